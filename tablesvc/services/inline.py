"""Services run inline after a successful write, in the writer's Spark session.

| setting | after each write |
|---|---|
| `hoodie.compact.inline=true` | run the pending compaction plans (oldest first); then, if compaction is due (trigger strategy), schedule it and run it now |
| `hoodie.compact.schedule.inline=true` | if due, only schedule it; `tablesvc compaction run` or the runner executes it |
| `hoodie.log.compaction.inline=true` | run the pending log compaction plans; then, if a file slice holds `hoodie.log.compaction.blocks.threshold` log blocks, log-compact it now |
| `hoodie.clean.automatic=true` (default) | clean, when the earliest commit to retain moved |

Defaults are Hudi's for MOR tables: cleaning on, compaction off inline.  Deciding that
nothing is due reads the timeline only: no Spark job, no file listing.

Running the pending plans first is what Hudi's inline compaction does (``runAnyPendingCompactions``):
a plan left behind by a crashed writer, or scheduled inline earlier, would otherwise wait forever,
since the planner leaves out the file groups of pending plans (apache/hudi#8567).  A plan whose
executor is alive (its heartbeat beats) is left to that executor, and a plan refused for its
content is reported, not raised: the write has committed (``_run_pending``).
"""

from __future__ import annotations

from collections.abc import Callable

from tablesvc.config.loader import ServiceConfig
from tablesvc.errors import ConflictError, InvalidInputError, UnknownInstantError
from tablesvc.services.metrics import CleanMetrics
from tablesvc.services.result import ServiceResult, Status
from tablesvc.table.writable import CLEAN, is_writable
from timeline.active import Timeline
from timeline.instant import Instant


def run_inline_services(table, config: ServiceConfig, spark=None) -> list[ServiceResult]:
    results: list[ServiceResult] = []
    # One load answers every "is it due?" below; a service that ran moved the table, and the
    # next decision loads afresh.  (The timeline was loaded three times per decision before.)
    timeline: Timeline | None = None
    inline = config.get("hoodie.compact.inline")
    schedule_only = config.get("hoodie.compact.schedule.inline")
    if (inline or schedule_only) and table.config.is_mor:
        from tablesvc.services.compaction import compaction_due, run_compaction, schedule_compaction

        from timeline.instant_time import resolve_timezone

        timeline = table.timeline()
        if inline and timeline.pending_compactions():
            results.extend(_run_pending(timeline.pending_compactions(), "compaction",
                                        lambda ts: run_compaction(table, ts, spark=spark, config=config)))
            timeline = table.timeline()
        due, reason = compaction_due(timeline, config, table.clock, tz=resolve_timezone(table.config.timezone))
        if due:
            scheduled = schedule_compaction(table, config)
            results.append(scheduled)
            if inline and scheduled.instant:
                results.extend(run_compaction(table, scheduled.instant, spark=spark, config=config))
            timeline = None
        else:
            results.append(ServiceResult("compaction", Status.NOTHING_TO_DO, None, reason))
    if config.get("hoodie.log.compaction.inline") and table.config.is_mor:
        from tablesvc.services.log_compaction import run_log_compaction, schedule_log_compaction

        timeline = timeline or table.timeline()
        pending = timeline.pending_log_compactions()
        if pending:
            results.extend(_run_pending(pending, "logcompaction",
                                        lambda ts: run_log_compaction(table, ts, spark=spark, config=config)))
            timeline = None
        scheduled = schedule_log_compaction(table, config)
        results.append(scheduled)
        if scheduled.instant:
            results.extend(run_log_compaction(table, scheduled.instant, spark=spark, config=config))
            timeline = None
    if config.get("hoodie.clean.automatic"):
        results.extend(_clean(table, config, timeline or table.timeline()))
    return results


def _run_pending(pending: tuple[Instant, ...], action: str,
                 run: Callable[[str], list[ServiceResult]]) -> list[ServiceResult]:
    """Run each pending plan, oldest first (an inflight one whose executor died is rolled back and
    re-executed by ``run``).  The write has committed, so a plan that cannot run now is reported
    in the results, with the reason, rather than raised: one another process is running (exit 3
    alone), one that vanished meanwhile (another process recovered it), one refused for its
    content (say, a file group shared with another pending plan).  ``compaction run`` still
    fails on such a plan, and the runner counts it as a failure of the job.  A failure while
    executing (a corrupt log block: exit 1) is raised, as it is for a plan scheduled now."""
    results: list[ServiceResult] = []
    for instant in pending:
        try:
            results.extend(run(instant.timestamp))
        except (ConflictError, InvalidInputError, UnknownInstantError) as e:
            results.append(ServiceResult(action, Status.NOTHING_TO_DO, instant.timestamp,
                                         f"pending plan {instant.timestamp} not run now: {e}"))
    return results


def _clean(table, config: ServiceConfig, timeline: Timeline) -> list[ServiceResult]:
    """``run_clean``, except that when ``timeline`` alone shows nothing to clean (no pending
    clean; the earliest commit to retain has not moved) the answer comes from it, with no
    second and third load: the result ``run_clean`` gives then, and the same leftover sweep."""
    from tablesvc.services.clean import run_clean
    from tablesvc.services.clean.planner import nothing_to_clean
    from tablesvc.services.rollback.executor import remove_leftovers
    from timeline.instant import Action

    if not is_writable(table, CLEAN) or timeline.pending(Action.CLEAN):
        return run_clean(table, config)     # refuses the table / finishes the pending cleans first
    reason = nothing_to_clean(table, config, timeline)
    if reason is None:
        return run_clean(table, config)
    # no listing of the partitions after every write: temporary copies wait for a clean that
    # plans, a runner's clean job or `tablesvc rollback`
    remove_leftovers(table, temporary_copies=False)
    return [ServiceResult("clean", Status.NOTHING_TO_DO, None, reason, CleanMetrics(partitions_scanned=0))]
