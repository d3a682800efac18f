"""Writing the metadata table's ``files`` partition on tablesvc's commits (``tablesvc.metadata.
writer`` / ``maintain``, hooked into ``InstantLifecycle.commit``), on Java-written v9 tables whose
metadata table keeps only ``files`` (dropped the way Hudi drops a partition).  The oracles:
hudi-rs (which lists v8+ tables through the metadata table), a storage listing of the same
table, and the Java-written fixtures' own bytes (schema, commit metadata, key -> file group)."""

from __future__ import annotations

import json

import pytest
from oracles.hudi_rs import sorted_rows as hudi_rs_rows

from fixture_tables import copy_table
from metadata_tables import (
    hudi_rs_slice_rows, keep_only_files_partition, metadata_listing, storage_listing, storage_slices, tablesvc_slices,
)
from tablesvc.api import Table
from tablesvc.fsview.view import FileSystemView
from tablesvc.hfile import read_hfile
from tablesvc.logformat import BlockType, HeaderKey, block_keyed_records, read_log_file
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.record_schema import metadata_record_schema
from tablesvc.metadata.writer import commit_schema, file_group_index, java_string_hash
from tablesvc.table.metadata_partitions import MAINTAINED, MetadataPartitionType
from tablesvc.table.writable import CLEAN, COMPACT, WRITE, writable_refusal
from timeline.instant import Action, State
from timeline.payloads import decode_commit_metadata, decode_payload

V9_MDT = ["zips:mor_avro_v9_txns_simple_meta", "zips:mor_avro_v9_txns_nonpart_meta", "v9_nonpartitioned_rollback"]
ROW_COLUMNS = ("txn_id", "txn_ts", "currency", "merchant_name")


def _files_blocks(path):
    root = path / ".hoodie" / "metadata" / "files"
    for log in sorted(root.glob(".files-*")):
        for block in read_log_file(Table.open(str(path)).storage, str(log)).blocks:
            yield log, block


@pytest.mark.parametrize("name", V9_MDT)
def test_the_record_schema_is_the_java_written_block_header(fixture_root, name):
    headers = {dict(b.header)[HeaderKey.SCHEMA] for _, b in _files_blocks(fixture_root.path(name))
               if b.block_type is BlockType.HFILE_DATA}
    assert headers == {metadata_record_schema()}


def test_the_commit_schema_is_the_java_written_one(fixture_root):
    path = fixture_root.path("zips:mor_avro_v9_txns_simple_meta")
    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    schemas = {decode_commit_metadata(mdt.storage.read_bytes(mdt.timeline.path_of(i)), mdt.config.layout, "x")
               .extra_metadata.get("schema") for i in mdt.timeline.completed(Action.DELTA_COMMIT)
               if not i.timestamp.startswith("0000")}
    assert schemas == {commit_schema()}


def test_java_string_hash():
    # values of Java's String.hashCode, including one past 2^31 and a character above U+FFFF
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00   # two UTF-16 units


@pytest.mark.parametrize("partition", ["column_stats", "record_index"])
def test_every_java_written_key_sits_in_the_file_group_the_mapping_names(fixture_root, partition):
    path = fixture_root.path("zips:mor_avro_v9_txns_simple_meta")
    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    view = FileSystemView.build(mdt.storage, mdt.base_path, mdt.config, mdt.timeline, [partition], sizes=False)
    slices = view.latest_file_slices(mdt.storage)
    groups = sorted({s.file_id for s in slices})
    assert len(groups) > 1
    checked = 0
    for s in slices:
        keys = []
        if s.base_file is not None:
            keys += [c.key for c in read_hfile(table.storage, s.base_file.path).cells()]
        for lf in s.log_files:
            for block in read_log_file(table.storage, lf.path).blocks:
                if block.block_type is BlockType.HFILE_DATA:
                    keys += [r.key for r in block_keyed_records(block, lf.path)]
        for key in keys:
            assert groups[file_group_index(key, len(groups))] == s.file_id, key
        checked += len(keys)
    assert checked > 20


def test_files_is_maintained_and_a_files_only_v9_table_is_writable(fixture_root, tmp_path):
    assert MetadataPartitionType.FILES in MAINTAINED
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    # every partition it lists is maintained now (record_index, secondary indexes included)
    assert writable_refusal(Table.open(str(path)), WRITE) is None
    keep_only_files_partition(path)
    table = Table.open(str(path))
    assert table.config.metadata_partitions == ("files",)
    assert writable_refusal(table, CLEAN) is None and writable_refusal(table, COMPACT) is None


def _tablesvc_rows(table) -> list[tuple]:
    ctx = ReadContext.for_table(table)
    rows = []
    for s in table.latest_file_slices():
        rows += read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx).to_pylist()
    return sorted(tuple(r[c] for c in ROW_COLUMNS) for r in rows)


def _agree(table, path, rows_before) -> None:
    assert metadata_listing(table) == storage_listing(path)
    assert tablesvc_slices(table) == hudi_rs_slice_rows(path) == storage_slices(table)
    assert _tablesvc_rows(table) == hudi_rs_rows(path, ROW_COLUMNS) == rows_before


