"""``tablesvc rollback PATH [--instant T] [--dry-run] [--allow-completed] [--json]``: recovery.

Without ``--instant``: finish pending rollbacks, then roll back every failed instant (pending
writes, compactions and log compactions whose heartbeat expired), newest first.  With
``--instant``: that instant; a completed one only with ``--allow-completed``, and only when
it is the latest completed write and nothing later depends on it.  One line per rollback
(or a JSON list); "nothing to roll back" when nothing failed.  Exit codes: 0 done or nothing
to do, 2 unknown instant / refused, 3 the instant is still running (live heartbeat).
"""

from __future__ import annotations

import argparse
import sys

from tablesvc.cli.output import print_json, say
from tablesvc.config import load_config
from tablesvc.errors import InvalidInputError
from tablesvc.services.rollback import rollback, rollback_failed
from tablesvc.table import Table


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("rollback", parents=[common], help="roll back failed instants (recovery)",
                       description="Roll back failed writes, compactions and log compactions (expired heartbeat), "
                                   "newest first, or one given instant.  Half-done rollbacks are finished.")
    p.add_argument("path", help="table base path")
    p.add_argument("--instant", metavar="T", help="roll back this instant only")
    p.add_argument("--dry-run", action="store_true", help="show what would be rolled back; change nothing")
    p.add_argument("--allow-completed", action="store_true",
                   help="with --instant: allow rolling back a completed instant (the latest completed write)")
    p.add_argument("--json", action="store_true", help="print a JSON list of results")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.allow_completed and not args.instant:
        raise InvalidInputError("--allow-completed needs --instant T (a completed instant is never rolled back "
                                "by the failed-instant sweep)")
    table = Table.open(args.path)
    config = load_config(table.storage, conf_pairs=getattr(args, "conf", None) or (),
                         config_file=getattr(args, "config", None), table_path=table.base_path)
    if args.instant:
        results = [rollback(table, args.instant, dry_run=args.dry_run, allow_completed=args.allow_completed,
                            config=config)]
    else:
        results = rollback_failed(table, dry_run=args.dry_run, config=config)
    if args.json:
        print_json([r.as_dict() for r in results], sys.stdout)
    elif not results:
        say("nothing to roll back", sys.stdout)
    else:
        for r in results:
            say(r.render(), sys.stdout)
    return 0
