"""When and at which instant the metadata table compacts itself, and what its plan holds (Hudi 1.x,
table versions 8 and 9; docs/metadata-table.md, "The metadata table's compaction").

* **When** (``ScheduleCompactionActionExecutor.needCompact``, trigger NUM_COMMITS): the metadata
  table holds at least ``hoodie.metadata.compact.max.delta.commits`` (10) completed delta commits
  whose instant is later than its latest completed compaction (all of them before the first one).
  A pending compaction is finished first, whatever the count (``runAnyPendingCompactions``).
* **At which instant** (``HoodieBackedTableMetadataWriter.compactIfNecessary``): if a data-table
  instant is pending while its metadata delta commit is completed (a writer died between the two
  commits, or is between them now), one millisecond before the earliest such instant; otherwise a
  new instant time.  The plan takes only log files whose delta commit completed before the
  compaction instant (``BaseHoodieCompactionPlanGenerator``): a delta commit completes after its
  own instant, so the delta commit of a pending data instant never reaches a base file, where the
  data-table filter readers apply to log blocks (``valid_instants``) could not take it out again.
  A compaction instant already on the metadata timeline is not planned twice (Java skips it too),
  and none is planned at or before an existing compaction (its base file would sort before the
  slice it replaces).
* **What** (``UnBoundedCompactionStrategy``): every file group of every partition of the metadata
  table whose latest slice has such log files; one ``HoodieCompactionOperation`` each, with the
  slice's base file, its log files and Java's metric names.
"""

from __future__ import annotations

from dataclasses import dataclass

from tablesvc.fsview.view import FileSlice, FileSystemView
from tablesvc.table.config import TableConfig
from timeline.active import Timeline
from timeline.instant import Action
from timeline.instant_time import add_millis
from timeline.payloads import CompactionOperation, CompactionPlan
from timeline.storage import Storage, join

MAX_DELTA_COMMITS_KEY = "hoodie.metadata.compact.max.delta.commits"
DEFAULT_MAX_DELTA_COMMITS = 10
PLAN_VERSION = 2
MB = 1024 * 1024
# HoodieCompactionStrategy.captureMetrics: a slice without a base file is expected to write
# hoodie.parquet.max.file.size (120 MB by default); the fixtures' plans carry exactly that.
DEFAULT_WRITE_MB_WITHOUT_BASE = 120.0


def delta_commits_since_compaction(mdt: Timeline) -> int:
    """Completed delta commits of the metadata table later than its latest completed compaction
    (``CompactionUtils.getDeltaCommitsSinceLatestCompaction``: by instant time)."""
    compactions = mdt.completed(Action.COMMIT)
    after = max((c.timestamp for c in compactions), default=None)
    return sum(1 for d in mdt.completed(Action.DELTA_COMMIT) if after is None or d.timestamp > after)


def compaction_instant_time(data: Timeline, mdt: Timeline, new_time: str) -> str:
    """The compaction's instant: one millisecond before the earliest data instant that is pending
    while its metadata delta commit is completed, else ``new_time``."""
    done_on_mdt = {i.timestamp for i in mdt.completed()}
    stuck = sorted(i.timestamp for i in data.pending() if i.timestamp in done_on_mdt)
    return add_millis(stuck[0], -1) if stuck else new_time


def why_not_at(mdt: Timeline, instant: str) -> str | None:
    """Why no compaction can be planned at ``instant`` (None: it can)."""
    if mdt.files_of(instant):
        return f"instant {instant} is already on the metadata table's timeline"
    later = [i.timestamp for i in mdt.instants if i.action.completed_action is Action.COMMIT
             and i.timestamp >= instant]
    if later:
        return f"the metadata table's compaction {later[0]} is not earlier than {instant}"
    return None


