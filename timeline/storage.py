"""The storage interface the timeline needs, and nothing more.

The timeline never touches ``os`` directly: it is handed an object with these
methods.  ``tablesvc.storage`` provides the implementations (local files first,
object stores later).  Paths are plain strings joined with ``/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, BinaryIO, Callable, Protocol


@dataclass(frozen=True)
class FileInfo:
    """One entry of a directory listing."""

    name: str
    path: str
    size: int
    mtime_ms: int
    is_dir: bool


class Storage(Protocol):
    def read_bytes(self, path: str) -> bytes:
        """Whole content; ``FileNotFoundError`` when absent."""

    def write_new(self, path: str, data: bytes) -> None:
        """Create ``path`` atomically and durably; ``FileExistsError`` if it exists.

        Readers see either no file or the whole content, never a prefix.
        """

    def open_read(self, path: str) -> BinaryIO:
        """A seekable binary file object over ``path`` (a context manager; the caller closes it),
        for reading a large file piece by piece; ``FileNotFoundError`` when absent."""

    def write_new_from(self, path: str, write: Callable[[BinaryIO], None]) -> int:
        """``write_new`` for content produced piece by piece: ``write`` gets a binary file object
        and writes the content into it; returns the size written.  The same contract as
        ``write_new`` (exclusive, atomic, durable); if ``write`` raises, nothing is created.
        """

    def write_replace(self, path: str, data: bytes) -> None:
        """Create or replace ``path`` atomically and durably."""

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        """Whole content and its version token (an object store's ETag), for ``write_if``;
        ``FileNotFoundError`` when absent.  Object stores only (``NotImplementedError`` elsewhere)."""

    def write_if(self, path: str, data: bytes, expected_version: str | None) -> str:
        """Replace ``path`` atomically only if its version is still ``expected_version`` (``None``:
        create it only if absent); returns the new version.  ``timeline.errors.VersionConflictError``
        when the object changed, appeared or vanished since.  A write whose answer was lost and that
        did succeed counts as a success.  Object stores only (``NotImplementedError`` elsewhere)."""

    def discard_partial(self, folder: str, names: Iterable[str]) -> list[str]:
        """Delete what a creator of these file names killed mid-create left in ``folder`` (local
        files: the hidden temporary copies; an object store would abort its uploads).  Returns
        the deleted paths."""

    def list_dir(self, path: str) -> list[FileInfo]:
        """Entries of a directory; an empty list when it does not exist."""

    def list_names(self, path: str) -> list[str]:
        """Names of the plain files of a directory, sorted, without sizes or times (one listing
        call, no per-file ``stat``: the timeline loader needs only names); empty when absent."""

    def stat(self, path: str) -> FileInfo:
        """``FileNotFoundError`` when absent."""

    def exists(self, path: str) -> bool: ...

    def delete(self, path: str) -> bool:
        """Delete a file; ``False`` when it was already gone (not an error)."""

    def delete_tree(self, path: str) -> None:
        """Delete a directory and everything below it; absent is fine."""

    def makedirs(self, path: str) -> None: ...


def join(*parts: str) -> str:
    """Join path parts with ``/``, skipping empty ones (non-partitioned tables use "")."""
    kept = [p for p in parts if p]
    if not kept:
        return ""
    head = kept[0].rstrip("/") if kept[0] != "/" else ""
    return "/".join([head] + [p.strip("/") for p in kept[1:]])
