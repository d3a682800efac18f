"""``tablesvc write PATH --input FILE_OR_DIR [--input-format F] [--operation OP]``."""

from __future__ import annotations

import argparse
import os

from tablesvc.cli.csv_input import plan_csv, read_csv, table_columns
from tablesvc.cli.output import add_quiet_option, print_json, say
from tablesvc.errors import InvalidInputError
from tablesvc.api import Table
from tablesvc.write.keys import KeySpec

FORMATS = ("parquet", "json", "csv")


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("write", parents=[common], help="insert, upsert or delete records from files",
                       description="Write records from Parquet, JSON or CSV files into a MOR table (Spark job).")
    p.add_argument("path", help="table base path")
    p.add_argument("--input", required=True, help="input file or folder")
    p.add_argument("--input-format", choices=FORMATS, help="default: from the file extension")
    p.add_argument("--operation", default="upsert", choices=["insert", "upsert", "delete"])
    p.add_argument("--log-block-format", choices=["avro", "parquet"],
                   help="data block format for updates (default: hoodie.logfile.data.block.format, avro)")
    p.add_argument("--spark-profile", help="Spark profile name in spark_conf/ or a YAML path (default: local)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_quiet_option(p)
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


def _input_files(path: str) -> list[str]:
    """The files Spark would read: ``path`` itself, or every file under the folder except the
    hidden and ``_``-prefixed ones (``_SUCCESS``, ``.crc``), which Spark skips too."""
    if not os.path.isdir(path):
        return [path]
    found = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        found += [os.path.join(root, f) for f in sorted(files) if not f.startswith((".", "_"))]
    return found


def _check_parquet(table: Table, path: str, operation: str) -> None:
    """What the footer tells without reading data: a real Parquet file with the key, partition and
    ordering columns, key and ordering types the table can take, and no null keys (row-group
    statistics; Spark checks again where a file has none)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tablesvc.spark.write_job import check_input_schema
    from tablesvc.write import reconcile_schema

    try:
        meta = pq.ParquetFile(path).metadata
        schema = meta.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as e:
        raise InvalidInputError(f"{path}: not a readable Parquet file ({str(e).splitlines()[0]})") from None
    check_input_schema(schema, table, operation, where=path)
    cfg = table.config
    old = table.schema()
    simple = (pa.types.is_string, pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)
    fields = [schema.field(n) for n in (*cfg.record_key_fields, *cfg.partition_fields, cfg.ordering_field)
              if n and n in schema.names and any(is_(schema.field(n).type) for is_ in simple)]
    if old and fields and operation != "delete":
        try:  # the same check as the write's, on these columns only (their Arrow types are Spark's too)
            reconcile_schema(old, pa.schema(fields), (), None, (), table_name=cfg.name)
        except InvalidInputError as e:
            raise InvalidInputError(f"{path}: {e}") from None
    if len(cfg.record_key_fields) == 1 and cfg.record_key_fields[0] in schema.names:
        column = schema.names.index(cfg.record_key_fields[0])
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(column).statistics
            if stats is not None and stats.has_null_count and stats.null_count:
                raise InvalidInputError(f"{path}: input has records with a null record key "
                                        f"({cfg.record_key_fields[0]}, row group {g})")


def _check_text(path: str, fmt: str) -> None:
    """JSON: the first line must be a JSON object (Spark reports later lines).  CSV files are
    checked by ``csv_input.plan_csv``."""
    import json

    with open(path, "rb") as f:
        first = f.readline(1 << 20).strip()
    if fmt == "json" and first:
        try:
            ok = isinstance(json.loads(first), dict)
        except ValueError:
            ok = False
        if not ok:
            raise InvalidInputError(f"{path}: line 1 is not a JSON object (input format json: one object per line)")


def check_input(table: Table, path: str, fmt: str, operation: str) -> None:
    """Refuse unreadable or malformed input before Spark starts, naming the file."""
    files = _input_files(path)
    if not files:
        raise InvalidInputError(f"{path}: the input folder holds no files")
    for f in files:
        try:
            with open(f, "rb") as handle:
                handle.read(1)
        except OSError as e:
            raise InvalidInputError(f"{f}: cannot read the input file ({e.strerror})") from None
        if fmt == "parquet":
            _check_parquet(table, f, operation)
        else:
            _check_text(f, fmt)


def _malformed_records(df, fmt: str, path: str) -> None:
    """Spark's permissive JSON reading turns malformed lines into a ``_corrupt_record`` column (CSV
    records with a wrong field count fail the write instead: ``csv_input.column_sql``)."""
    if "_corrupt_record" in df.columns:
        raise InvalidInputError(f"{path}: holds malformed {fmt} records (Spark could not parse every line)")


def run(args: argparse.Namespace) -> int:
    table = Table.open(args.path, options=getattr(args, "storage_options", None))
    KeySpec.from_config(table.config)   # a table whose keys cannot be built is refused before Spark starts
    if not os.path.exists(args.input):
        raise InvalidInputError(f"{args.input}: no such input file or folder")
    fmt = _format(args.input, args.input_format)
    check_input(table, args.input, fmt, args.operation)
    # CSV text is cast to the table's column types where that is exact, decided from each file's
    # header and first block before Spark starts (csv_input.py).
    csv_plan = plan_csv(_input_files(args.input), table_columns(table.schema())) if fmt == "csv" else None
    from tablesvc.spark.session import get_spark

    spark = get_spark(args.spark_profile, args.service_config.as_dict(), quiet=not args.debug)
    try:
        if csv_plan is not None:
            df = read_csv(spark, os.path.abspath(args.input), csv_plan)
        else:
            df = spark.read.format(fmt).load(os.path.abspath(args.input))
    except Exception as e:  # Spark's AnalysisException etc.: report the file, not a JVM stack
        raise InvalidInputError(f"{args.input}: cannot read as {fmt}: {str(e).splitlines()[0]}") from None
    _malformed_records(df, fmt, args.input)
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
