"""tablesvc's writes keep the metadata table's secondary indexes true (``secondary_index_*``), on a
copy of the Java-written ``mor_avro_v9_txns_simple_meta`` (indexes on ``merchant_name``, a string,
and ``txn_date``, a date; index version V2).  Upserts that insert keys, change an indexed value
(to another, to null, to one with ``$`` and ``\\``), change only other columns, then a delete; then
log compaction, compaction and clean, which write nothing into the indexes.  After every step:
hudi-rs and tablesvc's Spark read equal the model, and each index decoded from the metadata table
equals the model's (value, key) pairs (tests/secondary_index_check.py).  The record index is
dropped by the first write (``hoodie.metadata.record.index.enable=false``) so that the
secondary indexes are checked alone; test_record_index_partitioned_write.py keeps both."""

from __future__ import annotations

import datetime

import pytest
from oracles.hudi_rs import sorted_rows as hudi_rs_rows
from pyspark.sql import functions as F

from metadata_tables import check_listing_slices_and_rows
from fixture_tables import copy_table
from secondary_index_check import EPOCH, check_secondary_indexes, stored_pairs
from tablesvc.api import Table
from tablesvc.services.result import Status

COLUMNS = ("txn_id", "merchant_name", "txn_date", "txn_ts")
MERCHANT, DATE = "secondary_index_merchant_idx", "secondary_index_txn_date_idx"


def _model_pairs(model: dict, at: int) -> set:
    out = set()
    for key, row in model.items():
        value = row[at]
        if isinstance(value, datetime.date):
            value = str((value - EPOCH).days)
        out.add((value, key))
    return out


def _check(path, model: dict, step: str) -> None:
    check_listing_slices_and_rows(Table.open(str(path)), path, model, COLUMNS, step)
    try:
        counts = check_secondary_indexes(path)
        assert set(counts) == {MERCHANT, DATE}
        assert stored_pairs(path, MERCHANT) == _model_pairs(model, 0)
        assert stored_pairs(path, DATE) == _model_pairs(model, 1)
    except AssertionError as e:
        raise AssertionError(f"after {step}: {e}") from e


def _si_logs(path, ts: str) -> set[str]:
    folder = path / ".hoodie" / "metadata"
    return {p.parent.name for p in folder.glob(f"secondary_index_*/.*_{ts}.log.*")}


def _upsert(table: Table, model: dict, keys: list[str], change) -> str:
    data = [c for c in table.read().columns if not c.startswith("_hoodie_")]
    batch = change(table.read().select(*data).where(F.col("txn_id").isin(keys)))
    for row in batch.select(*COLUMNS).collect():
        model[row["txn_id"]] = tuple(row[c] for c in COLUMNS[1:])
    return table.upsert(batch).instant


