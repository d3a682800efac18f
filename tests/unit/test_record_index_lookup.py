"""The record-index lookup (``metadata/record_index_lookup.py``) against the record indexes Apache
Hudi wrote into the carried tables: every live key of a fixture, as hudi-rs reads the table, is
found at the partition and file group hudi-rs reads it from; keys the table does not hold (and
keys Java deleted) are not found; each key is answered by the one group its hash names."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_tables import TABLES_DIR
from record_index_check import table_key_locations
from tablesvc.api import Table
from tablesvc.hfile import HFileReader, read_hfile
from tablesvc.logformat import BlockType, read_log_file
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.record_index_lookup import Location, RecordIndexView, lookup_locations
from tablesvc.storage import LocalStorage

RLI_FIXTURES = ["v8_trips_8i3u1d", "v9_nonpartitioned_rollback", "zips:mor_avro_v9_txns_simple_meta",
                "zips:mor_avro_v9_txns_complex_meta", "zips:mor_avro_v9_txns_nonpart_meta"]


def _view(path: Path) -> RecordIndexView:
    table = Table.open(str(path))
    return RecordIndexView.of(MetadataTable(table.storage, table.base_path, table.timeline()))


@pytest.mark.parametrize("name", RLI_FIXTURES)
def test_every_live_key_is_found_where_hudi_rs_reads_it(fixture_root, name):
    path = fixture_root.path(name) if name.startswith("zips:") else TABLES_DIR / name
    view = _view(path)
    assert len(view.groups) >= 1
    actual = table_key_locations(path)          # hudi-rs: key -> {(partition, file id)}
    assert actual, name
    found = lookup_locations(LocalStorage(), view, [*actual, "no-such-key", "zz-not-a-key"])
    assert set(found) == set(actual)
    wrong = {k: (found[k], actual[k]) for k in actual if (found[k].partition, found[k].file_id) not in actual[k]}
    assert not wrong
    # a key is answered by its own group only: another group does not hold it
    for key in list(actual)[:20]:
        own = view.group_of(key)
        assert key in view.locations(LocalStorage(), own, [key])
        for other in range(len(view.groups)):
            if other != own:
                assert view.locations(LocalStorage(), other, [key]) == {}


def test_a_key_java_deleted_is_not_found(fixture_root):
    """``mor_avro_v9_txns_simple_meta``'s last delta commit deletes keys: the record index holds
    them in a DELETE block over the base file's (or an earlier block's) entry."""
    path = fixture_root.path("zips:mor_avro_v9_txns_simple_meta")
    view = _view(path)
    live = table_key_locations(path)
    storage = LocalStorage()
    seen_in_files: set[str] = set()
    for group in view.groups:
        if group.base_file:
            seen_in_files |= {c.key for c in read_hfile(storage, group.base_file).cells()}
        for log in group.log_files:
            for block in read_log_file(storage, log).blocks:
                if block.block_type is BlockType.HFILE_DATA:
                    seen_in_files |= {c.key for c in HFileReader(block.content, log, block.content_offset).cells()}
    gone = sorted(seen_in_files - set(live))
    assert gone, "the fixture's record index names no deleted key"
    assert lookup_locations(storage, view, gone) == {}
    assert all(isinstance(v, Location) for v in lookup_locations(storage, view, sorted(live)).values())
