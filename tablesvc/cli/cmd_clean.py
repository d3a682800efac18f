"""``tablesvc clean run|list PATH [--dry-run] [--json]``."""

from __future__ import annotations

import argparse
from dataclasses import replace

from tablesvc.cli.output import print_json, print_table, say
from tablesvc.api import Table


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("clean", parents=[common], help="delete file slices no longer needed",
                       description="Plan and run a clean with hoodie.cleaner.policy (default KEEP_LATEST_COMMITS), "
                                   "or list past cleans.")
    p.add_argument("verb", choices=["run", "list"])
    p.add_argument("path", help="table base path")
    p.add_argument("--dry-run", action="store_true", help="print what would be deleted; change nothing")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tablesvc.services.clean import list_cleans, run_clean
    from tablesvc.services.metrics import CleanMetrics

    table = Table.open(args.path, options=getattr(args, "storage_options", None))
    if args.verb == "list":
        rows = list_cleans(table)
        if args.json:
            print_json(rows)
        elif rows:
            print_table(rows, ["instant", "state", "policy", "files_deleted", "earliest_commit_to_retain"])
        else:
            say("no cleans on the timeline")
        return 0
    results = run_clean(table, args.service_config, dry_run=args.dry_run)
    if args.json:
        print_json([r.as_dict() for r in results])
        return 0
    for r in results:
        files: tuple[str, ...] = ()
        if isinstance(r.metrics, CleanMetrics) and r.metrics.files is not None:
            # a dry run's paths: one a line below the result, not inside it
            files = r.metrics.files
            r = replace(r, metrics=r.metrics.without_files())
        say(r.render())
        for f in files:
            say(f"  would delete {f}")
    return 0
