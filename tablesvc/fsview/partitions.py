"""Finding the partitions of a table in storage.

A folder is a partition when it holds ``.hoodie_partition_metadata`` (what Java
Hudi writes and checks).  Tables without those marker files fall back to the
leaf folders, the way hudi-rs lists.  Hidden folders (``.``-prefixed) are never
partitions and are not descended into, so a stray ``.tmp`` folder cannot hide a
partition (hudi-rs would lose it, see docs/file-system-view.md).
"""

from __future__ import annotations

from tablesvc.fsview.names import PARTITION_METAFILE
from timeline.storage import Storage, join

_SKIP_TOP = {".hoodie", "_delta_log"}


def _is_hidden(name: str) -> bool:
    return name.startswith(".") or name.startswith("_")


def list_partitions(storage: Storage, base_path: str, partitioned: bool) -> list[str]:
    """Relative partition paths ("" for a non-partitioned table), sorted."""
    return discover_partitions(storage, base_path, partitioned)[0]


def discover_partitions(storage: Storage, base_path: str,
                        partitioned: bool) -> tuple[list[str], dict[str, list[str]]]:
    """(partitions as ``list_partitions`` gives them, the plain file names of every partition, as
    listed on the way): the file-system view needs no second listing of any folder.

    Folders are listed by name only (no ``stat`` per file: a partition folder holds thousands of
    data files and only the marker matters here); folders without the marker are then listed in
    full for their sub-folders.
    """
    if not partitioned:
        return [""], {}
    marked: list[str] = []
    leaves: list[str] = []
    files_of: dict[str, list[str]] = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        folder = join(base_path, rel) if rel else base_path
        if rel:
            names = storage.list_names(folder)
            if _has_marker(names):
                marked.append(rel)
                files_of[rel] = names
                continue
        entries = storage.list_dir(folder)
        children = [e.name for e in entries if e.is_dir and not _is_hidden(e.name)
                    and not (rel == "" and e.name in _SKIP_TOP)]
        if rel and not children:
            leaves.append(rel)
            files_of[rel] = [e.name for e in entries if not e.is_dir]
        stack.extend(f"{rel}/{c}" if rel else c for c in children)
    return (sorted(marked) if marked else sorted(leaves)), files_of


def _has_marker(names) -> bool:
    return PARTITION_METAFILE in names or f"{PARTITION_METAFILE}.parquet" in names
