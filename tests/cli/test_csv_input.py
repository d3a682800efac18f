"""``tablesvc write --input-format csv``: CSV text cast to the table's column types where the cast is exact.

A CSV value is text.  It goes into a decimal, date or timestamp column when the text says exactly
that value (``12.34`` into ``decimal(10,2)``, ``2024-02-29`` into a date); text the column cannot
hold exactly (``soon`` into a long, ``12.345`` into ``decimal(10,2)``) is refused with exit 2,
naming the column: from the first block of each file before Spark starts, and for any later row
while Spark reads it, before anything is written.  Rows are read back with hudi-rs and compared
with the expected values exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import read_table, sorted_rows

from tablesvc.cli.main import main

from helpers import data_files

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]
COLUMNS = ("id", "ts", "region", "amount", "day", "at")
UTC = timezone.utc


def state(path: Path) -> tuple:
    """What a refused write must leave alone: the timeline folder, the data files."""
    hoodie = sorted(str(p.relative_to(path)) for p in (path / ".hoodie").rglob("*") if ".heartbeat" not in p.parts)
    return hoodie, sorted(data_files(path))


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def table(tmp_path, capsys, spark) -> Path:
    """A table whose first write (Parquet) made ``amount`` a decimal(10,2), ``day`` a date and
    ``at`` a timestamp (UTC instant)."""
    path = tmp_path / "payments"
    assert cli(capsys, "init", str(path), "--name", "payments", "--record-key", "id", "--ordering-field", "ts",
               "--partition-field", "region")[0] == 0
    first = pa.table({
        "id": ["k1", "k2"], "ts": pa.array([1, 1], pa.int64()), "region": ["eu", "us"],
        "amount": pa.array([Decimal("1.00"), Decimal("2.50")], pa.decimal128(10, 2)),
        "day": pa.array([date(2024, 1, 1), date(2024, 1, 2)], pa.date32()),
        "at": pa.array([datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC)], pa.timestamp("us", "UTC")),
    })
    pq.write_table(first, tmp_path / "first.parquet")
    rc, _out, err = cli(capsys, "write", str(path), "--input", str(tmp_path / "first.parquet"))
    assert rc == 0, err
    return path


def naive(spark, text: str) -> datetime:
    """A timestamp without an offset means the Spark session's time zone (as Spark reads it)."""
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(spark.conf.get("spark.sql.session.timeZone"))
    return datetime.fromisoformat(text).replace(tzinfo=zone).astimezone(UTC)


