"""``tablesvc status PATH [--json]``: pending jobs, leases, and the numbers a monitor alerts on."""

from __future__ import annotations

import argparse

from tablesvc.cli.output import print_json, print_table, say
from tablesvc.errors import InvalidInputError
from tablesvc.api import Table


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("status", parents=[common], help="table-service status for monitoring",
                       description="Pending jobs (in the order runners take them), leases, jobs set aside, each "
                                   "pending instant with what rollback does with it, the age "
                                   "of the oldest pending compaction, delta commits since the last compaction and "
                                   "log blocks per file group. Changes nothing.")
    p.add_argument("path", help="table base path")
    p.add_argument("--max-failures", type=int, default=3, help="the runners' --max-failures (default 3)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tablesvc.runner import table_status

    if args.max_failures < 1:
        raise InvalidInputError(f"--max-failures must be at least 1 (got {args.max_failures})")
    table = Table.open(args.path, options=getattr(args, "storage_options", None))
    status = table_status(table, args.service_config, args.max_failures)
    if args.json:
        print_json(status)
        return 0
    say(f"{status['name']} ({status['table']}), table version {status['version']}")
    say(f"delta commits since the last compaction ({status['last_compaction'] or 'none'}): "
        f"{status['delta_commits_since_last_compaction']}")
    age = status["oldest_pending_compaction_age_s"]
    say(f"oldest pending compaction: {f'{age} s old' if age is not None else 'none'}")
    jobs = status["pending_jobs"]
    say(f"pending jobs: {len(jobs)}")
    if jobs:
        rows = [j | {"owner": j.get("lease", {}).get("owner", ""), "token": j.get("lease", {}).get("token", "")}
                for j in jobs]
        print_table(rows, ["job", "state", "bytes", "failures", "owner", "token"])
    for s in status["set_aside"]:
        say(f"set aside: {s['job']} after {s['failures']} failures (last: {s['last_error']})")
    if status["pending_instants"]:
        say("pending instants (what tablesvc rollback does with them):")
        for p in status["pending_instants"]:
            say(f"  {p['instant']} {p['action']} ({p['state']}): {p['reason']}")
    groups = status["log_blocks_per_file_group"]
    if groups:
        say("log blocks per file group (most first):")
        print_table(groups[:20], ["partition", "file_id", "log_files", "log_blocks"])
    return 0
