"""Version-6 tables with a metadata table, written by Java Hudi 0.15.0 (``tests/data/hudi/v6_metadata``,
made by ``tests/interop_java/make_v6_metadata_fixtures.py``): tablesvc reads them through the
metadata table (its 20-digit ``<T>001`` compaction times included), and its clean and compaction
keep the v6 metadata table as Hudi 0.15 does (the delta commit at the data instant's time in the
v6 layout, v6 log names, the partition's own 0.15 record schema).  Oracles: a storage listing,
hudi-rs (which lists v6 tables from storage) and the rows Java read when it made the table."""

from __future__ import annotations

import json

import pytest
from oracles.hudi_rs import sorted_rows as hudi_rs_rows

from fixture_tables import V6_METADATA_FIXTURES_DIR, v6_metadata_table
from metadata_tables import hudi_rs_slice_rows, metadata_listing, storage_listing, storage_slices, tablesvc_slices
from tablesvc.api import Table
from tablesvc.fsview.names import LogFileName
from tablesvc.logformat import HeaderKey, read_log_file
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.maintain import v6_partitions_refusal
from tablesvc.services.result import Status
from tablesvc.table.writable import CLEAN, COMPACT, WRITE, writable_refusal
from timeline.instant import Action
from timeline.payloads import decode_commit_metadata

COLUMNS = ("id", "ts", "part", "val")


def _expected(name: str) -> list[tuple]:
    return sorted(tuple(r) for r in json.loads((V6_METADATA_FIXTURES_DIR / f"{name}.json").read_text())["rows"])


def _agree(path, rows, step: str) -> None:
    table = Table.open(str(path))
    try:
        assert table.uses_metadata_table
        assert metadata_listing(table) == storage_listing(path)
        assert tablesvc_slices(table) == hudi_rs_slice_rows(path) == storage_slices(table)
        assert hudi_rs_rows(path, COLUMNS) == rows
    except AssertionError as e:
        raise AssertionError(f"after {step}: {e}") from e


def _mdt(path) -> MetadataTable:
    table = Table.open(str(path))
    return MetadataTable(table.storage, table.base_path, table.timeline())


@pytest.mark.parametrize("name", ["v6_mdt_files", "v6_mdt_colstats"])
def test_the_java_written_v6_metadata_table_is_read(tmp_path, name):
    path = v6_metadata_table(name, tmp_path)
    mdt = _mdt(path)
    # Java 0.15 compacted the metadata table at <latest delta commit>001 (20 digits)
    compactions = [i.timestamp for i in mdt.timeline.completed(Action.COMMIT)]
    assert compactions and all(len(t) == 20 and t.endswith("001") for t in compactions)
    _agree(path, _expected(name), "Java's writes")


def test_a_v6_metadata_table_of_files_and_column_stats_is_writable(tmp_path):
    for name in ("v6_mdt_files", "v6_mdt_colstats"):
        table = Table.open(str(v6_metadata_table(name, tmp_path)))
        for action in (WRITE, CLEAN, COMPACT):
            assert writable_refusal(table, action) is None
        assert v6_partitions_refusal(table.base_path, table.config) is None


def _java_column_stats(path) -> dict:
    from tablesvc.metadata.mdt_compaction import merge_for
    from tablesvc.metadata.partition_reader import partition_records

    return partition_records(_mdt(path), "column_stats", merge_for("column_stats"))


def test_v6_column_stats_records_equal_the_ones_java_015_wrote(tmp_path):
    """For each of Java 0.15's delta commits (base files, log files of data and delete blocks),
    the column_stats records tablesvc builds (every column of the writer schema, V1 wrappers, the
    partition's 0.15 record schema) equal the records Java wrote, field for field."""
    from tablesvc.fsview.view import FileSystemView
    from tablesvc.metadata.indexed_columns import v6_indexed_columns
    from tablesvc.metadata.stats_records import commit_stats_records
    from tablesvc.metadata.writer import MetadataTableWriter

    path = v6_metadata_table("v6_mdt_colstats", tmp_path)
    table = Table.open(str(path))
    java = _java_column_stats(path)
    writer = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times, ("files", "column_stats"))
    schema = writer.partition_schema("column_stats", writer.timeline())
    assert "isTightBound" not in schema
    ours = {}
    timeline = table.timeline()
    for instant in timeline.completed(Action.DELTA_COMMIT):
        metadata = timeline.commit_metadata(table.storage, instant)
        index = v6_indexed_columns(metadata.extra_metadata["schema"], "schema")
        assert len(index.columns) == 9
        view = FileSystemView.build(table.storage, table.base_path, table.config, timeline,
                                    list(metadata.partition_to_write_stats), sizes=False)
        assert view is not None
        ours.update((r.key, r.record) for r in commit_stats_records(
            table.storage, table.base_path, instant.timestamp, metadata, index, {}, schema_json=schema,
            with_partition_stats=False).column_stats)
    assert len(ours) == len(java) == 126
    assert {k: v["ColumnStatsMetadata"] for k, v in ours.items()} == \
        {k: v["ColumnStatsMetadata"] for k, v in java.items()}