def test_csv_values_go_into_decimal_date_and_timestamp_columns_exactly(table, tmp_path, capsys, spark):
    csv = tmp_path / "more.csv"
    csv.write_text("id,ts,region,amount,day,at\n"
                   "k3,2,eu,12.34,2024-02-29,2024-01-02 03:04:05.123456\n"
                   "k4,2,us,100,2024-03-01,2024-01-02T03:04:05Z\n"
                   "k5,2,eu,-0.5,,2024-06-30T23:59:59.5+02:00\n"
                   "k1,3,eu,+0.10,2023-12-31,2024-01-01\n")
    rc, out, err = cli(capsys, "write", str(table), "--input", str(csv))
    assert rc == 0, err
    assert "1 updates" in out and "3 inserts" in out, out
    assert sorted_rows(table, COLUMNS) == [
        ("k1", 3, "eu", Decimal("0.10"), date(2023, 12, 31), naive(spark, "2024-01-01 00:00:00")),
        ("k2", 1, "us", Decimal("2.50"), date(2024, 1, 2), datetime(2024, 1, 2, tzinfo=UTC)),
        ("k3", 2, "eu", Decimal("12.34"), date(2024, 2, 29), naive(spark, "2024-01-02 03:04:05.123456")),
        ("k4", 2, "us", Decimal("100.00"), date(2024, 3, 1), datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("k5", 2, "eu", Decimal("-0.50"), None, datetime(2024, 6, 30, 21, 59, 59, 500000, tzinfo=UTC)),
    ]


@pytest.mark.parametrize("row, column, shown", [
    pytest.param("k3,soon,eu,1.00,2024-01-01,2024-01-01", "ts", "soon", id="text-into-a-long"),
    pytest.param("k3,2,eu,12.345,2024-01-01,2024-01-01", "amount", "12.345", id="a-digit-too-many-for-the-decimal"),
    pytest.param("k3,2,eu,123456789.5,2024-01-01,2024-01-01", "amount", "123456789.5", id="too-large-for-the-decimal"),
    pytest.param("k3,2,eu,1.00,2024-01-01 10:00:00,2024-01-01", "day", "2024-01-01 10:00:00", id="a-time-into-a-date"),
    pytest.param("k3,2,eu,1.00,2024-01-01,2024-01-01 10:00:00.1234567", "at", "10:00:00.1234567",
                 id="nanoseconds-into-a-timestamp"),
])
def test_a_column_that_cannot_be_cast_exactly_is_refused_naming_it(table, tmp_path, capsys, row, column, shown):
    before, rows = state(table), sorted_rows(table, COLUMNS)
    csv = tmp_path / "bad.csv"
    csv.write_text(f"id,ts,region,amount,day,at\nk6,2,us,3.00,2024-01-01,2024-01-01\n{row}\n")
    rc, out, err = cli(capsys, "write", str(table), "--input", str(csv))
    assert rc == 2, (out, err)
    [line] = err.strip().splitlines()
    assert line.startswith("tablesvc: error: ") and str(csv) in line and repr(column) in line and shown in line, line
    assert state(table) == before and sorted_rows(table, COLUMNS) == rows


def test_the_refusal_comes_before_spark_starts(table, tmp_path):
    """In a fresh process: the column is refused from the file's first block, and no JVM ever
    started (Spark's log file, which the first session creates, does not exist)."""
    before, rows = state(table), sorted_rows(table, COLUMNS)
    csv = tmp_path / "bad.csv"
    csv.write_text("id,ts,region,amount,day,at\nk3,soon,eu,1.00,2024-01-01,2024-01-01\n")
    log = tmp_path / "spark.log"
    env = dict(os.environ, PYTHONPATH=str(REPO), TABLESVC_SPARK_LOG=str(log))
    proc = subprocess.run([sys.executable, "-m", "tablesvc", "write", str(table), "--input", str(csv)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "'ts'" in line and "soon" in line and "Traceback" not in proc.stderr, proc.stderr
    assert not log.exists(), "Spark started although the input was refused from its first block"
    assert state(table) == before and sorted_rows(table, COLUMNS) == rows


def test_a_bad_value_after_the_first_block_is_refused_while_spark_reads_it(table, tmp_path, capsys):
    """The first block decides the column; every later row is checked as Spark reads it, before
    any file is written: the write is undone, exit 2, the column and the value named."""
    before, rows = state(table), sorted_rows(table, COLUMNS)
    csv = tmp_path / "long.csv"
    lines = ["id,ts,region,amount,day,at"]
    lines += [f"n{i},2,eu,{i % 1000}.25,2024-01-01,2024-01-01" for i in range(40_000)]   # > 1 MiB
    lines.append("late,2,eu,7.125,2024-01-01,2024-01-01")
    csv.write_text("\n".join(lines) + "\n")
    assert csv.stat().st_size > (1 << 20)
    rc, out, err = cli(capsys, "write", str(table), "--input", str(csv), "--quiet")
    assert rc == 2, (out, err)
    [line] = err.strip().splitlines()
    assert "'amount'" in line and "7.125" in line and "decimal(10,2)" in line, line
    assert state(table) == before and sorted_rows(table, COLUMNS) == rows


def test_a_line_with_the_wrong_number_of_fields_is_refused(table, tmp_path, capsys):
    before, rows = state(table), sorted_rows(table, COLUMNS)
    csv = tmp_path / "short.csv"
    lines = ["id,ts,region,amount,day,at"] + [f"n{i},2,eu,1.25,2024-01-01,2024-01-01" for i in range(40_000)]
    lines.append("short,2,eu")
    csv.write_text("\n".join(lines) + "\n")
    rc, out, err = cli(capsys, "write", str(table), "--input", str(csv), "--quiet")
    assert rc == 2, (out, err)
    [line] = err.strip().splitlines()
    assert str(csv) in line and "short,2,eu" in line, line
    assert state(table) == before and sorted_rows(table, COLUMNS) == rows


def test_new_csv_columns_take_the_type_their_first_block_shows(table, tmp_path, capsys, spark):
    """Columns the table does not have yet are typed from the file's first block (whole numbers:
    long, other numbers: double, dates, timestamps, true/false, else string)."""
    csv = tmp_path / "wider.csv"
    csv.write_text("id,ts,region,amount,day,at,qty,rate,note\n"
                   "k7,2,eu,1.00,2024-01-01,2024-01-01,3,0.5,hi\n")
    rc, _out, err = cli(capsys, "write", str(table), "--input", str(csv))
    assert rc == 0, err
    read = read_table(table)
    assert read.schema.field("qty").type == pa.int64() and read.schema.field("rate").type == pa.float64()
    assert read.schema.field("note").type == pa.string()
    [row] = [r for r in read.to_pylist() if r["id"] == "k7"]
    assert (row["qty"], row["rate"], row["note"], row["amount"]) == (3, 0.5, "hi", Decimal("1.00"))
    assert sorted_rows(table, COLUMNS)[0][0] == "k1" and len(sorted_rows(table, COLUMNS)) == 3
