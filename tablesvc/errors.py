"""tablesvc's errors: the shared hierarchy from ``timeline.errors`` plus the upper floor's own.

Exit codes (CLI): 0 done or nothing to do, 1 runtime failure (``TablesvcError``),
2 invalid usage or input (``InvalidInputError``), 3 conflict, retry later (``ConflictError``).
"""

from __future__ import annotations

from timeline.errors import (
    ConflictError,
    IllegalTransitionError,
    InstantExistsError,
    InvalidInputError,
    InvalidInstantError,
    LockHeldError,
    PayloadError,
    StorageError,
    TablesvcError,
    TimelineError,
    TimeTravelError,
    UnknownInstantError,
    VersionConflictError,
)

__all__ = [
    "ConfigError", "ConflictError", "CorruptHFileError", "CorruptLogBlockError", "FileNameError", "IllegalTransitionError",
    "HiddenWriteError", "InstantExistsError", "InvalidInputError", "InvalidInstantError", "LeftPendingError",
    "LockHeldError",
    "LogFormatError", "NotATableError", "PayloadError", "SparkEnvironmentError", "StorageError", "TableConfigError",
    "TablesvcError", "TimelineError", "TimeTravelError", "UnknownInstantError", "UnsupportedTableError",
    "VersionConflictError",
]


class ConfigError(InvalidInputError):
    """A configuration key with a malformed or contradictory value; the message names the key."""


class NotATableError(InvalidInputError):
    """A path that is missing or holds no ``.hoodie/hoodie.properties``."""


class TableConfigError(InvalidInputError):
    """``hoodie.properties`` that is damaged or inconsistent."""


class UnsupportedTableError(InvalidInputError):
    """A table this build cannot service (version, type, metadata table, …)."""


class SparkEnvironmentError(InvalidInputError):
    """Spark executors whose Python cannot run tablesvc's tasks (a package missing or of an
    unsupported version, tablesvc's own code unreachable); found before any table change, and the
    message names the package and what to install or set.  Exit 2: the set-up must change."""


class FileNameError(InvalidInputError):
    """A base or log file name that does not follow Hudi's naming."""


class CorruptHFileError(TablesvcError):
    """An HFile (a metadata-table base file, or the content of an HFILE_DATA log block) that does
    not decode; the message names the file and the byte offset (exit 1: the bytes are damaged)."""


class LogFormatError(TablesvcError):
    """A log file that cannot be read or written as Hudi log blocks."""


class CorruptLogBlockError(LogFormatError):
    """A log block whose framing is broken; the message names the file and byte offset."""


class LeftPendingError(ConflictError):
    """Recovery left pending instants that a live process (or a running rollback) still owns;
    the message names each one (exit 3: retry later, or ``rollback --wait``)."""


class HiddenWriteError(TablesvcError):
    """A service whose commit would hide a committed write: on table version 6, a log file that a
    committed delta commit put into a file slice the compaction replaces, which the plan does not
    list.  Not a conflict to retry (the plan cannot change): exit 1, the runner sets the job aside
    after its failures; the message names the log, the write and what to do."""
