"""``tablesvc read PATH [--as-of T] [--columns a,b] [--output OUT]``."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from tablesvc.cli.output import print_table, say
from tablesvc.spark.errors import translate_task_error
from tablesvc.table import Table
from timeline.instant import validate_instant_time

SHOW_ROWS = 20


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("read", parents=[common], help="read the table (snapshot or time travel)",
                       description="Read a MOR table with the Spark log-block reader.")
    p.add_argument("path", help="table base path")
    p.add_argument("--as-of", help="requested instant time to read the table as of (time travel)")
    p.add_argument("--columns", help="comma-separated columns to return")
    p.add_argument("--output", help="write Parquet here: a folder, or one file if the name ends in .parquet")
    p.add_argument("--spark-profile", help="Spark profile name in spark_conf/ or a YAML path (default: local)")
    p.set_defaults(run=run)


def write_output(df, output: str) -> None:
    """A folder of part files, or a single .parquet file (written by one task, never the driver)."""
    target = os.path.abspath(output)
    if not target.endswith(".parquet"):
        df.write.mode("overwrite").parquet(target)
        return
    staging = tempfile.mkdtemp(prefix=".tablesvc-out-", dir=os.path.dirname(target) or ".")
    try:
        df.coalesce(1).write.mode("overwrite").parquet(os.path.join(staging, "out"))
        parts = [n for n in os.listdir(os.path.join(staging, "out")) if n.endswith(".parquet")]
        if parts:
            os.replace(os.path.join(staging, "out", parts[0]), target)
        else:  # an empty table still yields a readable file with the schema
            import pyarrow.parquet as pq
            from pyspark.sql.pandas.types import to_arrow_schema

            pq.write_table(to_arrow_schema(df.schema, timezone="UTC").empty_table(), target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    table = Table.open(args.path)
    if args.as_of:  # a bad instant is refused before Spark starts
        validate_instant_time(args.as_of, "--as-of instant")
    columns = tuple(c.strip() for c in args.columns.split(",") if c.strip()) if args.columns else None
    from tablesvc.spark.session import get_spark

    spark = get_spark(args.spark_profile, args.service_config.as_dict(), quiet=not args.debug)
    df = table.read(as_of=args.as_of, columns=columns, spark=spark)
    try:
        if args.output:
            write_output(df, args.output)
            say(f"wrote {args.output}")
            return 0
        rows = [r.asDict() for r in df.limit(SHOW_ROWS).collect()]
    except Exception as e:  # an error inside a read task: tablesvc's own error (e.g. a corrupt log block)
        raise translate_task_error(e) from None
    if not rows:
        say("no rows")
        return 0
    print_table(rows, list(rows[0].keys()))
    say(f"({len(rows)} rows shown)")
    return 0
