"""What scheduling and executing a per-file-group plan have in common (compaction, log compaction).

``schedule_plan`` builds the plan from the timeline as it is under the table lock and persists
it as ``P.<action>.requested`` in the same lock hold; an empty plan is never written.

Both executors follow the one instant lifecycle (``services/lifecycle``) for a plan instant
``P``; only the work per file group, the commit metadata and the commit requirements differ:

1. ``P`` inflight: a live heartbeat means another process runs it (``ConflictError``); a dead
   one is the caller's to recover (``refuse_if_alive``).
2. ``InstantLifecycle.start``: under the table lock, ``P`` must still be requested; the
   heartbeat starts (so nobody takes ``P`` for a dead instant), then ``P`` moves to inflight.
3. ``spark.file_group_tasks.run_file_group_tasks``: a Spark job over the plan's operations,
   packed into tasks by bytes (or in this process); tasks write files after a marker and return
   write stats only, never data.
4. ``InstantLifecycle.remove_orphans``: files with a marker but no stat (failed task attempts)
   are deleted.
5. ``InstantLifecycle.commit``: under the lock, complete ``P`` with its metadata once its
   requirements hold; the heartbeat stops whatever happens, and the markers go after the
   completion.  On failure ``P`` stays inflight without a heartbeat, which is how the next run
   knows it died.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from tablesvc.errors import ConflictError, InvalidInputError, TablesvcError, UnknownInstantError
from tablesvc.config.values import service_config
from tablesvc.services.metrics import PlanMetrics
from tablesvc.services.lifecycle import COMPACTION_LIFECYCLE, LOG_COMPACTION_LIFECYCLE, Fence, InstantLifecycle
from tablesvc.services.lifecycle.collisions import collided_plan, foreign_files_at
from tablesvc.services.result import ServiceResult, Status
from tablesvc.spark.file_group_tasks import StatsByPartition
from tablesvc.storage import discard_partial_copies
from tablesvc.write.markers import delete_markers, list_markers, rel_path
from timeline.active import Timeline
from timeline.clock import wait_past
from timeline.heartbeat import is_expired, last_beat_ms
from timeline.instant import Action, Instant
from timeline.instant_time import parse_instant
from timeline.payloads import WriteStat, encode_compaction_plan
from timeline.storage import join

HEARTBEAT_INTERVAL_KEY = "hoodie.client.heartbeat.interval_in_ms"
HEARTBEAT_MISSES_KEY = "hoodie.client.heartbeat.tolerable.misses"
_LIFECYCLES = {Action.COMPACTION: COMPACTION_LIFECYCLE, Action.LOG_COMPACTION: LOG_COMPACTION_LIFECYCLE}


def schedule_plan(table, action: Action, service: str,
                  build: Callable[[Timeline], tuple[Any, str, PlanMetrics | None]],
                  instant: str | None = None, planned: str = "planned", *, ahead_ms: int = 0) -> ServiceResult:
    """``build(timeline) -> (CompactionPlan | None, why not, its PlanMetrics)`` runs under the lock;
    a plan is persisted (``SCHEDULED``), else the reason is returned (``NOTHING_TO_DO``).
    ``ahead_ms``: the plan's generated instant is that far ahead of the clock (a v6 compaction's;
    the reason says so when the file was not written before the clock reached it)."""
    outcome: dict[str, Any] = {}

    def payload(timeline: Timeline) -> bytes | None:
        plan, outcome["why_not"], outcome["metrics"] = build(timeline)
        return None if plan is None else encode_compaction_plan(plan)

    requested = InstantLifecycle(table, _LIFECYCLES[action]).request_built(payload, timestamp=instant,
                                                                           ahead_ms=ahead_ms)
    if requested is None:
        return ServiceResult(service, Status.NOTHING_TO_DO, None, outcome["why_not"])
    metrics: PlanMetrics = outcome["metrics"]
    reason = f"{plural(metrics.file_groups, 'file group')} {planned}"
    if ahead_ms:
        planned_ms = parse_instant(requested.timestamp, table.instant_times.timezone)
        late_ms = table.clock.now_ms() - planned_ms
        if late_ms >= 0:
            # Not expected (the lead is many times a file write); the commit's checks still refuse
            # to hide a log another write put into a planned slice meanwhile.
            reason += (f"; its requested file appeared {late_ms} ms after the clock passed its time, later "
                       f"than the {ahead_ms} ms lead allowed")
        # A caller that writes right after scheduling (a script, the inline pass, a test's next
        # step) must take a time later than the plan's: Hudi 0.x refuses a write earlier than a
        # pending compaction at its start.  So scheduling returns once the clock has passed it
        # (outside the lock: concurrent writers are not held up).
        wait_past(table.clock, planned_ms)
    return ServiceResult(service, Status.SCHEDULED, requested.timestamp, reason, metrics)


def pending_plan(table, timestamp: str, action: Action, service: str, label: str) -> Instant | ServiceResult:
    """The plan instant ``timestamp`` of ``action`` to execute, or ``NOTHING_TO_DO`` when it
    already completed; ``UnknownInstantError`` (exit 2) when there is no such plan."""
    timeline = table.timeline()
    if table.config.version < 8 and foreign_files_at(timeline, timestamp, action):
        # v6: a Hudi 0.x writer took the plan's time (lifecycle/collisions.py); the timeline's one
        # instant per family and time may show that writer's instead of the plan
        current = collided_plan(table, timestamp, action, label)
        if current.is_completed:
            return ServiceResult(service, Status.NOTHING_TO_DO, timestamp, "already completed")
        return current
    current = timeline.get(timestamp)
    if current is None or timeline.origin_action(current) is not action:
        raise UnknownInstantError(f"no {label} {timestamp} on the timeline of {table.base_path}")
    if current.is_completed:
        return ServiceResult(service, Status.NOTHING_TO_DO, timestamp, "already completed")
    return current


def run_plans(instant: str | None, pending: Callable[[], list[str]], schedule: Callable[[], ServiceResult],
              execute: Callable[[str], ServiceResult]) -> list[ServiceResult]:
    """What ``run`` means for a planned service: ``instant``'s plan; else every pending plan,
    oldest first; else schedule one (a manual request) and execute it."""
    if instant is not None:
        return [execute(instant)]
    timestamps = pending()
    if not timestamps:
        scheduled = schedule()
        if scheduled.status is not Status.SCHEDULED or not scheduled.instant:
            return [scheduled]
        timestamps = [scheduled.instant]
    return [execute(ts) for ts in timestamps]


def plans_on_timeline(table, action: Action) -> Iterator[tuple[Instant, tuple]]:
    """Every pending or completed plan of ``action``, oldest first, with its operations
    (none when the plan cannot be read: listing must not fail on one bad file)."""
    timeline = table.timeline()
    for instant in timeline.instants:
        if timeline.origin_action(instant) is not action:
            continue
        try:
            ops = tuple(timeline.plan_of(table.storage, instant).operations or ())
        except TablesvcError:
            ops = ()
        yield instant, ops


def heartbeat_settings(config: Any) -> tuple[int, int]:
    """(interval ms, tolerable misses): defaults (Hudi's: 60 s, 2) and checks are the registry's."""
    config = service_config(config)
    return config.get(HEARTBEAT_INTERVAL_KEY), config.get(HEARTBEAT_MISSES_KEY)


# The plans that pin their file groups: a file group may be in one pending plan only.
_PINNING_ACTIONS = (Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING, Action.REPLACE_COMMIT)


def pending_plan_file_groups(table, timeline: Timeline) -> Iterator[tuple[Instant, str, str]]:
    """(pending instant, partition, file id) for every file group a pending compaction, log
    compaction or clustering plan pins, oldest plan first.  The planners leave these groups out
    (``compaction.planner.pinned_file_groups``); the executors refuse a plan sharing one
    (``refuse_shared_file_groups``)."""
    for instant in timeline.pending():
        if instant.action not in _PINNING_ACTIONS:
            continue
        try:
            plan = timeline.plan_of(table.storage, instant)
        except Exception:  # a replacecommit without a clustering plan pins nothing
            continue
        file_ids = getattr(plan, "file_ids", None)
        for partition, file_id in (file_ids() if file_ids else ()):
            if file_id:
                yield instant, partition or "", file_id


def refuse_shared_file_groups(table, timeline: Timeline, instant_ts: str, plan: Any, label: str) -> None:
    """``InvalidInputError`` (exit 2) when a file group of ``plan`` is also in another pending
    compaction, log compaction or clustering plan.  tablesvc's planners never schedule that, but
    a plan written by another tool may (apache/hudi#1780: "more than 1 pending compactions"), and
    running both would merge the same slice twice.  Checked before anything moves."""
    mine = {(p or "", f) for p, f in plan.file_ids() if f}
    shared: dict[str, list[tuple[str, str]]] = {}
    others: dict[str, Instant] = {}
    for other, partition, file_id in pending_plan_file_groups(table, timeline):
        if other.timestamp != instant_ts and (partition, file_id) in mine:
            shared.setdefault(other.timestamp, []).append((partition, file_id))
            others[other.timestamp] = other
    if shared:
        first = min(shared)
        partition, file_id = min(shared[first])
        raise InvalidInputError(
            f"{label} {instant_ts}: file group {file_id} (partition {partition!r}) is also in the pending "
            f"{others[first].action.value} {first} ({len(shared[first])} shared in all); a file group may be in one "
            "pending plan only: remove one of the two plans (`tablesvc rollback --instant T` undoes what an "
            "inflight one wrote; then delete its .requested file, as Hudi's `compaction unschedule` does)")


def refuse_if_alive(table, instant: Instant, label: str, config: Any) -> None:
    """``ConflictError`` when the inflight ``instant`` still has a live heartbeat."""
    interval, misses = heartbeat_settings(config)
    if is_expired(table.storage, table.base_path, instant.timestamp, table.clock, interval, misses):
        return
    beat = last_beat_ms(table.storage, table.base_path, instant.timestamp)
    age = (table.clock.now_ms() - beat) if beat is not None else None
    raise ConflictError(f"{label} {instant.timestamp} is inflight and its heartbeat is alive (last beat {age} ms "
                        f"ago, expires after {interval * misses} ms): another process is running it; retry later")


def discard_stale_output(table, instant: str) -> int:
    """After losing a job: once another worker completed ``instant``, files that carry a marker
    of it but are not in its commit metadata are the stale attempt's (written after the new
    holder removed its orphans); delete them and the markers.  Once another worker rolled
    ``instant`` back (it is gone from the timeline), whatever of it is on storage is the stale
    attempt's (``rollback.sweep_rolled_back``).  While ``instant`` is still pending nothing is
    touched: those files may be the new holder's.  Returns files deleted."""
    timeline = table.timeline()
    done = timeline.get(instant)
    if done is None:
        # Gone: rolled back (this worker had requested it), unless archived once completed.
        if timeline.is_committed_or_archived(instant):
            return 0
        from tablesvc.services.rollback.executor import sweep_rolled_back

        return len(sweep_rolled_back(table, instant))
    if not done.is_completed:
        return 0
    metadata = timeline.commit_metadata(table.storage, done)
    committed = {s.path for s in (metadata.write_stats() if metadata is not None else ())}
    deleted = 0
    stale: list[str] = []
    for partition, file_name, _io in list_markers(table.storage, table.base_path, instant):
        rel = rel_path(partition, file_name)
        if rel in committed:
            continue
        stale.append(join(table.base_path, rel))
        if table.storage.delete(stale[-1]):
            deleted += 1
    deleted += len(discard_partial_copies(table.storage, stale))   # stale tasks killed before the link
    delete_markers(table.storage, table.base_path, instant)
    return deleted


def all_stats(stats: StatsByPartition) -> list[WriteStat]:
    return [s for v in stats.values() for s in v]


def total(stats: Sequence[WriteStat], field: str) -> int:
    """Sum of one write-stat field over ``stats`` (absent counts as 0)."""
    return int(sum(getattr(s, field) or 0 for s in stats))


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


__all__ = ["Fence", "HEARTBEAT_INTERVAL_KEY", "HEARTBEAT_MISSES_KEY", "all_stats", "discard_stale_output",
           "heartbeat_settings", "pending_plan", "pending_plan_file_groups", "plans_on_timeline", "plural",
           "refuse_if_alive", "refuse_shared_file_groups", "run_plans", "schedule_plan", "total"]
