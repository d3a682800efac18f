"""Write markers: one empty file per data file an instant writes, made before the file.

DIRECT markers, as Java's ``DirectWriteMarkers`` lays them out::

    <base>/.hoodie/.temp/<instant>/<partition>/<data file name>.marker.<CREATE|MERGE|APPEND>

They let a rollback (ours or Java's) find every file a failed write may have left,
including files no write stat mentions.  ``list_markers`` also reads the
timeline-server-based form Java's Spark writers default to (``MARKERS0..N`` files
listing marker paths, one per line), so Java's failed writes can be rolled back too.
The folder is removed once the instant is completed.
"""

from __future__ import annotations

import re
from enum import Enum

from tablesvc.errors import InvalidInputError
from timeline.storage import Storage, join

MARKER_ROOT = ".hoodie/.temp"
_MARKER = re.compile(r"^(?P<file>.+)\.marker\.(?P<io>CREATE|MERGE|APPEND)$")
_SERVER_MARKER_FILE = re.compile(r"^MARKERS\d+$")


class IOType(str, Enum):
    CREATE = "CREATE"   # a new base file
    MERGE = "MERGE"     # a base file rewritten from an older one
    APPEND = "APPEND"   # a log file


def _io(io_type: str | IOType) -> str:
    value = io_type.value if isinstance(io_type, IOType) else str(io_type).upper()
    if value not in IOType.__members__:
        raise InvalidInputError(f"marker IO type {io_type!r}: expected CREATE, MERGE or APPEND")
    return value


def marker_dir(base_path: str, instant: str) -> str:
    return join(base_path, MARKER_ROOT, instant)


def marker_path(base_path: str, instant: str, partition: str, file_name: str, io_type: str | IOType) -> str:
    return join(marker_dir(base_path, instant), partition, f"{file_name}.marker.{_io(io_type)}")


def create_marker(storage: Storage, base_path: str, instant: str, partition: str, file_name: str,
                  io_type: str | IOType) -> str:
    """Create the marker (an existing one is fine: task retries repeat it); returns its path."""
    path = marker_path(base_path, instant, partition, file_name, io_type)
    try:
        storage.write_new(path, b"")
    except FileExistsError:
        pass
    return path


def _walk(storage: Storage, folder: str, rel: str, out: list[tuple[str, str, str]]) -> None:
    for info in storage.list_dir(folder):
        if info.is_dir:
            _walk(storage, info.path, f"{rel}/{info.name}" if rel else info.name, out)
            continue
        m = _MARKER.match(info.name)
        if m:
            out.append((rel, m.group("file"), m.group("io")))
        elif not rel and _SERVER_MARKER_FILE.match(info.name):
            for line in storage.read_bytes(info.path).decode("utf-8").splitlines():
                partition, _, name = line.strip().rpartition("/")
                m = _MARKER.match(name)
                if m:
                    out.append((partition, m.group("file"), m.group("io")))


def list_markers(storage: Storage, base_path: str, instant: str) -> list[tuple[str, str, str]]:
    """``(partition, data file name, io type)`` of every marker of ``instant``, sorted."""
    out: list[tuple[str, str, str]] = []
    _walk(storage, marker_dir(base_path, instant), "", out)
    return sorted(set(out))


def delete_markers(storage: Storage, base_path: str, instant: str) -> None:
    """Remove the instant's marker folder (absent is fine)."""
    storage.delete_tree(marker_dir(base_path, instant))


def rel_path(partition: str, name: str) -> str:
    """A file's path relative to the table base, as write stats record it ("" is no partition)."""
    return f"{partition}/{name}" if partition else name


def remove_orphans(storage: Storage, base_path: str, instant: str, written: set[str]) -> None:
    """Delete the files of ``instant`` that carry a marker but are not in ``written`` (their
    paths relative to the table, as write stats record them): what a failed task attempt left."""
    for partition, file_name, _io in list_markers(storage, base_path, instant):
        rel = rel_path(partition, file_name)
        if rel not in written:
            storage.delete(join(base_path, rel))


__all__ = ["IOType", "MARKER_ROOT", "create_marker", "delete_markers", "list_markers", "marker_dir", "marker_path",
           "rel_path", "remove_orphans"]
