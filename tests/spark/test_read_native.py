"""Slices with nothing to merge are read by Spark's own Parquet reader (native_scan.py); the rows
are the same as through the Python reader and through hudi-rs, and a slice goes native only
when that is provably the same answer."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tablesvc.services.compaction import run_compaction
from tablesvc.spark.native_scan import split_native
from tablesvc.spark.read_job import plan_read
from tablesvc.api import Table, TableSpec
from oracles.hudi_rs import sorted_rows

pytestmark = pytest.mark.spark
COLUMNS = ("uuid", "ts", "fare", "city")


def rows(n: int, ts: int, start: int = 0, **extra) -> pa.Table:
    keys = range(start, start + n)
    data = {"uuid": [f"k{k:04d}" for k in keys], "ts": pa.array([ts] * n, pa.int64()),
            "fare": [k + ts / 1000 for k in keys], "city": [("ams", "ber", "cph")[k % 3] for k in keys]}
    data.update({name: [value] * n for name, value in extra.items()})
    return pa.table(data)


def ours(spark, table: Table, native: bool, columns=COLUMNS) -> list[tuple]:
    from tablesvc.spark.read_job import read_dataframe

    df = read_dataframe(spark, Table.open(table.base_path), native=native)
    return sorted(tuple(r[c] for c in columns) for r in df.select(*columns).collect())


def test_a_compacted_table_is_read_natively_and_equals_hudi_rs(tmp_path, spark):
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), table_version=8))
    table.insert(spark.createDataFrame(rows(300, 1).to_pandas()))
    table.upsert(spark.createDataFrame(rows(60, 2, start=30).to_pandas()))
    before = sorted_rows(table.base_path, COLUMNS)
    plan = plan_read(Table.open(table.base_path))
    assert plan.native_base_files == () and plan.slices           # every slice has logs: Python merges
    run_compaction(table, spark=spark)
    groups = len(Table.open(table.base_path).latest_file_slices())
    plan = plan_read(Table.open(table.base_path))
    assert len(plan.native_base_files) == groups and plan.slices == ()  # nothing to merge: all native
    assert ours(spark, table, native=True) == before == ours(spark, table, native=False)
    assert sorted_rows(table.base_path, COLUMNS) == before
    # one slice gets a log again: it alone goes back to Python, the others stay native
    table.upsert(spark.createDataFrame(rows(1, 3, start=0).to_pandas()))
    plan = plan_read(Table.open(table.base_path))
    assert len(plan.native_base_files) == groups - 1 and len(plan.slices) == 1
    expected = sorted_rows(table.base_path, COLUMNS)
    assert [r for r in expected if r[0] == "k0000"] == [("k0000", 3, 0.003, "ams")]
    assert ours(spark, table, native=True) == expected == ours(spark, table, native=False)


def test_base_files_written_under_an_older_schema_stay_with_the_python_reader(tmp_path, spark):
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), table_version=8))
    table.insert(spark.createDataFrame(rows(90, 1).to_pandas()))
    run_compaction(table, spark=spark)
    # a new column, written to one partition only ("ams": keys k % 3 == 0)
    table.upsert(spark.createDataFrame(rows(1, 2, start=3, tip=1.5).to_pandas()))
    t = Table.open(table.base_path)
    timeline = t.timeline()
    plan = plan_read(t, native=False)
    slices = t.file_system_view(timeline).latest_file_slices(t.storage)
    native, python = split_native(t, timeline, plan.context, plan.slices, tuple(s.base_instant for s in slices))
    assert native == [] and len(python) == len(slices)    # the compaction recorded the old schema
    columns = COLUMNS + ("tip",)
    expected = sorted_rows(table.base_path, columns)
    assert ("k0003", 2, 3.002, "ams", 1.5) in expected and ("k0004", 1, 4.001, "ber", None) in expected
    assert ours(spark, table, native=True, columns=columns) == expected


def test_a_damaged_base_file_read_natively_is_one_line_naming_it(tmp_path, spark, capsys):
    """Spark's own reader fails in the JVM, not in Python: the CLI still names the file (exit 1)."""
    from tablesvc.cli.main import main

    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), table_version=8))
    table.insert(spark.createDataFrame(rows(30, 1).to_pandas()))
    table.upsert(spark.createDataFrame(rows(3, 2).to_pandas()))
    run_compaction(table, spark=spark)
    plan = plan_read(Table.open(table.base_path))
    assert plan.slices == () and plan.native_base_files
    damaged = plan.native_base_files[0]
    with open(damaged, "wb") as f:
        f.write(b"PAR1 not a parquet file at all PAR1")
    capsys.readouterr()
    assert main(["read", table.base_path, "--output", str(tmp_path / "out.parquet")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and damaged.removeprefix("file://") in err[0] and "cannot read the file" in err[0], err


def test_a_required_nested_field_an_older_file_lacks_reads_as_null(tmp_path, spark):
    """The schema a read declares to Spark is nullable at every depth.  A nested field the Avro
    schema calls required (no null union) is filled with nulls for files written before it
    existed; declared required, Spark would read those slots as 0 with Arrow's null check off
    (the Spark profiles), or fail with it on."""
    import dataclasses
    import json

    from table_builders import write_without_spark
    from tablesvc.merge import ReadContext, SliceSpec
    from tablesvc.spark.read_job import _read_specs, pack_tasks, spark_schema

    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", (), table_version=8, num_buckets=1))
    addr = pa.struct([pa.field("zip", pa.int64(), nullable=False)])
    batch = pa.table({"uuid": ["a", "b"], "ts": [1, 1], "addr": pa.array([{"zip": 1}, {"zip": 2}], addr)},
                     schema=pa.schema([("uuid", pa.string()), ("ts", pa.int64()), pa.field("addr", addr, False)]))
    write_without_spark(table, batch, "insert", stage=1)
    ctx = ReadContext.for_table(table, table.timeline())
    # the table schema as a later writer (say Apache Hudi) evolved it: addr gains a required lat
    schema = json.loads(ctx.table_schema_json)
    record = next(f for f in schema["fields"] if f["name"] == "addr")["type"][0]
    assert [f["type"] for f in record["fields"]] == ["long"]          # required, as written above
    record["fields"].append({"name": "lat", "type": "double"})
    evolved = dataclasses.replace(ctx, table_schema_json=json.dumps(schema))

    declared = spark_schema(evolved)["addr"].dataType
    assert [(f.name, f.nullable) for f in declared.fields] == [("zip", True), ("lat", True)]
    specs = [SliceSpec.from_file_slice(s) for s in table.latest_file_slices()]
    tasks = pack_tasks(spark, specs)
    got = tasks.frame.mapInArrow(_read_specs(evolved, tasks.groups), spark_schema(evolved)).collect()
    assert sorted((r.uuid, r.addr.zip, r.addr.lat) for r in got) == [("a", 1, None), ("b", 2, None)]
    # hudi-rs reads the table as written (the schema in its commit): the same rows
    assert sorted_rows(table.base_path, ("uuid", "addr")) == [("a", {"zip": 1}), ("b", {"zip": 2})]
