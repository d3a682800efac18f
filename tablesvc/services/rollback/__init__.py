"""Rollback: undo a failed (or, on request, the latest completed) instant, Hudi-compatibly.

* ``plan_rollback(table, T)`` — the ``HoodieRollbackPlan`` for ``T`` (files to delete, v6
  command blocks to append), from ``T``'s markers or, without them, from listing.
* ``rollback(table, T, dry_run=, allow_completed=)`` — one rollback, planned, persisted,
  idempotent and resumable.
* ``rollback_failed(table, dry_run=)`` — finish pending rollbacks, then roll back every failed
  write / compaction / log compaction (expired heartbeat), newest first; then remove leftovers.
* ``eager_rollback(table)`` — what a writer runs before it starts (failed writes only).
* ``remove_leftovers(table)`` — delete markers and heartbeats of instants that are no longer
  pending (``rollback_failed`` and every clean end with it).
* ``recover(table, dry_run=)`` — ``rollback_failed`` plus what it left pending and why (a live
  heartbeat, a rollback running elsewhere): ``Recovery(results, left_pending)``.
* ``wait_and_recover(table, timeout_ms=)`` — ``recover`` until nothing is left pending or the bound.
* ``pending.classify_pending`` — the one decision behind all of these: each pending instant's
  verdict (failed, heartbeat alive, rollback running, plan waiting, not swept).

See docs/rollback.md.
"""

from tablesvc.services.rollback.executor import eager_rollback, remove_leftovers, rollback, rollback_failed
from tablesvc.services.rollback.pending import PendingInstant, Verdict, pending_instants
from tablesvc.services.rollback.planner import PlanSummary, plan_rollback
from tablesvc.services.rollback.recovery import Recovery, recover, wait_and_recover

__all__ = ["PendingInstant", "PlanSummary", "Recovery", "Verdict", "eager_rollback", "pending_instants",
           "plan_rollback", "recover", "remove_leftovers", "rollback", "rollback_failed", "wait_and_recover"]
