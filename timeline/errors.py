"""The project's one exception hierarchy.

It lives on the lower floor so that timeline code can raise typed errors without
importing tablesvc; tablesvc re-exports it and adds its own subclasses.  Every
message names the instant, file, offset or key it is about.  ``exit_code`` is
what the CLI returns for an error of that kind (see docs/cli.md).
"""

from __future__ import annotations


class TablesvcError(Exception):
    """Root of every error tablesvc raises on purpose."""

    exit_code = 1


class InvalidInputError(TablesvcError):
    """Bad input from the user: a path, a file, a value, an instant (exit 2)."""

    exit_code = 2


class ConflictError(TablesvcError):
    """Somebody else got there first; retrying later may succeed (exit 3)."""

    exit_code = 3


class TimelineError(TablesvcError):
    """Something about the timeline is inconsistent."""


class InvalidInstantError(TimelineError, InvalidInputError):
    """A timeline file name or instant time that cannot be parsed."""


class UnknownInstantError(TimelineError, InvalidInputError):
    """An instant that the timeline does not hold."""


class TimeTravelError(InvalidInputError):
    """An as-of time the table cannot be read as of: cleaned, or before its first commit."""


class IllegalTransitionError(TimelineError):
    """A state transition that the instant state machine does not allow."""


class InstantExistsError(TimelineError, ConflictError):
    """An instant file that should be created already exists."""


class PayloadError(TimelineError, InvalidInputError):
    """A plan or metadata payload that cannot be decoded or encoded."""


class LockHeldError(ConflictError):
    """The table lock is held by someone else."""


class StorageError(TablesvcError):
    """A storage call failed for a reason other than a missing or already existing file (an object
    store's error answer, a timeout, a refused connection); the message names the call and path."""


class VersionConflictError(ConflictError):
    """A conditional write (``Storage.write_if``) lost: the object was created, changed or removed
    since the version it expected was read (an object store's 412); the message names the path."""
