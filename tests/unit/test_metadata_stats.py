"""``column_stats`` and ``partition_stats`` records (``tablesvc.metadata.stats_records``) against
the oracle nobody here wrote: the records Apache Hudi (1.0 for v8, 1.1 for v9) wrote into the
metadata tables of the carried tables.  Every record Java wrote is recomputed from the data file
it describes (footer or log records) and must be equal field for field: key, file name, column,
the min/max wrapper (its Avro type and value), counts, sizes, isDeleted, isTightBound, valueType.
"""

from __future__ import annotations

import os

import pytest

from tablesvc.api import Table
from tablesvc.logformat import encode_hfile_records
from tablesvc.hfile import HFileReader
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.column_stats import ColumnRange, ColumnType, IndexVersion, UnsupportedColumnType, ValueType
from tablesvc.metadata.indexed_columns import default_indexed_columns, indexed_columns
from tablesvc.metadata.partition_reader import block_schema, decode_named, partition_records, slice_records
from tablesvc.metadata.stats_keys import column_stats_key, file_group_index, hash_id, xxh64
from tablesvc.metadata.stats_merge import merge_stats_records
from tablesvc.metadata.stats_records import (
    clean_stats_records,
    column_stats_record,
    commit_stats_records,
    file_ranges_from_storage,
)
from tablesvc.table.properties import read_properties
from timeline.active import Timeline
from timeline.payloads.clean import CleanMetadata, CleanPartitionMetadata

# fixture -> (column_stats records, partition_stats records) Java wrote and the test compares
STATS_FIXTURES = {
    "v8_trips_8i3u1d": (99, 27),
    "zips:mor_avro_v9_txns_simple_meta": (304, 48),
    "zips:mor_avro_v9_txns_complex_meta": (304, 48),
    "zips:mor_avro_v9_txns_nonpart_meta": (180, 0),      # keeps no partition_stats
    "v9_nonpartitioned_rollback": (30, 0),               # column_stats groups of logs only; no partition_stats
    "zips:mor_avro_v9_txns_simple_overwrite": (128, 48),
}


def _open(fixture_root, name):
    table = Table.open(str(fixture_root.path(name)))
    timeline = table.timeline()
    mdt = MetadataTable(table.storage, table.base_path, timeline)
    index = indexed_columns(table.storage, table.base_path, read_properties(table.storage, table.base_path),
                            table.schema(timeline))
    return table, timeline, mdt, index


def _without_file_name(record):
    # An MDT compaction fills the meta field _hoodie_file_name of the records it rewrites into its
    # base HFile; the stats themselves are what is compared.
    return {k: v for k, v in record.items() if k != "_hoodie_file_name"}


def _partition_of_files(root: str) -> dict[str, str]:
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for f in files:
            out[f] = os.path.relpath(folder, root) if folder != root else ""
    return out


def test_every_fixture_keeping_column_stats_is_covered(fixture_root):
    from fixture_tables import all_fixture_names
    have = [n for n in all_fixture_names()
            if (fixture_root.path(n) / ".hoodie" / "metadata" / "column_stats").is_dir()]
    assert sorted(have) == sorted(STATS_FIXTURES)


@pytest.mark.parametrize("name", sorted(STATS_FIXTURES))
def test_column_stats_records_equal_javas_field_for_field(fixture_root, name):
    table, _, mdt, index = _open(fixture_root, name)
    java = partition_records(mdt, "column_stats", merge_stats_records)
    schema = block_schema(mdt, "column_stats")
    where = _partition_of_files(table.base_path)
    ranges: dict[tuple[str, str], dict] = {}
    compared = []
    for key, record in sorted(java.items()):
        assert record is not None, key
        body = record["ColumnStatsMetadata"]
        file_name = body["fileName"]
        partition = where[file_name]                 # every file Java describes is still on storage
        if (partition, file_name) not in ranges:
            ranges[(partition, file_name)] = {r.column: r for r in file_ranges_from_storage(
                table.storage, table.base_path, partition, file_name, index)}
        mine = column_stats_record(partition, ranges[(partition, file_name)][body["columnName"]], index,
                                   schema_json=schema)
        assert mine.key == key
        assert _without_file_name(mine.record) == _without_file_name(record), (file_name, body["columnName"])
        compared.append(mine)
    assert len(compared) == STATS_FIXTURES[name][0]
    assert set(index.columns) == {r.record["ColumnStatsMetadata"]["columnName"] for r in compared}
    # Our records encode with Java's schema and decode back to themselves (named union branches).
    content = encode_hfile_records(compared, schema)
    assert dict(decode_named(HFileReader(content), schema)) == {r.key: r.record for r in compared}


@pytest.mark.parametrize("name", [n for n, (_, p) in sorted(STATS_FIXTURES.items()) if p])
def test_partition_stats_records_equal_javas(fixture_root, name):
    """Each partition's record is the one the last commit touching it wrote: recompute it the way
    that commit did (its files, plus the committed latest slices with it still pending)."""
    table, timeline, mdt, index = _open(fixture_root, name)
    table.metadata_enabled = False                  # slices from storage, not from the MDT under test
    java = partition_records(mdt, "partition_stats", merge_stats_records)
    schema = block_schema(mdt, "partition_stats")
    last_write = {}
    for instant in timeline.completed_writes():
        metadata = timeline.commit_metadata(table.storage, instant)
        for partition in metadata.partitions():
            last_write[partition] = (instant, metadata)
    compared = 0
    for partition, (instant, metadata) in sorted(last_write.items()):
        pending = Timeline(timeline.base_path, timeline.layout, tuple(
            f for f in timeline.files
            if f.timestamp < instant.timestamp or (f.timestamp == instant.timestamp and not f.is_completed)))
        slices = [s for s in table.file_system_view(pending).latest_file_slices(table.storage)
                  if s.partition == partition]
        out = commit_stats_records(table.storage, table.base_path, instant.timestamp, metadata, index,
                                   {partition: slices}, schema_json=schema)
        for mine in out.partition_stats:
            if mine.record["ColumnStatsMetadata"]["fileName"] != partition:
                continue
            assert mine.key in java, (partition, mine.record["ColumnStatsMetadata"]["columnName"])
            assert _without_file_name(mine.record) == _without_file_name(java[mine.key])
            compared += 1
    assert compared == len(java) == STATS_FIXTURES[name][1]


