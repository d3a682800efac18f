"""Two writes of one table with secondary indexes, interleaved for real: write A computes its
secondary-index changes, then (inside A, before A commits) write B updates the same key and
commits.  A must then be a conflict (``NoConcurrentFileGroupWrite``, exit 3, naming B's instant,
the partition and the file id) and leave nothing behind; without the requirement A would delete
``v0$k`` again and insert its own value, leaving B's entry stale.  A second interleaving on
another file group commits both writes.  After each: hudi-rs, tablesvc's read and the indexes
decoded from the metadata table agree with the model (``secondary_index_check``)."""

from __future__ import annotations

import pytest
from oracles.hudi_rs import sorted_rows as hudi_rs_rows
from pyspark.sql import functions as F

import tablesvc.services.write as write_action
from fixture_tables import copy_table
from secondary_index_check import check_secondary_indexes, stored_pairs
from tablesvc.api import Table
from tablesvc.errors import ConflictError

MERCHANT = "secondary_index_merchant_idx"
NO_RLI = {"hoodie.metadata.record.index.enable": False}


def _batch(path, key: str, merchant: str):
    table = Table.open(str(path))
    data = [c for c in table.read().columns if not c.startswith("_hoodie_")]
    return table.read().select(*data).where(F.col("txn_id") == key).withColumn("merchant_name", F.lit(merchant))


def _file_groups(path) -> dict[str, str]:
    rows = Table.open(str(path)).read().select("txn_id", "_hoodie_partition_path", "_hoodie_file_name").collect()
    return {r["txn_id"]: (r["_hoodie_partition_path"], r["_hoodie_file_name"].split("_")[0]) for r in rows}


def _interleave(monkeypatch, path, a_key: str, b_key: str):
    """Write A (``a_key`` -> "A") with write B (``b_key`` -> "B") committed inside A's run, after
    A computed its secondary-index changes; returns A's result or raises A's error."""
    real = write_action.secondary_index_changes
    calls = []

    def b_commits_meanwhile(*args, **kwargs):
        changes = real(*args, **kwargs)
        if not calls:           # A's call (B's own call, nested in it, passes through)
            calls.append(None)
            calls[0] = Table.open(str(path)).upsert(_batch(path, b_key, "B"), options=NO_RLI).instant
        return changes

    monkeypatch.setattr(write_action, "secondary_index_changes", b_commits_meanwhile)
    try:
        return calls, Table.open(str(path)).upsert(_batch(path, a_key, "A"), options=NO_RLI)
    finally:
        monkeypatch.setattr(write_action, "secondary_index_changes", real)


def _check(path, model: dict) -> None:
    assert sorted(hudi_rs_rows(path, ("txn_id", "merchant_name"))) == sorted(model.items())
    ours = Table.open(str(path)).read(columns=["txn_id", "merchant_name"]).collect()
    assert sorted((r["txn_id"], r["merchant_name"]) for r in ours) == sorted(model.items())
    assert check_secondary_indexes(path)[MERCHANT] == len(model)
    assert stored_pairs(path, MERCHANT) == {(v, k) for k, v in model.items()}


@pytest.mark.spark
def test_a_write_after_a_concurrent_write_to_its_file_group_is_a_conflict(tmp_path, spark, fixture_root, monkeypatch):
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    # the record index cannot take this partitioned table's inserts: dropped first (as the SI test)
    Table.open(str(path)).upsert(_batch(path, sorted(_file_groups(path))[0], "start"), options=NO_RLI)
    model = dict(hudi_rs_rows(path, ("txn_id", "merchant_name")))
    groups = _file_groups(path)
    key = sorted(groups)[1]
    before = {p.name for p in (path / ".hoodie" / "timeline").iterdir()}

    with pytest.raises(ConflictError) as raised:
        _interleave(monkeypatch, path, key, key)
    b_instant = _b_instant(path, before)
    partition, file_id = groups[key]
    message = str(raised.value)
    assert raised.value.exit_code == 3
    assert b_instant in message and file_id in message and repr(partition) in message, message
    model[key] = "B"
    _check(path, model)
    # A left no timeline file: only B's are new
    after = {p.name for p in (path / ".hoodie" / "timeline").iterdir()}
    assert all(name.startswith(b_instant) for name in after - before), sorted(after - before)

    # a concurrent write to another file group is no conflict: both commit
    other = next(k for k in sorted(groups) if groups[k] != groups[key])
    done, result = _interleave(monkeypatch, path, key, other)
    assert result.instant < done[0]         # A requested first, B completed first
    model[key], model[other] = "A", "B"
    _check(path, model)


def _b_instant(path, before: set[str]) -> str:
    new = sorted({p.name for p in (path / ".hoodie" / "timeline").iterdir()} - before)
    completed = [n for n in new if n.endswith(".deltacommit") and "_" in n.split(".")[0]]
    assert len(completed) == 1, new
    return completed[0].split("_")[0]
