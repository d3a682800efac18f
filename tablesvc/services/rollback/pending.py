"""Pending instants as the recovery sweep sees them: which ones it rolls back, and why it leaves
the others alone.

``classify_pending`` is the one decision.  ``rollback_failed`` (and a writer's eager pass) roll
back exactly the instants it calls ``FAILED``.  ``tablesvc rollback`` reports the ones it calls
``HEARTBEAT_ALIVE`` or ``ROLLBACK_RUNNING`` as left pending (exit 3), and ``tablesvc status``
shows every verdict.  So the report and the rollback cannot disagree.

| pending instant | verdict |
|---|---|
| one that a pending rollback ``R`` targets | ``FAILED`` once R's heartbeat expired (the sweep resumes R), else ``ROLLBACK_RUNNING`` |
| a write (deltacommit, commit, replacecommit), requested or inflight | ``FAILED`` once its heartbeat expired, else ``HEARTBEAT_ALIVE`` |
| a compaction or log compaction, inflight | the same as a write |
| a compaction or log compaction, requested only | ``PLAN_WAITING``: it wrote nothing, and its plan is waiting to be executed |
| a pending rollback whose target is not pending | by its own heartbeat: ``FAILED`` or ``ROLLBACK_RUNNING`` |
| anything else (clean, clustering, ...) | ``NOT_SWEPT``: left to its own command |

Expiry is ``timeline.heartbeat.judged_dead`` on ``table.clock``, with a window of
``hoodie.client.heartbeat.interval_in_ms`` x ``hoodie.client.heartbeat.tolerable.misses``.
A missing heartbeat file counts as expired.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from tablesvc.config.values import service_config
from timeline.active import Timeline
from timeline.errors import UnknownInstantError
from timeline.heartbeat import judged_dead, last_beat_ms
from timeline.instant import Action, Instant, State
from timeline.payloads import RollbackPlan

INTERVAL_KEY = "hoodie.client.heartbeat.interval_in_ms"
MISSES_KEY = "hoodie.client.heartbeat.tolerable.misses"
WRITE_ACTIONS = (Action.DELTA_COMMIT, Action.COMMIT, Action.REPLACE_COMMIT)
TABLE_SERVICE_ACTIONS = (Action.COMPACTION, Action.LOG_COMPACTION)


@dataclass(frozen=True)
class HeartbeatWindow:
    """How long after its last beat a process is judged dead."""

    interval_ms: int
    misses: int

    @classmethod
    def of(cls, config) -> "HeartbeatWindow":
        config = service_config(config)   # a plain mapping is checked by the registry too
        return cls(config.get(INTERVAL_KEY), config.get(MISSES_KEY))

    @property
    def window_ms(self) -> int:
        return self.interval_ms * self.misses


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f}"


@dataclass(frozen=True)
class Liveness:
    """One instant's heartbeat file as read at ``now_ms``."""

    last_beat_ms: int | None
    now_ms: int
    window_ms: int

    @classmethod
    def read(cls, table, timestamp: str, window: HeartbeatWindow) -> "Liveness":
        return cls(last_beat_ms(table.storage, table.base_path, timestamp), table.clock.now_ms(), window.window_ms)

    @property
    def expired(self) -> bool:
        return judged_dead(self.last_beat_ms, self.now_ms, self.window_ms)

    @property
    def age_ms(self) -> int | None:
        return None if self.last_beat_ms is None else self.now_ms - self.last_beat_ms

    @property
    def dead_in_ms(self) -> int:
        """How long until it is judged dead: 0 once it is (dead means *more* than the window old)."""
        return 0 if self.expired else self.window_ms - self.age_ms + 1

    def describe(self) -> str:
        if self.last_beat_ms is None:
            return "no heartbeat file"
        if self.expired:
            return f"last beat {_seconds(self.age_ms)} s ago, judged dead after {_seconds(self.window_ms)} s"
        return f"last beat {_seconds(self.age_ms)} s ago, judged dead in {_seconds(self.dead_in_ms)} s"


class Verdict(enum.Enum):
    FAILED = "failed"                        # its process died: the sweep rolls it back (or resumes its rollback)
    HEARTBEAT_ALIVE = "heartbeat_alive"      # its process is running: left alone, retry later
    ROLLBACK_RUNNING = "rollback_running"    # another process is rolling it back: left alone, retry later
    PLAN_WAITING = "plan_waiting"            # a requested compaction / log compaction plan: not failed
    NOT_SWEPT = "not_swept"                  # clean, clustering, ...: not the sweep's to undo


