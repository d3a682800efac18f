"""Temporary copies that a create killed before its link left behind, swept with the other leftovers.

``LocalStorage`` writes every new file (and every replacement) under a hidden name,
``.tmp-<32 hex>-<name, dots escaped>`` (``storage.local.temporary_name_for``), in the same folder,
then links (renames) it to ``<name>``.  A process
killed in between leaves the copy: in the timeline folder (a transition), in ``.hoodie/`` (v6
keeps its timeline there; ``hoodie.properties`` is replaced this way), among the heartbeats, and
in partitions (data files, ``.hoodie_partition_metadata``).  No reader takes today's names for
data files; copies named the way tablesvc named them before (``.<name>.<32 hex>.tmp``) are read
by hudi-rs (a log file's, failing the read) and Hudi 0.x (a base file's), and are swept alike.

A copy is deleted when both hold:

* its modification time is older than the heartbeat window (``interval × misses``): the file
  system stamps that time, and the table's clock (``table.clock``, injectable like every other
  reading of the time; the system clock outside tests) says what time it is now, as for the
  heartbeats Java Hudi writes (empty files whose mtime is the beat).  A live creator links
  within milliseconds of its last write (timeline files and partition metadata are small and
  written whole); a creator silent that long is dead by the rule every other recovery uses, and
  were it only stalled, its link then fails and nothing half-written ever shows;
* a data file's copy is not named with a pending instant: that instant's writer may still be
  streaming a large base file into it, and the instant's own rollback removes it by name (from
  its markers, ``Storage.discard_partial``).
"""

from __future__ import annotations

from tablesvc.fsview.names import BaseFileName, LogFileName, PARTITION_METAFILE
from tablesvc.fsview.partitions import discover_partitions
from tablesvc.errors import FileNameError
from timeline.heartbeat import HEARTBEAT_DIR
from timeline.storage import join


def _folders(table) -> list[tuple[str, list[str] | None, bool]]:
    """(folder, its names when already listed, whether it holds data files) of every folder a
    killed create can leave a copy in."""
    base = table.base_path
    meta = {join(base, ".hoodie"), join(base, table.config.layout.timeline_dir), join(base, HEARTBEAT_DIR)}
    out: list[tuple[str, list[str] | None, bool]] = [(folder, None, False) for folder in sorted(meta)]
    partitions, listed = discover_partitions(table.storage, base, table.config.is_partitioned)
    for partition in partitions:
        out.append((join(base, partition) if partition else base, listed.get(partition), True))
    return out


def _named_instant(name: str) -> str | None:
    """The instant a data file's name carries (None for the partition metadata and other names)."""
    if name == PARTITION_METAFILE:
        return None
    try:
        return (LogFileName.parse(name) if name.startswith(".") else BaseFileName.parse(name)).instant
    except FileNameError:
        return None


def sweep_temporary_copies(table, older_than_ms: int, now_ms: int | None = None) -> list[str]:
    """Delete the abandoned temporary copies (module doc) older than ``older_than_ms``; returns
    their paths.  Nothing for a storage without temporary copies.  ``now_ms``: the table's clock
    when not given."""
    storage = table.storage
    copy_of = getattr(storage, "temporary_copy_of", None)
    if copy_of is None:
        return []
    now = table.clock.now_ms() if now_ms is None else now_ms
    pending = None
    removed: list[str] = []
    for folder, names, data in _folders(table):
        for name in (names if names is not None else storage.list_names(folder)):
            final = copy_of(name)
            if final is None:
                continue
            if data:
                instant = _named_instant(final)
                if instant is not None:
                    if pending is None:
                        pending = {i.timestamp for i in table.timeline().pending()}
                    if instant in pending:
                        continue
            path = join(folder, name)
            try:
                if now - storage.stat(path).mtime_ms <= older_than_ms:
                    continue
            except FileNotFoundError:   # linked and removed by its creator meanwhile
                continue
            if storage.delete(path):
                removed.append(path)
    return removed


__all__ = ["sweep_temporary_copies"]
