"""``tablesvc compaction schedule|run|list PATH [--instant T] [--sort-columns a,b] [--json]``.

* ``schedule``: a manual request: writes a plan whatever the trigger says (the trigger's
  verdict is still reported); prints why when there is nothing to compact (exit 0).
* ``run``: executes ``--instant``'s plan, else every pending plan (oldest first), else
  schedules one and runs it.  An inflight plan whose process died is rolled back and re-run.
* ``list``: pending and completed compactions.
"""

from __future__ import annotations

import argparse

from tablesvc.cli.output import print_json, say
from tablesvc.cli.service_support import PlanCommand, add_plan_command, lazy_spark, open_table, print_plans, print_results


# Output goes to the current sys.stdout (not the one bound at import), so callers can capture it.
def run_schedule(args: argparse.Namespace) -> int:
    from tablesvc.services.compaction import compaction_due, schedule_compaction

    table, config = open_table(args)
    _due, trigger = compaction_due(table.timeline(), config, table.clock, tz=table.instant_times.timezone)
    result = schedule_compaction(table, config, force=True, instant=args.instant)
    if args.json:
        print_json(dict(result.as_dict(), trigger=trigger))
    else:
        say(result.render())
        say(f"trigger: {trigger} (ignored: schedule is a manual request)")
    return 0


def run_run(args: argparse.Namespace) -> int:
    from tablesvc.services.compaction import run_compaction

    table, config = open_table(args)
    sort_columns = tuple(c.strip() for c in (args.sort_columns or "").split(",") if c.strip())
    results = run_compaction(table, args.instant, spark=lazy_spark(args, config), sort_columns=sort_columns,
                             config=config)
    print_results(args, results)
    return 0


def run_list(args: argparse.Namespace) -> int:
    from tablesvc.services.compaction import list_compactions

    table, _config = open_table(args)
    return print_plans(args, list_compactions(table), "compaction",
                       ["instant", "state", "completion_time", "file_groups", "log_files", "log_bytes"])


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sort-columns", default="", metavar="A,B", help="sort the new base files by these columns")


COMMAND = PlanCommand(
    "compaction", "compaction", help="schedule, run or list compactions",
    description="Merge the log files of file groups into new base files (MOR compaction).",
    schedule_help="write a compaction plan (ignores the trigger)",
    schedule_description="Plan a compaction now: file groups with log files of completed delta commits, "
                         "largest logs first.",
    run_schedule=run_schedule, run_run=run_run, run_list=run_list, run_options=_run_options)


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    add_plan_command(sub, common, COMMAND)
