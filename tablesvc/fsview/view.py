"""The file-system view: file groups and file slices per partition.

Rules (docs/file-system-view.md explains them with examples):

* Only committed files are visible: a base or log file whose name instant is not a
  completed instant (or older than the active timeline, i.e. archived) is hidden.
  v6 exception, as in Java: log files named with a *pending compaction* instant are
  kept; they start the compaction's new slice.
* Base file -> slice keyed by its instant.
* Log file -> v6: the slice keyed by the instant in its name; v8/v9: the slice with
  the greatest base instant at or before the log's completion time (or a slice of
  its own when there is none).
* File groups replaced by a completed replacecommit (as of the query time) are gone.
* ``latest_file_slices(as_of)`` picks per file group the latest slice whose base
  instant is at or before ``as_of``; when that slice is a pending compaction's
  (no base file yet) it is merged with the slice before it, as Java's
  ``getLatestMergedFileSlicesBeforeOrOn`` does.  As in hudi-rs, the log files of the
  chosen slice are not filtered by ``as_of``: readers drop blocks written after it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING

from tablesvc.errors import FileNameError
from tablesvc.fsview.names import BaseFileName, LogFileName, unchecked
from tablesvc.fsview.partitions import StoredName, discover_partitions
from timeline.active import Timeline, gc_paused
from timeline.instant import Action, TimelineLayout
from timeline.storage import Storage, join

if TYPE_CHECKING:  # the table package imports this module; avoid the cycle at run time
    from tablesvc.table.config import TableConfig


@dataclass(frozen=True)
class _StoredFile:
    name: BaseFileName | LogFileName
    path: str
    size: int | None     # None when the view was built without sizes (FileSystemView.build)

    @property
    def file_name(self) -> str:
        return self.name.name


@dataclass(frozen=True)
class BaseFile(_StoredFile):
    """A base (parquet) file; ``name`` is a ``BaseFileName``."""


@dataclass(frozen=True)
class LogFile(_StoredFile):
    """A log file; ``name`` is a ``LogFileName``."""


@dataclass(frozen=True)
class FileSlice:
    partition: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None
    log_files: tuple[LogFile, ...]

    @property
    def file_names(self) -> tuple[str, ...]:
        head = (self.base_file.file_name,) if self.base_file else ()
        return head + tuple(lf.file_name for lf in self.log_files)

    def describe(self) -> dict[str, object]:
        return {"partition": self.partition, "file_id": self.file_id, "base_instant": self.base_instant,
                "base_file": self.base_file.file_name if self.base_file else None,
                "log_files": [lf.file_name for lf in self.log_files]}


@dataclass(frozen=True)
class FileGroup:
    partition: str
    file_id: str
    slices: tuple[FileSlice, ...]   # ascending by base instant

    def latest_slice(self, as_of: str | None = None) -> FileSlice | None:
        candidates = [s for s in self.slices if as_of is None or s.base_instant <= as_of]
        return candidates[-1] if candidates else None


@dataclass(frozen=True)
class FileSystemView:
    config: "TableConfig"
    timeline: Timeline
    partitions: tuple[str, ...]
    groups: tuple[FileGroup, ...]
    pending_compaction_instants: frozenset[str]
    skipped_files: tuple[str, ...] = field(default=())

    # -- building --------------------------------------------------------------------------
    @classmethod
    def build(cls, storage: Storage, base_path: str, config: "TableConfig", timeline: Timeline,
              partitions: list[str] | None = None, *, sizes: bool = True) -> "FileSystemView":
        """The view of ``timeline``.  ``sizes=False`` lists file names only (no ``stat`` per data
        file, the dominant cost on large tables) and leaves every ``size`` None: for callers
        that only need names and slices (the clean planner)."""
        with gc_paused():   # one object per data file (see gc_paused)
            return cls._build(storage, base_path, config, timeline, partitions, sizes)

    @classmethod
    def _build(cls, storage: Storage, base_path: str, config: "TableConfig", timeline: Timeline,
               partitions: list[str] | None, sizes: bool) -> "FileSystemView":
        listed: dict[str, list[StoredName]] = {}
        if partitions is None:
            partitions, listed = discover_partitions(storage, base_path, config.is_partitioned, sizes=sizes)
        pending_compactions = frozenset(i.timestamp for i in timeline.pending_compactions())
        completion = timeline.completion_times()
        committed = _Committed(timeline)
        v6_pending = pending_compactions if config.layout is TimelineLayout.V1 else frozenset()
        base_suffix = "." + config.base_file_format.lower()
        groups: list[FileGroup] = []
        skipped: list[str] = []
        for partition in partitions:
            files = listed.get(partition)
            if files is None:
                files = _list_files(storage, join(base_path, partition) if partition else base_path, sizes)
            bases, logs = _collect(files, committed, v6_pending, base_suffix, skipped)
            for file_id in sorted(set(bases) | set(logs)):
                groups.append(cls._group(partition, file_id, bases.get(file_id, []), logs.get(file_id, []),
                                         config.layout, completion))
        return cls(config, timeline, tuple(partitions), tuple(groups), pending_compactions, tuple(skipped))

    @staticmethod
    def _group(partition: str, file_id: str, bases: list[BaseFile], logs: list[LogFile],
               layout: TimelineLayout, completion: dict[str, str]) -> FileGroup:
        by_instant: dict[str, BaseFile] = {}
        for b in sorted(bases, key=lambda b: b.file_name):
            # Two base files for one instant only exist after a failed task attempt; keep
            # the first deterministically (rollback/markers clean the other up).
            by_instant.setdefault(b.name.instant, b)
        base_instants = sorted(by_instant)
        v1 = layout is TimelineLayout.V1
        # per slice: (order key, log); logs are ordered by instant (v6) or completion time (v8+)
        slice_logs: dict[str, list[tuple[tuple, LogFile]]] = defaultdict(list)
        for lf in logs:
            name = lf.name
            if v1:
                first = key = name.instant
            else:
                # the slice with the greatest base instant at or before the log's completion time
                first = completion.get(name.instant, name.instant)
                at = bisect_right(base_instants, first)
                key = base_instants[at - 1] if at else name.instant
            slice_logs[key].append(((first, name.version, name.write_token), lf))
        keys = sorted(set(base_instants) | set(slice_logs))
        slices = tuple(FileSlice(partition, file_id, k, by_instant.get(k), _in_order(slice_logs.get(k, ())))
                       for k in keys)
        return FileGroup(partition, file_id, slices)

    # -- queries -----------------------------------------------------------------------------
    def replaced_file_ids(self, storage: Storage, as_of: str | None = None) -> set[tuple[str, str]]:
        """(partition, file id) pairs replaced by completed replacecommits at or before ``as_of``."""
        out: set[tuple[str, str]] = set()
        for instant in self.timeline.completed(Action.REPLACE_COMMIT):
            if as_of is not None and instant.timestamp > as_of:
                continue
            md = self.timeline.commit_metadata(storage, instant)
            for partition, ids in (getattr(md, "partition_to_replace_file_ids", None) or {}).items():
                out.update((partition, fid) for fid in ids)
        return out

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        return [g for g in self.groups if partition is None or g.partition == partition]

    def latest_file_slices(self, storage: Storage, as_of: str | None = None,
                           partition: str | None = None) -> list[FileSlice]:
        replaced = self.replaced_file_ids(storage, as_of)
        out = []
        for g in self.file_groups(partition):
            if (g.partition, g.file_id) in replaced:
                continue
            s = g.latest_slice(as_of)
            if s is None:
                continue
            if s.base_file is None and s.base_instant in self.pending_compaction_instants:
                earlier = [x for x in g.slices if x.base_instant < s.base_instant]
                if earlier:
                    prev = earlier[-1]
                    s = FileSlice(s.partition, s.file_id, prev.base_instant, prev.base_file,
                                  prev.log_files + s.log_files)
            out.append(s)
        return out


def _in_order(keyed: list[tuple[tuple, LogFile]]) -> tuple[LogFile, ...]:
    return tuple(lf for _, lf in sorted(keyed, key=itemgetter(0)))   # stable; never compares logs


def _collect(files: list[StoredName], committed: _Committed, v6_pending: frozenset[str], base_suffix: str,
             skipped: list[str]) -> tuple[dict[str, list[BaseFile]], dict[str, list[LogFile]]]:
    """The visible base and log files of one partition, per file id; names that look like data
    files but do not parse go to ``skipped``.  (This loop runs once per data file of the table.)

    Visible: files of committed instants; and on v6 the logs of a pending compaction's new slice
    (v6 names logs by slice base instant: after a compaction is scheduled, new logs carry the
    compaction's instant while it is pending; their blocks are checked one by one)."""
    bases: dict[str, list[BaseFile]] = defaultdict(list)
    logs: dict[str, list[LogFile]] = defaultdict(list)
    for name, path, size in files:
        try:
            if name[:1] == ".":
                if ".log." in name and not name.endswith(".tmp"):       # looks_like_log_file
                    ln = LogFileName.parse(name)
                    if ln.extension == "log" and not ln.cdc and (committed[ln.instant] or ln.instant in v6_pending):
                        logs[ln.file_id].append(unchecked(LogFile, {"name": ln, "path": path, "size": size}))
            elif name.endswith(base_suffix):
                bn = BaseFileName.parse(name)
                if committed[bn.instant]:
                    bases[bn.file_id].append(unchecked(BaseFile, {"name": bn, "path": path, "size": size}))
        except FileNameError:
            skipped.append(path)
    return bases, logs


def _list_files(storage: Storage, folder: str, sizes: bool) -> list[StoredName]:
    """The plain files of one folder as (name, path, size or None)."""
    if sizes:
        return [(i.name, i.path, i.size) for i in storage.list_dir(folder) if not i.is_dir]
    return [(n, f"{folder}/{n}", None) for n in storage.list_names(folder)]


class _Committed(dict):
    """instant -> whether data files named with it are committed (module docstring), asked of the
    timeline once per instant: a partition holds many files of each instant."""

    def __init__(self, timeline: Timeline):
        super().__init__()
        self._timeline = timeline

    def __missing__(self, instant: str) -> bool:
        committed = self[instant] = self._timeline.is_committed_or_archived(instant)
        return committed