@dataclass(frozen=True)
class PendingInstant:
    """One pending instant with the sweep's verdict on it."""

    instant: Instant                    # a rollback instant only when what it rolls back is not pending
    action: Action                      # the action it was requested as
    verdict: Verdict
    heartbeat: Liveness | None = None   # the one that decides: a pending rollback's if any, else its own
    rollback: Instant | None = None     # the pending rollback of it (itself, for a rollback instant)
    rolls_back: str | None = None       # for a rollback instant: the instant it rolls back
    rollback_plan: RollbackPlan | None = field(default=None, compare=False, repr=False)

    @property
    def left_for_recovery(self) -> bool:
        """Pending because a process is still at work on it: the reason for exit 3 (retry later)."""
        return self.verdict in (Verdict.HEARTBEAT_ALIVE, Verdict.ROLLBACK_RUNNING)

    def reason(self) -> str:
        beat = self.heartbeat.describe() if self.heartbeat is not None else ""
        v = self.verdict
        if self.rolls_back is not None:      # a pending rollback whose target is not pending
            if v is Verdict.FAILED:
                return f"rollback of {self.rolls_back} whose process died ({beat}): the sweep finishes it"
            return f"rolls back {self.rolls_back}, still running: {beat}"
        if v is Verdict.FAILED and self.rollback is not None:
            return f"failed: rollback {self.rollback.timestamp} of it died ({beat}): the sweep finishes it"
        if v is Verdict.FAILED:
            return f"failed: heartbeat expired ({beat}): tablesvc rollback rolls it back"
        if v is Verdict.HEARTBEAT_ALIVE:
            return f"heartbeat alive: {beat}"
        if v is Verdict.ROLLBACK_RUNNING:
            return f"rollback {self.rollback.timestamp} of it is running: {beat}"
        if v is Verdict.PLAN_WAITING:
            return "a plan waiting to be executed (not failed)"
        if self.action is Action.CLEAN:
            return "a clean plan: the next clean finishes it"
        if self.action is Action.ROLLBACK:
            return "a rollback without a readable plan: left alone"
        if self.action is Action.CLUSTERING:
            return f"not rolled back by the sweep (only with --instant {self.instant.timestamp})"
        return "not an action rollback undoes: left alone"

    def render(self) -> str:
        return f"{self.instant.timestamp} {self.action.value} ({self.instant.state.value}): {self.reason()}"

    def as_dict(self) -> dict[str, Any]:
        hb = self.heartbeat
        return {"instant": self.instant.timestamp, "action": self.action.value, "state": self.instant.state.value,
                "verdict": self.verdict.value, "reason": self.reason(),
                "last_beat_s_ago": round(hb.age_ms / 1000, 1) if hb is not None and hb.age_ms is not None else None,
                "dead_in_s": round(hb.dead_in_ms / 1000, 1) if hb is not None else None,
                "rollback": self.rollback.timestamp if self.rollback is not None else None,
                "rolls_back": self.rolls_back}


def rollback_plans(table, timeline: Timeline, *, pending_only: bool = False) -> list[tuple[Instant, RollbackPlan]]:
    """Rollback instants on the timeline with their plans (oldest first)."""
    out = []
    rollbacks = timeline.pending(Action.ROLLBACK) if pending_only else timeline.filter(actions=[Action.ROLLBACK])
    for r in rollbacks:
        try:
            plan = timeline.plan_of(table.storage, r)
        except UnknownInstantError:
            continue  # a completed rollback whose requested file is gone: no plan to match
        if isinstance(plan, RollbackPlan):
            out.append((r, plan))
    return out


def target_of(plan: RollbackPlan) -> str | None:
    return plan.instant_to_rollback.commit_time if plan.instant_to_rollback else None


def classify_pending(table, window: HeartbeatWindow, timeline: Timeline | None = None) -> tuple[PendingInstant, ...]:
    """Every pending instant of ``timeline`` (default: the table's now), oldest first, with the
    sweep's verdict; a pending rollback appears with its target, or alone if that is not pending."""
    timeline = timeline if timeline is not None else table.timeline()
    pending = timeline.pending()
    targets = {i.timestamp for i in pending if i.action is not Action.ROLLBACK}
    plans = rollback_plans(table, timeline, pending_only=True)
    plan_of = {r.timestamp: plan for r, plan in plans}
    running: dict[str, tuple[Instant, RollbackPlan]] = {}
    for r, plan in plans:
        t = target_of(plan)
        if t is not None:
            running.setdefault(t, (r, plan))   # at most one per target (a pending one is resumed, never doubled)
    out = []
    for instant in pending:
        if instant.action is Action.ROLLBACK:
            plan = plan_of.get(instant.timestamp)
            if plan is None or target_of(plan) is None:
                out.append(PendingInstant(instant, Action.ROLLBACK, Verdict.NOT_SWEPT))
            elif target_of(plan) not in targets:
                beat = Liveness.read(table, instant.timestamp, window)
                out.append(PendingInstant(instant, Action.ROLLBACK,
                                          Verdict.FAILED if beat.expired else Verdict.ROLLBACK_RUNNING, beat,
                                          rollback=instant, rolls_back=target_of(plan), rollback_plan=plan))
            continue   # else reported with its target, below
        origin = timeline.origin_action(instant)
        if instant.timestamp in running:
            r, plan = running[instant.timestamp]
            beat = Liveness.read(table, r.timestamp, window)
            out.append(PendingInstant(instant, origin, Verdict.FAILED if beat.expired else Verdict.ROLLBACK_RUNNING,
                                      beat, rollback=r, rollback_plan=plan))
        elif origin not in WRITE_ACTIONS and origin not in TABLE_SERVICE_ACTIONS:
            out.append(PendingInstant(instant, origin, Verdict.NOT_SWEPT))
        elif origin in TABLE_SERVICE_ACTIONS and instant.state is State.REQUESTED:
            out.append(PendingInstant(instant, origin, Verdict.PLAN_WAITING))
        else:
            beat = Liveness.read(table, instant.timestamp, window)
            out.append(PendingInstant(instant, origin, Verdict.FAILED if beat.expired else Verdict.HEARTBEAT_ALIVE,
                                      beat))
    return tuple(out)


def pending_instants(table, config=None, timeline: Timeline | None = None) -> tuple[PendingInstant, ...]:
    """``classify_pending`` with the heartbeat window of ``config`` (default: the table's)."""
    if config is None:
        from tablesvc.config import load_config

        config = load_config(table.storage, table_path=table.base_path)
    return classify_pending(table, HeartbeatWindow.of(config), timeline)


__all__ = ["HeartbeatWindow", "Liveness", "PendingInstant", "TABLE_SERVICE_ACTIONS", "Verdict", "WRITE_ACTIONS",
           "classify_pending", "pending_instants", "rollback_plans", "target_of"]
