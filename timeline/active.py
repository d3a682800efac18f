"""The active timeline: a snapshot of the instant files, and the queries over it.

A ``Timeline`` is immutable; reload it (``Timeline.load``) to see later changes.
Files are grouped per instant time and action family (compaction with commit,
log compaction with deltacommit, clustering with replacecommit) and the highest
state wins, the way Hudi's own loaders do.
"""

from __future__ import annotations

import gc
import threading
from bisect import bisect_left, bisect_right
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Callable, Iterable, Iterator, Sequence

from timeline.errors import PayloadError, UnknownInstantError
from timeline.instant import Action, Instant, State, TimelineLayout, instant_suffixes
from timeline.storage import Storage, join
from timeline.watch import Watch, unwatch, watch_folder, watchable

WRITE_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
# Hudi's write timeline (commits, delta commits, replace commits, compaction, log compaction,
# clustering, in any state): where the active timeline "starts" for files and log blocks.  Cleans
# and rollbacks are archived on a schedule of their own (Hudi 0.x keeps its own min/max count for
# them), so an old clean may stay active while the commits after it went to the archive.
_TIMELINE_START_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION,
                                     Action.LOG_COMPACTION, Action.CLUSTERING})

# Plain dict lookups instead of enum properties: these run once per timeline file per load.
_FAMILY = {a: a.completed_action for a in Action}
_RANK = {s: s.rank for s in State}
_COMPLETED = State.COMPLETED
_PENDING_STATES = (State.REQUESTED, State.INFLIGHT)


def _outranks(state: State, other: State) -> bool:
    """state.rank > other.rank, by identity (requested < inflight < completed)."""
    return state is not other and (state is _COMPLETED or (state is State.INFLIGHT and other is State.REQUESTED))


def _rank_of(instant: Instant) -> int:
    return _RANK[instant.state]


_timestamp_of = attrgetter("timestamp")


def _max_of(a: str | None, b: str | None) -> str | None:
    return max(a, b) if a and b else a or b


def _max_time_of(files: Iterable[Instant]) -> str | None:
    """The greatest requested or completion time among ``files``."""
    latest = None
    for f in files:
        latest = _max_of(_max_of(latest, f.timestamp), f.completion_time)
    return latest


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run a loop that makes one long-lived object per file (a timeline of 30k files, a view of
    100k data files) without the cyclic garbage collector.  Nothing there forms a cycle, yet the
    collector would walk the growing heap over and over as the objects pile up: a third to a half
    of such a load's time (issue #6 profile).  It resumes as it was, errors included."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def is_instant_file_name(name: str) -> bool:
    """Timeline files start with a digit; everything else in the folder (hoodie.properties,
    .aux, archived/, timeline/, our hidden temp files, …) is not an instant."""
    return bool(name) and name[0].isdigit()


Entry = tuple[tuple[str, int, str, str], Instant]
_instant_of = itemgetter(1)


def _sort_entry(name: str, layout: TimelineLayout) -> Entry:
    """(sort key, instant) of one timeline file name (``Instant.parse`` caches the parsing).
    The key orders files by time, state and action, then by name: the order the loader always
    produced (a stable sort of the listing, which came sorted by name), as plain tuples so that
    sorting calls no Python code."""
    instant = Instant.parse(name, layout)
    return (instant.timestamp, _RANK[instant.state], instant.action._value_, name), instant


def _listed_entries(names: list[str], layout: TimelineLayout) -> list[Entry]:
    """``_sort_entry`` of every instant file name of a listing.  A cold load of 30k names spent
    most of its time parsing: names with a 17-digit time are cut here by position and their
    suffix looked up (``instant_suffixes``), the rest go through ``_sort_entry``."""
    rank, out = _RANK, []
    append = out.append
    suffixes = instant_suffixes(layout)
    new, set_fields = object.__new__, object.__setattr__
    for name in names:
        if not name[:1].isdigit():     # is_instant_file_name
            continue
        if name[17:18] == "_":
            completion, suffix = name[18:35], name[35:]
            found = suffixes.get((suffix, True)) if len(completion) == 17 and completion.isdecimal() else None
        else:
            completion, suffix = None, name[17:]
            found = suffixes.get((suffix, False))
        timestamp = name[:17]
        if found is None or len(timestamp) != 17 or not timestamp.isdecimal():
            append(_sort_entry(name, layout))
            continue
        action, state = found
        instant = new(Instant)   # the fields the generated __init__ sets, already valid
        set_fields(instant, "__dict__", {"timestamp": timestamp, "action": action, "state": state,
                                         "completion_time": completion})
        append(((timestamp, rank[state], action._value_, name), instant))
    return out


