"""``tablesvc logcompaction schedule|run|list PATH [--instant T] [--json]``.

* ``schedule``: plans file slices with at least ``hoodie.log.compaction.blocks.threshold``
  valid log blocks; prints why when nothing is eligible (exit 0).
* ``run``: executes ``--instant``'s plan, else every pending plan (oldest first), else schedules
  one (threshold lowered to 2) and runs it.  An inflight plan whose process died is rolled back,
  its plan dropped and a fresh plan scheduled and run (log compaction plans are mutable).
* ``list``: pending and completed log compactions.
"""

from __future__ import annotations

import argparse
import sys

from tablesvc.cli import output
from tablesvc.config import load_config
from tablesvc.table import Table


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("logcompaction", help="schedule, run or list log compactions",
                       description="Merge the log blocks of file slices into one compacted log block (RFC-48).")
    actions = p.add_subparsers(dest="logcompaction_action", metavar="ACTION")
    actions.required = True

    s = actions.add_parser("schedule", parents=[common], help="write a log compaction plan",
                           description="Plan a log compaction now: latest file slices with at least "
                                       "hoodie.log.compaction.blocks.threshold valid log blocks.")
    s.add_argument("path", help="table base path")
    s.add_argument("--instant", help="the log compaction instant (default: a new instant time)")
    s.add_argument("--force", action="store_true", help="lower the block threshold to 2")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(run=run_schedule)

    r = actions.add_parser("run", parents=[common], help="execute pending log compaction plans (Spark job)",
                           description="Execute the plan of --instant, else every pending plan oldest first, "
                                       "else schedule one and execute it.")
    r.add_argument("path", help="table base path")
    r.add_argument("--instant", help="the pending log compaction to execute")
    r.add_argument("--spark-profile", help="Spark profile name in spark_conf/ or a YAML path (default: local)")
    r.add_argument("--json", action="store_true", help="print the results as JSON")
    r.set_defaults(run=run_run)

    ls = actions.add_parser("list", parents=[common], help="list pending and completed log compactions")
    ls.add_argument("path", help="table base path")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(run=run_list)


def say(message: str) -> None:
    output.say(message, sys.stdout)


def print_json(data) -> None:
    output.print_json(data, sys.stdout)


def print_table(rows, columns) -> None:
    output.print_table(rows, columns, sys.stdout)


def _open(args: argparse.Namespace):
    table = Table.open(args.path)
    config = load_config(table.storage, conf_pairs=getattr(args, "conf", None) or (),
                         config_file=getattr(args, "config", None), table_path=table.base_path)
    return table, config


def run_schedule(args: argparse.Namespace) -> int:
    from tablesvc.services.log_compaction import schedule_log_compaction

    table, config = _open(args)
    result = schedule_log_compaction(table, config, force=bool(getattr(args, "force", False)), instant=args.instant)
    if args.json:
        print_json(result.as_dict())
    else:
        say(result.render())
    return 0


def run_run(args: argparse.Namespace) -> int:
    from tablesvc.services.log_compaction import run_log_compaction

    table, config = _open(args)

    def spark():
        from tablesvc.spark.session import get_spark

        return get_spark(args.spark_profile, config.as_dict(), quiet=not getattr(args, "debug", False))

    results = run_log_compaction(table, args.instant, spark=spark, config=config)
    if args.json:
        print_json([r.as_dict() for r in results])
    else:
        for r in results:
            say(r.render())
    return 0


def run_list(args: argparse.Namespace) -> int:
    from tablesvc.services.log_compaction import list_log_compactions

    table, _config = _open(args)
    rows = list_log_compactions(table)
    if args.json:
        print_json(rows)
    elif not rows:
        say("no log compactions on the timeline")
    else:
        print_table(rows, ["instant", "state", "completion_time", "file_groups", "log_files", "log_blocks"])
    return 0
