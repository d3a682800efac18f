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
    if not partitioned:
        return [""]
    marked: list[str] = []
    leaves: list[str] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        entries = storage.list_dir(join(base_path, rel) if rel else base_path)
        names = {e.name for e in entries}
        if rel and (PARTITION_METAFILE in names or f"{PARTITION_METAFILE}.parquet" in names):
            marked.append(rel)
            continue
        children = [e.name for e in entries if e.is_dir and not _is_hidden(e.name)
                    and not (rel == "" and e.name in _SKIP_TOP)]
        if rel and not children:
            leaves.append(rel)
        stack.extend(f"{rel}/{c}" if rel else c for c in children)
    return sorted(marked) if marked else sorted(leaves)
