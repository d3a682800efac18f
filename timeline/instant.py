"""Instants: frozen values that round-trip exactly to timeline file names.

Two layouts exist on disk:

* layout 1 (table version 6): every file in ``.hoodie/``; a completed instant is
  ``<T>.<action>``.
* layout 2 (table versions 8, 9): every file in ``.hoodie/timeline/``; a completed
  instant is ``<T>_<C>.<action>`` where ``C`` is its completion time.

In both, pending files are ``<T>.<action>.requested`` / ``<T>.<action>.inflight``,
except the inflight commit, which is the bare ``<T>.inflight``, and savepoints,
which have no requested file.  Compaction and log compaction complete as
``commit`` / ``deltacommit``; clustering completes as ``replacecommit``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from functools import lru_cache

from timeline.errors import InvalidInstantError

# yyyyMMddHHmmss[SSS], and the metadata table's version-6 suffixed times (a 17-digit time and
# three more digits: <T>001 compaction, <T>002 clean, <R>006 rollback, ...; Hudi 0.x writers),
# suffixed once more when the time they suffix already was: Hudi 0.15 initialises a partition of
# an existing metadata table at <T>010 and its compaction / clean after it are <T>010001 / <T>010002
# (HoodieTableMetadataUtil.createCompactionTimestamp appends to any time; 23 digits)
_TIME = re.compile(r"^\d{14}(\d{3}){0,3}$")


class Action(enum.Enum):
    """Timeline actions with their exact wire strings."""

    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    REPLACE_COMMIT = "replacecommit"
    CLUSTERING = "clustering"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"
    SCHEMA_COMMIT = "schemacommit"

    # Members are singletons compared by identity: hash them by identity too (C speed).  Enum's
    # default hashes the name in Python, which showed up in every timeline load (issue #6).
    __hash__ = object.__hash__

    @classmethod
    def parse(cls, text: str, file_name: str = "") -> "Action":
        try:
            return cls(text)
        except ValueError:
            where = f" in timeline file {file_name!r}" if file_name else ""
            raise InvalidInstantError(f"unknown action {text!r}{where}") from None

    @property
    def completed_action(self) -> "Action":
        """The action written in the completed file name (compaction completes as commit, …)."""
        return _COMPLETES_AS.get(self, self)

    @property
    def has_requested_state(self) -> bool:
        return self is not Action.SAVEPOINT

    @property
    def is_write(self) -> bool:
        """Actions whose completed instant makes data files visible to readers."""
        return self in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


_COMPLETES_AS = {
    Action.COMPACTION: Action.COMMIT,
    Action.LOG_COMPACTION: Action.DELTA_COMMIT,
    Action.CLUSTERING: Action.REPLACE_COMMIT,
}
# Actions that never appear in a completed file name.
_PENDING_ONLY = frozenset(_COMPLETES_AS)


class State(enum.Enum):
    """Instant states, ordered requested < inflight < completed."""

    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"

    __hash__ = object.__hash__   # as Action's

    @property
    def rank(self) -> int:
        return _STATE_RANK[self]


_STATE_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}


class TimelineLayout(enum.Enum):
    """Timeline layout version, as ``hoodie.timeline.layout.version`` spells it."""

    V1 = 1
    V2 = 2

    __hash__ = object.__hash__   # as Action's

    @property
    def timeline_dir(self) -> str:
        """Directory of the active timeline, relative to the table's base path."""
        return ".hoodie" if self is TimelineLayout.V1 else ".hoodie/timeline"

    @classmethod
    def for_table_version(cls, table_version: int) -> "TimelineLayout":
        return cls.V1 if table_version < 8 else cls.V2


def validate_instant_time(text: str, what: str = "instant time") -> str:
    """Check ``yyyyMMddHHmmss[SSS]``; return the text unchanged."""
    if not _TIME.match(text or ""):
        raise InvalidInstantError(f"invalid {what} {text!r}: expected 17 digits yyyyMMddHHmmssSSS "
                                   "(or 20 or 23, a suffixed metadata-table time)")
    return text


