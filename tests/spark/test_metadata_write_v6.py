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
    if name == "v6_mdt_colstats":
        _column_stats_cover(path)
