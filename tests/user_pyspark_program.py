"""A user's own PySpark program using tablesvc's Python API (the README's example, then a
compaction), run by tests/spark/test_python_api_executors.py as a subprocess whose Spark workers run a
Python that cannot import tablesvc (``PYSPARK_PYTHON``).

    python user_pyspark_program.py TABLE_PATH REPORT_JSON

Steps, each recorded in the report (the test asserts on it and reads the table with hudi-rs):

1. a plain Spark task tries ``import tablesvc``: it must fail (the workers cannot import it);
2. with ``TABLESVC_SHIP_CODE=off`` an upsert must be refused with ``SparkEnvironmentError``,
   before any table change;
3. shipping on (the default): create, upsert twice, read, compact, read;
4. a plain Spark task imports tablesvc again: now from the zip tablesvc shipped.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(path: str, report_path: str) -> None:
    from pyspark.sql import SparkSession

    # The user's own session: nothing of tablesvc's profiles, PYSPARK_PYTHON from the environment.
    spark = (SparkSession.builder.master("local[2]").appName("user-program")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sc = spark.sparkContext
    report: dict[str, object] = {}

    try:
        report["plain_task_before"] = sc.parallelize([0], 1).map(lambda _: __import__("tablesvc").__file__).collect()
    except Exception as e:   # noqa: BLE001 - the expected outcome
        lines = [line.strip() for line in str(e).splitlines() if "ModuleNotFoundError" in line]
        report["plain_task_before"] = lines[:1]

    from tablesvc.errors import SparkEnvironmentError
    from tablesvc.api import Table, TableSpec

    table = Table.create(path, TableSpec("trips", ("uuid",), "ts", ("city",), table_version=8))
    first = spark.createDataFrame([(f"u{i:02d}", 1, ("sf", "nyc")[i % 2], float(i)) for i in range(20)],
                                  "uuid string, ts long, city string, fare double")
    os.environ["TABLESVC_SHIP_CODE"] = "off"
    try:
        table.upsert(first)
        report["ship_off"] = "written"
    except SparkEnvironmentError as e:
        report["ship_off"] = str(e)
    report["instants_after_refusal"] = [i.file_name() for i in table.timeline().instants]
    del os.environ["TABLESVC_SHIP_CODE"]

    started = time.monotonic()
    r1 = table.upsert(first)
    report["first_upsert_seconds"] = round(time.monotonic() - started, 3)
    second = spark.createDataFrame([(f"u{i:02d}", 2, ("sf", "nyc")[i % 2], 100.0 + i) for i in range(10, 30)],
                                   "uuid string, ts long, city string, fare double")
    r2 = table.upsert(second)
    report["writes"] = [r1.as_dict(), r2.as_dict()]
    report["read_before_compaction"] = sorted(
        (r["uuid"], r["ts"], r["city"], r["fare"]) for r in table.read().collect())
    report["compaction"] = [r.as_dict() for r in table.compact()]
    report["read_after_compaction"] = sorted(
        (r["uuid"], r["ts"], r["city"], r["fare"]) for r in table.read().collect())
    report["plain_task_after"] = sc.parallelize([0], 1).map(lambda _: __import__("tablesvc").__file__).collect()
    with open(report_path, "w", encoding="utf-8") as f:
        json.dump(report, f)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
