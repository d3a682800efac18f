"""tablesvc's commits on a Java-written v9 table (metadata table keeping ``files`` only) until the
metadata table's own compaction comes due and runs inside a tablesvc commit: after every upsert
and after the compaction, the metadata table's listing equals storage's, hudi-rs lists the same
file slices through the metadata table as tablesvc (through it and from storage), and hudi-rs,
tablesvc's Spark read and the model read the same rows; the ``files`` records are unchanged by
the compaction, which holds no log of the delta commit being written."""

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
from tablesvc.metadata.mdt_compaction_plan import DEFAULT_MAX_DELTA_COMMITS, delta_commits_since_compaction
from timeline.instant import Action
from timeline.payloads import decode_compaction_plan

COLUMNS = ("txn_id", "txn_ts", "merchant_name")


def _check(path, model: dict, step: str) -> None:
    table = Table.open(str(path))
    check_listing_slices_and_rows(table, path, model, COLUMNS, step)


def _mdt(path) -> MetadataTable:
    table = Table.open(str(path))
    return MetadataTable(table.storage, table.base_path, table.timeline())


@pytest.mark.spark
def test_the_metadata_table_compacts_inside_a_tablesvc_commit(tmp_path, spark, fixture_root):
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    keep_only_files_partition(path)
    model = {r[0]: r[1:] for r in hudi_rs_rows(path, COLUMNS)}
    java_compactions = {i.timestamp for i in _mdt(path).timeline.completed(Action.COMMIT)}
    writes = 0
    while True:
        mdt = _mdt(path)
        due = delta_commits_since_compaction(mdt.timeline) >= DEFAULT_MAX_DELTA_COMMITS
        files_before = mdt.files_records()
        table = Table.open(str(path))
        data = [c for c in table.read().columns if not c.startswith("_hoodie_")]
        batch = (table.read().select(*data).orderBy("txn_id").limit(5)
                 .withColumn("txn_ts", F.col("txn_ts") + 1000 * (writes + 1))
                 .withColumn("merchant_name", F.lit(f"w{writes}")))
        for row in batch.select(*COLUMNS).collect():
            model[row["txn_id"]] = (row["txn_ts"], row["merchant_name"])
        instant = table.upsert(batch).instant
        writes += 1
        _check(path, model, f"upsert {writes}")
        if due:
            break
        assert writes <= DEFAULT_MAX_DELTA_COMMITS + 1
    mdt = _mdt(path)
    ours = [i for i in mdt.timeline.completed(Action.COMMIT) if i.timestamp not in java_compactions]
    assert len(ours) == 1, "the compaction came due and ran in the last commit"
    (compaction,) = ours
    assert compaction.timestamp > max(java_compactions) and compaction.completion_time < \
        [i for i in mdt.timeline.completed(Action.DELTA_COMMIT) if i.timestamp == instant][0].completion_time
    plan = decode_compaction_plan(mdt.storage.read_bytes(
        mdt.timeline.path_of([f for f in mdt.timeline.files_of(compaction.timestamp) if f.state.name == "REQUESTED"][0])),
        "plan")
    assert all(instant not in n for op in plan.operations for n in op.delta_file_paths)
    (files_slice,) = mdt.files_slices()
    assert files_slice.base_file is not None and files_slice.base_instant == compaction.timestamp
    # the write's delta commit (and those of the inline services after it) are logs of the new slice
    assert instant in [lf.name.instant for lf in files_slice.log_files]
    # the records the compaction rewrote are the ones the table had, plus the write's own
    after_without_write = {k: v for k, v in mdt.files_records().items()}
    assert set(files_before) <= set(after_without_write)
    assert delta_commits_since_compaction(mdt.timeline) < DEFAULT_MAX_DELTA_COMMITS
