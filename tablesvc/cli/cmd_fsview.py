"""``tablesvc fsview PATH [--as-of T] [--all] [--json]``: file groups and their latest slices."""

from __future__ import annotations

import argparse

from tablesvc.cli.output import print_json, print_table, say
from tablesvc.api import Table
from timeline.time_travel import resolve_as_of


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("fsview", parents=[common], help="show file groups and file slices",
                       description="Show the latest file slice of every file group (or all slices with --all).")
    p.add_argument("path", help="table base path")
    p.add_argument("--as-of", metavar="T", help="the slices a reader as of this time uses (the forms read --as-of "
                   "takes)")
    p.add_argument("--partition", help="only this partition path")
    p.add_argument("--all", action="store_true", help="every slice of every file group, not only the latest")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    table = Table.open(args.path, options=getattr(args, "storage_options", None))
    table.metadata_enabled = bool(args.service_config.get("hoodie.metadata.enable"))  # --conf may switch it off
    timeline = table.timeline()
    as_of = None
    if args.as_of is not None:
        as_of = resolve_as_of(table.storage, timeline, args.as_of, "--as-of")
    view = table.file_system_view(timeline)
    if args.all:
        slices = [s for g in view.file_groups(args.partition) for s in g.slices]
    else:
        slices = view.latest_file_slices(table.storage, as_of, args.partition)
    rows = [s.describe() for s in slices]
    if args.json:
        print_json(rows)
    elif not rows:
        say("no file slices (the table holds no committed data files)")
    else:
        print_table(rows, ["partition", "file_id", "base_instant", "base_file", "log_files"])
    return 0
