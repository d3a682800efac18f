"""What a log compaction's commit requires, as values (``services/lifecycle/requirements.py``).

In order: the lease (a runner's worker only), the plan still inflight, and on table version 6
no log of another write between the planned logs and the compacted one, and no write in progress
(``lifecycle/pending_writes.py``: Hudi 0.15's conflict check fails a 0.x write beside which a log
compaction completed, docs/interop.md, "Table version 6").  v8/v9 need neither: their log files
are named after their own instant, the reader orders blocks by completion, and Hudi 1.x reads a
log compaction's operation type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from tablesvc.errors import ConflictError
from tablesvc.fsview.names import LogFileName
from tablesvc.services.lifecycle import (
    LOG_COMPACTION_LIFECYCLE, CommitRequirement, Fence, NoWriteInProgress, StillInflight, lease_requirements,
)
from timeline.active import Timeline
from timeline.instant import Action
from timeline.payloads import WriteStat
from timeline.storage import join


def slice_log_names(table: Any, partition: str, file_id: str, name_instant: str) -> list[LogFileName]:
    """The log files on storage of file group ``file_id`` named with ``name_instant`` (CDC logs aside)."""
    out = []
    for info in table.storage.list_dir(join(table.base_path, partition)):
        if info.is_dir or not info.name.startswith("."):
            continue
        try:
            ln = LogFileName.parse(info.name)
        except Exception:
            continue
        if ln.file_id == file_id and ln.instant == name_instant and not ln.cdc:
            out.append(ln)
    return out


@dataclass(frozen=True)
class CompactedSlice:
    """One file group's planned logs and the version of the log file that compacted them."""

    partition: str
    file_id: str
    name_instant: str                 # the instant its log files are named with (v6: the base instant)
    planned_logs: tuple[str, ...]     # names
    planned_max_version: int          # the greatest version among the planned logs of ``name_instant``
    compacted_version: int            # the compacted log file's version


@dataclass(frozen=True)
class NoLogBetweenPlannedAndCompacted(CommitRequirement):
    """v6: no log file of another write was slotted between a slice's planned logs and the
    compacted one: the reader would read it before the compacted block although it is newer."""

    name: ClassVar[str] = "no-log-between-planned-and-compacted"
    reads_timeline: ClassVar[bool] = False     # it lists the slices' folders

    instant: str
    slices: tuple[CompactedSlice, ...]

    @classmethod
    def of(cls, instant: str, tasks: Sequence[Any],
           stats: Mapping[str, Sequence[WriteStat]]) -> "NoLogBetweenPlannedAndCompacted":
        """From the plan's tasks and the write stats of the compacted logs (a task without a
        stat compacted nothing and is left out)."""
        ours = {(s.partition_path or "", s.file_id): s.log_version for v in stats.values() for s in v}
        slices = []
        for t in tasks:
            mine = ours.get((t.partition, t.file_id))
            if mine is None:
                continue
            planned_max = max((LogFileName.parse(n).version for n in t.log_files
                               if LogFileName.parse(n).instant == t.name_instant), default=0)
            slices.append(CompactedSlice(t.partition, t.file_id, t.name_instant, tuple(t.log_files), planned_max,
                                         mine))
        return cls(instant, tuple(slices))

    def describe(self) -> str:
        return (f"no log file of another write lies between the planned logs of {self.instant}'s "
                f"{len(self.slices)} slices and their compacted log")

    def check(self, table: Any, timeline: Timeline | None) -> None:
        for s in self.slices:
            between = [ln.name for ln in slice_log_names(table, s.partition, s.file_id, s.name_instant)
                       if s.planned_max_version < ln.version < s.compacted_version and ln.name not in s.planned_logs]
            if between:
                raise ConflictError(f"log compaction {self.instant}: {between[0]} was written into file group "
                                    f"{s.file_id} after the plan; run again (the attempt is rolled back and "
                                    "a fresh plan scheduled)")


def start_requirements(table: Any, instant: str, heartbeat_window_ms: int,
                       fence: Fence | None = None) -> tuple[CommitRequirement, ...]:
    """What the start of log compaction ``instant`` checks under the lock (``StillRequested`` is
    the lifecycle's): the lease, and on v6 no write in progress, so that no work is done that its
    commit would refuse (the plan stays requested for the runner's next poll)."""
    v6 = ((NoWriteInProgress(instant, LOG_COMPACTION_LIFECYCLE.label, heartbeat_window_ms),)
          if table.config.version < 8 else ())
    return (*lease_requirements(fence), *v6)


def commit_requirements(table: Any, instant: str, tasks: Sequence[Any], stats: Mapping[str, Sequence[WriteStat]],
                        fence: Fence | None = None, *, heartbeat_window_ms: int = 120_000
                        ) -> tuple[CommitRequirement, ...]:
    """The requirements the commit of log compaction ``instant`` checks under the lock, in order.
    ``heartbeat_window_ms``: how young a heartbeat shows a write in progress (interval x misses)."""
    still = StillInflight(instant, Action.LOG_COMPACTION, LOG_COMPACTION_LIFECYCLE.label)
    v6 = ((NoLogBetweenPlannedAndCompacted.of(instant, tasks, stats),
           NoWriteInProgress(instant, LOG_COMPACTION_LIFECYCLE.label, heartbeat_window_ms))
          if table.config.version < 8 else ())
    return (*lease_requirements(fence), still, *v6)


__all__ = ["CompactedSlice", "NoLogBetweenPlannedAndCompacted", "commit_requirements", "slice_log_names",
           "start_requirements"]