def _entries_at(entries: list[Entry], timestamp: str) -> slice:
    """Where the files of ``timestamp`` lie in sorted ``entries`` ((ts,) sorts before every key
    of ts and (ts, 3) after them: a rank is at most 2)."""
    return slice(bisect_left(entries, ((timestamp,),)), bisect_left(entries, ((timestamp, 3),)))


def _summarize(files: Iterable[Instant]) -> tuple[tuple[Instant, ...], Action | None]:
    """For the files of one timestamp, in timeline order: (its instants: the highest state per
    action family, ordered by state, ties in the order the families first appear; the action
    the time was requested as: that of its first pending file, None when none is pending)."""
    if type(files) is tuple and 1 < len(files) <= 3:
        # The usual time: requested, inflight (and completed) of one action family, in that
        # order; then the last file wins and the first names the origin (what the loop below
        # gives, without a dict per time: a cold load summarizes 10k times at the issue #6 scale).
        a, b = files[0], files[1]
        c = files[2] if len(files) == 3 else None
        if (a.state is State.REQUESTED and b.state is State.INFLIGHT and _FAMILY[a.action] is _FAMILY[b.action]
                and (c is None or (c.state is _COMPLETED and _FAMILY[c.action] is _FAMILY[a.action]))):
            return ((c or b),), a.action
    best: dict[Action, Instant] = {}
    origin = None
    for f in files:
        if origin is None and f.state is not _COMPLETED:
            origin = f.action
        family = _FAMILY[f.action]
        cur = best.get(family)
        if cur is None or _outranks(f.state, cur.state):
            best[family] = f
    group = tuple(best.values())
    return (tuple(sorted(group, key=_rank_of)) if len(group) > 1 else group), origin


@dataclass(frozen=True)
class _Snapshot:
    """One loaded listing: its names, its sorted entries and the Timeline made of them."""

    names: list[str]
    name_set: set[str]
    entries: list[Entry]
    timeline: "Timeline"

    @classmethod
    def build(cls, base_path: str, layout: TimelineLayout, names: list[str]) -> "_Snapshot":
        with gc_paused():
            entries = _listed_entries(names, layout)
            entries.sort()   # keys are unique (the name is part of them): no Instant is ever compared
            return cls(list(names), set(names), entries,
                       Timeline(base_path, layout, tuple(map(_instant_of, entries))))

    def updated(self, names: list[str]) -> "_Snapshot | None":
        """This snapshot moved on to the listing ``names``, re-summarizing only the timestamps
        whose files changed (the usual step: a transition or two since the last load); None
        when most of the folder changed (building afresh is then as cheap)."""
        name_set = set(names)                     # set operations run in C: the folder is long
        added = sorted(name_set - self.name_set)
        removed = [] if len(names) == len(self.names) + len(added) else sorted(self.name_set - name_set)
        if 8 * (len(added) + len(removed)) > len(self.names) + 8:
            return None
        layout = self.timeline.layout
        entries, files = list(self.entries), self.timeline.files   # files: entries' instants, kept aligned
        changed: set[str] = set()
        for name in removed:
            if is_instant_file_name(name):
                key, instant = _sort_entry(name, layout)
                at = bisect_left(entries, (key,))
                del entries[at]
                files = files[:at] + files[at + 1:]
                changed.add(instant.timestamp)
        for name in added:
            if is_instant_file_name(name):
                entry = _sort_entry(name, layout)
                at = bisect_left(entries, entry)
                entries.insert(at, entry)
                files = files[:at] + (entry[1],) + files[at:]
                changed.add(entry[1].timestamp)
        timeline = self.timeline
        if changed:
            groups = {ts: tuple(map(_instant_of, entries[_entries_at(entries, ts)])) for ts in changed}
            timeline = timeline._derived(files, groups, files_removed=bool(removed))
        return _Snapshot(list(names), name_set, entries, timeline)