@dataclass(frozen=True)
class Instant:
    """One timeline file, as a value.

    ``action`` is the action spelled in the file name: a completed compaction is a
    ``commit`` instant whose requested/inflight siblings say ``compaction``.
    ``completion_time`` is set only for completed instants of layout 2.
    """

    timestamp: str
    action: Action
    state: State
    completion_time: str | None = None

    def __post_init__(self) -> None:
        validate_instant_time(self.timestamp)
        if self.completion_time is not None:
            validate_instant_time(self.completion_time, "completion time")
            if self.state is not State.COMPLETED:
                raise InvalidInstantError(
                    f"instant {self.timestamp}: only completed instants carry a completion time")
        if self.state is State.COMPLETED and self.action in _PENDING_ONLY:
            raise InvalidInstantError(
                f"instant {self.timestamp}: {self.action.value} completes as "
                f"{self.action.completed_action.value}, never as itself")
        if self.state is State.REQUESTED and not self.action.has_requested_state:
            raise InvalidInstantError(f"instant {self.timestamp}: {self.action.value} has no requested state")

    # -- file names -----------------------------------------------------------------
    @classmethod
    def parse(cls, file_name: str, layout: TimelineLayout | None = None) -> "Instant":
        """Parse a timeline file name; ``layout`` (when given) is enforced.

        Results are cached per (name, layout): an ``Instant`` is immutable, and every load of
        a long timeline parses the same tens of thousands of names again (issue #6).
        """
        return _parse_cached(file_name, layout)

    @classmethod
    def _parse_checked(cls, file_name: str, layout: TimelineLayout | None) -> "Instant":
        """The reference parser: every rule checked one by one, with the exact error."""
        head, dot, rest = file_name.partition(".")
        if not dot or not rest:
            raise InvalidInstantError(f"malformed timeline file name {file_name!r}")
        timestamp, _, completion = head.partition("_")
        if not _TIME.match(timestamp) or ("_" in head and not _TIME.match(completion)):
            raise InvalidInstantError(f"malformed instant time in timeline file name {file_name!r}")
        parts = rest.split(".")
        if parts == ["inflight"]:
            action, state = Action.COMMIT, State.INFLIGHT
        elif len(parts) == 1:
            action, state = Action.parse(parts[0], file_name), State.COMPLETED
        elif len(parts) == 2 and parts[1] in ("requested", "inflight"):
            action, state = Action.parse(parts[0], file_name), State(parts[1])
            if action is Action.COMMIT and state is State.INFLIGHT:
                raise InvalidInstantError(f"malformed timeline file name {file_name!r}: "
                                          "an inflight commit is spelled '<instant>.inflight'")
        else:
            raise InvalidInstantError(f"malformed timeline file name {file_name!r}")
        if completion and state is not State.COMPLETED:
            raise InvalidInstantError(f"malformed timeline file name {file_name!r}: "
                                      "only completed instants carry a completion time")
        if layout is TimelineLayout.V2 and state is State.COMPLETED and not completion:
            raise InvalidInstantError(f"timeline file {file_name!r} lacks the completion time "
                                      "that layout 2 requires ('<requested>_<completed>.<action>')")
        if layout is TimelineLayout.V1 and completion:
            raise InvalidInstantError(f"timeline file {file_name!r} has a completion time, "
                                      "which layout 1 does not use")
        try:
            return cls(timestamp, action, state, completion or None)
        except InvalidInstantError as e:
            raise InvalidInstantError(f"timeline file {file_name!r}: {e}") from None

    def file_name(self) -> str:
        """The exact file name of this instant (inverse of :meth:`parse`)."""
        if self.state is State.COMPLETED:
            head = f"{self.timestamp}_{self.completion_time}" if self.completion_time else self.timestamp
            return f"{head}.{self.action.value}"
        if self.action is Action.COMMIT and self.state is State.INFLIGHT:
            return f"{self.timestamp}.inflight"
        return f"{self.timestamp}.{self.action.value}.{self.state.value}"

    # -- helpers ----------------------------------------------------------------------
    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_pending(self) -> bool:
        return self.state is not State.COMPLETED

    @property
    def sort_key(self) -> tuple[str, int]:
        return (self.timestamp, self.state.rank)

    def with_state(self, state: State, completion_time: str | None = None) -> "Instant":
        action = self.action.completed_action if state is State.COMPLETED else self.action
        return Instant(self.timestamp, action, state, completion_time)

    def __str__(self) -> str:
        return self.file_name()


