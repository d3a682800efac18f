"""tablesvc's writes keep the metadata table's record index true (``record_index``), on a copy of
the Java-written ``v9_nonpartitioned_rollback`` (global record index, no secondary index; its key
TXN-002 is in two file groups, Java's record index naming the newer).  Upserts that insert new keys
and update old ones, a delete, an upsert reviving a deleted key; then log compaction, compaction and
clean, which write nothing into the index; then one more upsert on the compacted table.  After every
step: hudi-rs and tablesvc's Spark read equal the model, and the record index decoded from the
metadata table (tests/record_index_check.py, not tablesvc's record-index code) names exactly the
live keys, each in a file group that holds it; keys tablesvc inserted carry the write's instant."""

from __future__ import annotations

import pytest
from oracles.hudi_rs import sorted_rows as hudi_rs_rows
from pyspark.sql import functions as F

from metadata_tables import check_listing_slices_and_row_tuples
from fixture_tables import copy_table
from record_index_check import check_record_index, stored_record_index
from tablesvc.api import Table
from tablesvc.services.result import Status
from timeline.instant_time import parse_instant

COLUMNS = ("txn_id", "currency", "txn_ts")


def _check(path, model: list, step: str) -> int:
    check_listing_slices_and_row_tuples(Table.open(str(path)), path, model, COLUMNS, step)
    try:
        return check_record_index(path)
    except AssertionError as e:
        raise AssertionError(f"after {step}: {e}") from e


def _rli_logs(path, ts: str) -> int:
    return len(list((path / ".hoodie" / "metadata" / "record_index").glob(f".*_{ts}.log.*")))


def _data(table: Table):
    return table.read().select(*[c for c in table.read().columns if not c.startswith("_hoodie_")])


@pytest.mark.spark
def test_writes_keep_the_record_index_true(tmp_path, spark, fixture_root):
    path = copy_table(fixture_root.path("v9_nonpartitioned_rollback"), tmp_path)
    model = [tuple(r) for r in hudi_rs_rows(path, COLUMNS)]
    assert {r[0] for r in model} == {"TXN-001", "TXN-002", "TXN-003"} and len(model) == 4
    assert _check(path, model, "nothing (the Java-written table)") == 3
    writes: list[tuple[str, set[str]]] = []       # (instant, keys it inserted)

    def upsert(batch, inserted: set[str]) -> str:
        nonlocal model
        rows = [tuple(r[c] for c in COLUMNS) for r in batch.select(*COLUMNS).collect()]
        keys = {r[0] for r in rows}
        # an update replaces every row of its key (TXN-002 is in two file groups: both are updated)
        model = [r for r in model if r[0] not in keys]
        for r in rows:
            model += [r] * (1 if r[0] in inserted else max(1, n_rows.get(r[0], 1)))
        ts = Table.open(str(path)).upsert(batch).instant
        writes.append((ts, inserted))
        return ts

    # 1. update TXN-001, insert TXN-100..TXN-119 (copies of TXN-003 under new keys): a new base file
    table = Table.open(str(path))
    n_rows = {"TXN-002": 2}
    src = _data(table)
    new = (src.where(F.col("txn_id") == "TXN-003").crossJoin(spark.range(100, 120).withColumnRenamed("id", "n"))
           .withColumn("txn_id", F.concat(F.lit("TXN-"), F.col("n").cast("string"))).drop("n"))
    upd = src.where(F.col("txn_id") == "TXN-001").withColumn("currency", F.lit("CHF"))
    inserted = {f"TXN-{n}" for n in range(100, 120)}
    ts = upsert(upd.unionByName(new), inserted)
    assert _rli_logs(path, ts) > 0
    assert _check(path, model, "upsert with inserts") == 23

    # 2. delete TXN-003 and TXN-105 (log delete blocks): their keys leave the index
    table = Table.open(str(path))
    gone = _data(table).where(F.col("txn_id").isin("TXN-003", "TXN-105"))
    ts = table.delete(gone).instant
    model = [r for r in model if r[0] not in ("TXN-003", "TXN-105")]
    assert _rli_logs(path, ts) > 0
    assert _check(path, model, "delete") == 21
    assert not {"TXN-003", "TXN-105"} & set(stored_record_index(path))

    # 3. update TXN-002 (both its rows; a later ordering value than either) and TXN-110, revive
    # TXN-003 (a new file group)
    table = Table.open(str(path))
    src = _data(table)
    revived = src.where(F.col("txn_id") == "TXN-101").withColumn("txn_id", F.lit("TXN-003"))
    upd = src.where(F.col("txn_id").isin("TXN-002", "TXN-110")).dropDuplicates(["txn_id"]) \
             .withColumn("currency", F.lit("NOK")).withColumn("txn_ts", F.lit(1800000000000))
    upsert(upd.unionByName(revived), {"TXN-003"})
    assert _check(path, model, "upsert reviving a deleted key") == 22

    # 4. services: nothing for the record index, which stays true
    for step, run in (("log compaction", lambda t: t.log_compact()),
                      ("compaction", lambda t: t.compact()),
                      ("clean", lambda t: t.clean(options={"hoodie.cleaner.commits.retained": 1}))):
        [result] = run(Table.open(str(path)))
        assert result.status is Status.DONE, (step, result.render())
        assert _rli_logs(path, result.instant) == 0, step
        assert _check(path, model, step) == 22

    # 5. an upsert on the compacted table: inserts and updates
    table = Table.open(str(path))
    src = _data(table)
    new = src.where(F.col("txn_id") == "TXN-100").withColumn("txn_id", F.lit("TXN-200"))
    upd = src.where(F.col("txn_id") == "TXN-100").withColumn("currency", F.lit("SEK")) \
             .withColumn("txn_ts", F.lit(1800000000001))
    upsert(upd.unionByName(new), {"TXN-200"})
    assert _check(path, model, "upsert after the services") == 23

    # keys tablesvc inserted carry the instant of the write that inserted them last
    stored = stored_record_index(path)
    for ts, keys in writes:
        for key in keys:
            if key in stored and not any(key in later for t, later in writes if t > ts):
                assert stored[key][2] == parse_instant(ts), (key, ts)
