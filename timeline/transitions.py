"""Atomic, durable instant state transitions.

Every step is one file created (exclusively, whole or not at all) or deleted, so a
process killed at any point leaves the timeline in a state the table services
understand: a requested or inflight instant, later rolled back or resumed.

Legal moves::

    (none)    -> requested      request()        (savepoint: (none) -> inflight)
    requested -> inflight       start()
    inflight  -> completed      complete()       under the table lock (layout 2 picks the completion time)
    inflight  -> requested      revert_to_requested()   re-running a compaction from its plan
    completed -> inflight       revert_to_inflight()    first step of rolling back a completed instant
    pending   -> (none)         remove_pending()        last step of a rollback

Anything else raises ``IllegalTransitionError`` and touches nothing.
"""

from __future__ import annotations

from typing import Callable

from timeline.active import Timeline
from timeline.errors import IllegalTransitionError, InstantExistsError, InvalidInstantError
from timeline.instant import Action, Instant, State, TimelineLayout
from timeline.instant_time import InstantTimeGenerator
from timeline.lock import TableLock
from timeline.storage import Storage

_LEGAL = {
    (None, State.REQUESTED), (State.REQUESTED, State.INFLIGHT), (State.INFLIGHT, State.COMPLETED),
    (State.INFLIGHT, State.REQUESTED), (State.COMPLETED, State.INFLIGHT),
}


def check_transition(instant_ts: str, action: Action, current: State | None, target: State) -> None:
    legal = (current, target) in _LEGAL or (action is Action.SAVEPOINT and (current, target) == (None, State.INFLIGHT))
    if not legal:
        now = current.value if current else "absent"
        raise IllegalTransitionError(
            f"instant {instant_ts} ({action.value}): illegal transition {now} -> {target.value}")


class TimelineWriter:
    """Moves instants of one table through their states."""

    def __init__(self, storage: Storage, base_path: str, layout: TimelineLayout,
                 generator: InstantTimeGenerator, lock_factory: Callable[[], TableLock]):
        self.storage = storage
        self.base_path = base_path
        self.layout = layout
        self.generator = generator
        self._lock_factory = lock_factory

    def load(self) -> Timeline:
        return Timeline.load(self.storage, self.base_path, self.layout)

    def lock(self) -> TableLock:
        return self._lock_factory()

    def _current(self, timeline: Timeline, timestamp: str, action: Action) -> Instant | None:
        family = action.completed_action
        same = [f for f in timeline.files_of(timestamp) if f.action.completed_action is family]
        return max(same, key=lambda f: f.state.rank) if same else None

    def _write(self, timeline: Timeline, instant: Instant, payload: bytes) -> None:
        try:
            self.storage.write_new(timeline.path_of(instant), payload)
        except FileExistsError:
            raise InstantExistsError(f"timeline file {timeline.path_of(instant)} already exists") from None

    # -- creation -----------------------------------------------------------------------
    def request(self, action: Action, payload: bytes = b"", timestamp: str | None = None) -> Instant:
        """Create a new instant in its first state; the time is generated unless given.

        The new time must be greater than every time on the timeline, so the check and
        the create happen under the table lock.
        """
        with self.lock():
            return self._create(self.load(), action, payload, timestamp)

    def request_built(self, action: Action, build: Callable[[Timeline], bytes | None],
                      timestamp: str | None = None) -> Instant | None:
        """Like ``request``, with the payload built by ``build(timeline)`` under the same lock
        hold, so a plan cannot miss an instant completed between listing and creating it.
        ``build`` returning None creates nothing (returns None)."""
        with self.lock():
            timeline = self.load()
            payload = build(timeline)
            return None if payload is None else self._create(timeline, action, payload, timestamp)

    def _create(self, timeline: Timeline, action: Action, payload: bytes, timestamp: str | None) -> Instant:
        latest = timeline.max_time()
        if timestamp is None:
            timestamp = self.generator.next(after=latest)
        elif timeline.files_of(timestamp):
            raise InstantExistsError(f"instant {timestamp} already exists on the timeline of {self.base_path}")
        elif latest is not None and timestamp <= latest:
            raise InvalidInstantError(f"instant {timestamp} is not after the latest time on the timeline ({latest})")
        first = State.INFLIGHT if action is Action.SAVEPOINT else State.REQUESTED
        check_transition(timestamp, action, None, first)
        instant = Instant(timestamp, action, first)
        self._write(timeline, instant, payload)
        return instant

    def start(self, instant: Instant, payload: bytes = b"") -> Instant:
        """requested -> inflight."""
        timeline = self.load()
        current = self._current(timeline, instant.timestamp, instant.action)
        check_transition(instant.timestamp, instant.action, current.state if current else None, State.INFLIGHT)
        inflight = Instant(instant.timestamp, instant.action, State.INFLIGHT)
        self._write(timeline, inflight, payload)
        return inflight

    def complete(self, instant: Instant, payload: bytes,
                 precheck: Callable[[Timeline], None] | None = None) -> Instant:
        """inflight -> completed, under the table lock.

        ``precheck`` sees the timeline as it is under the lock and raises to refuse the
        commit (a conflict found after the work was done).  Layout 2 takes a completion
        time greater than every time on the timeline.
        """
        with self.lock():
            timeline = self.load()
            current = self._current(timeline, instant.timestamp, instant.action)
            check_transition(instant.timestamp, instant.action, current.state if current else None, State.COMPLETED)
            if precheck is not None:
                precheck(timeline)
            completion = None
            if self.layout is TimelineLayout.V2:
                completion = self.generator.next(after=timeline.max_time())
            done = Instant(instant.timestamp, instant.action.completed_action, State.COMPLETED, completion)
            self._write(timeline, done, payload)
            return done

    # -- undoing ------------------------------------------------------------------------
    def revert_to_requested(self, instant: Instant) -> Instant:
        """inflight -> requested: delete the inflight file; the plan in .requested stays."""
        timeline = self.load()
        current = self._current(timeline, instant.timestamp, instant.action)
        check_transition(instant.timestamp, instant.action, current.state if current else None, State.REQUESTED)
        inflight = Instant(instant.timestamp, current.action, State.INFLIGHT)  # type: ignore[union-attr]
        self.storage.delete(timeline.path_of(inflight))
        return Instant(instant.timestamp, current.action, State.REQUESTED)  # type: ignore[union-attr]

    def revert_to_inflight(self, instant: Instant) -> Instant:
        """completed -> inflight: delete the completed file (rolling back a completed instant)."""
        timeline = self.load()
        current = self._current(timeline, instant.timestamp, instant.action)
        check_transition(instant.timestamp, instant.action, current.state if current else None, State.INFLIGHT)
        assert current is not None
        pending_action = timeline.origin_action(current)
        inflight = Instant(instant.timestamp, pending_action, State.INFLIGHT)
        if inflight not in timeline.files:
            self._write(timeline, inflight, b"")
        self.storage.delete(timeline.path_of(current))
        return inflight

    def remove_pending(self, instant: Instant) -> None:
        """Delete the inflight, then the requested file of a pending instant.

        A crash in between leaves only the requested file: still pending, and
        removing it again finishes the job.
        """
        timeline = self.load()
        files = [f for f in timeline.files_of(instant.timestamp)
                 if f.action.completed_action is instant.action.completed_action]
        if any(f.is_completed for f in files):
            raise IllegalTransitionError(f"instant {instant.timestamp} is completed; revert it to inflight first")
        for f in sorted(files, key=lambda f: -f.state.rank):
            self.storage.delete(timeline.path_of(f))
