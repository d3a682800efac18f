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

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tablesvc.errors import FileNameError
from tablesvc.fsview.names import BaseFileName, LogFileName, looks_like_log_file
from tablesvc.fsview.partitions import list_partitions
from timeline.active import Timeline
from timeline.instant import Action, TimelineLayout
from timeline.storage import Storage, join

if TYPE_CHECKING:  # the table package imports this module; avoid the cycle at run time
    from tablesvc.table.config import TableConfig


@dataclass(frozen=True)
class _StoredFile:
    name: BaseFileName | LogFileName
    path: str
    size: int

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
              partitions: list[str] | None = None) -> "FileSystemView":
        parts = partitions if partitions is not None else list_partitions(storage, base_path,
                                                                          config.is_partitioned)
        pending_compactions = frozenset(i.timestamp for i in timeline.pending_compactions())
        completion = timeline.completion_times()
        groups: list[FileGroup] = []
        skipped: list[str] = []
        for partition in parts:
            bases: dict[str, list[BaseFile]] = defaultdict(list)
            logs: dict[str, list[LogFile]] = defaultdict(list)
            folder = join(base_path, partition) if partition else base_path
            for info in storage.list_dir(folder):
                if info.is_dir:
                    continue
                try:
                    if looks_like_log_file(info.name):
                        ln = LogFileName.parse(info.name)
                        if ln.extension == "log" and not ln.cdc and cls._log_visible(ln, config, timeline,
                                                                                      pending_compactions):
                            logs[ln.file_id].append(LogFile(ln, info.path, info.size))
                    elif not info.name.startswith(".") and info.name.endswith("." + config.base_file_format.lower()):
                        bn = BaseFileName.parse(info.name)
                        if timeline.is_committed_or_archived(bn.instant):
                            bases[bn.file_id].append(BaseFile(bn, info.path, info.size))
                except FileNameError:
                    skipped.append(info.path)
            for file_id in sorted(set(bases) | set(logs)):
                groups.append(cls._group(partition, file_id, bases.get(file_id, []), logs.get(file_id, []),
                                         config.layout, completion))
        return cls(config, timeline, tuple(parts), tuple(groups), pending_compactions, tuple(skipped))

    @staticmethod
    def _log_visible(ln: LogFileName, config: "TableConfig", timeline: Timeline, pending_compactions) -> bool:
        if timeline.is_committed_or_archived(ln.instant):
            return True
        # v6 names logs by slice base instant: after a compaction is scheduled, new logs carry
        # the compaction's instant while it is pending.  Their blocks are checked one by one.
        return config.layout is TimelineLayout.V1 and ln.instant in pending_compactions

    @staticmethod
    def _group(partition: str, file_id: str, bases: list[BaseFile], logs: list[LogFile],
               layout: TimelineLayout, completion: dict[str, str]) -> FileGroup:
        by_instant: dict[str, BaseFile] = {}
        for b in sorted(bases, key=lambda b: b.file_name):
            # Two base files for one instant only exist after a failed task attempt; keep
            # the first deterministically (rollback/markers clean the other up).
            by_instant.setdefault(b.name.instant, b)
        base_instants = sorted(by_instant)
        slice_logs: dict[str, list[LogFile]] = defaultdict(list)
        for lf in logs:
            if layout is TimelineLayout.V1:
                key = lf.name.instant
            else:
                done = completion.get(lf.name.instant, lf.name.instant)
                eligible = [b for b in base_instants if b <= done]
                key = eligible[-1] if eligible else lf.name.instant
            slice_logs[key].append(lf)

        def log_order(lf: LogFile):
            first = lf.name.instant if layout is TimelineLayout.V1 else completion.get(lf.name.instant, lf.name.instant)
            return (first, lf.name.version, lf.name.write_token)

        keys = sorted(set(base_instants) | set(slice_logs))
        slices = tuple(FileSlice(partition, file_id, k, by_instant.get(k),
                                 tuple(sorted(slice_logs.get(k, []), key=log_order))) for k in keys)
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
