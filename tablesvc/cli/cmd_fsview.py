"""``tablesvc fsview PATH [--as-of T] [--all] [--json]``: file groups and their latest slices."""

from __future__ import annotations

import argparse

from tablesvc.cli.output import print_json, print_table, say
from tablesvc.table import Table
from timeline.instant import validate_instant_time


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("fsview", parents=[common], help="show file groups and file slices",
                       description="Show the latest file slice of every file group (or all slices with --all).")
    p.add_argument("path", help="table base path")
    p.add_argument("--as-of", help="instant time: the slices a reader at that time uses")
    p.add_argument("--partition", help="only this partition path")
    p.add_argument("--all", action="store_true", help="every slice of every file group, not only the latest")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    table = Table.open(args.path)
    if args.as_of:
        validate_instant_time(args.as_of, "--as-of instant")
    view = table.file_system_view()
    if args.all:
        slices = [s for g in view.file_groups(args.partition) for s in g.slices]
    else:
        slices = view.latest_file_slices(table.storage, args.as_of, args.partition)
    rows = [s.describe() for s in slices]
    if args.json:
        print_json(rows)
    elif not rows:
        say("no file slices (the table holds no committed data files)")
    else:
        print_table(rows, ["partition", "file_id", "base_instant", "base_file", "log_files"])
    return 0
