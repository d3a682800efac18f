"""Table version 6: another writer's instant at tablesvc's own instant time.

Hudi 0.x takes an instant time from its JVM's clock outside any lock
(``HoodieActiveTimeline.createNewInstantTime``) and never looks at storage for it, so a Hudi 0.15
writer beside tablesvc can take the very millisecond of an instant tablesvc took (under its lock)
a moment before.  On table version 6 the two then share more than the time:

* a completed log compaction and a completed write are both ``T.deltacommit``;
* the heartbeat ``.hoodie/.heartbeat/T`` and the marker folder ``.hoodie/.temp/T/`` are one path
  for both (Java's Spark writes list their markers in ``MARKERS<n>`` files there, which
  ``write.markers.list_markers`` reads as markers of T too).

tablesvc cannot tell its own heartbeat or marker folder from the other writer's, but it can tell
its own timeline files: only ``T.<its action>.requested`` and ``.inflight`` (plus, for a clean, a
rollback or a compaction, the completed file of that action when another tablesvc run finished
the same plan) are its own.  Any other file with time T is a foreign instant: a collision.

``NoForeignInstantAtOwnTime`` is the requirement that finds one, under the table lock, before a
start, before failed attempts' files are deleted and before the commit; it raises
``InstantTimeCollision`` (a ``ConflictError``: exit 3, retry later), on which the lifecycle
abandons its instant (``InstantLifecycle.abandon``: only the files it wrote itself, by exact name)
or, for a compaction, goes back to its plan (docs/interop.md, "Instant-time collisions").

A v6 commit also waits until the clock is ``V6_SETTLE_MS`` past its instant time before it takes
the lock (``settle_past_own_time``): a 0.x writer that took T just before tablesvc's commit
writes ``T.deltacommit.requested`` 50-200 ms after T in our runs, so by then it is on the
timeline for the check to see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tablesvc.errors import ConflictError, UnknownInstantError
from tablesvc.services.lifecycle.requirements import CommitRequirement
from timeline.active import Timeline
from timeline.clock import wait_past
from timeline.instant import Action, Instant, State
from timeline.instant_time import parse_instant, resolve_timezone
from timeline.storage import join

# How far past its instant time the clock must be before a v6 instant of tablesvc completes.
# Hudi 0.15's ``startCommit`` writes ``T.<action>.requested`` right after its heartbeat, tens to
# hundreds of milliseconds after it took T; 2 s covers that with room for a loaded JVM.
V6_SETTLE_MS = 2000


def own_file_names(timestamp: str, action: Action) -> frozenset[str]:
    """The timeline file names at ``timestamp`` that belong to tablesvc's instant of ``action``.

    A log compaction's completed file, ``T.deltacommit``, is not among them: that name is a 0.x
    write's too (``foreign_files_at`` tells them apart)."""
    names = {Instant(timestamp, action, state).file_name() for state in (State.REQUESTED, State.INFLIGHT)}
    if action is not Action.LOG_COMPACTION:
        names.add(Instant(timestamp, action.completed_action, State.COMPLETED).file_name())
    return frozenset(names)


def foreign_files_at(timeline: Timeline, timestamp: str, action: Action) -> tuple[Instant, ...]:
    """Timeline files at ``timestamp`` that tablesvc's instant of ``action`` did not write."""
    own = own_file_names(timestamp, action)
    files = timeline.files_of(timestamp)
    if action is Action.LOG_COMPACTION:
        # ``T.deltacommit`` completed this log compaction when its inflight file is there and no
        # delta commit was requested at T: a 0.x write leaves its requested and inflight files
        names = {f.file_name() for f in files}
        write = {Instant(timestamp, Action.DELTA_COMMIT, s).file_name() for s in (State.REQUESTED, State.INFLIGHT)}
        if Instant(timestamp, action, State.INFLIGHT).file_name() in names and not names & write:
            own = own | {Instant(timestamp, Action.DELTA_COMMIT, State.COMPLETED).file_name()}
    return tuple(f for f in files if f.file_name() not in own)


def still_pending(foreign: tuple[Instant, ...]) -> tuple[Instant, ...]:
    """The files of ``foreign`` whose action has no completed file among them (a write that
    completed leaves its requested and inflight files behind on table version 6)."""
    done = {f.action.completed_action for f in foreign if f.is_completed}
    return tuple(f for f in foreign if f.is_pending and f.action.completed_action not in done)


class InstantTimeCollision(ConflictError):
    """Another writer's instant has tablesvc's instant time (exit 3: retry later, with a new time)."""

    def __init__(self, label: str, timestamp: str, foreign: tuple[Instant, ...]):
        self.label = label
        self.timestamp = timestamp
        self.foreign_names = tuple(f.file_name() for f in foreign)
        self.foreign_pending = bool(still_pending(foreign))
        super().__init__(
            f"{label} {timestamp}: another writer's instant has the same time ({', '.join(self.foreign_names)}); "
            f"{label} {timestamp} is abandoned, its own files only; retry later")


