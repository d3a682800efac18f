"""Local file system storage: atomic, durable creates by write-temp + fsync + link."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from typing import BinaryIO, Callable

from timeline.storage import FileInfo


def _strip_scheme(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


# A new file is written under a hidden temporary name, then linked to its own.  The temporary
# name must not look like a data file to any reader that lists the folder: Hudi 0.x takes every
# name that *contains* ".parquet" for a base file, and Java's and hudi-rs's log-file patterns are
# anchored only at the start, so ".<name>.<hex>.tmp" of a log file reads as that log file.  So the
# final name goes in with its dots escaped ("%2E", and "%" as "%25"): ".tmp-<32 hex>-<escaped>".
TEMP_PREFIX = ".tmp-"
_HEX = frozenset("0123456789abcdef")
_ESCAPED = re.compile(r"%(25|2E)")


def temporary_name_for(name: str) -> str:
    """The hidden name a new file ``name`` is written under before it is linked to ``name``."""
    return f"{TEMP_PREFIX}{uuid.uuid4().hex}-{name.replace('%', '%25').replace('.', '%2E')}"


def temporary_copy_of(candidate: str) -> str | None:
    """The final name ``candidate`` is a temporary copy of (``temporary_name_for``), or None when
    it is no such copy.  Copies named the way tablesvc named them before (``.<name>.<32 hex>.tmp``)
    are recognised too, so a table an older tablesvc was killed on is still swept."""
    start = len(TEMP_PREFIX)
    if candidate.startswith(TEMP_PREFIX):
        escaped = candidate[start + 33:]
        if (len(candidate) > start + 33 and candidate[start + 32] == "-" and "." not in escaped
                and _HEX.issuperset(candidate[start:start + 32])):
            return _ESCAPED.sub(lambda m: "%" if m[1] == "25" else ".", escaped)
        return None
    if (candidate.startswith(".") and candidate.endswith(".tmp") and len(candidate) > 39
            and candidate[-37] == "." and _HEX.issuperset(candidate[-36:-4])):
        return candidate[1:-37]
    return None


class LocalStorage:
    """Implements ``timeline.storage.Storage`` on a POSIX file system.

    A new file is written under a hidden temporary name in the same directory,
    flushed to disk, then hard-linked to its final name.  ``link`` fails when the
    target exists, so creation is exclusive, and the final name only ever shows
    the whole content.  The directory is fsynced so the name survives a crash.
    An empty file is created exclusively under its final name (``_create_empty``).
    """

    def read_bytes(self, path: str) -> bytes:
        with open(_strip_scheme(path), "rb") as f:
            return f.read()

    def open_read(self, path: str) -> BinaryIO:
        return open(_strip_scheme(path), "rb")

    def _write_temp(self, path: str, data: bytes) -> str:
        directory, name = os.path.split(path)
        os.makedirs(directory or ".", exist_ok=True)
        tmp = os.path.join(directory, temporary_name_for(name))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        return tmp

    @staticmethod
    def _fsync_dir(directory: str) -> None:
        fd = os.open(directory or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def write_new(self, path: str, data: bytes) -> None:
        path = _strip_scheme(path)
        if not data:
            self._create_empty(path)
            return
        tmp = self._write_temp(path, data)
        try:
            os.link(tmp, path)
        finally:
            os.unlink(tmp)
        self._fsync_dir(os.path.dirname(path))

    def _create_empty(self, path: str) -> None:
        """An empty file (markers, most requested and inflight instants) has no content that
        could show half-written, so it is created exclusively under its final name: no
        temporary copy, no fsync of its own; the directory's fsync makes the name durable.
        ``O_EXCL`` is atomic on local file systems (and NFS from version 3), as ``link`` is."""
        directory = os.path.dirname(path)
        os.makedirs(directory or ".", exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        self._fsync_dir(directory)

    def write_new_from(self, path: str, write: Callable[[BinaryIO], None]) -> int:
        """``write_new`` for streamed content: ``write`` fills the temporary file, which is then
        flushed, fsynced and linked like ``write_new``'s; on any failure the temporary goes."""
        path = _strip_scheme(path)
        directory, name = os.path.split(path)
        os.makedirs(directory or ".", exist_ok=True)
        tmp = os.path.join(directory, temporary_name_for(name))
        try:
            with open(tmp, "xb") as f:
                write(f)
                f.flush()
                size = f.tell()
                os.fsync(f.fileno())
            os.link(tmp, path)
        finally:
            os.unlink(tmp)
        self._fsync_dir(os.path.dirname(path))
        return size

    def write_replace(self, path: str, data: bytes) -> None:
        path = _strip_scheme(path)
        tmp = self._write_temp(path, data)
        try:
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        self._fsync_dir(os.path.dirname(path))

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        raise NotImplementedError(f"read_versioned {path}: local files have no version to compare and swap on")

    def write_if(self, path: str, data: bytes, expected_version: str | None) -> str:
        """Not on local files: POSIX has no atomic compare-and-replace of a file's content (a check
        and a rename are two steps another process can come between), and nothing needs one there:
        the table lock on local files is Java's file-system lock (``timeline/lock.py``)."""
        raise NotImplementedError(f"write_if {path}: local files have no conditional replace; "
                                  "the table lock on them is the file-system lock (timeline/lock.py)")

    def list_dir(self, path: str) -> list[FileInfo]:
        path = _strip_scheme(path)
        try:
            entries = list(os.scandir(path))
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for e in entries:
            try:
                st = e.stat()
            except FileNotFoundError:  # deleted between listing and stat
                continue
            out.append(FileInfo(e.name, os.path.join(path, e.name), st.st_size, st.st_mtime_ns // 1_000_000,
                                e.is_dir()))
        out.sort(key=lambda f: f.name)
        return out

    # the name scheme of the temporary copies, for the sweep of abandoned ones (services/temporary_copies.py)
    temporary_copy_of = staticmethod(temporary_copy_of)

    def discard_partial(self, folder: str, names) -> list[str]:
        wanted = set(names)
        if not wanted:
            return []
        folder = _strip_scheme(folder)
        removed = []
        for candidate in self.list_names(folder):
            # a creator killed between writing its temporary copy and the link
            if temporary_copy_of(candidate) in wanted and self.delete(os.path.join(folder, candidate)):
                removed.append(os.path.join(folder, candidate))
        return removed

    def list_names(self, path: str) -> list[str]:
        path = _strip_scheme(path)
        try:
            with os.scandir(path) as entries:
                # is_file() answers from the directory entry's type on Linux: no stat per name
                names = [e.name for e in entries if e.is_file()]
        except (FileNotFoundError, NotADirectoryError):
            return []
        names.sort()
        return names

    def stat(self, path: str) -> FileInfo:
        path = _strip_scheme(path)
        st = os.stat(path)
        return FileInfo(os.path.basename(path), path, st.st_size, st.st_mtime_ns // 1_000_000,
                        os.path.isdir(path))

    def exists(self, path: str) -> bool:
        return os.path.exists(_strip_scheme(path))

    def delete(self, path: str) -> bool:
        local = _strip_scheme(path)
        try:
            os.unlink(local)
            gone = True
        except FileNotFoundError:
            gone = False
        # Java Hudi writes through Hadoop's checksummed local file system, which keeps a
        # ``.<name>.crc`` beside every file it writes and deletes it with the file; so do we,
        # or every file of a Java-written table that we clean or roll back leaves its checksum behind.
        folder, name = os.path.split(local)
        try:
            os.unlink(os.path.join(folder, f".{name}.crc"))
        except FileNotFoundError:
            pass
        return gone

    def delete_tree(self, path: str) -> None:
        shutil.rmtree(_strip_scheme(path), ignore_errors=True)

    def makedirs(self, path: str) -> None:
        os.makedirs(_strip_scheme(path), exist_ok=True)
