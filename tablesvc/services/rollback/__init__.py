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

See docs/rollback.md.
"""

from tablesvc.services.rollback.executor import eager_rollback, remove_leftovers, rollback, rollback_failed
from tablesvc.services.rollback.planner import PlanSummary, plan_rollback

__all__ = ["PlanSummary", "eager_rollback", "plan_rollback", "remove_leftovers", "rollback", "rollback_failed"]
