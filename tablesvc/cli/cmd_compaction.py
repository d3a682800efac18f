"""``tablesvc compaction schedule|run|list PATH [--instant T] [--sort-columns a,b] [--json]``.

* ``schedule``: a manual request: writes a plan whatever the trigger says (the trigger's
  verdict is still reported); prints why when there is nothing to compact (exit 0).
* ``run``: executes ``--instant``'s plan, else every pending plan (oldest first), else
  schedules one and runs it.  An inflight plan whose process died is rolled back and re-run.
* ``list``: pending and completed compactions.
"""

from __future__ import annotations

import argparse
import sys

from tablesvc.cli import output
from tablesvc.config import load_config
from tablesvc.table import Table


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
    r.set_defaults(run=run_run)

    ls = actions.add_parser("list", parents=[common], help="list pending and completed compactions")
    ls.add_argument("path", help="table base path")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(run=run_list)


# Output goes to the current sys.stdout (not the one bound at import), so callers can capture it.
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
    from tablesvc.services.compaction import compaction_due, schedule_compaction

    table, config = _open(args)
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

    table, config = _open(args)

    def spark():
        from tablesvc.spark.session import get_spark

        return get_spark(args.spark_profile, config.as_dict(), quiet=not args.debug)

    sort_columns = tuple(c.strip() for c in (args.sort_columns or "").split(",") if c.strip())
    results = run_compaction(table, args.instant, spark=spark, sort_columns=sort_columns, config=config)
    if args.json:
        print_json([r.as_dict() for r in results])
    else:
        for r in results:
            say(r.render())
    return 0


def run_list(args: argparse.Namespace) -> int:
    from tablesvc.services.compaction import list_compactions

    table, _config = _open(args)
    rows = list_compactions(table)
    if args.json:
        print_json(rows)
    elif not rows:
        say("no compactions on the timeline")
    else:
        print_table(rows, ["instant", "state", "completion_time", "file_groups", "log_files", "log_bytes"])
    return 0
