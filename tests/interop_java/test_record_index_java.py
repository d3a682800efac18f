"""Issue #27, the record index: Java Hudi 1.2 routes its writes by the record index tablesvc kept
(docs/metadata-table.md, "record_index").

On a copy of the Java-written ``v9_nonpartitioned_rollback`` (global record index, no secondary
index), tablesvc upserts (20 new keys, an update) and deletes two keys, one of them its own insert;
Java's comparison of the metadata table with storage (``metadata_validation``) finds nothing.  Then
Java upserts with ``hoodie.index.type=RECORD_INDEX``: updates of five keys tablesvc inserted, one
new key, then deletes one key tablesvc inserted and one it updated.  Java tags each incoming key by
looking it up in the record index: a key missing there would be written as an insert into a new file
group (the key then read twice) and a delete of it dropped (the row still read).  After Java's
writes, Java's read, hudi-rs and tablesvc's read equal the model, every key once (but TXN-002,
which the fixture holds twice since Java's own second insert).

The counterfactual shows the test can fail: on a copy whose metadata table lost tablesvc's
record-index log files, the same Java upsert leaves the five updated keys twice in Java's read."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest
from java_hudi import JavaTable
from metadata_validation import FILE_SLICES, validate_metadata_table
from oracles.hudi_rs import read_rows
from oracles.hudi_rs import sorted_rows as hudi_rs_rows
from pyspark.sql import functions as F

from fixture_tables import copy_table
from record_index_check import check_record_index
from tablesvc.api import Table
from tablesvc.errors import InvalidInputError

pytestmark = pytest.mark.interop_java

COLUMNS = ("txn_id", "currency", "txn_ts")
RLI_WRITER = (("hoodie.index.type", "RECORD_INDEX"), ("hoodie.metadata.record.index.enable", "true"),
              ("hoodie.metadata.index.column.stats.enable", "true"))


def _data(table: Table):
    return table.read().select(*[c for c in table.read().columns if not c.startswith("_hoodie_")])


def _java_rows(java, jt: JavaTable) -> list[tuple]:
    return sorted(tuple(r) for r in java.read_columns(jt, list(COLUMNS)))


def _twice(rows: list[tuple]) -> list[str]:
    keys = [r[0] for r in rows]
    return sorted({k for k in keys if keys.count(k) > 1})


def _java_write(java, jt: JavaTable, operation: str, df, folder) -> None:
    df.write.mode("overwrite").parquet(str(folder))
    java.step({"op": "write", "path": jt.path, "operation": operation, "schema": None, "rows": None,
               "generate": None, "source": str(folder), "options": jt.write_options()})


def _tablesvc_writes(path, spark) -> list[tuple]:
    """tablesvc's upsert and delete; the model after them."""
    table = Table.open(str(path))
    src = _data(table)
    new = (src.where(F.col("txn_id") == "TXN-003").crossJoin(spark.range(100, 120).withColumnRenamed("id", "n"))
           .withColumn("txn_id", F.concat(F.lit("TXN-"), F.col("n").cast("string"))).drop("n"))
    upd = src.where(F.col("txn_id") == "TXN-001").withColumn("currency", F.lit("CHF")) \
        .withColumn("txn_ts", F.lit(1800000000000))
    table.upsert(upd.unionByName(new))
    table = Table.open(str(path))
    table.delete(_data(table).where(F.col("txn_id").isin("TXN-003", "TXN-105")))
    return hudi_rs_rows(path, COLUMNS)


