"""The recovery command's work: roll back what failed, say what was left pending and why, and
optionally wait for those to fail too (``tablesvc rollback [--wait]``).

Right after a crash, the dead process's heartbeat is still fresh (for up to
``interval_ms`` x ``tolerable.misses``, 2 minutes by default), so its instant is not failed
yet and the sweep leaves it alone.  ``recover`` says so: every instant the sweep left because
a process may still be at work on it comes back in ``left_pending``, with the verdict of
``pending.classify_pending``, the same function the sweep acts on.  ``wait_and_recover``
repeats the sweep until nothing is left pending or a bound passes; it reads time from
``table.clock`` and sleeps through ``sleep``, so tests move a clock instead of waiting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from tablesvc.config import load_config
from tablesvc.services.result import ServiceResult
from tablesvc.services.rollback.executor import rollback_failed
from tablesvc.services.rollback.pending import PendingInstant, Verdict, pending_instants

PROGRESS_EVERY_MS = 5_000
# Never poll faster than this: the sweep lists the timeline, markers and heartbeats each time.
MIN_STEP_MS = 100


@dataclass(frozen=True)
class Recovery:
    results: tuple[ServiceResult, ...]          # one per rollback done (or, dry run, that would be done)
    left_pending: tuple[PendingInstant, ...]    # instants still pending for recovery: exit 3, retry later


ProgressCallback = Callable[[Sequence[PendingInstant], int, int], None]   # (left, waited_ms, timeout_ms)


def recover(table, *, dry_run: bool = False, config=None) -> Recovery:
    """``rollback_failed``, then what it left: instants a live process (or a running rollback)
    still owns, and, after a real sweep, any that failed while it ran (the next sweep takes
    those).  A requested compaction or log compaction plan is never left pending: it is not
    failed, only waiting to be executed."""
    cfg = config if config is not None else load_config(table.storage, table_path=table.base_path)
    results = tuple(rollback_failed(table, dry_run=dry_run, config=cfg))
    left = tuple(p for p in pending_instants(table, cfg)
                 if p.left_for_recovery or (p.verdict is Verdict.FAILED and not dry_run))
    return Recovery(results, left)


def wait_and_recover(table, *, timeout_ms: int, config=None, sleep: Callable[[float], None] = time.sleep,
                     on_progress: ProgressCallback | None = None,
                     progress_every_ms: int = PROGRESS_EVERY_MS) -> Recovery:
    """``recover`` until nothing is left pending or ``timeout_ms`` passed on ``table.clock``.

    Between sweeps it sleeps until the first heartbeat left is judged dead, the next progress
    call (``on_progress(left, waited_ms, timeout_ms)``, at once and then every
    ``progress_every_ms``) or the bound, whichever comes first.  Returns every rollback done,
    and what is still left pending at the end (empty unless the bound passed)."""
    cfg = config if config is not None else load_config(table.storage, table_path=table.base_path)
    clock = table.clock
    started = clock.now_ms()
    deadline = started + timeout_ms
    results: list[ServiceResult] = []
    last_progress: int | None = None
    while True:
        outcome = recover(table, config=cfg)
        results.extend(outcome.results)
        now = clock.now_ms()
        if not outcome.left_pending or now >= deadline:
            return Recovery(tuple(results), outcome.left_pending)
        if last_progress is None or now - last_progress >= progress_every_ms:
            if on_progress is not None:
                on_progress(outcome.left_pending, now - started, timeout_ms)
            last_progress = now
        soonest_dead = min(p.heartbeat.dead_in_ms if p.heartbeat is not None else progress_every_ms
                           for p in outcome.left_pending)
        step = min(last_progress + progress_every_ms - now, soonest_dead, deadline - now)
        sleep(max(step, MIN_STEP_MS) / 1000)


__all__ = ["Recovery", "recover", "wait_and_recover"]
