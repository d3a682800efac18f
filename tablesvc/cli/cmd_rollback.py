"""``tablesvc rollback PATH [--instant T] [--dry-run] [--allow-completed] [--wait [--timeout S]] [--json]``:
recovery.

Without ``--instant``: finish pending rollbacks, then roll back every failed instant (pending
writes, compactions and log compactions whose heartbeat expired), newest first.  Every pending
instant it left because a process may still be at work on it (a live heartbeat, a rollback
running elsewhere) gets a ``left pending:`` line, and the exit code is 3 (retry later).  A
requested compaction or log compaction plan is not failed and is not reported.  ``--wait``
sweeps again as heartbeats expire (a progress line on stderr every 5 s), until nothing is left
pending or ``--timeout`` passes.  With ``--instant``: that instant; a completed one only with
``--allow-completed``, and only when it is the latest completed write and nothing later depends
on it.  One line per rollback (or a JSON list); "nothing to roll back" when nothing failed and
nothing is left.  Exit codes: 0 done or nothing to do, 2 unknown instant / refused, 3 an
instant is still running (live heartbeat).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from tablesvc.cli.output import print_json, say
from tablesvc.config import load_config
from tablesvc.errors import InvalidInputError, LeftPendingError
from tablesvc.services.metrics import RollbackMetrics
from tablesvc.services.rollback import PendingInstant, Verdict, recover, rollback, wait_and_recover
from tablesvc.services.rollback.pending import HeartbeatWindow
from tablesvc.api import Table

# --wait's default bound on top of the heartbeat window: any process dead when the command
# starts is judged dead within the window, so its instant is rolled back before the bound.
WAIT_MARGIN_S = 60


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("rollback", parents=[common], help="roll back failed instants (recovery)",
                       description="Roll back failed writes, compactions and log compactions (expired heartbeat), "
                                   "newest first, or one given instant.  Half-done rollbacks are finished.  "
                                   "Instants left pending because their process may still run are listed, and "
                                   "the exit code is then 3 (retry later, or --wait).")
    p.add_argument("path", help="table base path")
    p.add_argument("--instant", metavar="T", help="roll back this instant only")
    p.add_argument("--dry-run", action="store_true", help="show what would be rolled back; change nothing")
    p.add_argument("--allow-completed", action="store_true",
                   help="with --instant: allow rolling back a completed instant (the latest completed write)")
    p.add_argument("--wait", action="store_true",
                   help="wait until the heartbeats of instants left pending expire, then roll them back "
                        "(progress on stderr)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help=f"with --wait: give up after this long, exit 3 (default: the heartbeat window "
                        f"+ {WAIT_MARGIN_S} s)")
    p.add_argument("--json", action="store_true", help="print a JSON list of results")
    p.set_defaults(run=run)


def _check_options(args: argparse.Namespace) -> None:
    if args.allow_completed and not args.instant:
        raise InvalidInputError("--allow-completed needs --instant T (a completed instant is never rolled back "
                                "by the failed-instant sweep)")
    if args.timeout is not None and not args.wait:
        raise InvalidInputError("--timeout needs --wait")
    if args.wait and args.instant:
        raise InvalidInputError("--wait applies to the sweep of failed instants, not to --instant T")
    if args.wait and args.dry_run:
        raise InvalidInputError("--wait rolls back what it waited for; it cannot be a --dry-run")
    if args.timeout is not None and not args.timeout > 0:
        raise InvalidInputError(f"--timeout must be more than 0 seconds (got {args.timeout:g})")


def left_pending_item(p: PendingInstant) -> dict[str, Any]:
    """A ``--json`` list item for an instant left pending; ``pending`` is the same object as in
    ``tablesvc status --json``'s ``pending_instants``."""
    return {"action": "rollback", "status": "left_pending", "instant": None, "reason": p.reason(),
            "metrics": RollbackMetrics(target=p.instant.timestamp).as_dict(), "pending": p.as_dict()}


def _names(left: Sequence[PendingInstant]) -> str:
    def why(p: PendingInstant) -> str:
        if p.verdict is Verdict.HEARTBEAT_ALIVE:
            return "heartbeat alive"
        if p.verdict is Verdict.ROLLBACK_RUNNING:
            return f"rollback {p.rollback.timestamp} running"
        return "failed meanwhile"
    return ", ".join(f"{p.instant.timestamp} ({p.action.value}, {why(p)})" for p in left)


def _progress(left: Sequence[PendingInstant], waited_ms: int, timeout_ms: int) -> None:
    say(f"waiting ({waited_ms / 1000:.0f} s of at most {timeout_ms / 1000:.0f} s) for "
        + "; ".join(p.render() for p in left), sys.stderr)
    sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    _check_options(args)
    table = Table.open(args.path, options=getattr(args, "storage_options", None))
    config = load_config(table.storage, conf_pairs=getattr(args, "conf", None) or (),
                         config_file=getattr(args, "config", None), table_path=table.base_path)
    left: tuple[PendingInstant, ...] = ()
    timeout_ms = None
    if args.instant:
        results = [rollback(table, args.instant, dry_run=args.dry_run, allow_completed=args.allow_completed,
                            config=config)]
    elif args.wait:
        timeout_s = args.timeout if args.timeout is not None else \
            HeartbeatWindow.of(config).window_ms / 1000 + WAIT_MARGIN_S
        timeout_ms = int(timeout_s * 1000)
        outcome = wait_and_recover(table, timeout_ms=timeout_ms, config=config, on_progress=_progress)
        results, left = list(outcome.results), outcome.left_pending
    else:
        outcome = recover(table, dry_run=args.dry_run, config=config)
        results, left = list(outcome.results), outcome.left_pending
    if args.json:
        print_json([r.as_dict() for r in results] + [left_pending_item(p) for p in left], sys.stdout)
    elif not results and not left:
        say("nothing to roll back", sys.stdout)
    else:
        for r in results:
            say(r.render(), sys.stdout)
        for p in left:
            say(f"left pending: {p.render()}", sys.stdout)
    if left:
        sys.stdout.flush()
        if timeout_ms is not None:
            raise LeftPendingError(f"still pending after waiting {timeout_ms / 1000:g} s: {_names(left)}; "
                                   "retry later")
        raise LeftPendingError(f"left pending: {_names(left)}; retry later, or use tablesvc rollback --wait")
    return 0
