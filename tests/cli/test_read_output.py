"""``tablesvc read``'s output: ``--output`` files keep the table's exact Arrow/Parquet types and
values, compared with hudi-rs's read field by field (no normalisation of types); without
``--output`` it prints the column names as they are and the total row count, counted by Spark.

Known differences from hudi-rs, asserted as such rather than normalised away:

* hudi-rs declares the five ``_hoodie_*`` columns non-null.  The base files Apache Hudi wrote
  declare them optional and Hudi's own Avro meta fields are nullable unions; tablesvc's output
  declares every column nullable.
* On a ``hoodie.populate.meta.fields=false`` table hudi-rs leaves the ``_hoodie_*`` columns
  out; tablesvc keeps them as the base files hold them: null, but for ``_hoodie_file_name``,
  which Apache Hudi wrote even there.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import read_table

from fixture_tables import TABLES_DIR, all_fixture_names, copy_table
from tablesvc.cli.main import main

pytestmark = pytest.mark.spark

META_COLUMNS = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                "_hoodie_partition_path", "_hoodie_file_name"]
OUTPUT_KINDS = ("folder", "file")


def table_properties(path: Path) -> dict[str, str]:
    """hoodie.properties as text (Java properties: ``\\:`` is ``:``), read without tablesvc."""
    props = {}
    for line in (path / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            props[key] = value.replace("\\:", ":").replace("\\=", "=")
    return props


def output_path(tmp_path: Path, kind: str) -> Path:
    return tmp_path / ("out.parquet" if kind == "file" else "out")


def read_output(out: Path) -> pa.Table:
    """The output as pyarrow reads it (a folder: every part file, as one dataset)."""
    return pq.read_table(out)


def assert_same_type(ours: pa.DataType, theirs: pa.DataType, where: tuple) -> None:
    """Arrow's type equality, and the same names, nullability and parameters at every depth
    (unit and time zone of timestamps, decimal precision and scale, list and struct children).
    One name is the readers' own: pyarrow names a map's entries field after the column when it
    reads any Parquet file (Apache Hudi's base files too), arrow-rs (hudi-rs) names it
    ``entries``; the map's key and value fields are compared as everything else."""
    assert ours == theirs, (*where, ours, theirs)
    if pa.types.is_map(theirs):
        assert pa.types.is_map(ours) and ours.keys_sorted == theirs.keys_sorted, (*where, ours, theirs)
        children = [(ours.key_field, theirs.key_field), (ours.item_field, theirs.item_field)]
    elif pa.types.is_struct(theirs) or pa.types.is_list(theirs) or pa.types.is_large_list(theirs):
        children = [(ours.field(i), theirs.field(i)) for i in range(theirs.num_fields)]
    else:
        assert str(ours) == str(theirs), (*where, ours, theirs)
        return
    for mine, field in children:
        assert (mine.name, mine.nullable) == (field.name, field.nullable), (*where, mine, field)
        assert_same_type(mine.type, field.type, (*where, field.name))


def sorted_rows(table: pa.Table, key: list[str]) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: tuple(str(r[k]) for k in key))


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
@pytest.mark.parametrize("name", all_fixture_names())
def test_output_keeps_every_type_and_value_as_hudi_rs_reads_them(fixture_root, spark, tmp_path, name, kind):
    path = fixture_root.path(name)
    out = output_path(tmp_path, kind)
    assert main(["read", str(path), "--output", str(out), "--quiet"]) == 0
    ours = read_output(out)
    theirs = read_table(path)
    props = table_properties(path)

    if theirs is None:  # no rows, no completed commit (v6_empty): hudi-rs gives no schema at all
        assert ours.num_rows == 0, name
        avro = json.loads(props["hoodie.table.create.schema"])["fields"]
        assert ours.schema.names == META_COLUMNS + [f["name"] for f in avro], name
        primitive = {"int": pa.int32(), "long": pa.int64(), "string": pa.string(), "boolean": pa.bool_(),
                     "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary()}
        for f in avro:
            (avro_type,) = [t for t in (f["type"] if isinstance(f["type"], list) else [f["type"]]) if t != "null"]
            assert ours.schema.field(f["name"]).type == primitive[avro_type], (name, f)
        return

    populate_meta = props.get("hoodie.populate.meta.fields", "true") == "true"
    if populate_meta:
        assert ours.schema.names == theirs.schema.names, name
        # a key can be in two file groups (v9_nonpartitioned_rollback: both readers return both rows)
        key = ["_hoodie_record_key", "_hoodie_commit_seqno"]
    else:  # hudi-rs leaves the meta columns out; tablesvc keeps them as the base files hold them
        assert ours.schema.names == META_COLUMNS + theirs.schema.names, name
        assert all(ours.column(c).null_count == ours.num_rows for c in META_COLUMNS[:4]), name
        assert ours.column("_hoodie_file_name").null_count == 0, name   # Hudi wrote only this one
        key = props["hoodie.table.recordkey.fields"].split(",")
    assert ours.num_rows == theirs.num_rows, name

    ours_rows, theirs_rows = sorted_rows(ours, key), sorted_rows(theirs, key)
    for field in theirs.schema:
        mine = ours.schema.field(field.name)
        assert_same_type(mine.type, field.type, (name, field.name))
        assert mine.nullable, (name, field.name)
        assert field.nullable or field.name in META_COLUMNS, (name, field.name)  # hudi-rs: meta columns non-null
        assert [r[field.name] for r in ours_rows] == [r[field.name] for r in theirs_rows], (name, field.name)


def test_output_timestamps_stay_utc_whatever_the_session_time_zone(spark, tmp_path):
    path = TABLES_DIR / "v9_txns_simple_nometa"
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        assert main(["read", str(path), "--columns", "txn_id,txn_datetime", "--output",
                     str(tmp_path / "out.parquet"), "--quiet"]) == 0
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    ours = pq.read_table(tmp_path / "out.parquet")
    theirs = read_table(path).select(["txn_id", "txn_datetime"])
    assert ours.schema.field("txn_datetime").type == pa.timestamp("us", tz="UTC")
    assert sorted_rows(ours, ["txn_id"]) == sorted_rows(theirs, ["txn_id"])


def millisecond_copy(tmp_path: Path) -> Path:
    """A copy of a fixture whose ``timestampField`` is Avro ``timestamp-millis`` and Parquet
    TIMESTAMP(MILLIS, UTC): the unit Spark's writer would turn into microseconds."""
    path = copy_table(TABLES_DIR / "v6_simplekeygen_nonhivestyle_overwritetable", tmp_path)
    for f in (path / ".hoodie").iterdir():
        data = f.read_bytes() if f.is_file() else b""
        if b"timestamp-micros" in data:  # the same length: Avro-encoded timeline files stay valid
            f.write_bytes(data.replace(b"timestamp-micros", b"timestamp-millis"))
    millis = pa.timestamp("ms", tz="UTC")
    for name in glob.glob(str(path / "*" / "*.parquet")):
        t = pq.read_table(name)
        i = t.schema.get_field_index("timestampField")
        t = t.set_column(i, t.schema.field(i).with_type(millis), t.column(i).cast(millis))
        pq.write_table(t, name, store_schema=False)   # as Hudi's files: no Arrow schema inside
    return path


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_output_keeps_millisecond_timestamps(spark, tmp_path, kind):
    path = millisecond_copy(tmp_path)
    theirs = read_table(path)
    assert theirs.schema.field("timestampField").type == pa.timestamp("ms", tz="UTC")
    out = output_path(tmp_path, kind)
    assert main(["read", str(path), "--output", str(out), "--quiet"]) == 0
    ours = read_output(out)
    assert ours.schema.field("timestampField").type == pa.timestamp("ms", tz="UTC")
    assert ours.schema.names == theirs.schema.names
    key = ["_hoodie_record_key"]
    assert sorted_rows(ours, key) == sorted_rows(theirs, key)


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_output_replaces_what_was_there_and_leaves_nothing_else(spark, tmp_path, kind):
    path = TABLES_DIR / "v6_trips_8i1u"
    out = output_path(tmp_path, kind)
    if kind == "folder":
        out.mkdir()
        (out / "stale.parquet").write_bytes(b"not parquet")
    else:
        out.write_bytes(b"not parquet")
    assert main(["read", str(path), "--columns", "rider,fare", "--output", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]   # no staging folder left
    if kind == "folder":
        assert "stale.parquet" not in {p.name for p in out.iterdir()}
    ours = read_output(out)
    assert ours.schema.names == ["rider", "fare"]
    assert sorted_rows(ours, ["rider"]) == sorted_rows(read_table(path).select(["rider", "fare"]), ["rider"])


def test_read_prints_names_as_they_are_and_the_row_count(spark, tmp_path, capsys):
    from pyspark.sql import functions as F

    from tablesvc.api import Table, TableSpec

    path = tmp_path / "mixed_case"
    Table.create(str(path), TableSpec("mixed_case", ("tripId",), "eventTs", table_version=8))
    rows = spark.range(1234).select(F.format_string("trip-%04d", "id").alias("tripId"),
                                    F.col("id").alias("eventTs"), (F.col("id") * 1.5).alias("FareAmount"))
    Table.open(str(path)).insert(rows)
    capsys.readouterr()
    assert main(["read", str(path), "--columns", "tripId,eventTs,FareAmount", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["tripId", "eventTs", "FareAmount"]
    assert len(lines) == 1 + 20 + 1
    assert read_table(path).num_rows == 1234
    assert lines[-1] == "(20 of 1,234 rows shown)"


def test_read_prints_all_rows_of_a_small_table_with_their_count(spark, capsys):
    path = TABLES_DIR / "v6_nonpartitioned"
    theirs = read_table(path)
    assert main(["read", str(path), "--columns", "id,isActive,doubleField", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "isActive", "doubleField"]
    assert lines[-1] == f"({theirs.num_rows} of {theirs.num_rows} rows shown)"
    assert sorted(int(line.split()[0]) for line in lines[1:-1]) == sorted(theirs.column("id").to_pylist())
