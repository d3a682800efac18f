"""Issue #27's acceptance on every Java-written table with a global record index, partitioned or
not: an upsert through tablesvc (updates and inserts), a delete, then log compaction, compaction
and clean.  On a partitioned table the upsert's keys are first looked up in the record index
(``spark/record_index_lookup_job``): a key living in another partition is refused (exit 2 class,
nothing written), and a delete naming a partition where its key does not live deletes nothing
(Hudi's default Spark index, SIMPLE, looks a key up in its own partition only).

After every step: hudi-rs (listing through the metadata table) and tablesvc read exactly the
model; the file slices hudi-rs lists through the metadata table equal tablesvc's and those of a
storage listing; the record index, decoded without tablesvc's record-index code, names exactly
the live keys where they live (tests/record_index_check.py); the secondary indexes name the live
(value, key) pairs (tests/secondary_index_check.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracles.hudi_rs import sorted_rows as hudi_rs_rows
from pyspark.sql import functions as F

from metadata_tables import check_listing_slices_and_row_tuples
from fixture_tables import copy_table
from record_index_check import check_record_index, stored_record_index, table_key_locations
from secondary_index_check import check_secondary_indexes
from tablesvc.api import Table
from tablesvc.errors import InvalidInputError
from tablesvc.services.result import Status
from tablesvc.spark.record_index_lookup_job import global_record_index, keys_in_other_partitions
from tablesvc.write import KeySpec


@dataclass(frozen=True)
class Spec:
    name: str
    keys: tuple[str, ...]       # record key fields (the first gets new values for inserts)
    ordering: str
    label: str                  # a column the updates change
    partition: str | None       # the partition field

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.keys, self.ordering, self.label, *((self.partition,) if self.partition else ()))


TXN = dict(ordering="txn_ts", label="merchant_name")
SPECS = [
    Spec("v8_trips_8i3u1d", ("uuid",), "ts", "rider", "city"),
    Spec("zips:mor_avro_v9_txns_simple_meta", ("txn_id",), partition="region", **TXN),
    Spec("zips:mor_avro_v9_txns_complex_meta", ("txn_id", "account_id"), partition="region", **TXN),
    Spec("zips:mor_avro_v9_txns_nonpart_meta", ("txn_id",), partition=None, **TXN),
    Spec("v9_nonpartitioned_rollback", ("txn_id",), partition=None, **TXN),
]


def _instants(path) -> list[tuple[str, str, str]]:
    return [(i.timestamp, i.action.value, i.state.value) for i in Table.open(str(path)).timeline().instants]


def _committed(path) -> list[str]:
    return [i.timestamp for i in Table.open(str(path)).timeline().completed()]


def _check(path, spec: Spec, model: list[tuple], step: str) -> None:
    check_listing_slices_and_row_tuples(Table.open(str(path)), path, model, spec.columns, f"{spec.name}, {step}")
    try:
        assert check_record_index(path) == len({r[:len(spec.keys)] for r in model})
        check_secondary_indexes(path)
    except AssertionError as e:
        raise AssertionError(f"{spec.name}, after {step}: {e}") from e


def _data(table: Table):
    return table.read().select(*[c for c in table.read().columns if not c.startswith("_hoodie_")])


def _where_key(df, spec: Spec, key: tuple):
    cond = F.lit(True)
    for field, value in zip(spec.keys, key):
        cond = cond & (F.col(field) == value)
    return df.where(cond)


@pytest.mark.spark
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_upsert_delete_and_services_keep_the_record_index_true(tmp_path, spark, fixture_root, spec):
    path = copy_table(fixture_root.path(spec.name), tmp_path)
    n = len(spec.keys)
    model = [tuple(r) for r in hudi_rs_rows(path, spec.columns)]
    counts: dict[tuple, int] = {}
    for row in model:
        counts[row[:n]] = counts.get(row[:n], 0) + 1
    single = sorted(k for k, c in counts.items() if c == 1)    # keys in one file group only
    assert len(single) >= 2, spec.name
    updated, deleted = single[0], single[1]
    _check(path, spec, model, "nothing (the Java-written table)")

    src = _data(Table.open(str(path)))
    if spec.partition:
        # a key upserted into another partition than the one it lives in: refused, nothing written
        moved_row = _where_key(src, spec, updated)
        here = moved_row.select(spec.partition).first()[0]
        there = next(r[-1] for r in model if r[-1] != here)
        before = _instants(path)
        with pytest.raises(InvalidInputError, match="another partition|global record index holds it") as info:
            Table.open(str(path)).upsert(moved_row.withColumn(spec.partition, F.lit(there)))
        assert repr(_key_text(spec, updated)) in str(info.value) and len(str(info.value).splitlines()) == 1
        assert _instants(path) == before, "the refused upsert left an instant"

    # 1. an upsert: one key updated (a later ordering value), two new keys (copies of the deleted-to-be
    # row, in its partition): new base files, record-index inserts
    upd = _where_key(src, spec, updated).withColumn(spec.ordering, F.col(spec.ordering) + 1000) \
                                        .withColumn(spec.label, F.lit("r2-updated"))
    copies = _where_key(src, spec, deleted).crossJoin(spark.range(2).withColumnRenamed("id", "r2_n"))
    new = copies.withColumn(spec.keys[0], F.concat(F.col(spec.keys[0]), F.lit("-r2-"), F.col("r2_n").cast("string"))) \
                .drop("r2_n")
    batch = upd.unionByName(new)
    rows = [tuple(r[c] for c in spec.columns) for r in batch.select(*spec.columns).collect()]
    keys = {r[:n] for r in rows}
    model = [r for r in model if r[:n] not in keys] + rows
    upsert_ts = Table.open(str(path)).upsert(batch).instant
    _check(path, spec, model, "the upsert")
    stored = stored_record_index(path)
    for row in rows:
        if row[:n] != updated:
            assert stored[_key_text(spec, row[:n])][2] > 0, row
    assert upsert_ts in _committed(path)

    # 2. a delete of one key; on a partitioned table also the updated key under another partition,
    # which (as with Hudi's default index) deletes nothing
    table = Table.open(str(path))
    src = _data(table)
    gone = _where_key(src, spec, deleted)
    if spec.partition:
        here = _where_key(src, spec, updated).select(spec.partition).first()[0]
        there = next(r[-1] for r in model if r[-1] != here)
        gone = gone.unionByName(_where_key(src, spec, updated).withColumn(spec.partition, F.lit(there)))
    table.delete(gone)
    model = [r for r in model if r[:n] != deleted]
    _check(path, spec, model, "the delete")
    assert _key_text(spec, deleted) not in stored_record_index(path)

    # 3. services: nothing changes for the record index, which stays true
    statuses: dict[str, str] = {}
    for step, run in (("log compaction", lambda t: t.log_compact()),
                      ("compaction", lambda t: t.compact()),
                      ("clean", lambda t: t.clean(options={"hoodie.cleaner.commits.retained": 1}))):
        results = run(Table.open(str(path)))
        # every step has work on each table: the upsert's and the delete's logs, the old slices
        assert results and all(r.status is Status.DONE for r in results), (step, [r.render() for r in results])
        statuses[step] = results[0].status.value
        _check(path, spec, model, step)
    print(f"{spec.name}: {len(model)} rows after the services {statuses}")


def _key_text(spec: Spec, key: tuple) -> str:
    """The record key Hudi stores: the value for one key field, ``field:value,...`` for several."""
    if len(spec.keys) == 1:
        return str(key[0])
    return ",".join(f"{f}:{v}" for f, v in zip(spec.keys, key))


@pytest.mark.spark
@pytest.mark.parametrize("name", ["zips:mor_avro_v9_txns_simple_meta", "zips:mor_avro_v9_txns_complex_meta"])
def test_the_spark_lookup_finds_every_key_given_under_another_partition(spark, fixture_root, name):
    """Every row of the table under another partition: the Spark lookup (keys spread over the
    index's file groups by Java's hash) names every key, with the partition and file group
    hudi-rs reads it from; under its own partition, none."""
    path = fixture_root.path(name)
    table = Table.open(str(path))
    view = global_record_index(table)
    assert view is not None and len(view.groups) > 1
    actual = table_key_locations(path)
    src = _data(table)
    field = table.config.partition_fields[0]
    values = sorted({r[0] for r in src.select(field).collect()})
    swapped = src.withColumn(field, F.when(F.col(field) == values[0], F.lit(values[1])).otherwise(F.lit(values[0])))
    spec = KeySpec.from_config(table.config)
    found = keys_in_other_partitions(swapped, spec, view, table.base_path, limit=1000)
    assert sorted(f.key for f in found) == sorted(actual)
    for f in found:
        assert {(f.indexed_partition, f.indexed_file_id)} == actual[f.key] and f.partition != f.indexed_partition
    assert keys_in_other_partitions(src, spec, view, table.base_path) == []