@dataclass(frozen=True)
class PlannedSlice:
    """One file group's operation: its latest slice with the log files the plan takes."""

    file_slice: FileSlice
    log_names: tuple[str, ...]
    log_bytes: int
    base_bytes: int

    def operation(self) -> CompactionOperation:
        s = self.file_slice
        read_mb = float((self.base_bytes + self.log_bytes) // MB)
        write_mb = float(self.base_bytes // MB) if s.base_file is not None else DEFAULT_WRITE_MB_WITHOUT_BASE
        metrics = {"TOTAL_LOG_FILES": float(len(self.log_names)), "TOTAL_IO_MB": read_mb + write_mb,
                   "TOTAL_IO_READ_MB": read_mb, "TOTAL_LOG_FILES_SIZE": float(self.log_bytes),
                   "TOTAL_IO_WRITE_MB": write_mb}
        return CompactionOperation(base_instant_time=s.base_instant, file_id=s.file_id, partition_path=s.partition,
                                   data_file_path=s.base_file.file_name if s.base_file else None,
                                   delta_file_paths=self.log_names, metrics=metrics)


def metadata_partitions(storage: Storage, mdt_base_path: str) -> list[str]:
    """The partition folders of the metadata table (Java lists its folders: the metadata table has
    no metadata table of its own)."""
    return sorted(e.name for e in storage.list_dir(mdt_base_path) if e.is_dir and not e.name.startswith("."))


def group_slices(view: FileSystemView) -> list[FileSlice]:
    """Per file group, the slice a compaction merges: the latest slice when the group has a base
    file; for a group of log files only (every metadata partition before its first compaction
    but ``files``), ONE slice of all its logs, as Java's ``HoodieFileGroup.addLogFile`` makes it
    (a log joins the slice an earlier log started), where ``FileSystemView`` starts a slice per
    log file.  Compacting only the newest of those would drop every older record."""
    out: list[FileSlice] = []
    for group in view.file_groups():
        if not group.slices:
            continue
        if any(s.base_file is not None for s in group.slices):
            out.append(group.slices[-1])
            continue
        first = group.slices[0]
        logs = tuple(lf for s in group.slices for lf in s.log_files)
        out.append(FileSlice(first.partition, first.file_id, first.base_instant, None, logs))
    return out


def build_plan(storage: Storage, mdt_base_path: str, config: TableConfig, mdt: Timeline,
               instant: str) -> CompactionPlan | None:
    """The plan of a compaction at ``instant`` over every file group, or None when no group has a
    log file that completed before ``instant``."""
    completion = mdt.completion_times()
    view = FileSystemView.build(storage, mdt_base_path, config, mdt, metadata_partitions(storage, mdt_base_path))
    planned: list[PlannedSlice] = []
    for s in sorted(group_slices(view), key=lambda x: (x.partition, x.file_id)):
        # an archived delta commit (absent from the active timeline) completed long before
        # version 6: a log's name carries its slice's base instant, not its delta commit; the
        # slice's logs all go (Hudi 0.15 gates the schedule on no pending data instant instead)
        logs = [lf for lf in s.log_files
                if config.version < 8 or completion.get(lf.name.instant, lf.name.instant) < instant]
        if not logs:
            continue
        planned.append(PlannedSlice(s, tuple(lf.file_name for lf in logs), sum(lf.size or 0 for lf in logs),
                                    (s.base_file.size or 0) if s.base_file else 0))
    if not planned:
        return None
    return CompactionPlan(operations=tuple(p.operation() for p in planned), extra_metadata={}, version=PLAN_VERSION,
                          strategy=None, preserve_hoodie_metadata=False, missing_schedule_partitions=())


def operation_paths(mdt_base_path: str, op: CompactionOperation) -> tuple[str | None, list[str]]:
    """The base file's and the log files' paths of one operation."""
    folder = join(mdt_base_path, op.partition_path or "")
    base = join(folder, op.data_file_path) if op.data_file_path else None
    return base, [join(folder, name) for name in op.delta_file_paths or ()]


__all__ = ["DEFAULT_MAX_DELTA_COMMITS", "MAX_DELTA_COMMITS_KEY", "PlannedSlice", "build_plan",
           "compaction_instant_time", "delta_commits_since_compaction", "metadata_partitions", "operation_paths",
           "why_not_at"]
