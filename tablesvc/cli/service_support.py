"""What the table-service commands (compaction, logcompaction, …) share: the ``schedule|run|list``
parsers of a service that plans, opening the table with its layered config, a Spark session
started only when a plan needs one, and printing service results and plan lists as text or JSON."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from tablesvc.cli.output import add_quiet_option, print_json, print_table, say
from tablesvc.config import ServiceConfig, load_config
from tablesvc.services.result import ServiceResult
from tablesvc.api import Table


Handler = Callable[[argparse.Namespace], int]


def _no_options(parser: argparse.ArgumentParser) -> None:
    pass


@dataclass(frozen=True)
class PlanCommand:
    """A command of a service that plans (``compaction``, ``logcompaction``): ``schedule`` writes a
    plan, ``run`` executes pending plans, ``list`` shows them.  The two commands differ only in these
    texts, in a few options and in what runs; ``add_plan_command`` builds the parsers of both."""

    name: str                   # the command word, and ``<name>_action`` holds the action chosen
    noun: str                   # what the help texts call one plan: "compaction", "log compaction"
    help: str
    description: str
    schedule_help: str
    schedule_description: str
    run_schedule: Handler
    run_run: Handler
    run_list: Handler
    schedule_options: Callable[[argparse.ArgumentParser], None] = _no_options   # added after --instant
    run_options: Callable[[argparse.ArgumentParser], None] = _no_options        # added after --instant


def add_plan_command(sub: argparse._SubParsersAction, common: argparse.ArgumentParser, command: PlanCommand) -> None:
    p = sub.add_parser(command.name, help=command.help, description=command.description)
    actions = p.add_subparsers(dest=f"{command.name}_action", metavar="ACTION")
    actions.required = True

    s = actions.add_parser("schedule", parents=[common], help=command.schedule_help,
                           description=command.schedule_description)
    s.add_argument("path", help="table base path")
    s.add_argument("--instant", help=f"the {command.noun} instant (default: a new instant time)")
    command.schedule_options(s)
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(run=command.run_schedule)

    r = actions.add_parser("run", parents=[common], help=f"execute pending {command.noun} plans (Spark job)",
                           description="Execute the plan of --instant, else every pending plan oldest first, "
                                       "else schedule one and execute it.")
    r.add_argument("path", help="table base path")
    r.add_argument("--instant", help=f"the pending {command.noun} to execute")
    command.run_options(r)
    r.add_argument("--spark-profile", help="Spark profile name in spark_conf/ or a YAML path (default: local)")
    r.add_argument("--json", action="store_true", help="print the results as JSON")
    add_quiet_option(r)
    r.set_defaults(run=command.run_run)

    ls = actions.add_parser("list", parents=[common], help=f"list pending and completed {command.noun}s")
    ls.add_argument("path", help="table base path")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(run=command.run_list)


def open_table(args: argparse.Namespace) -> tuple[Table, ServiceConfig]:
    """The table and its config (defaults < table yaml < --config < --conf)."""
    table = Table.open(args.path, options=getattr(args, "storage_options", None))
    config = load_config(table.storage, conf_pairs=getattr(args, "conf", None) or (),
                         config_file=getattr(args, "config", None), table_path=table.base_path)
    return table, config


def lazy_spark(args: argparse.Namespace, config: ServiceConfig) -> Callable[[], object]:
    """A factory: Spark starts only if there is a plan to execute."""
    def spark():
        from tablesvc.spark.session import get_spark

        return get_spark(getattr(args, "spark_profile", None), config.as_dict(),
                         quiet=not getattr(args, "debug", False))
    return spark


def print_results(args: argparse.Namespace, results: Iterable[ServiceResult]) -> None:
    results = list(results)
    if getattr(args, "json", False):
        print_json([r.as_dict() for r in results])
    else:
        for r in results:
            say(r.render())


def print_plans(args: argparse.Namespace, rows: list[dict], noun: str, columns: Sequence[str]) -> int:
    """``list``: the plans on the timeline as JSON, a table, or a line saying there are none."""
    if getattr(args, "json", False):
        print_json(rows)
    elif not rows:
        say(f"no {noun}s on the timeline")
    else:
        print_table(rows, columns)
    return 0
