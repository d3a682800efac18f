"""tablesvc's upsert, log compaction, compaction, clean and rollback on a version-6 table whose
metadata table Java Hudi 0.15.0 wrote (``tests/data/hudi/v6_metadata``: ``files``, and ``files`` with
``column_stats``, whose every data file then has its records): after every
step the metadata table's listing equals storage's (names and sizes), tablesvc's slices through the
metadata table equal hudi-rs's (which lists v6 tables from storage) and a storage listing's, and
hudi-rs, tablesvc's Spark read and the model read the same rows.  Each step's metadata delta commit
is at the data instant's time, in the v6 layout; a rollback's is at the rollback's time."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from fixture_tables import V6_METADATA_FIXTURES_DIR, v6_metadata_table
from metadata_tables import check_listing_slices_and_rows
from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from tablesvc.services.result import Status
from timeline.instant import Action

COLUMNS = ("id", "ts", "part", "val")


def _check(path, model: dict, step: str) -> None:
    table = Table.open(str(path))
    assert table.uses_metadata_table
    check_listing_slices_and_rows(table, path, model, COLUMNS, step)


def _upsert(table: Table, model: dict, keys: list[str], delta: int, label: str) -> str:
    batch = (table.read().select(*COLUMNS).where(F.col("id").isin(keys))
             .withColumn("ts", F.col("ts") + delta).withColumn("val", F.lit(label)))
    for row in batch.collect():
        model[row["id"]] = (row["ts"], row["part"], row["val"])
    return table.upsert(batch).instant


def _mdt_delta_commits(path) -> list[str]:
    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    return [i.timestamp for i in mdt.timeline.completed(Action.DELTA_COMMIT)]


def _v6_metadata_rollback(path, r: str, target: str) -> None:
    """Hudi 0.15's metadata side of the data rollback ``r`` of ``target``: the delta commit at ``r``
    holds exactly the rollback's ``files`` additions (``from_rollback``: the logs that received a
    rollback command block; none when the rollback only deleted files, as on these fixtures, whose
    writes each wrote their own log files), and the metadata rollback ``<r>006`` completed, naming
    ``target``."""
    from tablesvc.metadata.files_changes import from_rollback
    from tablesvc.metadata.partition_reader import log_records
    from timeline.instant import Instant, State
    from timeline.storage import join

    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    data_rb = table.timeline().payload(table.storage, Instant(r, Action.ROLLBACK, State.COMPLETED))
    want = {c.key: dict(c.entries) for c in from_rollback(data_rb)}
    dc = mdt.timeline.commit_metadata(table.storage, Instant(r, Action.DELTA_COMMIT, State.COMPLETED))
    paths = [join(mdt.base_path, s.path) for s in dc.partition_to_write_stats.get("files", ())]
    got = {k: {n: (i["size"], i["isDeleted"]) for n, i in v["filesystemMetadata"].items()}
           for k, v in log_records(mdt, paths) if v is not None}
    assert got == want, f"the metadata delta commit at {r}"
    r006 = Instant(r + "006", Action.ROLLBACK, State.COMPLETED)
    assert r006 in mdt.timeline.completed(Action.ROLLBACK), [i.file_name() for i in mdt.timeline.instants]
    assert list(mdt.timeline.payload(table.storage, r006).commits_rollback) == [target]


def _column_stats_cover(path) -> None:
    """Every data file on storage has its 9 live column_stats records (0.15: every column)."""
    from metadata_tables import storage_listing

    from tablesvc.metadata.mdt_compaction import merge_for
    from tablesvc.metadata.partition_reader import partition_records

    table = Table.open(str(path))
    records = partition_records(MetadataTable(table.storage, table.base_path, table.timeline()), "column_stats",
                                merge_for("column_stats"))
    by_file: dict[str, list] = {}
    for v in records.values():
        if v is not None:
            by_file.setdefault(v["ColumnStatsMetadata"]["fileName"], []).append(v["ColumnStatsMetadata"])
    for files in storage_listing(path).values():
        for name in files:
            assert len(by_file.get(name, ())) == 9 and not any(b["isDeleted"] for b in by_file[name]), name


@pytest.mark.spark
@pytest.mark.parametrize("name", ["v6_mdt_files", "v6_mdt_colstats"])
def test_services_and_writes_keep_the_v6_metadata_table_true(tmp_path, spark, name):
    path = v6_metadata_table(name, tmp_path)
    rows = json.loads((V6_METADATA_FIXTURES_DIR / f"{name}.json").read_text())["rows"]
    model = {r[0]: tuple(r[1:]) for r in rows}
    _check(path, model, "Java's writes")

    first = _upsert(Table.open(str(path)), model, ["k000", "k003"], 100_000, "late-1")
    _check(path, model, "an upsert")
    second = _upsert(Table.open(str(path)), model, ["k002", "k005"], 200_000, "late-2")
    _check(path, model, "a second upsert")
    assert {first, second} <= set(_mdt_delta_commits(path))
    assert (path / ".hoodie" / "metadata" / ".hoodie" / f"{second}.deltacommit").is_file()

    [lc] = Table.open(str(path)).log_compact()
    assert lc.status is Status.DONE, lc.render()
    _check(path, model, "log compaction")
    [c] = Table.open(str(path)).compact()
    assert c.status is Status.DONE, c.render()
    _check(path, model, "compaction")
    [cl] = Table.open(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})
    assert cl.status is Status.DONE and cl.metrics.files_deleted > 0, cl.render()
    _check(path, model, "clean")
    assert {lc.instant, c.instant, cl.instant} <= set(_mdt_delta_commits(path))

    # a completed write rolled back: a metadata delta commit at the rollback's time (0.15), and
    # the write's own metadata delta commit is taken out
    saved = dict(model)
    third = _upsert(Table.open(str(path)), model, ["k007"], 300_000, "late-3")
    _check(path, model, "a third upsert")
    assert third in _mdt_delta_commits(path)
    rb = Table.open(str(path)).rollback(third, allow_completed=True)
    assert rb.status is Status.DONE, rb.render()
    _check(path, saved, "the rollback of the third upsert")
    assert third not in _mdt_delta_commits(path)
    assert rb.instant in _mdt_delta_commits(path)
    _v6_metadata_rollback(path, rb.instant, third)
    if name == "v6_mdt_colstats":
        _column_stats_cover(path)
