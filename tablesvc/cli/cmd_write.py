"""``tablesvc write PATH --input FILE_OR_DIR [--input-format F] [--operation OP]``."""

from __future__ import annotations

import argparse
import os

from tablesvc.cli.output import print_json, say
from tablesvc.errors import InvalidInputError
from tablesvc.table import Table

FORMATS = ("parquet", "json", "csv")


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("write", parents=[common], help="insert, upsert or delete records from files",
                       description="Write records from Parquet, JSON or CSV files into a MOR table (Spark job).")
    p.add_argument("path", help="table base path")
    p.add_argument("--input", required=True, help="input file or folder")
    p.add_argument("--input-format", choices=FORMATS, help="default: from the file extension")
    p.add_argument("--operation", default="upsert", choices=["insert", "upsert", "delete"])
    p.add_argument("--log-block-format", default="avro", choices=["avro", "parquet"],
                   help="data block format for updates (hoodie.logfile.data.block.format)")
    p.add_argument("--spark-profile", help="Spark profile name in spark_conf/ or a YAML path (default: local)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run)


def _format(path: str, given: str | None) -> str:
    if given:
        return given
    probe = path
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith((".", "_")))
        probe = names[0] if names else ""
    ext = os.path.splitext(probe)[1].lstrip(".").lower()
    if ext in FORMATS:
        return ext
    raise InvalidInputError(f"{path}: cannot tell the input format; pass --input-format parquet|json|csv")


def run(args: argparse.Namespace) -> int:
    table = Table.open(args.path)
    if not os.path.exists(args.input):
        raise InvalidInputError(f"{args.input}: no such input file or folder")
    fmt = _format(args.input, args.input_format)
    from tablesvc.spark.session import get_spark

    spark = get_spark(args.spark_profile, args.service_config.as_dict(), quiet=not args.debug)
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    try:
        df = reader.load(os.path.abspath(args.input))
    except Exception as e:  # Spark's AnalysisException etc.: report the file, not a JVM stack
        raise InvalidInputError(f"{args.input}: cannot read as {fmt}: {str(e).splitlines()[0]}") from None
    result = table.write(df, args.operation, log_block_format=args.log_block_format, config=args.service_config)
    if result is None:
        say("nothing to write: the input holds no records")
    elif args.json:
        print_json(result.as_dict())
    else:
        say(f"{result.operation} committed as instant {result.instant}: {result.records_written} records "
            f"({result.inserts} inserts, {result.updates} updates, {result.deletes} deletes) "
            f"in {result.files_written} files, {result.seconds}s")
        for service in result.services:
            say(f"  inline {service.render()}")
    return 0
