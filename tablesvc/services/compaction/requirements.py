"""What a compaction's commit requires, as values (``services/lifecycle/requirements.py``).

In order: the lease (a runner's worker only), the plan still inflight, and on table version 6
no write into a planned slice that the plan does not list.  v8/v9 need no third: a log joins the
slice its completion time falls into, so a write that completes after the plan never lands in a
compacted slice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tablesvc.errors import ConflictError, HiddenWriteError
from tablesvc.fsview.names import LogFileName
from tablesvc.logformat import BlockType, LogBlock, iter_blocks
from tablesvc.services.lifecycle import (
    COMPACTION_LIFECYCLE, CommitRequirement, Fence, StillInflight, lease_requirements,
)
from timeline.active import Timeline
from timeline.instant import Action
from timeline.payloads import CompactionPlan
from timeline.storage import join


@dataclass(frozen=True)
class PlannedSlice:
    """One operation of a compaction plan: the slice it replaces and the log files it lists."""

    partition: str
    file_id: str
    base_instant: str | None
    planned_logs: frozenset[str]      # file names


# Blocks that carry a write's records; a command block (a rollback's) hides nothing when left out.
_RECORD_BLOCKS = frozenset({BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.HFILE_DATA, BlockType.DELETE})


@dataclass(frozen=True)
class NoWriteIntoPlannedSlice(CommitRequirement):
    """v6: no log file that the plan does not list lies in a slice the compaction replaces, with
    records of a write that committed, or of a pending write later than the plan.  The compacted
    base file starts a new slice, and v6 names a log after its slice's base instant, so such a log
    would drop out of every reader's view: a lost write.

    The slices' folders are listed (one listing per partition) and every log file of a planned
    slice that the plan does not list is read for its blocks' instants, whatever their timestamp:

    * records of a completed instant: ``HiddenWriteError`` (exit 1; the plan cannot change, so
      retrying cannot help: the job is set aside after the runner's failures);
    * records of a pending instant later than the plan: ``ConflictError`` (retry later: that write
      may still fail; Hudi 0.15's conflict check lets it commit, since the compaction is earlier);
    * records of a pending instant earlier than the plan: nothing (Hudi 0.x's conflict check aborts
      that write: a compaction later than it changed its file group), nor blocks of instants that are
      gone (rolled back) and rollback command blocks."""

    name: ClassVar[str] = "no-write-into-planned-slice"
    reads_timeline: ClassVar[bool] = True

    instant: str
    slices: tuple[PlannedSlice, ...]

    @classmethod
    def of(cls, plan: CompactionPlan, instant: str) -> "NoWriteIntoPlannedSlice":
        return cls(instant, tuple(
            PlannedSlice(op.partition_path or "", op.file_id, op.base_instant_time,
                         frozenset(n.rsplit("/", 1)[-1] for n in op.delta_file_paths or ()))
            for op in plan.operations or ()))

    def describe(self) -> str:
        return (f"no log file outside the plan of {self.instant}, of a committed write or of a pending write "
                f"later than it, lies in one of its {len(self.slices)} planned slices (the compacted base file "
                "would hide it)")

    def check(self, table: Any, timeline: Timeline | None) -> None:
        assert timeline is not None
        by_partition: dict[str, dict[str, PlannedSlice]] = {}
        for s in self.slices:
            by_partition.setdefault(s.partition, {})[s.file_id] = s
        for partition, groups in sorted(by_partition.items()):
            for info in table.storage.list_dir(join(table.base_path, partition)):
                if info.is_dir or not info.name.startswith("."):
                    continue
                try:
                    ln = LogFileName.parse(info.name)
                except Exception:   # not a log file (Hadoop's .crc siblings among them)
                    continue
                planned = groups.get(ln.file_id)
                if planned is None or ln.cdc or ln.instant != planned.base_instant or info.name in planned.planned_logs:
                    continue
                self._judge(table, timeline, partition, info.name, planned)

    def _judge(self, table: Any, timeline: Timeline, partition: str, name: str, planned: PlannedSlice) -> None:
        path = join(table.base_path, partition, name)
        try:
            data = table.storage.read_bytes(path)
        except FileNotFoundError:   # removed meanwhile (a rollback): nothing to hide
            return
        writes = sorted({b.instant_time for b in iter_blocks(data, path)
                         if isinstance(b, LogBlock) and b.block_type in _RECORD_BLOCKS and b.instant_time})
        where = f"file group {planned.file_id} (partition {partition!r}), slice {planned.base_instant}"
        for write in writes:
            if timeline.is_completed(write):
                raise HiddenWriteError(
                    f"compaction {self.instant}: the committed write {write} put {name} into {where}, which the "
                    f"plan replaces without listing it: completing would hide that write.  Roll the write back "
                    f"(`tablesvc rollback --instant {write}`, then write its records again), then `tablesvc retry` "
                    "the job or run the compaction again")
        for write in writes:
            current = timeline.get(write)
            if current is not None and not current.is_completed and write > self.instant:
                raise ConflictError(
                    f"compaction {self.instant}: the pending write {write} put {name} into {where}, which the "
                    "plan replaces; completing now would hide it once it commits; retry once it is rolled back "
                    "(if it commits, the compaction is refused for good, naming it)")


def commit_requirements(table: Any, plan: CompactionPlan, instant: str,
                        fence: Fence | None = None) -> tuple[CommitRequirement, ...]:
    """The requirements the commit of compaction ``instant`` checks under the lock, in order."""
    still = StillInflight(instant, Action.COMPACTION, COMPACTION_LIFECYCLE.label)
    v6 = (NoWriteIntoPlannedSlice.of(plan, instant),) if table.config.version < 8 else ()
    return (*lease_requirements(fence), still, *v6)


__all__ = ["NoWriteIntoPlannedSlice", "PlannedSlice", "commit_requirements"]
