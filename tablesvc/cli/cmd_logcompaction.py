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

from tablesvc.cli.output import add_quiet_option, print_json, print_table, say
from tablesvc.cli.service_support import lazy_spark, open_table, print_results


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
    add_quiet_option(r)
    r.set_defaults(run=run_run)

    ls = actions.add_parser("list", parents=[common], help="list pending and completed log compactions")
    ls.add_argument("path", help="table base path")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(run=run_list)


def run_schedule(args: argparse.Namespace) -> int:
    from tablesvc.services.log_compaction import schedule_log_compaction

    table, config = open_table(args)
    result = schedule_log_compaction(table, config, force=bool(getattr(args, "force", False)), instant=args.instant)
    if args.json:
        print_json(result.as_dict())
    else:
        say(result.render())
    return 0


def run_run(args: argparse.Namespace) -> int:
    from tablesvc.services.log_compaction import run_log_compaction

    table, config = open_table(args)
    results = run_log_compaction(table, args.instant, spark=lazy_spark(args, config), config=config)
    print_results(args, results)
    return 0


def run_list(args: argparse.Namespace) -> int:
    from tablesvc.services.log_compaction import list_log_compactions

    table, _config = open_table(args)
    rows = list_log_compactions(table)
    if args.json:
        print_json(rows)
    elif not rows:
        say("no log compactions on the timeline")
    else:
        print_table(rows, ["instant", "state", "completion_time", "file_groups", "log_files", "log_blocks"])
    return 0
