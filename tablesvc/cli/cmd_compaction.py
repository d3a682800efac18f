"""``tablesvc compaction schedule|run|list PATH [--instant T] [--sort-columns a,b] [--json]``.

* ``schedule``: a manual request: writes a plan whatever the trigger says (the trigger's
  verdict is still reported); prints why when there is nothing to compact (exit 0).
* ``run``: executes ``--instant``'s plan, else every pending plan (oldest first), else
  schedules one and runs it.  An inflight plan whose process died is rolled back and re-run.
* ``list``: pending and completed compactions.
"""

from __future__ import annotations

import argparse

from tablesvc.cli.output import add_quiet_option, print_json, print_table, say
from tablesvc.cli.service_support import lazy_spark, open_table, print_results


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("compaction", help="schedule, run or list compactions",
                       description="Merge the log files of file groups into new base files (MOR compaction).")
    actions = p.add_subparsers(dest="compaction_action", metavar="ACTION")
    actions.required = True

    s = actions.add_parser("schedule", parents=[common], help="write a compaction plan (ignores the trigger)",
                           description="Plan a compaction now: file groups with log files of completed delta "
                                       "commits, largest logs first.")
    s.add_argument("path", help="table base path")
    s.add_argument("--instant", help="the compaction instant (default: a new instant time)")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(run=run_schedule)

    r = actions.add_parser("run", parents=[common], help="execute pending compaction plans (Spark job)",
                           description="Execute the plan of --instant, else every pending plan oldest first, "
                                       "else schedule one and execute it.")
    r.add_argument("path", help="table base path")
    r.add_argument("--instant", help="the pending compaction to execute")
    r.add_argument("--sort-columns", default="", metavar="A,B", help="sort the new base files by these columns")
    r.add_argument("--spark-profile", help="Spark profile name in spark_conf/ or a YAML path (default: local)")
    r.add_argument("--json", action="store_true", help="print the results as JSON")
    add_quiet_option(r)
    r.set_defaults(run=run_run)

    ls = actions.add_parser("list", parents=[common], help="list pending and completed compactions")
    ls.add_argument("path", help="table base path")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(run=run_list)


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
    rows = list_compactions(table)
    if args.json:
        print_json(rows)
    elif not rows:
        say("no compactions on the timeline")
    else:
        print_table(rows, ["instant", "state", "completion_time", "file_groups", "log_files", "log_bytes"])
    return 0
