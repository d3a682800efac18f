"""How each action's instant lives: the few choices the actions differ by, as values.

Everything else (request, start, commit under the lock after the requirements, abort) is the
one lifecycle in ``instant_lifecycle.py``; an action picks its ``LifecycleRules`` here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tablesvc.table.writable import CLEAN, COMPACT, LOG_COMPACT, ROLLBACK, WRITE, TableAction
from timeline.instant import Action


class Start(enum.Enum):
    """How requested becomes inflight."""

    FRESH = "fresh"                            # just requested by this process (the write): start it
    # a plan another process may run too (compaction, log compaction): under the table lock the
    # start requirements and ``StillRequested`` are checked, then the instant starts
    IF_STILL_REQUESTED = "if-still-requested"
    # a plan whose every step is idempotent (clean, rollback): started when requested, taken as it
    # is when inflight (a re-run resumes it), left to the caller when found completed
    RESUME = "resume"


class RacingStart(enum.Enum):
    """What a start that loses a race (the inflight file exists already) does."""

    RAISE = "raise"          # the timeline's own error goes up (write, rollback)
    CONFLICT = "conflict"    # ConflictError naming the instant: retry later (compaction, log compaction)
    JOIN = "join"            # go on beside the other process: the work is idempotent (clean)


class HeartbeatFrom(enum.Enum):
    """When the instant's heartbeat starts; it stops when the run ends, however it ends."""

    NONE = "none"                        # no heartbeat (clean: deletes only what its plan lists)
    BEFORE_REQUEST = "before-request"    # under the lock, before the requested file exists (the write)
    WITH_START = "with-start"            # under the lock, right before the start (compaction, log compaction)
    BEFORE_START = "before-start"        # before the state is read, outside the lock (rollback)


class Markers(enum.Enum):
    """Whether the action writes files after markers, and when its marker folder goes."""

    NONE = "none"                        # writes no markers (clean, rollback)
    AT_COMMIT = "at-commit"              # right after the commit, while the heartbeat still beats
    AFTER_HEARTBEAT = "after-heartbeat"  # after the commit, once the heartbeat has stopped (the write)


class OnFailure(enum.Enum):
    """What a run that raises leaves behind."""

    ABORT = "abort"                      # undo it now: marked files, markers, the pending instant (the write)
    LEAVE_INFLIGHT = "leave-inflight"    # stays pending without a heartbeat: rolled back or resumed later


class CompletedElsewhere(enum.Enum):
    """What a commit that finds the instant completed by another process does."""

    FAILS = "fails"                      # the timeline's error goes up
    IS_FINE = "is-fine"                  # the commit returns None: the same plan was finished (clean, rollback)


@dataclass(frozen=True)
class LifecycleRules:
    action: Action                      # the action the instant is requested as
    label: str                          # the action as messages name it
    start: Start
    racing_start: RacingStart
    heartbeat: HeartbeatFrom
    markers: Markers
    on_failure: OnFailure
    completed_elsewhere: CompletedElsewhere
    # what the commit does to the table, for the refusal policy re-checked under the commit's lock
    # (``requirements.MetadataTableKept``); None: not re-checked
    table_action: TableAction | None = None


# One value per action (docs/architecture.md, "One instant lifecycle", has them as a table).
WRITE_LIFECYCLE = LifecycleRules(
    Action.DELTA_COMMIT, "write", Start.FRESH, RacingStart.RAISE, HeartbeatFrom.BEFORE_REQUEST,
    Markers.AFTER_HEARTBEAT, OnFailure.ABORT, CompletedElsewhere.FAILS, WRITE)
COMPACTION_LIFECYCLE = LifecycleRules(
    Action.COMPACTION, "compaction", Start.IF_STILL_REQUESTED, RacingStart.CONFLICT, HeartbeatFrom.WITH_START,
    Markers.AT_COMMIT, OnFailure.LEAVE_INFLIGHT, CompletedElsewhere.FAILS, COMPACT)
LOG_COMPACTION_LIFECYCLE = LifecycleRules(
    Action.LOG_COMPACTION, "log compaction", Start.IF_STILL_REQUESTED, RacingStart.CONFLICT,
    HeartbeatFrom.WITH_START, Markers.AT_COMMIT, OnFailure.LEAVE_INFLIGHT, CompletedElsewhere.FAILS, LOG_COMPACT)
CLEAN_LIFECYCLE = LifecycleRules(
    Action.CLEAN, "clean", Start.RESUME, RacingStart.JOIN, HeartbeatFrom.NONE, Markers.NONE,
    OnFailure.LEAVE_INFLIGHT, CompletedElsewhere.IS_FINE, CLEAN)
ROLLBACK_LIFECYCLE = LifecycleRules(
    Action.ROLLBACK, "rollback", Start.RESUME, RacingStart.RAISE, HeartbeatFrom.BEFORE_START, Markers.NONE,
    OnFailure.LEAVE_INFLIGHT, CompletedElsewhere.IS_FINE, ROLLBACK)

__all__ = ["CLEAN_LIFECYCLE", "COMPACTION_LIFECYCLE", "CompletedElsewhere", "HeartbeatFrom", "LOG_COMPACTION_LIFECYCLE",
           "LifecycleRules", "Markers", "OnFailure", "ROLLBACK_LIFECYCLE", "RacingStart", "Start", "WRITE_LIFECYCLE"]