@pytest.mark.parametrize("name", ["zips:mor_avro_v9_txns_simple_meta", "zips:mor_avro_v9_txns_nonpart_meta"])
def test_a_clean_marks_the_files_it_deleted_in_the_metadata_table(fixture_root, tmp_path, name):
    path = copy_table(fixture_root.path(name), tmp_path)
    keep_only_files_partition(path)
    table = Table.open(str(path))
    rows_before = hudi_rs_rows(path, ROW_COLUMNS)
    assert rows_before and _tablesvc_rows(table) == rows_before
    [result] = table.clean(options={"hoodie.cleaner.commits.retained": 1})
    assert result.metrics.files_deleted > 0
    table = Table.open(str(path))
    # without the metadata table's delta commit the listing still names the deleted files
    _agree(table, path, rows_before)

    # the metadata table's delta commit at the clean's instant, shaped like Java's
    t = result.instant
    data_done = next(i for i in table.timeline().instants if i.timestamp == t and i.is_completed)
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    files = {f.state: f for f in mdt.timeline.files_of(t)}
    assert set(files) == {State.REQUESTED, State.INFLIGHT, State.COMPLETED}
    assert {f.action for f in files.values()} == {Action.DELTA_COMMIT}
    assert files[State.COMPLETED].completion_time < data_done.completion_time
    assert table.storage.read_bytes(mdt.timeline.path_of(files[State.REQUESTED])) == b""
    inflight = decode_payload(files[State.INFLIGHT], table.storage.read_bytes(mdt.timeline.path_of(
        files[State.INFLIGHT])), mdt.config.layout)
    assert (inflight.operation_type, dict(inflight.partition_to_write_stats)) == ("UPSERT_PREPPED", {})
    done = decode_commit_metadata(table.storage.read_bytes(mdt.timeline.path_of(files[State.COMPLETED])),
                                  mdt.config.layout, "x")
    assert done.operation_type == "UPSERT_PREPPED" and done.extra_metadata == {"schema": commit_schema()}
    [stat] = done.partition_to_write_stats["files"]
    log = path / ".hoodie" / "metadata" / stat.path
    assert log.name.startswith(f".files-0000-0_{t}.log.1_") and log.stat().st_size == stat.file_size_in_bytes
    [block] = read_log_file(table.storage, str(log)).blocks
    assert dict(block.header) == {HeaderKey.INSTANT_TIME: t, HeaderKey.SCHEMA: metadata_record_schema()}
    records = block_keyed_records(block, str(log))
    assert [r.key for r in records] == sorted(r.key for r in records) and stat.num_writes == len(records)
    deleted = {n for r in records for n, info in r.record["filesystemMetadata"].items() if info["isDeleted"]}
    assert len(deleted) == result.metrics.files_deleted


def test_without_files_listed_nothing_is_written(fixture_root, tmp_path):
    """A table whose properties list no metadata partition: readers list storage, and the commit
    writes no metadata delta commit."""
    from tablesvc.table.properties import read_properties, write_properties

    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    keep_only_files_partition(path)
    table = Table.open(str(path))
    props = read_properties(table.storage, table.base_path)
    props["hoodie.table.metadata.partitions"] = ""
    write_properties(table.storage, table.base_path, props)
    before = sorted(p.name for p in (path / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir())
    Table.open(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})
    after = sorted(p.name for p in (path / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir())
    assert before == after


def test_schema_file_is_json(fixture_root):
    assert json.loads(metadata_record_schema())["name"] == "HoodieMetadataRecord"


def test_a_delta_commit_a_metadata_compaction_holds_is_not_rolled_back(fixture_root, tmp_path):
    """Rolling back the metadata table's ``T`` takes out its log files; once a compaction of the
    metadata table folded ``T`` into a base file that would not remove its records: refused,
    nothing touched (no rollback instant either)."""
    from tablesvc.errors import TablesvcError
    from tablesvc.metadata.mdt_rollback import new_instant_time, rollback_delta_commit
    from tablesvc.metadata.writer import MetadataTableWriter

    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    table = Table.open(str(path))
    mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)
    timeline = mdt.timeline()
    [compaction] = [i for i in timeline.completed(Action.COMMIT)]
    held = [i for i in timeline.completed(Action.DELTA_COMMIT)
            if i.completion_time < compaction.timestamp and not i.timestamp.startswith("0000")][-1]
    after = [i for i in timeline.completed(Action.DELTA_COMMIT) if i.timestamp > compaction.timestamp][0]
    before = sorted(p.name for p in (path / ".hoodie" / "metadata").rglob("*"))
    with pytest.raises(TablesvcError, match=f"delta commit {held.timestamp}: its compaction {compaction.timestamp}"):
        rollback_delta_commit(mdt, held.timestamp, new_instant_time(mdt))
    assert sorted(p.name for p in (path / ".hoodie" / "metadata").rglob("*")) == before
    # one completed after the compaction goes: its completed, inflight and requested files and its
    # logs, with a completed rollback instant naming it
    done = rollback_delta_commit(mdt, after.timestamp, new_instant_time(mdt))
    assert done is not None and done.instant.is_completed and done.target == after.timestamp
    assert mdt.timeline().files_of(after.timestamp) == ()
    assert not [p for p in (path / ".hoodie" / "metadata").rglob(f"*_{after.timestamp}.log.*")]
    assert rollback_delta_commit(mdt, after.timestamp, new_instant_time(mdt)) is None