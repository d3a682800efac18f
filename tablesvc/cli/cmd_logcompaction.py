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

from tablesvc.cli.output import print_json, say
from tablesvc.cli.service_support import PlanCommand, add_plan_command, lazy_spark, open_table, print_plans, print_results


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
    return print_plans(args, list_log_compactions(table), "log compaction",
                       ["instant", "state", "completion_time", "file_groups", "log_files", "log_blocks"])


def _schedule_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="lower the block threshold to 2")


COMMAND = PlanCommand(
    "logcompaction", "log compaction", help="schedule, run or list log compactions",
    description="Merge the log blocks of file slices into one compacted log block (RFC-48).",
    schedule_help="write a log compaction plan",
    schedule_description="Plan a log compaction now: latest file slices with at least "
                         "hoodie.log.compaction.blocks.threshold valid log blocks.",
    run_schedule=run_schedule, run_run=run_run, run_list=run_list, schedule_options=_schedule_options)


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    add_plan_command(sub, common, COMMAND)
