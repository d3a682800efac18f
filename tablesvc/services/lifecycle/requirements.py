"""What must still hold when an instant moves: requirements as values, not closures.

A requirement is checked under the table lock, on the timeline as it is in that lock hold, right
before the transition it guards (a start, a commit, or deleting a failed attempt's files):
whatever was true when the work was planned may have changed while it ran.  Each is a frozen
value with a short stable ``name`` and a ``describe()`` in words, so that an action's
requirements can be listed, logged and tested (``tests/unit/test_lifecycle.py``); ``check`` raises
``ConflictError`` (exit 3, retry later), or the lease's ``LeaseLostError``, naming the instant
or the file at fault.

The requirements every action may use live here; an action's own live beside it
(``services/compaction/requirements.py``, ``services/log_compaction/requirements.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

from tablesvc.errors import ConflictError, UnsupportedTableError
from tablesvc.table.config import TableConfig
from tablesvc.table.properties import PROPS_FILE, read_properties
from tablesvc.table.writable import TableAction, keeps_metadata_table, metadata_table_refusal
from timeline.active import Timeline
from timeline.instant import Action, State
from timeline.storage import join

# A fence raises (``timeline.lease.LeaseLostError``) when the caller no longer owns the job;
# the async runner passes a ``timeline.lease.LeaseFence``, tests and other callers any callable.
Fence = Callable[[], None]


@dataclass(frozen=True)
class CommitRequirement:
    """One condition an instant's transition needs, re-checked under the table lock.

    ``name`` is a short stable id (logs, tests, docs/architecture.md's table); ``reads_timeline``
    False lets a lock hold that has not loaded the timeline skip loading it for this check."""

    name: ClassVar[str] = "requirement"
    reads_timeline: ClassVar[bool] = True

    def describe(self) -> str:
        raise NotImplementedError

    def check(self, table: Any, timeline: Timeline | None) -> None:
        """Raise when the requirement no longer holds; ``timeline`` is the one loaded under the
        lock (None only for requirements that do not read it)."""
        raise NotImplementedError

    @property
    def message(self) -> str:
        return self.describe()


def check_all(requirements: Sequence[CommitRequirement], table: Any, timeline: Timeline | None = None) -> None:
    """Check ``requirements`` in order (the caller holds the table lock).  The timeline is loaded
    at the first requirement that reads it, unless the caller passes the one it loaded."""
    for requirement in requirements:
        if timeline is None and requirement.reads_timeline:
            timeline = table.timeline()
        requirement.check(table, timeline)


def family_state(timeline: Timeline, timestamp: str, action: Action) -> State | None:
    """The state of the instant ``timestamp`` of ``action``'s family (its highest state file),
    or None when the timeline holds none."""
    family = action.completed_action
    states = [f.state for f in timeline.files_of(timestamp) if f.action.completed_action is family]
    return max(states, key=lambda s: s.rank) if states else None


@dataclass(frozen=True)
class LeaseHeld(CommitRequirement):
    """The async runner's worker still holds the job's lease: a worker whose lease was taken over
    (it stalled, the lease expired) must not start, complete or delete anything of the job."""

    name: ClassVar[str] = "lease-held"
    reads_timeline: ClassVar[bool] = False

    job: str | None
    token: int | None
    fence: Fence = field(compare=False, repr=False)

    @classmethod
    def of(cls, fence: Fence) -> "LeaseHeld":
        """The requirement of ``fence``; its job and token when it knows them (``LeaseFence``)."""
        return cls(getattr(fence, "job", None), getattr(fence, "token", None), fence)

    def describe(self) -> str:
        if self.job is None:
            return "the caller's fence passes: it still owns the job"
        return f"the lease of job {self.job} with token {self.token} is still the job's newest"

    def check(self, table: Any, timeline: Timeline | None) -> None:
        self.fence()


def lease_requirements(fence: Fence | None) -> tuple[CommitRequirement, ...]:
    """``(LeaseHeld,)`` for a caller with a fence, else nothing."""
    return () if fence is None else (LeaseHeld.of(fence),)


@dataclass(frozen=True)
class StillRequested(CommitRequirement):
    """A planned instant is still only requested: no other process started it meanwhile."""

    name: ClassVar[str] = "still-requested"

    timestamp: str
    label: str          # the action as messages name it ("compaction", "log compaction")
    # the planned action: its family's state is read, not the first instant at the time (on v6 a
    # Hudi 0.x write may have taken the same time: ``collisions.py``); None: the first instant
    action: Action | None = None

    def describe(self) -> str:
        return f"{self.label} {self.timestamp} is still requested: no other process has started it"

    def check(self, table: Any, timeline: Timeline | None) -> None:
        if timeline is None:
            state = None
        elif self.action is not None:
            state = family_state(timeline, self.timestamp, self.action)
        else:
            now = timeline.get(self.timestamp)
            state = now.state if now is not None else None
        if state is not State.REQUESTED:
            raise ConflictError(f"{self.label} {self.timestamp} is {state.value if state else 'gone'}, not "
                                "requested: another process took it; retry later")


@dataclass(frozen=True)
class StillInflight(CommitRequirement):
    """The instant is still inflight: nobody completed or rolled it back while the work ran.

    ``TimelineWriter.complete`` refuses any other state too; listing the requirement makes the
    commit decide from the timeline loaded under the lock (the full check), as a planned
    service's commit always has, and names it among the action's requirements."""

    name: ClassVar[str] = "still-inflight"

    timestamp: str
    action: Action
    label: str

    def describe(self) -> str:
        return f"{self.label} {self.timestamp} is still inflight: nobody completed or rolled it back meanwhile"

    def check(self, table: Any, timeline: Timeline | None) -> None:
        state = family_state(timeline, self.timestamp, self.action) if timeline is not None else None
        if state is not State.INFLIGHT:
            raise ConflictError(f"{self.label} {self.timestamp} is {state.value if state else 'gone'}, not "
                                "inflight: another process completed or rolled it back")


@dataclass(frozen=True)
class MetadataTableKept(CommitRequirement):
    """The metadata table is still one this commit may keep true (table versions 6, 8 and 9).

    What the command decided at ``Table.open`` (write the MDT or not, the refusal policy) may be
    stale by the commit: a Java writer may have initialised the metadata table or added a
    partition, or an async indexer may have put one in ``….inflight``.  So under the commit's lock
    ``hoodie.properties`` is read again, ``table.config`` replaced by what it says (the commit then
    decides from it whether to write the MDT), and ``table.writable``'s policy re-run for this
    action: a partition it would leave stale refuses (``UnsupportedTableError``, exit 2: retrying
    cannot help until the partition is dropped).  While an ``indexing`` instant is pending on the
    data timeline the commit is refused with ``ConflictError`` (exit 3, retry later): the indexer
    catches up from instants it saw when it planned, and Java's writers wait for it too."""

    name: ClassVar[str] = "metadata-table-kept"

    action: TableAction
    timestamp: str

    def describe(self) -> str:
        return (f"hoodie.properties read again: the metadata table's partitions allow {self.action.name} "
                f"{self.timestamp} and no indexing is pending")

    def check(self, table: Any, timeline: Timeline | None) -> None:
        before: TableConfig = table.config
        if before.version < 6:
            return
        props = read_properties(table.storage, table.base_path)
        if props != dict(before.props):
            table.config = TableConfig.from_properties(props, join(table.base_path, PROPS_FILE))
        refusal = metadata_table_refusal(table, self.action)
        if refusal is not None:
            raise UnsupportedTableError(f"{refusal} (found when committing {self.timestamp}; nothing committed)")
        indexing = timeline.pending(Action.INDEXING) if timeline is not None else ()
        if indexing and keeps_metadata_table(table.config):
            raise ConflictError(f"{table.base_path}: indexing {indexing[0].timestamp} is pending (an indexer is "
                                f"building metadata partitions); {self.action.name} {self.timestamp} not committed: "
                                "retry later")


__all__ = ["CommitRequirement", "Fence", "LeaseHeld", "MetadataTableKept", "StillInflight", "StillRequested",
           "check_all", "family_state", "lease_requirements"]