def test_java_routes_by_the_record_index_tablesvc_kept(tmp_path, spark, fixture_root, java_hudi):
    path = copy_table(fixture_root.path("v9_nonpartitioned_rollback"), tmp_path)
    model = _tablesvc_writes(path, spark)
    keys = [r[0] for r in model]
    assert "TXN-100" in keys and "TXN-105" not in keys and "TXN-003" not in keys
    assert check_record_index(path) == 21
    found = validate_metadata_table(java_hudi, path)
    assert not found.differences and found.count(FILE_SLICES) > 0, found.render()
    # a copy without tablesvc's record-index log files (the counterfactual, below)
    broken = tmp_path / "without-rli"
    shutil.copytree(path, broken)
    tablesvc_instants = [i.timestamp for i in Table.open(str(path)).timeline().completed()][-2:]
    removed = [p for ts in tablesvc_instants
               for p in (broken / ".hoodie" / "metadata" / "record_index").glob(f".*_{ts}.log.*")]
    assert removed
    for p in removed:
        p.unlink()

    jt = replace(JavaTable.existing(path, java_hudi.bundle), default_metadata=True, writer=RLI_WRITER)
    table = Table.open(str(path))
    src = _data(table)
    upd = src.where(F.col("txn_id").isin(*[f"TXN-{n}" for n in range(100, 105)])) \
        .withColumn("currency", F.lit("JPY")).withColumn("txn_ts", F.lit(1900000000000))
    new = src.where(F.col("txn_id") == "TXN-100").withColumn("txn_id", F.lit("TXN-300")) \
        .withColumn("txn_ts", F.lit(1900000000000))
    batch = upd.unionByName(new).cache()
    batch_rows = {r["txn_id"]: tuple(r[c] for c in COLUMNS) for r in batch.select(*COLUMNS).collect()}
    _java_write(java_hudi, jt, "upsert", batch, tmp_path / "batch1")
    model = sorted([r for r in model if r[0] not in batch_rows] + list(batch_rows.values()))
    gone = src.where(F.col("txn_id").isin("TXN-110", "TXN-001"))
    _java_write(java_hudi, jt, "delete", gone, tmp_path / "batch2")
    model = [r for r in model if r[0] not in ("TXN-110", "TXN-001")]

    java_rows = _java_rows(java_hudi, jt)
    # TXN-002 is in two file groups since Java's own insert (the fixture); any other key read twice
    # would be one Java did not find in the record index
    assert _twice(java_rows) == ["TXN-002"], "a key read twice: Java missed it in the record index"
    assert java_rows == model
    assert hudi_rs_rows(path, COLUMNS) == model
    ours = sorted(tuple(r[c] for c in COLUMNS) for r in Table.open(str(path)).read(columns=list(COLUMNS)).collect())
    assert ours == model
    assert check_record_index(path) == len({r[0] for r in model})
    found = validate_metadata_table(java_hudi, path)
    assert not found.differences, found.render()
    print(f"Java's RECORD_INDEX writes after tablesvc's: {len(model)} rows, no key twice but TXN-002; {found.render()}")

    # the counterfactual: without tablesvc's record-index entries, Java writes the updates as inserts
    jb = replace(jt, path=str(broken))
    _java_write(java_hudi, jb, "upsert", batch, tmp_path / "batch3")
    broken_rows = _java_rows(java_hudi, jb)
    assert _twice(broken_rows) == ["TXN-002"] + [f"TXN-{n}" for n in range(100, 105)]


# -- a partitioned table: Java's global record index finds tablesvc's keys across partitions ------------
TXN_COLUMNS = ("txn_id", "merchant_name", "txn_ts")


def _rows(path) -> list[tuple]:
    return hudi_rs_rows(path, TXN_COLUMNS)


