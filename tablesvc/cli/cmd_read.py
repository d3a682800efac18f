"""``tablesvc read PATH [--as-of T] [--columns a,b] [--output OUT]``."""

from __future__ import annotations

import argparse

from tablesvc.cli.output import add_quiet_option, print_table, say
from tablesvc.spark.errors import translate_task_error
from tablesvc.spark.progress import phase as progress_phase
from tablesvc.api import Table
from tablesvc.errors import InvalidInputError
from tablesvc.storage.object_store import is_object_store_url
from timeline.time_travel import resolve_as_of

SHOW_ROWS = 20


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("read", parents=[common], help="read the table (snapshot or time travel)",
                       description="Read a MOR table with the Spark log-block reader.")
    p.add_argument("path", help="table base path")
    p.add_argument("--as-of", metavar="T", help="read the table as of this time (time travel): yyyyMMddHHmmss[SSS], "
                   "yyyy-MM-dd or yyyy-MM-dd HH:mm:ss[.SSS], compared with requested instant times")
    p.add_argument("--columns", help="comma-separated columns to return")
    p.add_argument("--output", help="write Parquet here: a folder, or one file if the name ends in .parquet")
    p.add_argument("--spark-profile", help="Spark profile name in spark_conf/ or a YAML path (default: local)")
    add_quiet_option(p)
    p.set_defaults(run=run)


def write_output(read, output: str) -> int:
    """A folder of part files, or a single .parquet file, in the table's exact Arrow types,
    written by Spark tasks (never the driver: ``spark/parquet_output.py``); the rows written."""
    from tablesvc.spark.parquet_output import write_folder, write_single_file

    if output.endswith(".parquet"):
        return write_single_file(read.frame, read.arrow_schema, output)
    return write_folder(read.frame, read.arrow_schema, output)


def run(args: argparse.Namespace) -> int:
    if args.output and is_object_store_url(args.output):
        # Spark's writer would need Hadoop's S3A jars, and the path would become a local folder
        # named "s3:": refused before anything runs.  A local --output on a cluster must be a
        # file system every node mounts (docs/cluster.md).
        raise InvalidInputError(f"--output {args.output}: writing the read to an object store is not supported; "
                                "give a local or shared file system path")
    table = Table.open(args.path, options=getattr(args, "storage_options", None))
    table.metadata_enabled = bool(args.service_config.get("hoodie.metadata.enable"))  # --conf may switch it off
    as_of = None
    if args.as_of is not None:  # a bad or unreadable as-of is refused before Spark starts
        as_of = resolve_as_of(table.storage, table.timeline(), args.as_of, "--as-of")
    columns = tuple(c.strip() for c in args.columns.split(",") if c.strip()) if args.columns else None
    from tablesvc.spark.read_job import read_table
    from tablesvc.spark.session import get_spark

    spark = get_spark(args.spark_profile, args.service_config.as_dict(), quiet=not args.debug)
    with progress_phase("read"):
        read = read_table(spark, table, as_of, columns)
        try:
            if args.output:
                written = write_output(read, args.output)
                say(f"wrote {args.output} ({written:,} rows)")
                return 0
            rows = [r.asDict() for r in read.frame.limit(SHOW_ROWS).collect()]
            with progress_phase("read: counting rows"):
                total = read.frame.count()   # counted by Spark's tasks: no row comes to the driver
        except Exception as e:  # an error inside a read task: tablesvc's own error (e.g. a corrupt log block)
            raise translate_task_error(e) from None
    if not rows:
        say("no rows")
        return 0
    print_table(rows, read.frame.columns, names_as_they_are=True)
    say(f"({len(rows):,} of {total:,} rows shown)")
    return 0
