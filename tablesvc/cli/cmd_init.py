"""``tablesvc init PATH --name N --record-key K [...]``: create an empty MOR table.

``hoodie.metadata.enable`` (``--conf``/``--config``) decides whether the table gets a metadata
table; unset, every table version gets one (a Java Spark writer's default: Hudi 1.2's metadata
table on versions 8 and 9, Hudi 0.15's on version 6)."""

from __future__ import annotations

import argparse

from tablesvc.cli.output import print_json, say
from tablesvc.errors import InvalidInputError
from tablesvc.api import MergeMode, Table, TableSpec


METADATA_ENABLE = "hoodie.metadata.enable"
COLUMN_STATS_ENABLE = "hoodie.metadata.index.column.stats.enable"


def _fields(text: str | None) -> tuple[str, ...]:
    return tuple(f.strip() for f in (text or "").split(",") if f.strip())


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("init", parents=[common], help="create an empty MOR table",
                       description="Create an empty merge-on-read table that Apache Hudi and hudi-rs can read.")
    p.add_argument("path", help="where the table goes (a new or empty folder)")
    p.add_argument("--name", required=True, help="table name (hoodie.table.name)")
    p.add_argument("--record-key", required=True, help="record key field(s), comma separated")
    p.add_argument("--ordering-field", help="ordering (precombine) field: the larger value wins a merge")
    p.add_argument("--partition-field", help="partition field(s), comma separated; omit for none")
    p.add_argument("--table-version", type=int, choices=[6, 8, 9], default=8, help="Hudi table version (default 8)")
    p.add_argument("--merge-mode", choices=[m.value for m in MergeMode if m is not MergeMode.CUSTOM],
                   help="default: EVENT_TIME_ORDERING with an ordering field, else COMMIT_TIME_ORDERING")
    p.add_argument("--buckets", type=int, default=4, help="bucket index: file groups per partition (default 4)")
    p.add_argument("--no-hive-style", action="store_true", help="partition folders without 'field='")
    p.add_argument("--json", action="store_true", help="print the new table's config as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tablesvc.api.table import normalize_path
    from tablesvc.storage import join, storage_for

    base = normalize_path(args.path)
    storage = storage_for(base, getattr(args, "storage_options", None))   # local, or an object store (s3://, s3a://)
    if storage.list_dir(base) and not storage.exists(join(base, ".hoodie")):
        raise InvalidInputError(f"{base} exists and is not empty; choose a new folder")
    cfg = args.service_config
    metadata_table = bool(cfg.get(METADATA_ENABLE))      # default true, as Java's writers
    spec = TableSpec(name=args.name, record_key_fields=_fields(args.record_key),
                     ordering_field=args.ordering_field or None, partition_fields=_fields(args.partition_field),
                     table_version=args.table_version, hive_style_partitioning=not args.no_hive_style,
                     merge_mode=MergeMode(args.merge_mode) if args.merge_mode else None,
                     num_buckets=args.buckets, metadata_table=metadata_table,
                     metadata_column_stats=bool(cfg.get(COLUMN_STATS_ENABLE)))
    table = Table.create(base, spec, storage=storage)
    if args.json:
        print_json(table.config.summary() | {"path": table.base_path})
    else:
        partitions = ",".join(table.config.metadata_partitions)
        mdt = f", metadata table: {partitions}" if partitions else ", no metadata table"
        say(f"created table {table.config.name} (version {table.config.version}, MERGE_ON_READ{mdt}) at "
            f"{table.base_path}")
    return 0
