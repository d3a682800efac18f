"""Secondary-index records (``tablesvc.metadata.secondary_index``) against the records Apache Hudi
(1.0 for v8, 1.1 for v9) wrote into the carried tables' ``secondary_index_*`` partitions: keys,
their file groups (V1 whole key, V2 value prefix), the value bytes of an insert, the deletes, and
the whole index equal to (value, key) pairs of the table's rows as tablesvc's reader returns them.
"""

from __future__ import annotations

import io
import json

import fastavro
import pytest

from tablesvc.api import Table
from tablesvc.errors import InvalidInputError, TablesvcError
from tablesvc.logformat import BlockType, block_deletes, read_log_file
from tablesvc.logformat.avro_content import parse_avro_schema
from tablesvc.merge.context import ReadContext, SliceSpec
from tablesvc.merge.slice_reader import read_file_slice
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.partition_reader import decode_named, partition_records
from tablesvc.metadata.secondary_index import (
    SecondaryIndexChanges, column_texts, escape, group_key, insert_record, reduce_changes, secondary_index_key, secondary_indexes,
    slice_changes, split_key, unescape,
)
from tablesvc.metadata.writer import file_group_index
from tablesvc.hfile import read_hfile
from tablesvc.table.meta_fields import RECORD_KEY

SI_FIXTURES = ["v8_trips_8i3u1d", "zips:mor_avro_v9_txns_simple_meta", "zips:mor_avro_v9_txns_complex_meta",
               "zips:mor_avro_v9_txns_nonpart_meta"]


def _indexes(table):
    timeline = table.timeline()
    return secondary_indexes(table.storage, table.base_path, table.config.props, table.config.version,
                             table.schema(timeline))


def _model_pairs(table, index) -> set[tuple[str | None, str]]:
    """(value text, record key) of every live row: the table read by tablesvc's merge reader."""
    timeline = table.timeline()
    ctx = ReadContext.for_table(table, timeline, columns=(RECORD_KEY, index.source_field))
    out = set()
    for file_slice in table.file_system_view(timeline).latest_file_slices(table.storage):
        rows = read_file_slice(table.storage, SliceSpec.from_file_slice(file_slice), ctx)
        texts = column_texts(rows.column(index.source_field).combine_chunks(), index.kind)
        out.update(zip(texts, rows.column(RECORD_KEY).to_pylist()))
    return out


@pytest.mark.parametrize("name", SI_FIXTURES)
def test_index_equals_the_tables_rows(fixture_root, name):
    table = Table.open(str(fixture_root.path(name)))
    indexes = _indexes(table)
    assert indexes, "every fixture here lists a secondary index"
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    for index in indexes:
        assert index.version == (1 if table.config.version == 8 else 2)
        records = partition_records(mdt, index.partition, lambda newer, older: newer)
        live = {k for k, r in records.items() if r is not None and not r["SecondaryIndexMetadata"]["isDeleted"]}
        assert {split_key(k) for k in live} == _model_pairs(table, index), index.partition
        assert all(secondary_index_key(*split_key(k)) == k for k in live)


@pytest.mark.parametrize("name", SI_FIXTURES)
def test_keys_sit_in_the_file_group_their_version_names(fixture_root, name):
    table = Table.open(str(fixture_root.path(name)))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    checked = 0
    for index in _indexes(table):
        slices = mdt.partition_slices(index.partition)
        ids = sorted(s.file_id for s in slices)
        for file_slice in slices:
            keys = []
            if file_slice.base_file is not None:
                reader = read_hfile(table.storage, file_slice.base_file.path)
                keys += [k for k, _ in decode_named(reader, reader.schema)]
            for log_file in file_slice.log_files:
                for block in read_log_file(table.storage, log_file.path).blocks:
                    if block.block_type is BlockType.DELETE:
                        deletes = block_deletes(block, log_file.path)
                        assert {d.partition_path for d in deletes} <= {index.partition}
                        keys += [d.record_key for d in deletes]
            for key in keys:
                assert ids[file_group_index(group_key(key, index.version), len(ids))] == file_slice.file_id, key
                checked += 1
    assert checked > 0


def test_an_insert_encodes_to_javas_bytes(fixture_root):
    table = Table.open(str(fixture_root.path("zips:mor_avro_v9_txns_simple_meta")))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    file_slice = mdt.partition_slices("secondary_index_merchant_idx")[0]
    reader = read_hfile(table.storage, file_slice.base_file.path)
    schema = parse_avro_schema(reader.schema)
    cells = list(reader.cells())
    for cell in cells:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, insert_record(reader.schema))
        assert buf.getvalue() == cell.value, cell.key
    assert cells


