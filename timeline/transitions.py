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

Cost on a long timeline (issue #6): ``start`` and a layout-1 ``complete`` decide from the few
file names of their timestamp (``exists``), never listing the folder; a layout-2 ``complete``
decides from the timeline this process last loaded plus the names created and deleted since,
as the kernel reports them (``Timeline.changed_since_load``, local file systems), else it loads
the timeline; everything else loads the timeline, which after the first load is one listing of
names plus the few files that changed (``Timeline.load`` keeps the last snapshot).  The rare
unusual state always takes the full path, so every refusal is the one a full load gives.
"""

from __future__ import annotations

from typing import Callable

from timeline.active import Timeline
from timeline.errors import IllegalTransitionError, InstantExistsError, InvalidInstantError
from timeline.instant import Action, Instant, State, TimelineLayout
from timeline.instant_time import InstantTimeGenerator
from timeline.lock import TableLock
from timeline.storage import Storage, join

_LEGAL = {
    (None, State.REQUESTED), (State.REQUESTED, State.INFLIGHT), (State.INFLIGHT, State.COMPLETED),
    (State.INFLIGHT, State.REQUESTED), (State.COMPLETED, State.INFLIGHT),
}


# action family (the completed action) -> the actions whose instants complete as it
_FAMILY_MEMBERS: dict[Action, tuple[Action, ...]] = {
    family: tuple(a for a in Action if a.completed_action is family)
    for family in {a.completed_action for a in Action}}


def check_transition(instant_ts: str, action: Action, current: State | None, target: State) -> None:
    legal = (current, target) in _LEGAL or (action is Action.SAVEPOINT and (current, target) == (None, State.INFLIGHT))
    if not legal:
        now = current.value if current else "absent"
        raise IllegalTransitionError(
            f"instant {instant_ts} ({action.value}): illegal transition {now} -> {target.value}")


def _fence(held) -> None:
    """The fence before a requested or completed instant file is written under the table lock: a lock
    that can tell it is no longer safely held (``StorageLock.ensure_held``: lost, or too near its
    ``validUntil``) raises ``LockHeldError`` (exit 3) here, before the file becomes visible.  The
    file-system ``TableLock`` has no such check (no expiry while its holder lives)."""
    check = getattr(held, "ensure_held", None)
    if check is not None:
        check()


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
        self._write_new(instant, payload)

    def _path(self, instant: Instant) -> str:
        return join(self.base_path, self.layout.timeline_dir, instant.file_name())   # = Timeline.path_of

    def _write_new(self, instant: Instant, payload: bytes) -> None:
        path = self._path(instant)
        try:
            self.storage.write_new(path, payload)
        except FileExistsError:
            raise InstantExistsError(f"timeline file {path} already exists") from None

    def _exists(self, timestamp: str, action: Action, state: State) -> bool:
        return self.storage.exists(self._path(Instant(timestamp, action, state)))

    def _start_allowed(self, timestamp: str, action: Action) -> bool:
        """Whether the full check would let ``start`` go ahead, from the few names it depends on:
        ``action``'s requested file exists and no inflight file of its family does.  The family's
        state is then requested, or completed where a completed file exists (a layout-2 one cannot
        be asked for by name: its completion time is in it); completed -> inflight is legal too
        (a rollback's first step), so the full check lets both through alike.  False sends the
        caller to the full check, for its own verdict."""
        if not action.has_requested_state or not self._exists(timestamp, action, State.REQUESTED):
            return False
        family = action.completed_action
        return not any(self._exists(timestamp, member, State.INFLIGHT) for member in _FAMILY_MEMBERS[family])

    # -- creation -----------------------------------------------------------------------
    def request(self, action: Action, payload: bytes = b"", timestamp: str | None = None, *,
                before_create: Callable[[str], None] | None = None) -> Instant:
        """Create a new instant in its first state; the time is generated unless given.

        The new time must be greater than every time on the timeline, so the check and
        the create happen under the table lock.  ``before_create(timestamp)`` runs under the
        lock once the time is chosen, before the file exists: a writer starts its heartbeat
        there, so no other process ever sees its instant without one (and takes it for a
        failed write to roll back).
        """
        with self.lock() as held:
            return self._create(self.load(), action, payload, timestamp, before_create, held=held)

    def request_built(self, action: Action, build: Callable[[Timeline], bytes | None],
                      timestamp: str | None = None, *, ahead_ms: int = 0) -> Instant | None:
        """Like ``request``, with the payload built by ``build(timeline)`` under the same lock
        hold, so a plan cannot miss an instant completed between listing and creating it.
        ``build`` returning None creates nothing (returns None).  The time is generated once the
        payload is built, ``ahead_ms`` ahead of the clock at least (``InstantTimeGenerator.next``)."""
        with self.lock() as held:
            timeline = self.load()
            payload = build(timeline)
            return None if payload is None else self._create(timeline, action, payload, timestamp,
                                                              ahead_ms=ahead_ms, held=held)

    def _create(self, timeline: Timeline, action: Action, payload: bytes, timestamp: str | None,
                before_create: Callable[[str], None] | None = None, ahead_ms: int = 0, held=None) -> Instant:
        latest = timeline.max_time()
        if timestamp is None:
            timestamp = self.generator.next(after=latest, ahead_ms=ahead_ms)
        elif timeline.files_of(timestamp):
            raise InstantExistsError(f"instant {timestamp} already exists on the timeline of {self.base_path}")
        elif latest is not None and timestamp <= latest:
            raise InvalidInstantError(f"instant {timestamp} is not after the latest time on the timeline ({latest})")
        first = State.INFLIGHT if action is Action.SAVEPOINT else State.REQUESTED
        check_transition(timestamp, action, None, first)
        instant = Instant(timestamp, action, first)
        if before_create is not None:
            before_create(timestamp)
        _fence(held)
        self._write(timeline, instant, payload)
        return instant

    def start(self, instant: Instant, payload: bytes = b"") -> Instant:
        """requested -> inflight.

        The usual case (the instant is requested) is checked by name (``_start_allowed``),
        without listing the timeline; the create is exclusive either way, so of two racing
        starts one fails with ``InstantExistsError``, as before."""
        if self._start_allowed(instant.timestamp, instant.action):
            inflight = Instant(instant.timestamp, instant.action, State.INFLIGHT)
            self._write_new(inflight, payload)
            return inflight
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
        with self.lock() as held:
            if precheck is None and self.layout is TimelineLayout.V1 and self._only_inflight_v1(instant):
                done = Instant(instant.timestamp, instant.action.completed_action, State.COMPLETED)
                _fence(held)
                self._write_new(done, payload)
                return done
            if precheck is None and self.layout is TimelineLayout.V2:
                after = self._inflight_v2_and_latest(instant)
                if after is not None:
                    done = Instant(instant.timestamp, instant.action.completed_action, State.COMPLETED,
                                   self.generator.next(after=after))
                    _fence(held)
                    self._write_new(done, payload)
                    return done
            # Layout 2 needs the folder: the instant's completed file, if another process wrote
            # one, has an unknown name (its completion time), and the new completion time must
            # exceed every time on the timeline.  The load is one listing of names plus the few
            # files that changed since the last one (the snapshot keeps the greatest time).
            timeline = self.load()
            current = self._current(timeline, instant.timestamp, instant.action)
            check_transition(instant.timestamp, instant.action, current.state if current else None, State.COMPLETED)
            if precheck is not None:
                precheck(timeline)
            completion = None
            if self.layout is TimelineLayout.V2:
                completion = self.generator.next(after=timeline.max_time())
            done = Instant(instant.timestamp, instant.action.completed_action, State.COMPLETED, completion)
            _fence(held)
            self._write(timeline, done, payload)
            return done

    def _only_inflight_v1(self, instant: Instant) -> bool:
        """Layout 1, under the lock: ``instant``'s inflight file exists and its family's completed
        file (``T.<action>``, a known name in layout 1) does not, so it is inflight.  Layout 1
        has no completion time to choose, hence nothing else to look at."""
        return (self._exists(instant.timestamp, instant.action, State.INFLIGHT)
                and not self._exists(instant.timestamp, instant.action.completed_action, State.COMPLETED))

    def _inflight_v2_and_latest(self, instant: Instant) -> str | None:
        """Layout 2, under the lock, without listing: the greatest time on the timeline when
        ``instant`` is inflight (what the full check needs: its family's files, and that time),
        told by the timeline this process last loaded plus the names created and deleted in the
        folder since (``Timeline.changed_since_load``: kernel change events, any process's);
        None when those are not known exactly or the instant is not plainly inflight: the caller
        then takes the full path, for its own verdict."""
        known = Timeline.changed_since_load(self.storage, self.base_path, self.layout)
        if known is None:
            return None
        timeline, changes = known
        ts, family = instant.timestamp, instant.action.completed_action
        files = {f.file_name(): f for f in timeline.files_of(ts)}
        latest = timeline.max_time()
        for name, present in changes.items():
            if not present:
                files.pop(name, None)   # a time that left the timeline may stay in ``latest``: still safe
                continue
            try:
                added = Instant.parse(name, self.layout)
            except InvalidInstantError:   # the full load refuses it, worded as always
                return None
            if added.timestamp == ts:
                files[name] = added
            for t in (added.timestamp, added.completion_time):
                if t is not None and (latest is None or t > latest):
                    latest = t
        same = [f for f in files.values() if f.action.completed_action is family]
        current = max(same, key=lambda f: f.state.rank) if same else None
        if current is None or current.state is not State.INFLIGHT:
            return None
        return latest

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