# -- parsing fast path ------------------------------------------------------------------
# One match for the shapes Hudi writes: T.action, T_C.action, T.action.requested|inflight and
# T.inflight.  Only names this accepts *and* ``_trusted`` approves skip the checked parser;
# anything else (including every malformed name) goes through ``Instant._parse_checked``, so
# results and error messages are those of the reference parser.
_NAME = re.compile(r"(\d{14}(?:\d{3}){0,3})(?:_(\d{14}(?:\d{3})?))?\.([a-z]+)(?:\.(requested|inflight))?")
_ACTIONS = {a.value: a for a in Action}
_STATES = {"requested": State.REQUESTED, "inflight": State.INFLIGHT}


def _trusted(file_name: str, layout: TimelineLayout | None) -> Instant | None:
    """The instant of a well-formed name, built without re-validating it; None when any rule
    of the checked parser might object (the caller then runs it)."""
    m = _NAME.fullmatch(file_name)
    if m is None:
        return None
    timestamp, completion, action_text, state_text = m.groups()
    if state_text is None and action_text == "inflight":
        action, state = Action.COMMIT, State.INFLIGHT          # the bare T.inflight of a commit
    else:
        action = _ACTIONS.get(action_text)
        if action is None:
            return None
        state = _STATES[state_text] if state_text else State.COMPLETED
    if state is State.COMPLETED:
        if action in _PENDING_ONLY or (completion is None and layout is TimelineLayout.V2) \
                or (completion is not None and layout is TimelineLayout.V1):
            return None
    elif completion is not None or (action is Action.COMMIT and state_text == "inflight") \
            or (state is State.REQUESTED and not action.has_requested_state):
        # 'T.commit.inflight' is spelled 'T.inflight'; pending names carry no completion time
        return None
    return _make(timestamp, action, state, completion)


def _make(timestamp: str, action: Action, state: State, completion: str | None) -> Instant:
    """An ``Instant`` whose fields ``_trusted`` already validated (``__post_init__`` skipped)."""
    instant = object.__new__(Instant)
    # the attributes the generated __init__ would set, as the instance's dict in one step
    object.__setattr__(instant, "__dict__", {"timestamp": timestamp, "action": action, "state": state,
                                             "completion_time": completion})
    return instant


@lru_cache(maxsize=1 << 17)
def _parse_cached(file_name: str, layout: TimelineLayout | None) -> Instant:
    # Errors are not cached (lru_cache does not keep exceptions): a bad name raises each time.
    return _trusted(file_name, layout) or Instant._parse_checked(file_name, layout)


# -- listing fast path ---------------------------------------------------------------------------
# A cold load parses every name of the folder (30k at the issue #6 scale), where the pattern above
# cost ~6 µs a name.  The loader (``timeline.active._listed_entries``) cuts names with a 17-digit
# time by position instead: the time, an optional "_" and 17-digit completion time, and the rest
# looked up in this table of the suffixes ``_trusted`` accepts for the layout, built by asking
# ``_trusted`` itself, so both agree by construction.  Anything else (14-digit times, unknown or
# refused suffixes) goes through ``Instant.parse``.
_SAMPLE_TIME = "20250101000000000"


def _suffixes(layout: TimelineLayout | None) -> dict[tuple[str, bool], tuple[Action, State]]:
    table = {}
    for action in Action:
        for suffix in (f".{action.value}", f".{action.value}.requested", f".{action.value}.inflight", ".inflight"):
            for with_completion in (False, True):
                head = f"{_SAMPLE_TIME}_{_SAMPLE_TIME}" if with_completion else _SAMPLE_TIME
                instant = _trusted(head + suffix, layout)
                if instant is not None:
                    table[(suffix, with_completion)] = (instant.action, instant.state)
    return table


_SUFFIXES = {layout: _suffixes(layout) for layout in (None, *TimelineLayout)}


def instant_suffixes(layout: TimelineLayout | None) -> dict[tuple[str, bool], tuple[Action, State]]:
    """(suffix after the times, has a completion time) -> (action, state), for ``layout``."""
    return _SUFFIXES[layout]