def test_v8_deletes_are_delete_blocks_naming_the_index(fixture_root):
    table = Table.open(str(fixture_root.path("v8_trips_8i3u1d")))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    seen = []
    folder = f"{mdt.base_path}/secondary_index_rider_idx"
    for name in table.storage.list_names(folder):     # every log, compacted ones too
        if ".log." in name:
            for block in read_log_file(table.storage, f"{folder}/{name}").blocks:
                assert block.block_type is BlockType.DELETE
                seen += [(d.record_key, d.partition_path) for d in block_deletes(block, name)]
    assert seen and all(p == "secondary_index_rider_idx" for _, p in seen)


def test_escaping_round_trips_and_nulls():
    for value in ["plain", "a$b", "back\\slash", "nul\u0000x", "", "$", "\\$"]:
        key = secondary_index_key(value, "k$1")
        assert split_key(key) == (value, "k$1")
        assert unescape(escape(value)) == value
    assert secondary_index_key(None, "TXN-003") == "\u0000$TXN-003"
    assert split_key("\u0000$TXN-003") == (None, "TXN-003")
    assert group_key("a\\$b$k", 2) == "a\\$b$" and group_key("a\\$b$k", 1) == "a\\$b$k"


def test_changes_per_key_and_reduction():
    before = {"k1": "a", "k2": "b", "k3": "c", "k4": None}
    after = {"k1": "a", "k2": "x", "k5": "e", "k4": "d"}
    changes = slice_changes(before, after)
    assert sorted(changes, key=str) == sorted([("b", "k2", True), ("x", "k2", False), ("e", "k5", False),
                                               (None, "k4", True), ("d", "k4", False), ("c", "k3", True)], key=str)
    reduced = reduce_changes("secondary_index_i", [(secondary_index_key(v, k), d) for v, k, d in changes]
                             + [(secondary_index_key("e", "k5"), True)], "T1")      # an insert beats a delete
    assert reduced == SecondaryIndexChanges("secondary_index_i",
                                            tuple(sorted(["x$k2", "e$k5", "d$k4"])),
                                            tuple(sorted(["b$k2", "\u0000$k4", "c$k3"])))
    with pytest.raises(InvalidInputError, match=r"secondary_index_i: write T1 .* 'a\$k' twice") as raised:
        reduce_changes("secondary_index_i", [("a$k", False), ("a$k", False)], "T1")
    assert raised.value.exit_code == 2


def test_a_damaged_key_names_its_file():
    for bad in ("no-separator", "a\\$b\\$c\\"):
        with pytest.raises(TablesvcError, match="^mdt/si/f1.hfile: secondary index key"):
            split_key(bad, "mdt/si/f1.hfile")