@pytest.mark.parametrize("name", sorted(STATS_FIXTURES))
def test_default_column_choice_is_what_java_recorded(fixture_root, name):
    table, timeline, _, index = _open(fixture_root, name)
    assert default_indexed_columns(table.schema(timeline), index.version) == list(index.columns)


def test_xxh64_published_vectors_and_hudi_keys():
    assert xxh64(b"", 0) == 0xEF46DB3751D8E999
    assert xxh64(b"abc", 0) == 0x44BC2CF5AD770999
    assert xxh64(b"Nobody inspects the spammish repetition", 0) == 0xFBCEA83C8A378BF1   # > 32 bytes
    # docs/metadata-table-write-research.md §1.5, checked on the v8 fixture
    assert hash_id("_hoodie_commit_time") == "JBBzUToHtLc="
    assert hash_id("city=sao_paulo") == "6Hj+sBy+gvM="
    assert len(column_stats_key("c", "", ".f.log.1_0-1-1")) == 48


@pytest.mark.parametrize("name", sorted(STATS_FIXTURES))
def test_keys_sit_in_the_file_group_java_put_them_in(fixture_root, name):
    _, _, mdt, _ = _open(fixture_root, name)
    for partition in ("column_stats", "partition_stats"):
        slices = mdt.partition_slices(partition)
        for number, file_slice in enumerate(slices):
            assert file_slice.file_id.endswith(f"{number:04d}-0")
            keys = slice_records(mdt, file_slice, merge_stats_records)
            assert all(file_group_index(k, len(slices)) == number for k in keys)


def test_clean_stubs_tombstones_and_deleted_records():
    index_columns = {"a": ColumnType(ValueType.STRING), "b": ColumnType(ValueType.LONG)}
    from tablesvc.metadata.indexed_columns import ColumnStatsIndex
    index = ColumnStatsIndex(IndexVersion.V2, index_columns)
    # Java (and files_changes.from_clean) take deletePathPatterns: f2 was already gone when a re-run
    # deleted, so successDeleteFiles lacks it, yet its records must go too
    patterns = ("f1.parquet", ".f1_1.log.1_0-1-1", "f2.parquet")
    clean = CleanMetadata("1", 0, 2, "0", {"p": CleanPartitionMetadata(
        "p", "KEEP_LATEST_COMMITS", delete_path_patterns=patterns, success_delete_files=patterns[:2])})
    j12 = clean_stats_records(clean, index)
    assert j12.column_stats == () and j12.partition_stats == ()
    assert j12.column_stats_deletes == tuple(column_stats_key(c, "p", f) for f in patterns for c in ("a", "b"))
    j15 = clean_stats_records(clean, index, tombstones=False)
    bodies = [r.record["ColumnStatsMetadata"] for r in j15.column_stats]
    assert len(bodies) == 6 and all(b["isDeleted"] and b["minValue"] is None and b["valueCount"] == 0
                                    for b in bodies)


def _stats(lo, hi, count, tight=False, deleted=False):
    wrap = lambda v: ("org.apache.hudi.avro.model.LongWrapper", {"value": v})
    return {"type": 3, "ColumnStatsMetadata": {
        "fileName": "f", "columnName": "c", "minValue": wrap(lo), "maxValue": wrap(hi), "valueCount": count,
        "nullCount": 0, "totalSize": count, "totalUncompressedSize": count, "isDeleted": deleted,
        "isTightBound": tight, "valueType": {"typeOrdinal": 4, "additionalInfo": None}}}


def test_stats_merge_rules():
    merged = merge_stats_records(_stats(5, 9, 2), _stats(1, 6, 3))["ColumnStatsMetadata"]
    assert merged["minValue"][1]["value"] == 1 and merged["maxValue"][1]["value"] == 9
    assert merged["valueCount"] == merged["totalSize"] == 5
    assert merge_stats_records(_stats(5, 9, 2, tight=True), _stats(1, 6, 3)) == _stats(5, 9, 2, tight=True)
    assert merge_stats_records(_stats(5, 9, 2), _stats(1, 6, 3, deleted=True)) == _stats(5, 9, 2)
    assert merge_stats_records(_stats(5, 9, 2, deleted=True), _stats(1, 6, 3)) == _stats(5, 9, 2, deleted=True)


def test_v1_refuses_what_it_cannot_write_as_java_does():
    from tablesvc.metadata.column_stats import stats_body
    r = ColumnRange("f", "d", ColumnType(ValueType.DATE), 1, 2, 0, 2, 0, 0)
    with pytest.raises(UnsupportedColumnType, match="'d'"):
        stats_body(r, IndexVersion.V1, fields=frozenset())
    assert stats_body(r, IndexVersion.V2, fields=frozenset({"valueType"}))["minValue"] == (
        "org.apache.hudi.avro.model.IntWrapper", {"value": 1})
