"""The demo's main story: a MOR table written and read through Spark.

Rows are generated inside Spark (``spark.range``), never on the driver: 300,000 trips
over five cities, then an upsert of 10% (some with newer, some with older ordering
values), a delete batch, and reads — latest and as of the first commit — checked
against hudi-rs, the independent reader.
"""

from __future__ import annotations

import time

import pyarrow as pa

from tablesvc.cli.cmd_timeline import describe_instant
from tablesvc.cli.output import print_table, say
from tablesvc.table import Table, TableSpec

CITIES = ("chennai", "london", "new_york", "san_francisco", "sao_paulo")


def trips(spark, start: int, count: int, ts_base: int, fare_scale: float = 1.0):
    from pyspark.sql import functions as F

    cities = F.array(*[F.lit(c) for c in CITIES])
    return (spark.range(start, start + count)
            .select(F.format_string("trip-%07d", F.col("id")).alias("uuid"),
                    (F.lit(ts_base) + F.col("id") % 1000).alias("ts"),
                    F.format_string("rider-%03d", F.col("id") % 997).alias("rider"),
                    F.round(F.rand(seed=start) * 80 * fare_scale + 5, 2).alias("fare"),
                    F.element_at(cities, (F.col("id") % len(CITIES) + 1).cast("int")).alias("city")))


def hudi_rs_count(path: str, as_of: str | None = None) -> int:
    from hudi import HudiReadOptions, HudiTableBuilder

    opts = HudiReadOptions() if as_of is None else HudiReadOptions().with_as_of_timestamp(as_of)
    return sum(b.num_rows for b in HudiTableBuilder.from_base_uri(path).build().read(opts))


def run_story(path: str, rows: int = 300_000, table_version: int = 8) -> None:
    from tablesvc.spark.session import get_spark

    spark = get_spark(quiet=True)
    table = Table.create(path, TableSpec("trips", ("uuid",), "ts", ("city",), table_version=table_version,
                                         num_buckets=2))
    say(f"created table trips (version {table_version}) at {path}")
    steps = [
        ("insert", trips(spark, 0, rows, 1_000_000)),
        ("upsert", trips(spark, 0, rows // 10, 2_000_000, fare_scale=2.0)
         .unionByName(trips(spark, rows // 10, rows // 20, 0))       # older ts: ignored (event time)
         .unionByName(trips(spark, rows, rows // 50, 2_000_000))),   # new keys
        ("delete", trips(spark, rows // 2, rows // 100, 0).select("uuid", "city")),
    ]
    for operation, df in steps:
        started = time.monotonic()
        result = table.write(df, operation)
        say(f"{operation:>6}: instant {result.instant}, {result.records_written} records "
            f"({result.inserts} inserts, {result.updates} updates, {result.deletes} deletes) in "
            f"{result.files_written} files, {time.monotonic() - started:.1f}s")
    timeline = table.timeline()
    say("\ntimeline:")
    print_table([describe_instant(table, timeline, i) for i in timeline.instants],
                ["instant", "action", "state", "completion_time", "operation"])
    say("\nlatest file slices:")
    print_table([s.describe() | {"log_files": len(s.log_files)} for s in table.latest_file_slices()],
                ["partition", "file_id", "base_instant", "base_file", "log_files"])
    say("\nread (first rows, by key):")
    df = table.read(spark=spark)
    first = [r.asDict() for r in df.orderBy("uuid").limit(5).collect()]
    print_table(first, ["uuid", "ts", "rider", "fare", "city", "_hoodie_commit_time"])
    ours = df.count()
    first_instant = timeline.completed_writes()[0].timestamp
    ours_then = table.read(as_of=first_instant, spark=spark).count()
    say(f"\nrows: tablesvc {ours}, hudi-rs {hudi_rs_count(path)}; "
        f"as of {first_instant}: tablesvc {ours_then}, hudi-rs {hudi_rs_count(path, first_instant)}")
    expected = rows + rows // 50 - rows // 100
    say(f"expected {expected} now and {rows} as of the first commit: "
        + ("OK" if ours == expected and ours_then == rows else "MISMATCH"))
    run_services(table, spark, expected)


def run_services(table, spark, expected: int) -> None:
    """Compaction folds the logs into new base files; a clean then deletes the old slices."""
    from tablesvc.config import build_config
    from tablesvc.services.clean import run_clean
    from tablesvc.services.compaction import run_compaction, schedule_compaction

    config = build_config(conf={"hoodie.cleaner.commits.retained": "1"})
    say("\ncompaction:")
    say("  " + schedule_compaction(table, config, force=True).render())
    for result in run_compaction(table, spark=spark, config=config):
        say("  " + result.render())
    logs = sum(len(s.log_files) for s in table.latest_file_slices())
    say(f"  latest slices now hold {logs} log files; rows: tablesvc {table.read(spark=spark).count()}, "
        f"hudi-rs {hudi_rs_count(table.base_path)} (expected {expected})")
    say("clean (keep 1 commit):")
    for result in run_clean(table, config):
        say("  " + result.render())
    say(f"  rows after the clean: hudi-rs {hudi_rs_count(table.base_path)}")
