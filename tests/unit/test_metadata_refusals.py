"""What tablesvc refuses on a table with a metadata table, and the opt-outs that drop partitions
first, as Java Hudi's writer does (docs/metadata-table.md, "Refusals and opt-outs").

* The policy per action and partition: a partition stops an action unless tablesvc maintains it
  (``MAINTAINED``, pinned here both ways) or the action leaves it true; the expectations below are
  written out by hand from docs/metadata-table-write-research.md §1.3, not taken from the code.
* The refusal: exit 2, one line naming the table, the stale partitions and the key per partition;
  nothing on disk changes (a digest of every file before and after).
* The opt-outs on copies of the Java-written fixtures: hoodie.properties rewritten (both partition
  lists, a checksum that verifies), the folders gone, column stats' index definition gone (the
  rest of index.json byte for byte as Java writes it), only when a key is SET; a drop killed after
  the properties rewrite is swept by the next run; hudi-rs reads the same rows before and after.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from oracles.hudi_rs import read_rows

from fixture_tables import copy_table
from table_builders import tree
from tablesvc.api import Table
from tablesvc.config import build_config
from tablesvc.errors import UnsupportedTableError
from tablesvc.services.metadata_drops import drop_opted_out_partitions
from tablesvc.services.result import Status
from tablesvc.storage import LocalStorage
from tablesvc.table.metadata_opt_outs import MetadataOptOuts
from tablesvc.table.metadata_partitions import MetadataPartitionType as K
from tablesvc.table.properties import parse_properties, table_checksum
from tablesvc.table.writable import (CLEAN, COMPACT, LOG_COMPACT, ROLLBACK, SERVICE, WRITE, require_writable,
                                     writable_refusal)

MDT_FIXTURES = ["v8_trips_8i3u1d", "v9_nonpartitioned_rollback", "zips:mor_avro_v9_txns_simple_meta",
                "zips:mor_avro_v9_txns_complex_meta", "zips:mor_avro_v9_txns_nonpart_meta"]
ALL = (WRITE, COMPACT, LOG_COMPACT, CLEAN, ROLLBACK, SERVICE)
PARTITIONS = ["files", "column_stats", "partition_stats", "bloom_filters", "record_index",
              "secondary_index_rider_idx", "expr_index_fare", "some_future_index"]
# Which partitions each action leaves as they were (research §1.3), by hand.
LEAVES_TRUE = {
    "write": set(),
    "compact": {"record_index", "secondary_index_rider_idx"},
    "log compact": {"record_index", "secondary_index_rider_idx", "bloom_filters"},
    "clean": {"record_index", "secondary_index_rider_idx", "partition_stats"},
    # Java's MDT rollback takes T out of every partition: all stay true, names tablesvc knows of
    "rollback": set(PARTITIONS) - {"some_future_index"},
    # the runner compacts, log-compacts, cleans and rolls back: what all four leave true
    "service": {"record_index", "secondary_index_rider_idx"},
}
KEY = {"files": "hoodie.metadata.enable", "column_stats": "hoodie.metadata.index.column.stats.enable",
       "partition_stats": "hoodie.metadata.index.column.stats.enable",
       "bloom_filters": "hoodie.metadata.index.bloom.filter.enable",
       "record_index": "hoodie.metadata.record.index.enable"}


class _Table:
    def __init__(self, props: dict[str, str], version: int = 9):
        from tablesvc.table.config import TableConfig
        base = {"hoodie.table.name": "t", "hoodie.table.version": str(version), "hoodie.table.type": "MERGE_ON_READ",
                "hoodie.table.recordkey.fields": "id", "hoodie.table.ordering.fields": "ts"}
        self.base_path = "/data/t"
        self.config = TableConfig.from_properties({**base, **props})


def _listing(*names: str, inflight: str = "") -> _Table:
    return _Table({"hoodie.table.metadata.partitions": ",".join(names),
                   "hoodie.table.metadata.partitions.inflight": inflight})


@pytest.fixture
def files_maintained(monkeypatch):
    monkeypatch.setattr("tablesvc.table.metadata_partitions.MAINTAINED", frozenset({K.FILES}))


@pytest.fixture
def nothing_maintained(monkeypatch):
    monkeypatch.setattr("tablesvc.table.metadata_partitions.MAINTAINED", frozenset())


# -- the policy ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("action", ALL, ids=lambda a: a.name)
@pytest.mark.parametrize("partition", PARTITIONS)
def test_a_partition_stops_an_action_unless_maintained_or_left_true(action, partition, monkeypatch):
    for maintained in (frozenset(), frozenset({K.FILES})):
        monkeypatch.setattr("tablesvc.table.metadata_partitions.MAINTAINED", maintained)
        allowed = partition in LEAVES_TRUE[action.name] or (partition == "files" and bool(maintained))
        for table in (_listing("files", partition), _listing("files", inflight=partition)):
            files_ok = bool(maintained) or "files" in LEAVES_TRUE[action.name]
            assert (writable_refusal(table, action) is None) == (allowed and files_ok), (maintained, table.config.props)
        # without files listed, no reader uses the metadata table (Java's isMetadataTableAvailable)
        if partition != "files":
            assert writable_refusal(_listing(partition), action) is None


def test_the_refusal_is_one_line_naming_partitions_and_keys(files_maintained):
    table = _listing("column_stats", "files", "partition_stats", "record_index", "secondary_index_rider_idx")
    with pytest.raises(UnsupportedTableError) as refused:
        require_writable(table, COMPACT)
    assert refused.value.exit_code == 2
    assert str(refused.value) == (
        "/data/t: compact would leave the metadata table's column_stats, partition_stats stale (tablesvc does not "
        "update them); to go ahead, drop them first as Java Hudi does: "
        "hoodie.metadata.index.column.stats.enable=false (column_stats, partition_stats)")
    with pytest.raises(UnsupportedTableError) as refused:
        require_writable(table, WRITE)
    assert str(refused.value).endswith(
        "drop them first as Java Hudi does: hoodie.metadata.index.column.stats.enable=false (column_stats, "
        "partition_stats); hoodie.metadata.record.index.enable=false (record_index); "
        "hoodie.metadata.enable=false (secondary_index_rider_idx)")
    assert "\n" not in str(refused.value)


def test_version_6_with_a_metadata_table_is_kept_for_files_and_column_stats(files_maintained):
    """A v6 metadata table listing files (and column_stats) is written as Hudi 0.15 writes it
    (docs/metadata-table.md, "Version 6"); one listing any other partition (inflight ones too)
    stays refused."""
    kept = _Table({"hoodie.table.metadata.partitions": "files"}, version=6)
    for action in ALL:
        assert writable_refusal(kept, action) is None
    for props in ({"hoodie.table.metadata.partitions": "files,record_index"},
                  {"hoodie.table.metadata.partitions": "files", "hoodie.table.metadata.partitions.inflight": "record_index"}):
        table = _Table(props, version=6)
        for action in ALL:
            assert writable_refusal(table, action) == (
                "/data/t: a table version 6 table with a metadata table (hoodie.table.metadata.partitions"
                "=files,record_index): tablesvc keeps only files and column_stats of a version-6 metadata table, "
                f"and does not drop the others; {action.name} refused")


# -- which keys ask for a drop ---------------------------------------------------------------------------
@pytest.mark.parametrize("conf, whole, kinds", [
    ({}, False, set()),
    ({"hoodie.metadata.enable": "true", "hoodie.metadata.index.column.stats.enable": "true"}, False, set()),
    ({"hoodie.metadata.enable": "false"}, True, set()),
    ({"hoodie.metadata.index.column.stats.enable": "false"}, False, {K.COLUMN_STATS, K.PARTITION_STATS}),
    ({"hoodie.metadata.index.bloom.filter.enable": "false"}, False, {K.BLOOM_FILTERS}),
    ({"hoodie.metadata.record.index.enable": "false"}, False, {K.RECORD_INDEX}),
    ({"hoodie.metadata.global.record.level.index.enable": "false"}, False, {K.RECORD_INDEX}),
    ({"hoodie.metadata.record.level.index.enable": "false"}, False, {K.RECORD_INDEX}),
    # Java: the partitioned record index still on keeps the partition; the global key wins over its alias
    ({"hoodie.metadata.record.index.enable": "false", "hoodie.metadata.record.level.index.enable": "true"},
     False, set()),
    ({"hoodie.metadata.global.record.level.index.enable": "true", "hoodie.metadata.record.index.enable": "false"},
     False, set()),
    ({"hoodie.metadata.enable": "false", "hoodie.metadata.auto.delete.partitions": "false"}, False, set()),
    ({"hoodie.metadata.index.column.stats.enable": "false", "hoodie.metadata.auto.delete.partitions": "false"},
     False, set()),
])
def test_only_keys_the_user_sets_ask_for_a_drop(conf, whole, kinds):
    opt_outs = MetadataOptOuts.of(build_config(conf=conf))
    assert (opt_outs.whole, set(opt_outs.kinds)) == (whole, kinds)


# -- drops on the Java-written fixtures -----------------------------------------------------------------------
@pytest.fixture
def copy_of(fixture_root, tmp_path):
    def make(name: str) -> Path:
        return copy_table(fixture_root.path(name), tmp_path / name.replace(":", "_"))
    return make


def _props(path: Path) -> dict[str, str]:
    return parse_properties((path / ".hoodie" / "hoodie.properties").read_text())


def _rows(path: Path) -> list:
    return sorted(map(repr, read_rows(path)))


def _index_defs(path: Path) -> dict:
    return json.loads((path / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]


def _changed(before: dict, after: dict) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def _checksum_verifies(props: dict[str, str]) -> bool:
    return props["hoodie.table.checksum"] == str(table_checksum(props))


@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_metadata_enable_false_drops_the_whole_metadata_table(copy_of, name, files_maintained):
    path = copy_of(name)
    before, rows, defs = tree(path), _rows(path), _index_defs(path)
    listed = _props(path)["hoodie.table.metadata.partitions"]
    table = Table.open(str(path))
    result = drop_opted_out_partitions(table, WRITE, {"hoodie.metadata.enable": "false"})
    assert result.status is Status.DONE and result.action == "metadata table"
    assert result.reason == (f"dropped the metadata table ({', '.join(sorted(listed.split(',')))}) "
                             "(hoodie.metadata.enable=false)")
    props = _props(path)
    assert props["hoodie.table.metadata.partitions"] == "" and props["hoodie.table.metadata.partitions.inflight"] == ""
    assert _checksum_verifies(props) and not (path / ".hoodie" / "hoodie.properties.backup").exists()
    assert not (path / ".hoodie" / "metadata").exists()
    changed = _changed(before, tree(path))
    assert changed - {".hoodie/hoodie.properties"} == {k for k in before if k.startswith(".hoodie/metadata/")}
    assert _index_defs(path) == defs                     # Java leaves index.json as it is on a whole drop
    assert not table.config.has_metadata_table and not Table.open(str(path)).config.has_metadata_table
    require_writable(table, WRITE)                       # the action now goes on as on a table without one
    assert _rows(path) == rows                           # hudi-rs now lists storage: the same rows


@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_column_stats_and_record_index_opt_outs_drop_those_partitions(copy_of, name, files_maintained):
    path = copy_of(name)
    before, rows, defs = tree(path), _rows(path), _index_defs(path)
    listed = _props(path)["hoodie.table.metadata.partitions"].split(",")
    table = Table.open(str(path))
    conf = {"hoodie.metadata.index.column.stats.enable": "false", "hoodie.metadata.record.index.enable": "false"}
    gone = [p for p in listed if p in ("column_stats", "partition_stats", "record_index")]
    kept = [p for p in listed if p not in gone]
    # compaction leaves record_index and secondary indexes true: with files maintained, it may go ahead
    result = drop_opted_out_partitions(table, COMPACT, conf)
    assert result.reason == (f"dropped {', '.join(gone)} (hoodie.metadata.index.column.stats.enable=false, "
                             "hoodie.metadata.record.index.enable=false)")
    props = _props(path)
    assert props["hoodie.table.metadata.partitions"] == ",".join(kept)
    assert props["hoodie.table.metadata.partitions.inflight"] == "" and _checksum_verifies(props)
    for p in gone:
        assert not (path / ".hoodie" / "metadata" / p).exists()
    for p in kept:
        assert (path / ".hoodie" / "metadata" / p).is_dir()
    # Java removes column stats' definition only (record_index's stays, as HoodieTable does)
    assert _index_defs(path) == {k: v for k, v in defs.items() if k != "column_stats"}
    changed = _changed(before, tree(path))
    assert changed - {".hoodie/hoodie.properties", ".hoodie/.index_defs/index.json"} == {
        k for k in before if any(k.startswith(f".hoodie/metadata/{p}/") for p in gone)}
    require_writable(table, COMPACT)
    assert _rows(path) == rows                           # hudi-rs still lists through files: the same rows
    # a second run finds nothing to drop
    assert drop_opted_out_partitions(Table.open(str(path)), COMPACT, conf) is None


@pytest.mark.parametrize("conf", [
    {},                                                              # the default: refuse, never drop
    {"hoodie.metadata.index.column.stats.enable": "false"},          # record_index stays: still stale for a write
    {"hoodie.metadata.enable": "false", "hoodie.metadata.auto.delete.partitions": "false"},
])
def test_a_refused_action_drops_nothing(copy_of, conf, files_maintained):
    path = copy_of("v9_nonpartitioned_rollback")
    before = tree(path)
    table = Table.open(str(path))
    with pytest.raises(UnsupportedTableError) as refused:
        drop_opted_out_partitions(table, WRITE, conf)
        require_writable(table, WRITE)
    assert refused.value.exit_code == 2 and str(path) in str(refused.value)
    assert "record_index" in str(refused.value) and "hoodie.metadata.record.index.enable=false" in str(refused.value)
    assert tree(path) == before


def test_v6_opt_outs_drop_nothing(files_maintained):
    table = _Table({"hoodie.table.metadata.partitions": "files"}, version=6)
    table.storage = None        # never touched
    assert drop_opted_out_partitions(table, WRITE, {"hoodie.metadata.enable": "false"}) is None


class _KilledAfterProperties(LocalStorage):
    """Storage whose first folder delete fails: a drop killed right after the properties rewrite."""

    def __init__(self):
        super().__init__()
        self.killed = False

    def delete_tree(self, path: str) -> None:
        if not self.killed:
            self.killed = True
            raise OSError("killed")
        super().delete_tree(path)


def test_a_drop_killed_after_the_properties_rewrite_is_swept_by_the_next(copy_of, files_maintained):
    path = copy_of("v8_trips_8i3u1d")
    rows = _rows(path)
    conf = {"hoodie.metadata.index.column.stats.enable": "false"}
    storage = _KilledAfterProperties()
    with pytest.raises(OSError):
        drop_opted_out_partitions(Table.open(str(path), storage=storage), COMPACT, conf)
    props = _props(path)
    assert props["hoodie.table.metadata.partitions"] == "files,record_index,secondary_index_rider_idx"
    assert _checksum_verifies(props)
    assert (path / ".hoodie" / "metadata" / "column_stats").is_dir() and "column_stats" in _index_defs(path)
    assert _rows(path) == rows                   # nobody reads what is left: the properties no longer list it
    result = drop_opted_out_partitions(Table.open(str(path)), COMPACT, conf)
    assert result.reason == ("swept what an interrupted drop left: .hoodie/metadata/column_stats, "
                             ".hoodie/metadata/partition_stats, index definition column_stats "
                             "(hoodie.metadata.index.column.stats.enable=false)")
    assert not (path / ".hoodie" / "metadata" / "column_stats").exists()
    assert not (path / ".hoodie" / "metadata" / "partition_stats").exists()
    assert "column_stats" not in _index_defs(path) and _rows(path) == rows


def test_a_whole_drop_killed_after_the_properties_rewrite_is_swept_by_the_next(copy_of, files_maintained):
    path = copy_of("v9_nonpartitioned_rollback")
    conf = {"hoodie.metadata.enable": "false"}
    with pytest.raises(OSError):
        drop_opted_out_partitions(Table.open(str(path), storage=_KilledAfterProperties()), WRITE, conf)
    assert _props(path)["hoodie.table.metadata.partitions"] == "" and (path / ".hoodie" / "metadata").is_dir()
    table = Table.open(str(path))
    require_writable(table, WRITE)               # nothing lists a partition: the table has no metadata table
    result = drop_opted_out_partitions(table, WRITE, conf)
    assert result.reason == "swept what an interrupted drop left: .hoodie/metadata (hoodie.metadata.enable=false)"
    assert not (path / ".hoodie" / "metadata").exists()