def test_a_write_commit_without_its_secondary_index_changes_is_a_conflict(fixture_root, tmp_path):
    """An index listed after the write's Spark job ran (a Java indexer finishing meanwhile) reaches
    the commit without changes: a conflict (exit 3), and the metadata table is left as it was."""
    from fixture_tables import copy_table
    from tablesvc.errors import ConflictError
    from tablesvc.metadata.maintain import update_metadata_table
    from tablesvc.metadata.write_key_changes import WriteKeyChanges
    from timeline.instant import Action, Instant, State
    from timeline.payloads import CommitMetadata, encode_commit_metadata

    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    table = Table.open(str(path))
    before = sorted(p.name for p in (path / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir())
    ts = table.instant_times.next()
    payload = encode_commit_metadata(CommitMetadata(partition_to_write_stats={}, extra_metadata={},
                                                    operation_type="UPSERT"), table.config.layout)
    with pytest.raises(ConflictError, match="secondary_index_merchant_idx, secondary_index_txn_date_idx"):
        update_metadata_table(table, Instant(ts, Action.DELTA_COMMIT, State.INFLIGHT), payload,
                              WriteKeyChanges(), None)
    assert sorted(p.name for p in (path / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir()) == before


def test_value_texts_are_sparks_and_other_types_are_refused():
    import datetime

    import pyarrow as pa

    from tablesvc.errors import UnsupportedTableError
    from tablesvc.metadata.secondary_index import ValueKind, value_kind

    assert value_kind(["null", {"type": "int", "logicalType": "date"}], "t") == ValueKind.INTEGER
    assert column_texts(pa.array([datetime.date(2024, 1, 20), None]), ValueKind.INTEGER) == ["19742", None]
    micros = pa.array([1_700_000_000_123_456], pa.timestamp("us", tz="UTC"))
    assert column_texts(micros, value_kind({"type": "long", "logicalType": "timestamp-micros"}, "t")) \
        == ["1700000000123456"]
    for millis in ("timestamp-millis", "local-timestamp-millis"):     # Java's text not settled: refused
        with pytest.raises(UnsupportedTableError, match=f"index i: .* {millis} column"):
            value_kind(["null", {"type": "long", "logicalType": millis}], "index i")
    assert column_texts(pa.array([True, False]), ValueKind.BOOLEAN) == ["true", "false"]
    assert column_texts(pa.array([7, None], pa.int64()), ValueKind.INTEGER) == ["7", None]
    for unsupported in ("double", "float", "bytes", {"type": "fixed", "size": 7, "logicalType": "decimal",
                                                     "precision": 15, "scale": 2, "name": "f"}):
        with pytest.raises(UnsupportedTableError, match="index i"):
            value_kind(["null", unsupported], "index i")


class _Definitions:
    """A storage whose only file is an ``index.json`` with ``definitions``."""

    def __init__(self, definitions: dict):
        self.text = json.dumps({"indexDefinitions": definitions}).encode()

    def read_bytes(self, path: str) -> bytes:
        return self.text


_SCHEMA = json.dumps({"type": "record", "name": "r", "fields": [{"name": "k", "type": "string"},
                                                                  {"name": "rider", "type": ["null", "string"]}]})
_PROPS = {"hoodie.table.metadata.partitions": "files,secondary_index_rider_idx",
          "hoodie.table.index.defs.path": ".hoodie/.index_defs/index.json"}


def _definition(**extra) -> dict:
    return {"secondary_index_rider_idx": {"indexName": "secondary_index_rider_idx", "indexType": "secondary_index",
                                          "indexFunction": "identity", "sourceFields": ["rider"], **extra}}


def test_index_versions_hudi_rejects_are_refused():
    from tablesvc.errors import UnsupportedTableError

    def versions(table_version: int, **extra):
        found = secondary_indexes(_Definitions(_definition(**extra)), "/t", _PROPS, table_version, _SCHEMA)
        return [ix.version for ix in found]

    assert versions(8) == [1] and versions(9) == [2]
    assert versions(8, version="V1") == [1] and versions(9, version="V2") == [2] and versions(9, version="V1") == [1]
    for table_version, version in ((8, "V2"), (9, "V3"), (8, "2")):
        with pytest.raises(UnsupportedTableError, match="index.json: index secondary_index_rider_idx: index version"):
            versions(table_version, version=version)


def test_a_table_without_stored_record_keys_is_refused():
    from tablesvc.errors import UnsupportedTableError

    props = {**_PROPS, "hoodie.populate.meta.fields": "false"}
    with pytest.raises(UnsupportedTableError, match="^/t: hoodie.populate.meta.fields=false: .*secondary_index_rider_idx"):
        secondary_indexes(_Definitions(_definition()), "/t", props, 9, _SCHEMA)
    # no secondary index listed: nothing to refuse here
    assert secondary_indexes(_Definitions({}), "/t", {**props, "hoodie.table.metadata.partitions": "files"}, 9,
                             _SCHEMA) == ()


def test_a_file_group_with_two_base_files_or_a_base_file_and_logs_in_one_write_is_refused(fixture_root):
    from tablesvc.spark.secondary_index_job import slice_diffs
    from timeline.payloads import WriteStat

    table = Table.open(str(fixture_root.path("zips:mor_avro_v9_txns_simple_meta")))
    timeline = table.timeline()
    p, f = "region=apac", "0f1e2d3c-0000-4000-8000-000000000000-0"
    base = WriteStat(file_id=f, path=f"{p}/{f}_0-1-1_20990101000000000.parquet", partition_path=p)
    other_base = WriteStat(file_id=f, path=f"{p}/{f}_1-1-1_20990101000000000.parquet", partition_path=p)
    log = WriteStat(file_id=f, path=f"{p}/.{f}_20990101000000000.log.1_0-1-1", partition_path=p)
    for stats in ([base, other_base], [base, log]):
        with pytest.raises(TablesvcError, match=f"write 20990101000000000 wrote .* file group {f} of partition "
                                                f"'{p}': only either one base file or log files"):
            slice_diffs(table, timeline, "20990101000000000", {p: stats})
    [one] = slice_diffs(table, timeline, "20990101000000000", {p: [base]})
    assert one.before is None and one.after.log_files == () and one.after.base_file.endswith(base.path)
