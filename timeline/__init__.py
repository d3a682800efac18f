"""The lower floor: instants, layouts, plans and metadata payloads, atomic state transitions.

Nothing here imports Spark or tablesvc; storage and time come in through the small
interfaces in ``timeline.storage`` and ``timeline.clock``.
"""

from timeline.active import Timeline, WRITE_ACTIONS
from timeline.clock import Clock, ManualClock, SystemClock
from timeline.errors import (
    ConflictError, IllegalTransitionError, InstantExistsError, InvalidInputError, InvalidInstantError,
    LockHeldError, PayloadError, TablesvcError, TimelineError, UnknownInstantError,
)
from timeline.instant import Action, Instant, State, TimelineLayout, validate_instant_time
from timeline.instant_time import InstantTimeGenerator, format_instant, parse_instant, resolve_timezone
from timeline.lock import TableLock
from timeline.storage import FileInfo, Storage, join
from timeline.transitions import TimelineWriter, check_transition

__all__ = [
    "Action", "Clock", "ConflictError", "FileInfo", "IllegalTransitionError", "Instant", "InstantExistsError",
    "InstantTimeGenerator", "InvalidInputError", "InvalidInstantError", "LockHeldError", "ManualClock",
    "PayloadError", "State", "Storage", "SystemClock", "TableLock", "TablesvcError", "Timeline", "TimelineError",
    "TimelineLayout", "TimelineWriter", "UnknownInstantError", "WRITE_ACTIONS", "check_transition",
    "format_instant", "join", "parse_instant", "resolve_timezone", "validate_instant_time",
]
