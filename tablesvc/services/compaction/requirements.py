"""What a compaction's commit requires, as values (``services/lifecycle/requirements.py``).

In order: the lease (a runner's worker only), the plan still inflight, and on table version 6
no write into a planned slice.  v8/v9 need no third: a log joins the slice its completion time
falls into, so a write that completes after the plan never lands in a compacted slice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tablesvc.errors import ConflictError
from tablesvc.services.lifecycle import (
    COMPACTION_LIFECYCLE, CommitRequirement, Fence, StillInflight, lease_requirements,
)
from timeline.active import Timeline
from timeline.instant import Action
from timeline.payloads import CompactionPlan


@dataclass(frozen=True)
class NoWriteIntoPlannedSlice(CommitRequirement):
    """v6: no delta commit completed after the plan wrote a log into a planned slice (its stat's
    previous commit is the slice's base instant).  The compacted base file replaces the slice,
    so such a log would be lost.  ``slices``: (partition, file id, base instant) per operation."""

    name: ClassVar[str] = "no-write-into-planned-slice"

    instant: str
    slices: tuple[tuple[str, str, str | None], ...]

    @classmethod
    def of(cls, plan: CompactionPlan, instant: str) -> "NoWriteIntoPlannedSlice":
        return cls(instant, tuple((op.partition_path or "", op.file_id, op.base_instant_time)
                                  for op in plan.operations or ()))

    def describe(self) -> str:
        return (f"no delta commit completed after {self.instant} wrote a log into one of its "
                f"{len(self.slices)} planned slices (the compacted base file would hide it)")

    def check(self, table: Any, timeline: Timeline | None) -> None:
        assert timeline is not None
        base_of = {(partition, file_id): base for partition, file_id, base in self.slices}
        for done in timeline.completed(Action.DELTA_COMMIT):
            if done.timestamp <= self.instant:
                continue
            metadata = timeline.commit_metadata(table.storage, done)
            for stat in metadata.write_stats() if metadata is not None else ():
                old = base_of.get((stat.partition_path or "", stat.file_id))
                if old is not None and stat.is_log_write and stat.prev_commit == old:
                    raise ConflictError(f"compaction {self.instant}: write {done.timestamp} added {stat.path} to "
                                        f"the slice {old} being compacted; roll back one of them")


def commit_requirements(table: Any, plan: CompactionPlan, instant: str,
                        fence: Fence | None = None) -> tuple[CommitRequirement, ...]:
    """The requirements the commit of compaction ``instant`` checks under the lock, in order."""
    still = StillInflight(instant, Action.COMPACTION, COMPACTION_LIFECYCLE.label)
    v6 = (NoWriteIntoPlannedSlice.of(plan, instant),) if table.config.version < 8 else ()
    return (*lease_requirements(fence), still, *v6)


__all__ = ["NoWriteIntoPlannedSlice", "commit_requirements"]