# The last timeline loaded per (base path, layout).  A Timeline is a pure function of the names
# in its folder: a listing equal to the last one gives the same (immutable) object back, and one
# that differs by a few files derives the new Timeline from the last one.  Loading a long timeline
# again is then one listing and one comparison (services load the timeline several times per
# operation; writers and the runner come back to the same table).  Bounded: a process serving
# many tables keeps the latest few.
_SNAPSHOTS: dict[tuple[str, TimelineLayout], _Snapshot] = {}
_MAX_SNAPSHOTS = 16
_SNAPSHOTS_LOCK = threading.Lock()   # a runner's threads may load at once (reads need no lock)


def _remember(key: tuple[str, TimelineLayout], snapshot: _Snapshot) -> None:
    with _SNAPSHOTS_LOCK:
        _SNAPSHOTS.pop(key, None)
        while len(_SNAPSHOTS) >= _MAX_SNAPSHOTS:
            _SNAPSHOTS.pop(next(iter(_SNAPSHOTS)))   # the least recently loaded table
        _SNAPSHOTS[key] = snapshot


# The watched timeline folders of this process (timeline.watch), at most as many as snapshots.
_WATCHES: dict[str, Watch] = {}


def _watch_of(storage: Storage, folder: str) -> Watch | None:
    """The watch on ``folder``, set up on first use; None when it cannot be watched."""
    if not watchable(storage):
        return None
    with _SNAPSHOTS_LOCK:
        watch = _WATCHES.get(folder)
        if watch is not None and watch.usable:
            return watch
        if watch is not None:
            del _WATCHES[folder]
            unwatch(watch)
        while len(_WATCHES) >= _MAX_SNAPSHOTS:
            unwatch(_WATCHES.pop(next(iter(_WATCHES))))
        watch = watch_folder(folder)
        if watch is not None:
            _WATCHES[folder] = watch
        return watch


