"""Write and read throughput of tablesvc next to plain Spark Parquet, in one run.

Not a test: ``make bench-io`` (or ``python tests/benchmarks/bench_write_read.py``) prints a
Markdown table and writes ``bench-out/write_read.{md,json}``.  Both sides get the same
rows, generated inside Spark; reads are fully materialised (Spark's ``noop`` sink) so
neither side can answer from file metadata.  ``TABLESVC_BENCH_ROWS`` sets the size
(default 2,000,000).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tablesvc.demo.spark_story import trips  # noqa: E402
from tablesvc.spark.session import get_spark  # noqa: E402
from tablesvc.table import Table, TableSpec  # noqa: E402


def timed(fn):
    started = time.monotonic()
    fn()
    return time.monotonic() - started


def materialise(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def main() -> int:
    rows = int(os.environ.get("TABLESVC_BENCH_ROWS", "2000000"))
    updates = rows // 10
    work = Path(tempfile.mkdtemp(prefix="tablesvc-bench-"))
    spark = get_spark(quiet=True)
    base = trips(spark, 0, rows, 1_000_000).cache()
    upd = trips(spark, 0, updates, 2_000_000, fare_scale=2.0).cache()
    base.count(), upd.count()  # generate once, outside the timings
    materialise(base)          # warm the Python workers and the JVM for both sides

    results = []

    def record(case, baseline_case, n, ours, theirs):
        results.append({"case": case, "rows": n, "tablesvc_s": round(ours, 2), "tablesvc_rows_per_s": int(n / ours),
                        "baseline": baseline_case, "baseline_s": round(theirs, 2),
                        "baseline_rows_per_s": int(n / theirs), "ratio": round(ours / theirs, 2)})

    table = Table.create(str(work / "mor"), TableSpec("bench", ("uuid",), "ts", ("city",), num_buckets=4))
    t_insert = timed(lambda: table.insert(base))
    t_plain_write = timed(lambda: base.write.mode("overwrite").partitionBy("city").parquet(str(work / "plain")))
    record("write: insert", "Spark parquet write", rows, t_insert, t_plain_write)

    t_upsert = timed(lambda: table.upsert(upd))
    merged_plain = (spark.read.parquet(str(work / "plain")).join(upd.select("uuid"), "uuid", "left_anti")
                    .unionByName(upd))
    t_plain_merge = timed(lambda: merged_plain.write.mode("overwrite").partitionBy("city")
                          .parquet(str(work / "plain_merged")))
    record("write: upsert 10%", "Spark anti-join + union rewrite", updates, t_upsert, t_plain_merge)

    t_read = timed(lambda: materialise(table.read(spark=spark)))
    t_plain_read = timed(lambda: materialise(spark.read.parquet(str(work / "plain_merged"))))
    record("read: snapshot (10% updates in logs)", "Spark parquet read", rows, t_read, t_plain_read)

    out = REPO / "bench-out"
    out.mkdir(exist_ok=True)
    lines = [f"# tablesvc write/read vs plain Spark Parquet ({rows:,} rows, {os.cpu_count()} cores)", "",
             "| case | rows | tablesvc s | tablesvc rows/s | baseline | baseline s | baseline rows/s | ratio |",
             "|---|---:|---:|---:|---|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['case']} | {r['rows']:,} | {r['tablesvc_s']} | {r['tablesvc_rows_per_s']:,} | "
                     f"{r['baseline']} | {r['baseline_s']} | {r['baseline_rows_per_s']:,} | {r['ratio']} |")
    lines.append("")
    lines.append("ratio = tablesvc time / baseline time (below 1: tablesvc is faster).")
    (out / "write_read.md").write_text("\n".join(lines) + "\n")
    (out / "write_read.json").write_text(json.dumps(results, indent=2) + "\n")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
