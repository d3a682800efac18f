"""Sizes of data files, asked for by name, one folder at a time.

The view lists folders by name only; sizes are read afterwards for just the files a caller
needs (the compaction planner: the log and base files of its candidate slices).  A size is
one ``stat`` per file; on this project's VM that is 3.5-6 µs whatever the route, so the
number of files asked about is what matters (issue #6: 73.5k of the 100k files of the large
benchmark table, not all of them).
"""

from __future__ import annotations

import os
from functools import partial
from operator import attrgetter
from typing import Iterable

from tablesvc.storage.local import LocalStorage
from timeline.storage import Storage, join


def file_sizes(storage: Storage, folder: str, names: Iterable[str]) -> list[int | None]:
    """The size of each of ``names`` in ``folder``, in order; None for a file that is gone
    (deleted since it was listed: the listing with sizes left such files out too)."""
    if type(storage) is LocalStorage:
        # Fast path for plain local storage (not subclasses or wrappers, which may count or fail
        # calls on purpose): one directory handle and a relative ``stat`` per name, without the
        # ``FileInfo`` and the second ``isdir`` stat that ``Storage.stat`` makes per file.
        return _local_sizes(folder[len("file://"):] if folder.startswith("file://") else folder, names)
    out: list[int | None] = []
    for name in names:
        try:
            out.append(storage.stat(join(folder, name)).size)
        except FileNotFoundError:
            out.append(None)
    return out


_size_of = attrgetter("st_size")


def _local_sizes(folder: str, names: Iterable[str]) -> list[int | None]:
    try:
        fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        return [None for _ in names]
    names = names if isinstance(names, list) else list(names)
    try:
        try:   # the usual case, every file there: the loop runs in C (map over a partial)
            return list(map(_size_of, map(partial(os.stat, dir_fd=fd), names)))
        except FileNotFoundError:   # one is gone: name by name
            out: list[int | None] = []
            for name in names:
                try:
                    out.append(os.stat(name, dir_fd=fd).st_size)
                except FileNotFoundError:
                    out.append(None)
            return out
    finally:
        os.close(fd)
