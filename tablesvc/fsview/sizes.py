"""Sizes of data files, asked for by name, folder by folder.

The view lists folders by name only; sizes are read afterwards for just the files a caller
needs (the compaction planner: the log and base files of its candidate slices).  A size is
one ``stat`` per file; on this project's VM that is 3.5-6 µs whatever the route, so the
number of files asked about is what matters (issue #6: 73.5k of the 100k files of the large
benchmark table, not all of them), and then how many are asked about at once.

On plain local storage a folder's files are sized in one pyarrow call, whose loop of ``stat``
calls runs in C++ without holding the GIL; ``sizes_by_folder`` therefore sizes many folders
on a few threads, which do overlap (two threads on this 2-core VM: the 100.6k files of the
benchmark table in 0.18-0.26 s against 0.39-0.52 s for ``os.stat`` in one thread; Python's own
``os.stat`` takes the GIL back per file, so threads made it slower).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from operator import attrgetter
from typing import Iterable, Mapping

from pyarrow import fs as pafs

from tablesvc.storage.local import LocalStorage
from timeline.storage import Storage, join

# Below this many files in all, one thread: a pool costs about a millisecond to start.
PARALLEL_MIN_FILES = 4096
# The calls wait on the file system, not the CPU, so a few more threads than cores still help
# on a remote or slow disk; beyond 8 the GIL handovers for building paths and results dominate.
MAX_SIZE_THREADS = 8


def file_sizes(storage: Storage, folder: str, names: Iterable[str]) -> list[int | None]:
    """The size of each of ``names`` in ``folder``, in order; None for a file that is gone
    (deleted since it was listed: the listing with sizes left such files out too)."""
    if type(storage) is LocalStorage:
        # Fast path for plain local storage (not subclasses or wrappers, which may count or fail
        # calls on purpose): the stat calls in one pyarrow call, without the
        # ``timeline.storage.FileInfo`` and the second ``isdir`` stat that ``Storage.stat`` makes
        # per file.
        return _local_sizes(folder[len("file://"):] if folder.startswith("file://") else folder, names)
    names = list(names)
    if getattr(storage, "listing_gives_sizes", False) and len(names) > 1:
        # An object store's LIST carries every object's size: one request per thousand files of the
        # folder instead of a HEAD per file asked about.
        listed = {info.name: info.size for info in storage.list_dir(folder) if not info.is_dir}
        return [listed.get(name) for name in names]
    out: list[int | None] = []
    for name in names:
        try:
            out.append(storage.stat(join(folder, name)).size)
        except FileNotFoundError:
            out.append(None)
    return out


def sizes_by_folder(storage: Storage, names_by_folder: Mapping[str, list[str]]) -> dict[str, list[int | None]]:
    """``file_sizes`` of each folder's names.  Many files on plain local storage are sized on a
    few threads, a folder per call (see the module docstring), when there is more than one
    folder; other storages one call at a time, in order (a wrapper may count or fail calls on
    purpose)."""
    total = sum(map(len, names_by_folder.values()))
    if type(storage) is LocalStorage and len(names_by_folder) > 1 and total >= PARALLEL_MIN_FILES:
        workers = min(len(names_by_folder), MAX_SIZE_THREADS, max(2, _usable_cpus()))
        with ThreadPoolExecutor(workers, thread_name_prefix="tablesvc-sizes") as pool:
            found = pool.map(partial(file_sizes, storage), names_by_folder.keys(), names_by_folder.values())
            return dict(zip(names_by_folder.keys(), found))
    return {folder: file_sizes(storage, folder, names) for folder, names in names_by_folder.items()}


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))   # the CPUs this process may run on (containers, taskset)
    except AttributeError:                     # not on every platform
        return os.cpu_count() or 1


_LOCAL = pafs.LocalFileSystem()
_size_of = attrgetter("size")
_st_size_of = attrgetter("st_size")


def _local_sizes(folder: str, names: Iterable[str]) -> list[int | None]:
    names = names if isinstance(names, list) else list(names)
    prefix = f"{folder or '.'}/"
    try:
        # A name that is gone (or is a folder) comes back as NotFound (or Directory), size None.
        return list(map(_size_of, _LOCAL.get_file_info([prefix + name for name in names])))
    except (OSError, ValueError):   # pyarrow refused a path or the folder: Python's stat decides
        return _stat_sizes(folder, names)


def _stat_sizes(folder: str, names: list[str]) -> list[int | None]:
    try:
        fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        return [None for _ in names]
    try:
        out: list[int | None] = []
        for name in names:
            try:
                out.append(_st_size_of(os.stat(name, dir_fd=fd)))
            except FileNotFoundError:
                out.append(None)
        return out
    finally:
        os.close(fd)
