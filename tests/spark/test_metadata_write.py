"""tablesvc's write, log compaction, compaction, clean and rollback on a Java-written v9 table
whose metadata table keeps only ``files`` (the other partitions dropped the way Hudi drops
them): after every step the metadata table's listing equals storage's, the file slices hudi-rs
lists through the metadata table equal tablesvc's through it and tablesvc's from a storage
listing, and hudi-rs, tablesvc's Spark read and the model read the same rows."""

from __future__ import annotations

import pytest
from oracles.hudi_rs import sorted_rows as hudi_rs_rows
from pyspark.sql import functions as F

from fixture_tables import copy_table
from metadata_tables import (
    check_listing_slices_and_rows,
    keep_only_files_partition,
)
from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from tablesvc.services.result import Status
from timeline.instant import Action

COLUMNS = ("txn_id", "txn_ts", "merchant_name")


def _check(path, model: dict, step: str) -> None:
    table = Table.open(str(path))
    assert table.uses_metadata_table
    check_listing_slices_and_rows(table, path, model, COLUMNS, step)


def _upsert(table: Table, model: dict, delta: int, label: str) -> str:
    data = [c for c in table.read().columns if not c.startswith("_hoodie_")]
    some = table.read().select(*data).orderBy("txn_id").limit(7)
    batch = some.withColumn("txn_ts", F.col("txn_ts") + delta).withColumn("merchant_name", F.lit(label))
    for row in batch.select(*COLUMNS).collect():
        model[row["txn_id"]] = (row["txn_ts"], row["merchant_name"])
    return table.upsert(batch).instant


def _mdt_delta_commits(path) -> list[str]:
    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    return [i.timestamp for i in mdt.timeline.completed(Action.DELTA_COMMIT)]


@pytest.mark.spark
def test_services_and_writes_keep_the_files_partition_true(tmp_path, spark, fixture_root):
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    keep_only_files_partition(path)
    model = {r[0]: r[1:] for r in hudi_rs_rows(path, COLUMNS)}
    assert model
    _check(path, model, "dropping the other partitions")

    table = Table.open(str(path))
    first = _upsert(table, model, 1000, "late-1")
    _check(path, model, "an upsert")
    second = _upsert(Table.open(str(path)), model, 2000, "late-2")
    _check(path, model, "a second upsert")
    assert {first, second} <= set(_mdt_delta_commits(path))

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

    # a completed write rolled back: its metadata delta commit goes with it
    saved = dict(model)
    third = _upsert(Table.open(str(path)), model, 3000, "late-3")
    _check(path, model, "a third upsert")
    assert third in _mdt_delta_commits(path)
    rb = Table.open(str(path)).rollback(third, allow_completed=True)
    assert rb.status is Status.DONE, rb.render()
    _check(path, saved, "the rollback of the third upsert")
    assert third not in _mdt_delta_commits(path)
    assert not [n for n in (path / ".hoodie" / "metadata" / "files").iterdir() if f"_{third}." in n.name]
    # as Java: a rollback instant at the data rollback's time on the metadata table, T gone from its timeline
    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline()).timeline
    assert rb.instant in {i.timestamp for i in mdt.completed(Action.ROLLBACK)} and mdt.files_of(third) == ()