@dataclass(frozen=True)
class NoForeignInstantAtOwnTime(CommitRequirement):
    """v6: no timeline file at the instant's time but the instant's own (``foreign_files_at``).

    ``pending_only``: only a pending foreign instant refuses (a compaction: once the other
    writer's instant completed, sharing the time no longer harms, see docs/interop.md)."""

    name: ClassVar[str] = "v6-own-instant-time"

    timestamp: str
    action: Action
    label: str
    pending_only: bool = False

    def describe(self) -> str:
        which = "no pending timeline file" if self.pending_only else "no timeline file"
        return (f"{which} of another writer has the time of {self.label} {self.timestamp} (a Hudi 0.x writer "
                "takes its instant time from its clock, outside the lock)")

    def check(self, table: Any, timeline: Timeline | None) -> None:
        assert timeline is not None
        foreign = foreign_files_at(timeline, self.timestamp, self.action)
        if self.pending_only:
            foreign = still_pending(foreign)
        if foreign:
            raise InstantTimeCollision(self.label, self.timestamp, foreign)


# The actions checked: the table services.  tablesvc's own write requests ``T.deltacommit.requested``,
# the very name a 0.x write of time T creates, which Hudi 0.15 creates only if it does not exist
# (``createImmutableFileInPath``): a 0.x write that takes the time of a tablesvc write fails at its start.
SERVICE_ACTIONS = (Action.LOG_COMPACTION, Action.COMPACTION, Action.CLEAN, Action.ROLLBACK)


def checks_collisions(table: Any, action: Action) -> bool:
    """Table version 6 and a service's action (Hudi 1.x, the writer of versions 8 and 9, takes its
    instant times under the table lock)."""
    return table.config.version < 8 and action in SERVICE_ACTIONS


def collision_requirements(table: Any, timestamp: str, action: Action, label: str) -> tuple[CommitRequirement, ...]:
    """``(NoForeignInstantAtOwnTime,)`` where ``checks_collisions``, else nothing."""
    if not checks_collisions(table, action):
        return ()
    return (NoForeignInstantAtOwnTime(timestamp, action, label, pending_only=action is Action.COMPACTION),)


def collided_plans(timeline: Timeline, action: Action) -> list[str]:
    """The times of ``action``'s requested plans that share their time with another writer's file.

    The timeline keeps one instant per action family and time: a log compaction plan
    (``T.logcompaction.requested``) beside a Hudi 0.x ``T.deltacommit.requested`` of the same
    family may show as the delta commit alone, so ``pending_log_compactions`` would not list it;
    the files tell."""
    requested = [f.timestamp for f in timeline.files if f.action is action and f.state is State.REQUESTED]
    # a plan started meanwhile is its run's to settle (its commit checks; a dead one: ``collided_plan``)
    started = {f.timestamp for f in timeline.files if f.action is action and f.state is State.INFLIGHT}
    return [t for t in requested if t not in started and foreign_files_at(timeline, t, action)]


def collided_plan(table: Any, timestamp: str, action: Action, label: str) -> Instant:
    """A v6 plan ``timestamp`` of ``action`` that shares its time with another writer's instant,
    settled under the table lock: raises ``InstantTimeCollision`` (exit 3) after deleting the plan's
    own requested file (a log compaction: nothing was written yet; the runner plans afresh with a
    new time), or keeps the plan and raises while the other instant is pending (a compaction: see
    ``_KEEP_PLAN_ON_COLLISION`` in ``instant_lifecycle.py``).  Returns the plan's own instant when
    it may go on: a compaction whose other instant completed, or a plan this time already completed.
    A plan of ours inflight beside a foreign instant (an attempt that died, or runs in another
    process, which checks for itself) is a ``ConflictError``: a rollback would take the other
    writer's markers in the shared marker folder for its own."""
    own_names = own_file_names(timestamp, action)
    with table.timeline_writer.lock():
        timeline = table.timeline()
        own = [f for f in timeline.files_of(timestamp) if f.file_name() in own_names]
        if not own:
            raise UnknownInstantError(f"no {label} {timestamp} on the timeline of {table.base_path}")
        best = max(own, key=lambda f: f.state.rank)
        foreign = foreign_files_at(timeline, timestamp, action)
        if action is Action.COMPACTION:
            foreign = still_pending(foreign)
        if best.is_completed or not foreign:
            return best
        if best.state is State.INFLIGHT:
            raise ConflictError(
                f"{label} {timestamp} is inflight and another writer's instant has the same time "
                f"({', '.join(f.file_name() for f in foreign)}): left as it is, since rolling it back would take "
                "that writer's markers for its own; retry once that instant completed")
        if action is not Action.COMPACTION:
            table.storage.delete(join(table.base_path, table.config.layout.timeline_dir, best.file_name()))
        raise InstantTimeCollision(label, timestamp, foreign)


def settle_past_own_time(table: Any, timestamp: str, action: Action) -> None:
    """Where ``checks_collisions``: return once the clock is ``V6_SETTLE_MS`` past ``timestamp``
    (see the module doc)."""
    if not checks_collisions(table, action):
        return
    wait_past(table.clock, parse_instant(timestamp, resolve_timezone(table.config.timezone)) + V6_SETTLE_MS)


__all__ = ["InstantTimeCollision", "NoForeignInstantAtOwnTime", "SERVICE_ACTIONS", "V6_SETTLE_MS", "checks_collisions", "collided_plan", "collided_plans",
           "collision_requirements", "foreign_files_at", "own_file_names", "settle_past_own_time", "still_pending"]