def test_v6_column_stats_kept_by_compaction_and_clean(tmp_path):
    """tablesvc's compaction adds its base files' records; its clean marks each deleted Parquet
    file's records deleted as 0.15 does (a data record: no range, counts -1, isDeleted), none for
    the deleted log files; the listing stays storage's."""
    path = v6_metadata_table("v6_mdt_colstats", tmp_path)
    rows = _expected("v6_mdt_colstats")
    [c] = Table.open(str(path)).compact()
    assert c.status is Status.DONE, c.render()
    [cl] = Table.open(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})
    assert cl.status is Status.DONE and cl.metrics.files_deleted > 0, cl.render()
    _agree(path, rows, "compaction and clean")
    stats = {v["ColumnStatsMetadata"]["fileName"]: [] for v in _java_column_stats(path).values() if v}
    for v in _java_column_stats(path).values():
        stats[v["ColumnStatsMetadata"]["fileName"]].append(v["ColumnStatsMetadata"])
    live = {n for files in storage_listing(path).values() for n in files}
    assert live <= set(stats)                                   # every data file has its records
    for name in live:
        assert len(stats[name]) == 9 and not any(b["isDeleted"] for b in stats[name]), name
    gone = set(stats) - live
    assert any(n.endswith(".parquet") for n in gone)
    for name in gone:
        bodies = stats[name]
        # a deleted log file keeps its (live-looking) records, as 0.15 leaves them
        if name.endswith(".parquet"):
            assert all(b["isDeleted"] and b["valueCount"] == -1 and b["minValue"] is None for b in bodies), name
        else:
            assert not any(b["isDeleted"] for b in bodies), name


def test_clean_and_compaction_write_v6_metadata_delta_commits(tmp_path):
    path = v6_metadata_table("v6_mdt_files", tmp_path)
    rows = _expected("v6_mdt_files")
    before = {i.timestamp for i in _mdt(path).timeline.completed(Action.DELTA_COMMIT)}

    [c] = Table.open(str(path)).compact()
    assert c.status is Status.DONE, c.render()
    _agree(path, rows, "compaction")
    [cl] = Table.open(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})
    assert cl.status is Status.DONE and cl.metrics.files_deleted > 0, cl.render()
    _agree(path, rows, "clean")

    mdt = _mdt(path)
    assert {i.timestamp for i in mdt.timeline.completed(Action.DELTA_COMMIT)} - before == {c.instant, cl.instant}
    for t in (c.instant, cl.instant):
        done = next(i for i in mdt.timeline.completed(Action.DELTA_COMMIT) if i.timestamp == t)
        assert done.completion_time is None          # the v6 layout: T.deltacommit
        assert (path / ".hoodie" / "metadata" / ".hoodie" / f"{t}.deltacommit").is_file()
        metadata = decode_commit_metadata(mdt.storage.read_bytes(mdt.timeline.path_of(done)), mdt.config.layout, t)
        [stat] = metadata.partition_to_write_stats["files"]
        name = LogFileName.parse(stat.path.rsplit("/", 1)[-1])
        # named by the slice's base instant (Java's latest compaction), a new version each
        assert name.instant == stat.prev_commit == max(i.timestamp for i in mdt.timeline.completed(Action.COMMIT))
        assert stat.base_file.endswith(f"_{name.instant}.hfile")
        [block] = read_log_file(mdt.storage, str(path / ".hoodie" / "metadata" / stat.path)).blocks
        # the partition keeps 0.15's record schema (no isTightBound)
        assert dict(block.header)[HeaderKey.INSTANT_TIME] == t
        assert "isTightBound" not in dict(block.header)[HeaderKey.SCHEMA]
    versions = sorted(LogFileName.parse(p.name).version
                      for p in (path / ".hoodie" / "metadata" / "files").glob(".files-0000-0_*.log.*")
                      if LogFileName.parse(p.name).instant == name.instant)
    assert versions == list(range(1, len(versions) + 1)) and len(versions) >= 3


