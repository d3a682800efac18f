"""The runner's jobs: what is pending on a table's timeline, as units of work a worker can lease.

A job is one pending instant of a table service, or one failed write to roll back:

| kind | from | executed by |
|---|---|---|
| ``rollback`` | a pending write (deltacommit/commit/replacecommit) whose heartbeat expired | ``services.rollback.rollback`` |
| ``logcompaction`` | a pending ``logcompaction`` plan | ``services.log_compaction.run_log_compaction`` |
| ``compaction`` | a pending ``compaction`` plan | ``services.compaction.run_compaction`` |
| ``clean`` | a pending ``clean`` plan | ``services.clean.finish_pending_cleans`` |

Smaller jobs go first: rollbacks (they unblock scheduling), then log compactions, then
compactions, then cleans; within a kind, fewer bytes first, then the older instant.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tablesvc.services.lifecycle.collisions import collided_plans
from timeline.active import Timeline
from timeline.heartbeat import last_beat_ms
from timeline.instant import Action, Instant, State
from timeline.instant_time import parse_instant, resolve_timezone

WRITE_ACTIONS = (Action.DELTA_COMMIT, Action.COMMIT, Action.REPLACE_COMMIT)


class JobKind(enum.Enum):
    ROLLBACK = "rollback"
    LOG_COMPACTION = "logcompaction"
    COMPACTION = "compaction"
    CLEAN = "clean"

    @property
    def priority(self) -> int:
        return list(JobKind).index(self)


@dataclass(frozen=True)
class Job:
    """One unit of leased work: ``kind`` on ``instant`` of the table at ``base_path``."""

    base_path: str
    kind: JobKind
    instant: str
    state: str           # the instant's state when the job was found
    size_bytes: int = 0  # planned input bytes (log files for compactions); 0 when unknown

    @property
    def id(self) -> str:
        """The lease key: unique per table, never reused (instant times are unique)."""
        return f"{self.kind.value}-{self.instant}"

    def sort_key(self) -> tuple:
        return (self.kind.priority, self.size_bytes, self.instant)

    def as_dict(self) -> dict:
        return {"job": self.id, "kind": self.kind.value, "instant": self.instant, "state": self.state,
                "bytes": self.size_bytes}


def _plan_bytes(table, timeline: Timeline, instant) -> int:
    try:
        plan = timeline.plan_of(table.storage, instant)
    except Exception:  # an unreadable plan still is a job; its executor reports the error
        return 0
    return int(sum((op.metrics or {}).get("TOTAL_LOG_FILES_SIZE", 0) for op in plan.operations or ()))


def write_failed(table, instant: Instant, heartbeat_interval_ms: int, heartbeat_misses: int) -> bool:
    """Whether a pending write belongs to a dead process: its heartbeat is older than the expiry
    window, or it has none although it was requested longer than that window ago.

    tablesvc's writer beats before its requested file exists, but a writer that beats only after
    requesting (tablesvc before this was found by the soak run; other implementations) has a
    moment with an instant and no beat: counting that as dead rolled back live writes (a runner
    waiting for the lock got it right after the request and found no beat)."""
    window_ms = heartbeat_interval_ms * heartbeat_misses
    now_ms = table.clock.now_ms()
    beat = last_beat_ms(table.storage, table.base_path, instant.timestamp)
    if beat is not None:
        return now_ms - beat > window_ms
    requested_ms = parse_instant(instant.timestamp, resolve_timezone(table.config.timezone))
    return now_ms - requested_ms > window_ms


def pending_jobs(table, timeline: Timeline, heartbeat_interval_ms: int, heartbeat_misses: int) -> list[Job]:
    """Every job on ``timeline``, in the order workers take them.

    Pending writes count only once they failed (``write_failed``: a live writer owns them);
    pending plans are jobs in any state: the executor itself refuses an inflight plan whose
    heartbeat is alive, and recovers a dead one."""
    jobs: list[Job] = []
    for instant in timeline.pending():
        origin = timeline.origin_action(instant)
        kind = {Action.COMPACTION: JobKind.COMPACTION, Action.LOG_COMPACTION: JobKind.LOG_COMPACTION,
                Action.CLEAN: JobKind.CLEAN}.get(origin)
        if kind is not None:
            size = _plan_bytes(table, timeline, instant) if kind is not JobKind.CLEAN else 0
            jobs.append(Job(table.base_path, kind, instant.timestamp, instant.state.value, size))
        elif origin in WRITE_ACTIONS and write_failed(table, instant, heartbeat_interval_ms, heartbeat_misses):
            jobs.append(Job(table.base_path, JobKind.ROLLBACK, instant.timestamp, instant.state.value))
    if table.config.version < 8:
        # v6: a log compaction plan whose time a Hudi 0.x write took shows as that write (one instant per
        # family and time); its job gives the plan up (services/lifecycle/collisions.py)
        listed = {j.instant for j in jobs if j.kind is JobKind.LOG_COMPACTION}
        jobs += [Job(table.base_path, JobKind.LOG_COMPACTION, t, State.REQUESTED.value, 0)
                 for t in collided_plans(timeline, Action.LOG_COMPACTION) if t not in listed]
    return sorted(jobs, key=Job.sort_key)


def is_pending(timeline: Timeline, job: Job) -> bool:
    """Whether ``job`` still has work: its instant is still pending on ``timeline``."""
    instant = timeline.get(job.instant)
    return instant is not None and instant.state is not State.COMPLETED


__all__ = ["Job", "JobKind", "WRITE_ACTIONS", "is_pending", "pending_jobs", "write_failed"]
