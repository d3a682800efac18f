"""``tablesvc timeline PATH [--json] [--incomplete]``: the active timeline, one line per instant."""

from __future__ import annotations

import argparse

from tablesvc.cli.output import print_json, print_table, say
from tablesvc.api import Table
from timeline.active import Timeline
from timeline.instant import Instant


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("timeline", parents=[common], help="show the active timeline",
                       description="List the instants of a table's active timeline, oldest first.")
    p.add_argument("path", help="table base path")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--incomplete", action="store_true", help="only requested and inflight instants")
    p.set_defaults(run=run)


def describe_instant(table: Table, timeline: Timeline, instant: Instant) -> dict[str, object]:
    operation = None
    if instant.is_completed and instant.action.is_write:
        md = timeline.commit_metadata(table.storage, instant)
        operation = getattr(md, "operation_type", None) if md is not None else None
    return {"instant": instant.timestamp, "action": instant.action.value, "state": instant.state.value,
            "completion_time": instant.completion_time, "operation": operation}


def run(args: argparse.Namespace) -> int:
    table = Table.open(args.path, options=getattr(args, "storage_options", None))
    timeline = table.timeline()
    instants = timeline.pending() if args.incomplete else timeline.instants
    rows = [describe_instant(table, timeline, i) for i in instants]
    if args.json:
        print_json(rows)
    elif not rows:
        say("no pending instants" if args.incomplete else "the timeline is empty")
    else:
        print_table(rows, ["instant", "action", "state", "completion_time", "operation"])
    return 0