def _writer(table):
    from tablesvc.metadata.writer import MetadataTableWriter

    return MetadataTableWriter.of(table.storage, table.base_path, table.instant_times, ("files",))


def test_the_v6_metadata_compaction_is_at_the_latest_delta_commit_001_and_gated(tmp_path):
    from tablesvc.metadata.mdt_compaction import compact_if_due

    path = v6_metadata_table("v6_mdt_files", tmp_path)
    table = Table.open(str(path))
    latest = _mdt(path).timeline.latest_completed(Action.DELTA_COMMIT).timestamp
    # a data instant at or before the latest metadata delta commit is pending: no compaction (0.15's gate)
    pending = path / ".hoodie" / f"{latest[:-3]}000.deltacommit.requested"
    pending.write_bytes(b"")
    assert compact_if_due(table, _writer(table), max_delta_commits=1) == []
    pending.unlink()
    [done] = compact_if_due(Table.open(str(path)), _writer(Table.open(str(path))), max_delta_commits=1)
    assert done.timestamp == latest + "001" and done.action is Action.COMMIT
    assert (path / ".hoodie" / "metadata" / "files" / f"files-0000-0_1-0-1_{latest}001.hfile").is_file()
    # readers take the new base file: the listing is still storage's, the rows Java's
    _agree(path, _expected("v6_mdt_files"), "the metadata compaction")
    # not twice at the same instant
    assert compact_if_due(Table.open(str(path)), _writer(Table.open(str(path))), max_delta_commits=1) == []


def test_the_v6_metadata_clean_is_at_the_latest_delta_commit_002(tmp_path):
    from tablesvc.config.registry import CleanerPolicy
    from tablesvc.metadata.mdt_clean import clean_if_due
    from tablesvc.metadata.mdt_clean_plan import MetadataCleanPolicy

    path = v6_metadata_table("v6_mdt_files", tmp_path)
    # two delta commits after Java's last metadata compaction (three instants): the clean is due
    assert [r.status for r in Table.open(str(path)).compact()] == [Status.DONE]
    assert [r.status for r in Table.open(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})] \
        == [Status.DONE]
    table = Table.open(str(path))
    latest = _mdt(path).timeline.latest_completed(Action.DELTA_COMMIT).timestamp
    hfiles_before = sorted(p.name for p in (path / ".hoodie" / "metadata" / "files").glob("*.hfile"))
    [done] = clean_if_due(table, _writer(table), MetadataCleanPolicy(CleanerPolicy.KEEP_LATEST_FILE_VERSIONS,
                                                                      file_versions_retained=1))
    assert done.timestamp == latest + "002" and done.action is Action.CLEAN
    mdt_timeline = path / ".hoodie" / "metadata" / ".hoodie"
    assert (mdt_timeline / f"{done.timestamp}.clean").is_file()
    assert (mdt_timeline / f"{done.timestamp}.clean.inflight").stat().st_size > 0      # 0.x: the plan
    hfiles_after = sorted(p.name for p in (path / ".hoodie" / "metadata" / "files").glob("*.hfile"))
    assert len(hfiles_after) == 1 < len(hfiles_before)
    _agree(path, _expected("v6_mdt_files"), "the metadata clean")


def test_a_v6_partition_added_after_open_refuses_the_commit(tmp_path):
    """A Java 0.15 writer turns the record index on between tablesvc's open and its commit: the commit
    reads hoodie.properties again under its lock (``MetadataTableKept``, on v6 too) and refuses."""
    from tablesvc.errors import UnsupportedTableError
    from tablesvc.storage import LocalStorage
    from tablesvc.table.properties import read_properties, write_properties

    path = v6_metadata_table("v6_mdt_files", tmp_path)
    table = Table.open(str(path))                       # files only: a compaction may go ahead
    mdt_before = {i.timestamp for i in _mdt(path).timeline.completed(Action.DELTA_COMMIT)}
    props = read_properties(LocalStorage(), str(path))
    props["hoodie.table.metadata.partitions"] = "files,record_index"
    write_properties(LocalStorage(), str(path), props)
    with pytest.raises(UnsupportedTableError) as refused:
        table.compact()
    message = str(refused.value)
    assert refused.value.exit_code == 2 and "record_index" in message and "found when committing" in message
    assert {i.timestamp for i in _mdt(path).timeline.completed(Action.DELTA_COMMIT)} == mdt_before