@pytest.mark.spark
def test_writes_keep_secondary_indexes_true(tmp_path, spark, fixture_root):
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    model = {r[0]: r[1:] for r in hudi_rs_rows(path, COLUMNS)}
    assert len(model) > 10
    _check(path, model, "nothing (the Java-written table)")
    keys = sorted(model)
    written = []

    # inserts: two new keys (copies of existing rows under new keys), new base files
    table = Table.open(str(path))
    data = [c for c in table.read().columns if not c.startswith("_hoodie_")]
    src = table.read().select(*data).where(F.col("txn_id").isin(keys[:2]))
    new = src.withColumn("txn_id", F.concat(F.col("txn_id"), F.lit("-NEW"))) \
             .withColumn("merchant_name", F.concat(F.lit("New Shop "), F.col("txn_id")))
    for row in new.select(*COLUMNS).collect():
        model[row["txn_id"]] = tuple(row[c] for c in COLUMNS[1:])
    # the table's global record index cannot take inserts on a partitioned table (tablesvc refuses
    # them): the first write drops it with Java's opt-out, as the secondary indexes do not need it
    written.append(table.upsert(new, options={"hoodie.metadata.record.index.enable": False}).instant)
    assert "record_index" not in Table.open(str(path)).config.props["hoodie.table.metadata.partitions"]
    _check(path, model, "an insert")

    # an indexed value changes (both indexes), to a value with the key's separator and escape
    written.append(_upsert(Table.open(str(path)), model, keys[2:5], lambda b: b
                           .withColumn("merchant_name", F.concat(F.lit("Caf$ \\ "), F.col("txn_id")))
                           .withColumn("txn_date", F.date_add(F.col("txn_date"), 3))
                           .withColumn("txn_ts", F.col("txn_ts") + 1000)))
    _check(path, model, "an update of indexed columns")

    # other columns only: the indexes do not change (no secondary-index record at all)
    before = {MERCHANT: stored_pairs(path, MERCHANT), DATE: stored_pairs(path, DATE)}
    ts = _upsert(Table.open(str(path)), model, keys[5:8], lambda b: b.withColumn("txn_ts", F.col("txn_ts") + 2000))
    written.append(ts)
    _check(path, model, "an update of other columns")
    assert _si_logs(path, ts) == set()
    assert {MERCHANT: stored_pairs(path, MERCHANT), DATE: stored_pairs(path, DATE)} == before

    # to null and back from it
    written.append(_upsert(Table.open(str(path)), model, keys[8:10], lambda b: b
                           .withColumn("merchant_name", F.lit(None).cast("string"))
                           .withColumn("txn_ts", F.col("txn_ts") + 3000)))
    _check(path, model, "an update to null")

    # deletes
    table = Table.open(str(path))
    gone = [keys[0], keys[3], keys[9]]
    table.delete(table.read().select("txn_id", "region").where(F.col("txn_id").isin(gone)))
    for key in gone:
        del model[key]
    _check(path, model, "a delete")
    assert all(_si_logs(path, ts) for ts in written[:2])

    # services: nothing for the indexes, which stay true
    services = []
    [lc] = Table.open(str(path)).log_compact()
    assert lc.status in (Status.DONE, Status.NOTHING_TO_DO), lc.render()
    if lc.status is Status.DONE:
        services.append(lc.instant)
        _check(path, model, "log compaction")
    [c] = Table.open(str(path)).compact()
    assert c.status is Status.DONE, c.render()
    services.append(c.instant)
    _check(path, model, "compaction")
    [cl] = Table.open(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})
    assert cl.status in (Status.DONE, Status.NOTHING_TO_DO), cl.render()
    if cl.status is Status.DONE:
        services.append(cl.instant)
        _check(path, model, "clean")
    for ts in services:
        assert _si_logs(path, ts) == set(), ts

    # and a write after the services
    _upsert(Table.open(str(path)), model, keys[10:12], lambda b: b.withColumn("merchant_name", F.lit("After")))
    _check(path, model, "an upsert after the services")


@pytest.mark.spark
def test_writes_keep_a_v1_secondary_index_true(tmp_path, spark, fixture_root):
    """Table version 8 (``v8_trips_8i3u1d``, Hudi 1.0): index ``rider_idx`` has version V1, whose
    keys go to the file group of the whole key's hash (checked by ``stored_pairs``)."""
    path = copy_table(fixture_root.path("v8_trips_8i3u1d"), tmp_path)
    rider = "secondary_index_rider_idx"
    model = {r[0]: r[1] for r in hudi_rs_rows(path, ("uuid", "rider"))}
    assert stored_pairs(path, rider) == {(v, k) for k, v in model.items()}
    keys = sorted(model)
    table = Table.open(str(path))
    data = [c for c in table.read().columns if not c.startswith("_hoodie_")]
    batch = table.read().select(*data).where(F.col("uuid").isin(keys[:3]))
    batch = batch.withColumn("rider", F.concat(F.lit("rider-$"), F.col("uuid"))).withColumn("ts", F.col("ts") + 1)
    new = batch.limit(1).withColumn("uuid", F.lit("new-key-1")).withColumn("rider", F.lit("rider-new"))
    upsert = batch.unionByName(new)
    for row in upsert.select("uuid", "rider").collect():
        model[row["uuid"]] = row["rider"]
    table.upsert(upsert, options={"hoodie.metadata.record.index.enable": False})
    assert check_secondary_indexes(path) == {rider: len(model)}
    assert stored_pairs(path, rider) == {(v, k) for k, v in model.items()}

    table = Table.open(str(path))
    table.delete(table.read().select("uuid", "city").where(F.col("uuid").isin([keys[0], keys[5]])))
    del model[keys[0]], model[keys[5]]
    assert stored_pairs(path, rider) == {(v, k) for k, v in model.items()}
    assert check_secondary_indexes(path) == {rider: len(model)}
    assert sorted(tuple(r) for r in Table.open(str(path)).read(columns=["uuid", "rider"]).collect()) \
        == sorted(model.items())