@dataclass(frozen=True)
class Timeline:
    base_path: str
    layout: TimelineLayout
    files: tuple[Instant, ...]
    instants: tuple[Instant, ...] = field(init=False)
    _origin: dict[str, Action] = field(init=False, repr=False, compare=False)
    # By timestamp, for O(1) lookups: planners ask for every log file's instant (issue #6 profile)
    _by_time: dict[str, tuple[Instant, ...]] = field(init=False, repr=False, compare=False)
    _files_by_time: dict[str, tuple[Instant, ...]] = field(init=False, repr=False, compare=False)
    # filter() results: the timeline never changes, and planners ask the same questions repeatedly
    _memo: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Files grouped per time, then per time the highest state per action family and the
        # action the time was requested as; the instants are the groups in time order.
        files_by_time: dict[str, list[Instant]] = {}
        for f in self.files:
            same_time = files_by_time.get(f.timestamp)
            if same_time is None:
                files_by_time[f.timestamp] = [f]
            else:
                same_time.append(f)
        as_tuples = {k: tuple(v) for k, v in files_by_time.items()}
        by_time: dict[str, tuple[Instant, ...]] = {}
        origin: dict[str, Action] = {}
        for ts in sorted(as_tuples):
            by_time[ts], first = _summarize(as_tuples[ts])
            if first is not None:
                origin[ts] = first
        self._set(tuple(chain.from_iterable(by_time.values())), origin, by_time, as_tuples)

    def _set(self, instants, origin, by_time, files_by_time) -> None:
        object.__setattr__(self, "instants", instants)
        object.__setattr__(self, "_origin", origin)
        object.__setattr__(self, "_by_time", by_time)
        object.__setattr__(self, "_files_by_time", files_by_time)
        object.__setattr__(self, "_memo", {})

    def _derived(self, files: tuple[Instant, ...], changed: dict[str, tuple[Instant, ...]], *,
                 files_removed: bool) -> "Timeline":
        """The timeline whose files are ``files``: these ones' except at the timestamps in
        ``changed`` (each mapped to its new files, in order; empty when gone).  Only those
        times are summarized again; the rest is copied (what __post_init__ would compute)."""
        by_time, origin, files_by_time = dict(self._by_time), dict(self._origin), dict(self._files_by_time)
        for ts, same_time in changed.items():
            by_time.pop(ts, None)
            origin.pop(ts, None)
            files_by_time.pop(ts, None)
            if same_time:
                files_by_time[ts] = same_time
                by_time[ts], first = _summarize(same_time)
                if first is not None:
                    origin[ts] = first
        ordered = sorted(changed)
        new = object.__new__(Timeline)
        object.__setattr__(new, "base_path", self.base_path)
        object.__setattr__(new, "layout", self.layout)
        object.__setattr__(new, "files", files)
        new._set(tuple(chain.from_iterable(self._spliced(self.instants, ordered, lambda ts: by_time.get(ts, ())))),
                 origin, by_time, files_by_time)
        self._derive_cached(new, ordered, by_time, files_removed)
        return new

    def _spliced(self, seq, ordered: list[str], replacement: Callable[[str], Sequence]) -> list[Sequence]:
        """``seq`` (``instants`` or a sequence aligned with it) in pieces, its part at each time
        in ``ordered`` (ascending) replaced by ``replacement(time)``: slices, no per-item work."""
        pieces, done, times = [], 0, self._times
        for ts in ordered:
            at = bisect_left(times, ts, done)
            pieces += [seq[done:at], replacement(ts)]
            done = bisect_right(times, ts, at)
        pieces.append(seq[done:])
        return pieces

    def _derive_cached(self, new: "Timeline", ordered: list[str], by_time: dict[str, tuple[Instant, ...]],
                       files_removed: bool) -> None:
        """Carry this timeline's derived values that were computed over to ``new``, updated at
        the changed times only (else ``new`` computes them on first use, walking every instant)."""
        known, changed = self.__dict__, set(ordered)
        regrouped = [i for ts in ordered for i in by_time.get(ts, ())]
        if "_times" in known:
            new.__dict__["_times"] = list(chain.from_iterable(
                self._spliced(self._times, ordered, lambda ts: [ts] * len(by_time.get(ts, ())))))
        if "_pending" in known:
            # kept in instants order: sorting by time is stable and each time's instants come
            # from one source, already in order
            pending = [i for i in self._pending if i.timestamp not in changed]
            pending += [i for i in regrouped if i.state is not _COMPLETED]
            new.__dict__["_pending"] = tuple(sorted(pending, key=_timestamp_of))
        if "_completion_times" in known:
            completion = dict(self._completion_times)
            for ts in ordered:
                completion.pop(ts, None)
            completion.update((i.timestamp, i.completion_time or i.timestamp) for i in regrouped
                              if i.state is _COMPLETED)
            new.__dict__["_completion_times"] = completion
        if "_max_time" in known and not files_removed:   # times only grew
            new.__dict__["_max_time"] = _max_of(self._max_time, _max_time_of(
                f for ts in ordered for f in new.files_of(ts)))

    # -- loading ------------------------------------------------------------------------
    @classmethod
    def load(cls, storage: Storage, base_path: str, layout: TimelineLayout) -> "Timeline":
        """The timeline as the folder shows it now: one listing of names (no per-file ``stat``)."""
        folder = join(base_path, layout.timeline_dir)
        watch = _watch_of(storage, folder)
        token = watch.reset() if watch is not None else 0   # before listing: see Watch.reset
        timeline = cls.from_names(base_path, layout, storage.list_names(folder))
        if watch is not None:
            watch.set_baseline(token, timeline)
        return timeline

    @classmethod
    def changed_since_load(cls, storage: Storage, base_path: str,
                           layout: TimelineLayout) -> "tuple[Timeline, dict[str, bool]] | None":
        """(the timeline this process last loaded from the folder, each timeline file name created
        (True) or deleted (False) since, by any process on this machine), without listing; None
        when that cannot be known exactly (``timeline.watch``): load the timeline instead."""
        folder = join(base_path, layout.timeline_dir)
        watch = _WATCHES.get(folder)
        if watch is None or not watchable(storage):
            return None
        found = watch.changes()
        if found is None:
            return None
        timeline, changes = found
        return timeline, {n: present for n, present in changes.items() if is_instant_file_name(n)}

    @classmethod
    def from_names(cls, base_path: str, layout: TimelineLayout, names: list[str]) -> "Timeline":
        """The timeline of a listing of the timeline folder (``Storage.list_names``)."""
        key = (base_path, layout)
        known = _SNAPSHOTS.get(key)
        if known is not None and known.names == names:
            return known.timeline
        snapshot = known.updated(names) if known is not None else None
        if snapshot is None:
            snapshot = _Snapshot.build(base_path, layout, names)
        _remember(key, snapshot)
        return snapshot.timeline

    def path_of(self, instant: Instant) -> str:
        return join(self.base_path, self.layout.timeline_dir, instant.file_name())

    # -- lookups -----------------------------------------------------------------------
    def get(self, timestamp: str) -> Instant | None:
        """The instant at ``timestamp`` in its highest state (a non-rollback action first)."""
        found = self._by_time.get(timestamp)
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        return max(found, key=lambda i: (i.state.rank, i.action is not Action.ROLLBACK))

    def require(self, timestamp: str) -> Instant:
        instant = self.get(timestamp)
        if instant is None:
            raise UnknownInstantError(f"instant {timestamp} is not on the timeline of {self.base_path}")
        return instant

    def files_of(self, timestamp: str) -> tuple[Instant, ...]:
        return self._files_by_time.get(timestamp, ())

    def origin_action(self, instant: Instant) -> Action:
        """The action an instant was requested as: a completed ``commit`` may be a compaction."""
        if instant.is_pending:
            return instant.action
        origin = self._origin.get(instant.timestamp)
        if origin is not None and _FAMILY[origin] is instant.action:
            return origin
        return instant.action

    # -- filtered views -------------------------------------------------------------------
    def filter(self, *, actions: Iterable[Action] | None = None, states: Iterable[State] | None = None,
               origins: Iterable[Action] | None = None) -> tuple[Instant, ...]:
        action_set = frozenset(actions) if actions is not None else None
        state_set = frozenset(states) if states is not None else None
        origin_set = frozenset(origins) if origins is not None else None
        key = (action_set, state_set, origin_set)
        found = self._memo.get(key)
        if found is None:
            # Only pending instants can match a pending-only filter: they are few.
            pool = self._pending if state_set is not None and _COMPLETED not in state_set else self.instants
            found = tuple(i for i in pool if _matches(self, i, action_set, state_set, origin_set))
            self._memo[key] = found
        return found

    def completed(self, *actions: Action) -> tuple[Instant, ...]:
        return self.filter(actions=actions or None, states=[State.COMPLETED])

    def pending(self, *actions: Action) -> tuple[Instant, ...]:
        return self.filter(actions=actions or None, states=_PENDING_STATES)

    def completed_writes(self) -> tuple[Instant, ...]:
        """Completed commit, deltacommit and replacecommit instants: those that make files visible."""
        return self.completed(*WRITE_ACTIONS)

    def pending_compactions(self) -> tuple[Instant, ...]:
        return tuple(i for i in self._pending if i.action is Action.COMPACTION)

    def pending_log_compactions(self) -> tuple[Instant, ...]:
        return tuple(i for i in self._pending if i.action is Action.LOG_COMPACTION)

    def latest_completed(self, *actions: Action) -> Instant | None:
        action_set = frozenset(actions) if actions else None
        return next((i for i in reversed(self.instants) if i.state is _COMPLETED
                     and _matches(self, i, action_set, None, None)), None)

    def newest_first(self, after: str | None = None) -> Iterator[Instant]:
        """Instants from the newest back, stopping at ``after`` (exclusive) when given: questions
        about recent history (the last compaction, commits since it) cost what they look at, not
        the length of the timeline."""
        for i in reversed(self.instants):
            if after is not None and i.timestamp <= after:
                return
            yield i

    def position(self, timestamp: str) -> int:
        """Index in ``instants`` of the first instant requested at or after ``timestamp``
        (``instants`` is ordered by requested time): windows of the timeline by bisection."""
        return bisect_left(self._times, timestamp)

    def as_of(self, timestamp: str) -> "Timeline":
        """The timeline as a reader at ``timestamp`` sees it: instants requested at or before it.

        Time travel compares requested times, as hudi-rs does.
        """
        return Timeline(self.base_path, self.layout, tuple(f for f in self.files if f.timestamp <= timestamp))

    # -- times -------------------------------------------------------------------------
    def completion_times(self) -> dict[str, str]:
        """Requested time -> completion time for completed instants (layout 1: the requested time)."""
        return dict(self._completion_times)

    def is_completed(self, timestamp: str) -> bool:
        return timestamp in self._completion_times

    @cached_property
    def start(self) -> str | None:
        """Where the active timeline starts, as Hudi's ``isBeforeTimelineStarts`` judges it: the
        first instant of a write action (any state) that is not a savepointed commit.  A file or
        block named with an older instant that is not on the timeline was archived, hence committed.
        Not the first instant of all: a clean or rollback older than the archived commits may stay
        on the active timeline (seen with Hudi 0.15's archival, tests/interop_java/test_archived_timeline.py)."""
        savepoints = {i.timestamp for i in self.instants if i.action is Action.SAVEPOINT}
        return next((i.timestamp for i in self.instants
                     if i.action in _TIMELINE_START_ACTIONS and i.timestamp not in savepoints), None)

    def is_committed_or_archived(self, timestamp: str) -> bool:
        """True when a file named with ``timestamp`` belongs to committed data.

        Instants older than the start of the active timeline were archived and are
        treated as committed, as Hudi does.
        """
        if timestamp in self._completion_times:
            return True
        start = self.start
        return start is not None and timestamp < start and timestamp not in self._by_time

    def max_time(self) -> str | None:
        """The greatest instant or completion time present; new times must exceed it."""
        return self._max_time

    # -- derived once, on first use ----------------------------------------------------------
    @cached_property
    def _pending(self) -> tuple[Instant, ...]:
        return tuple(i for i in self.instants if i.state is not _COMPLETED)

    @cached_property
    def _completion_times(self) -> dict[str, str]:
        return {i.timestamp: (i.completion_time or i.timestamp) for i in self.instants if i.state is _COMPLETED}

    @cached_property
    def _times(self) -> list[str]:
        return [i.timestamp for i in self.instants]

    @cached_property
    def _max_time(self) -> str | None:
        latest = max((f.timestamp for f in self.files), default=None)
        done = max((f.completion_time for f in self.files if f.completion_time), default=None)
        return _max_of(latest, done)

    # -- payloads --------------------------------------------------------------------------
    def read_bytes(self, storage: Storage, instant: Instant) -> bytes:
        try:
            return storage.read_bytes(self.path_of(instant))
        except FileNotFoundError:
            raise UnknownInstantError(f"timeline file {self.path_of(instant)} disappeared") from None

    def payload(self, storage: Storage, instant: Instant):
        """The decoded plan or metadata of one timeline file (see ``timeline.payloads``)."""
        from timeline.payloads import decode_payload

        return decode_payload(instant, self.read_bytes(storage, instant), self.layout, self.path_of(instant))

    def plan_of(self, storage: Storage, instant: Instant):
        """The plan of a planned action, read from its ``.requested`` file (plans never change)."""
        action = self.origin_action(instant)
        requested = Instant(instant.timestamp, action, State.REQUESTED)
        if requested not in self.files_of(instant.timestamp):
            raise UnknownInstantError(f"instant {instant.timestamp}: no {requested.file_name()} on the timeline")
        return self.payload(storage, requested)

    def commit_metadata(self, storage: Storage, instant: Instant):
        if not instant.is_completed:
            raise PayloadError(f"instant {instant.timestamp} is not completed; it has no commit metadata")
        return self.payload(storage, instant)

    def latest_schema(self, storage: Storage) -> str | None:
        """The table's Avro schema (without meta fields) from the latest completed write's metadata."""
        for instant in self.newest_first():
            if instant.state is not _COMPLETED or not _matches(self, instant, _WRITE_SET, None, None):
                continue
            md = self.commit_metadata(storage, instant)
            schema = (md.extra_metadata or {}).get("schema") if md is not None else None
            if schema:
                return schema
        return None


_WRITE_SET = frozenset(WRITE_ACTIONS)


def _matches(timeline: Timeline, i: Instant, actions: frozenset | None, states: frozenset | None,
             origins: frozenset | None) -> bool:
    """``Timeline.filter``'s test for one instant (an action matches itself or its family)."""
    if states is not None and i.state not in states:
        return False
    if actions is not None and i.action not in actions and _FAMILY[i.action] not in actions:
        return False
    return origins is None or timeline.origin_action(i) in origins
