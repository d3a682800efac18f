"""``tablesvc retry PATH JOB``: clear a set-aside job's failure count so runners take it again."""

from __future__ import annotations

import argparse

from tablesvc.cli.output import say
from tablesvc.errors import UnknownInstantError
from tablesvc.api import Table
from timeline.lease import LeaseStore


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("retry", parents=[common], help="let runners retry a job set aside after failures",
                       description="A job that failed --max-failures times is set aside by the runners; this "
                                   "clears its failure count. JOB is as `tablesvc status` shows it, "
                                   "e.g. compaction-20250101000000000.")
    p.add_argument("path", help="table base path")
    p.add_argument("job", help="job id (KIND-INSTANT)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    table = Table.open(args.path, options=getattr(args, "storage_options", None))
    leases = LeaseStore(table.storage, table.base_path, table.clock)
    try:
        known = args.job in leases.jobs()
    except ValueError:
        known = False
    if not known:
        raise UnknownInstantError(f"no job {args.job} in {table.base_path}/.hoodie/.aux/tablesvc/jobs")
    failures = leases.failures(args.job)
    leases.reset_failures(args.job)
    say(f"{args.job}: failure count {failures.count} cleared; runners will take it again")
    return 0
