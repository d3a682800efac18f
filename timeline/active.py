"""The active timeline: a snapshot of the instant files, and the queries over it.

A ``Timeline`` is immutable; reload it (``Timeline.load``) to see later changes.
Files are grouped per instant time and action family (compaction with commit,
log compaction with deltacommit, clustering with replacecommit) and the highest
state wins, the way Hudi's own loaders do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from timeline.errors import PayloadError, UnknownInstantError
from timeline.instant import Action, Instant, State, TimelineLayout
from timeline.storage import Storage, join

WRITE_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


def _family(action: Action) -> Action:
    return action.completed_action


def is_instant_file_name(name: str) -> bool:
    """Timeline files start with a digit; everything else in the folder (hoodie.properties,
    .aux, archived/, timeline/, our hidden temp files, …) is not an instant."""
    return bool(name) and name[0].isdigit()


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

    def __post_init__(self) -> None:
        best: dict[tuple[str, Action], Instant] = {}
        origin: dict[str, Action] = {}
        for f in self.files:
            key = (f.timestamp, _family(f.action))
            if f.is_pending:
                origin.setdefault(f.timestamp, f.action)
            cur = best.get(key)
            if cur is None or f.state.rank > cur.state.rank:
                best[key] = f
        object.__setattr__(self, "instants", tuple(sorted(best.values(), key=lambda i: i.sort_key)))
        object.__setattr__(self, "_origin", origin)
        by_time: dict[str, list[Instant]] = {}
        for i in self.instants:
            by_time.setdefault(i.timestamp, []).append(i)
        files_by_time: dict[str, list[Instant]] = {}
        for f in self.files:
            files_by_time.setdefault(f.timestamp, []).append(f)
        object.__setattr__(self, "_by_time", {k: tuple(v) for k, v in by_time.items()})
        object.__setattr__(self, "_files_by_time", {k: tuple(v) for k, v in files_by_time.items()})

    # -- loading ------------------------------------------------------------------------
    @classmethod
    def load(cls, storage: Storage, base_path: str, layout: TimelineLayout) -> "Timeline":
        folder = join(base_path, layout.timeline_dir)
        files = []
        for info in storage.list_dir(folder):
            if info.is_dir or not is_instant_file_name(info.name):
                continue
            files.append(Instant.parse(info.name, layout))
        return cls(base_path, layout, tuple(sorted(files, key=lambda i: (i.sort_key, i.action.value))))

    def path_of(self, instant: Instant) -> str:
        return join(self.base_path, self.layout.timeline_dir, instant.file_name())

    # -- lookups -----------------------------------------------------------------------
    def get(self, timestamp: str) -> Instant | None:
        """The instant at ``timestamp`` in its highest state (a non-rollback action first)."""
        found = self._by_time.get(timestamp)
        if not found:
            return None
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
        if origin is not None and _family(origin) is instant.action:
            return origin
        return instant.action

    # -- filtered views -------------------------------------------------------------------
    def filter(self, *, actions: Iterable[Action] | None = None, states: Iterable[State] | None = None,
               origins: Iterable[Action] | None = None) -> tuple[Instant, ...]:
        action_set = {a for a in actions} if actions is not None else None
        state_set = set(states) if states is not None else None
        origin_set = set(origins) if origins is not None else None
        out = []
        for i in self.instants:
            if state_set is not None and i.state not in state_set:
                continue
            if action_set is not None and i.action not in action_set and _family(i.action) not in action_set:
                continue
            if origin_set is not None and self.origin_action(i) not in origin_set:
                continue
            out.append(i)
        return tuple(out)

    def completed(self, *actions: Action) -> tuple[Instant, ...]:
        return self.filter(actions=actions or None, states=[State.COMPLETED])

    def pending(self, *actions: Action) -> tuple[Instant, ...]:
        return self.filter(actions=actions or None, states=[State.REQUESTED, State.INFLIGHT])

    def completed_writes(self) -> tuple[Instant, ...]:
        """Completed commit, deltacommit and replacecommit instants: those that make files visible."""
        return self.completed(*WRITE_ACTIONS)

    def pending_compactions(self) -> tuple[Instant, ...]:
        return tuple(i for i in self.pending() if i.action is Action.COMPACTION)

    def pending_log_compactions(self) -> tuple[Instant, ...]:
        return tuple(i for i in self.pending() if i.action is Action.LOG_COMPACTION)

    def latest_completed(self, *actions: Action) -> Instant | None:
        done = self.completed(*actions)
        return done[-1] if done else None

    def as_of(self, timestamp: str) -> "Timeline":
        """The timeline as a reader at ``timestamp`` sees it: instants requested at or before it.

        Time travel compares requested times, as hudi-rs does.
        """
        return Timeline(self.base_path, self.layout, tuple(f for f in self.files if f.timestamp <= timestamp))

    # -- times -------------------------------------------------------------------------
    def completion_times(self) -> dict[str, str]:
        """Requested time -> completion time for completed instants (layout 1: the requested time)."""
        return {i.timestamp: (i.completion_time or i.timestamp) for i in self.instants if i.is_completed}

    def is_completed(self, timestamp: str) -> bool:
        instant = self.get(timestamp)
        return instant is not None and instant.is_completed

    @property
    def start(self) -> str | None:
        """The first instant on the active timeline; anything older counts as archived."""
        return self.files[0].timestamp if self.files else None

    def is_committed_or_archived(self, timestamp: str) -> bool:
        """True when a file named with ``timestamp`` belongs to committed data.

        Instants older than the start of the active timeline were archived and are
        treated as committed, as Hudi does.
        """
        if self.is_completed(timestamp):
            return True
        start = self.start
        return start is not None and timestamp < start and self.get(timestamp) is None

    def max_time(self) -> str | None:
        """The greatest instant or completion time present; new times must exceed it."""
        times = [f.timestamp for f in self.files] + [f.completion_time for f in self.files if f.completion_time]
        return max(times) if times else None

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
        if requested not in self.files:
            raise UnknownInstantError(f"instant {instant.timestamp}: no {requested.file_name()} on the timeline")
        return self.payload(storage, requested)

    def commit_metadata(self, storage: Storage, instant: Instant):
        if not instant.is_completed:
            raise PayloadError(f"instant {instant.timestamp} is not completed; it has no commit metadata")
        return self.payload(storage, instant)

    def latest_schema(self, storage: Storage) -> str | None:
        """The table's Avro schema (without meta fields) from the latest completed write's metadata."""
        for instant in reversed(self.completed_writes()):
            md = self.commit_metadata(storage, instant)
            schema = (md.extra_metadata or {}).get("schema") if md is not None else None
            if schema:
                return schema
        return None