def test_java_global_record_index_on_a_partitioned_table_tablesvc_wrote(tmp_path, spark, fixture_root, java_hudi):
    """``mor_avro_v9_txns_simple_meta`` (partitioned by ``region``, global record index): tablesvc
    upserts (one update, five new keys in one partition) and deletes (an old key and one of its
    new keys), then refuses an upsert moving a key to another region.  Java (``hoodie.index.type``
    RECORD_INDEX, ``hoodie.record.index.update.partition.path`` false, its default) then updates
    two of tablesvc's keys, and one more given with ANOTHER region: Java's global index finds it
    through tablesvc's record-index entry and updates it where it lives; then Java deletes a
    tablesvc key given with a wrong region (deleted where it lives).  A key tablesvc's index lacked
    would be read twice (an insert into the named region) or survive its delete."""
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    table = Table.open(str(path))
    src = _data(table)
    home = src.where(F.col("txn_id") == "TXN-011").select("region").first()[0]
    other = src.where(F.col("region") != home).select("region").first()[0]
    new = (src.where(F.col("txn_id") == "TXN-011").crossJoin(spark.range(500, 505).withColumnRenamed("id", "n"))
           .withColumn("txn_id", F.concat(F.lit("TXN-"), F.col("n").cast("string"))).drop("n"))
    old = src.where(F.col("region") == other).orderBy("txn_id").first()["txn_id"]
    upd = src.where(F.col("txn_id") == old).withColumn("merchant_name", F.lit("tablesvc")) \
        .withColumn("txn_ts", F.col("txn_ts") + 1000)
    table.upsert(upd.unionByName(new))
    table = Table.open(str(path))
    gone_old = src.where((F.col("region") == other) & (F.col("txn_id") != old)).orderBy("txn_id").first()["txn_id"]
    table.delete(_data(table).where(F.col("txn_id").isin(gone_old, "TXN-504")))
    model = _rows(path)
    keys = [r[0] for r in model]
    assert "TXN-500" in keys and "TXN-504" not in keys and gone_old not in keys and len(keys) == len(set(keys))
    assert check_record_index(path) == len(keys)
    with pytest.raises(InvalidInputError, match="global record index holds it"):
        Table.open(str(path)).upsert(_data(Table.open(str(path))).where(F.col("txn_id") == "TXN-500")
                                     .withColumn("region", F.lit(other)))
    found = validate_metadata_table(java_hudi, path)
    assert not found.differences and found.count(FILE_SLICES) > 0, found.render()

    jt = replace(JavaTable.existing(path, java_hudi.bundle), default_metadata=True, writer=RLI_WRITER)
    src = _data(Table.open(str(path)))
    same = src.where(F.col("txn_id").isin("TXN-500", "TXN-501"))
    moved = src.where(F.col("txn_id") == "TXN-503").withColumn("region", F.lit(other))
    batch = same.unionByName(moved).withColumn("merchant_name", F.lit("java")) \
        .withColumn("txn_ts", F.col("txn_ts") + 2000).cache()
    batch_rows = {r["txn_id"]: tuple(r[c] for c in TXN_COLUMNS) for r in batch.select(*TXN_COLUMNS).collect()}
    _java_write(java_hudi, jt, "upsert", batch, tmp_path / "batch1")
    model = sorted([r for r in model if r[0] not in batch_rows] + list(batch_rows.values()))
    wrong_region = src.where(F.col("txn_id") == "TXN-502").withColumn("region", F.lit(other))
    _java_write(java_hudi, jt, "delete", wrong_region, tmp_path / "batch2")
    model = [r for r in model if r[0] != "TXN-502"]

    java_rows = sorted(tuple(r) for r in java_hudi.read_columns(jt, list(TXN_COLUMNS)))
    assert _twice(java_rows) == [], "a key read twice: Java missed it in tablesvc's record index"
    assert java_rows == model
    assert _rows(path) == model
    ours = sorted(tuple(r[c] for c in TXN_COLUMNS)
                  for r in Table.open(str(path)).read(columns=list(TXN_COLUMNS)).collect())
    assert ours == model
    where = {r["_hoodie_record_key"]: r["_hoodie_partition_path"] for r in read_rows(path)}
    assert where["TXN-503"] == f"region={home}", where["TXN-503"]     # updated where it lives
    assert check_record_index(path) == len(model)
    found = validate_metadata_table(java_hudi, path)
    assert not found.differences, found.render()
    print(f"Java's global RECORD_INDEX writes on partitioned tablesvc output: {len(model)} rows; {found.render()}")
