"""Issue #27, secondary indexes: after tablesvc's writes, Java Hudi 1.2 answers by the secondary key
with the model's rows (docs/metadata-table.md, "Secondary indexes").

On a copy of the Java-written ``mor_avro_v9_txns_simple_meta`` (record index and two V2 secondary
indexes, ``merchant_name`` and ``txn_date``), tablesvc upserts rows whose indexed value changes
(to values no row had, one with ``$``), then rows whose other columns only change, then compacts,
inserts new keys with a new value and deletes one key, then upserts again.  After each step, for every
merchant name the model has and every one it had before:

* Java's metadata-table reader looks the value up in ``secondary_index_merchant_idx``
  (``readSecondaryIndexDataTableRecordKeysV2``) and finds exactly the model's keys;
* a Spark SQL filter ``merchant_name = value`` with the metadata table and data skipping on
  returns exactly the model's keys.

Last, the SI is shown to drive that query: on a copy whose metadata table lost the secondary-index
log files of tablesvc's last write, Java's filtered query for a value only that write introduced
returns no row (its files are pruned), while the same query on the intact table returns its row.
"""

from __future__ import annotations

import shutil

import pytest
from oracles.hudi_rs import sorted_rows as hudi_rs_rows
from pyspark.sql import functions as F

from fixture_tables import copy_table
from tablesvc.api import Table
from tablesvc.services.result import Status

pytestmark = pytest.mark.interop_java

PARTITION = "secondary_index_merchant_idx"
COLUMNS = ("txn_id", "merchant_name")


def _expected(model: dict[str, str | None], values) -> dict[str, list[str]]:
    return {v: sorted(k for k, m in model.items() if m == v) for v in values}


def _ask(java, path, values) -> dict:
    return java.step({"op": "secondary_index", "path": str(path), "partition": PARTITION,
                      "column": "merchant_name", "values": sorted(values)})


def _check(java, path, model: dict, seen: set, step: str) -> dict:
    assert hudi_rs_rows(path, COLUMNS) == sorted(model.items()), step
    values = {v for v in seen | set(model.values()) if v is not None}
    got = _ask(java, path, values)
    expected = _expected(model, values)
    assert got["version"] == "V2"
    assert got["lookups"] == expected, f"after {step}: Java's secondary-index lookup"
    assert got["query"] == expected, f"after {step}: Java's filtered query"
    print(f"{step}: {len(values)} values, {sum(map(len, expected.values()))} keys agree")
    return got


def _upsert(path, model: dict, keys: list[str], merchant) -> str:
    table = Table.open(str(path))
    data = [c for c in table.read().columns if not c.startswith("_hoodie_")]
    batch = table.read().select(*data).where(F.col("txn_id").isin(keys)) \
        .withColumn("txn_ts", F.col("txn_ts") + 1000).withColumn("merchant_name", merchant)
    for row in batch.select(*COLUMNS).collect():
        model[row["txn_id"]] = row["merchant_name"]
    return table.upsert(batch).instant


def test_java_answers_by_secondary_key_after_tablesvc_writes(tmp_path, spark, fixture_root, java_hudi):
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    model = dict(hudi_rs_rows(path, COLUMNS))
    seen = set(model.values())
    keys = sorted(model)
    _check(java_hudi, path, model, seen, "nothing (the Java-written table)")

    _upsert(path, model, keys[0:3], F.concat(F.lit("Shop$"), F.col("txn_id")))
    seen |= set(model.values())
    _check(java_hudi, path, model, seen, "an update of the indexed column")

    _upsert(path, model, keys[3:6], F.col("merchant_name"))
    _check(java_hudi, path, model, seen, "an update of other columns")

    # inserts (new keys, a value no row had) and a delete: index inserts and deletes, and the
    # record index's new keys and tombstone in the same metadata delta commit
    table = Table.open(str(path))
    data = [c for c in table.read().columns if not c.startswith("_hoodie_")]
    source = table.read().select(*data).where(F.col("txn_id").isin(keys[7:9]))
    fresh = source.withColumn("txn_id", F.concat(F.lit("NEW-"), F.col("txn_id"))) \
        .withColumn("merchant_name", F.lit("Brand New Shop"))
    for row in fresh.select(*COLUMNS).collect():
        model[row["txn_id"]] = row["merchant_name"]
    table.upsert(fresh)
    seen |= set(model.values())
    _check(java_hudi, path, model, seen, "an insert of new keys")
    gone = table.read().select(*data).where(F.col("txn_id") == keys[9])
    table.delete(gone)
    seen.add(model.pop(keys[9]))
    _check(java_hudi, path, model, seen, "a delete")

    [c] = Table.open(str(path)).compact()
    assert c.status is Status.DONE, c.render()
    _check(java_hudi, path, model, seen, "compaction")

    last = _upsert(path, model, keys[6:7], F.lit("Only After Compaction"))
    seen |= set(model.values())
    _check(java_hudi, path, model, seen, "an update after compaction")

    # the counterfactual: without the index's log files of the last write, Java prunes the row away
    broken = tmp_path / "without-si-logs"
    shutil.copytree(path, broken)
    removed = [p for p in (broken / ".hoodie" / "metadata" / PARTITION).glob(f".*_{last}.log.*")]
    assert removed
    for p in removed:
        p.unlink()
    assert _ask(java_hudi, path, ["Only After Compaction"])["query"] == {"Only After Compaction": [keys[6]]}
    assert _ask(java_hudi, broken, ["Only After Compaction"])["query"] == {"Only After Compaction": []}
