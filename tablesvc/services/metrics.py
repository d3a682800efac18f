"""What a service run measured, as one typed value per service (``ServiceResult.metrics``).

Each type is a frozen dataclass whose fields are the numbers the run reports, in the order they
are printed.  ``as_dict()`` is what ``render()`` and ``--json`` show: every field in order, except
those left ``None``, which that outcome of the service does not report (a dry-run clean reports
the files it would delete, a finished one the files it deleted).  ``metrics["file_groups"]``
still works (it reads ``as_dict()``), as it did when metrics were a plain dict.

Counts are plain numbers of things; ``*_bytes`` are bytes; ``seconds`` is wall-clock time of the
run, rounded to milliseconds; instants and completion times are timeline timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class ServiceMetrics:
    """No numbers: what a result carries when its run measured nothing (nothing to do, say)."""

    def as_dict(self) -> dict[str, Any]:
        """The reported fields in order, ``None`` ones left out; tuples as lists (as JSON has them)."""
        shown: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                shown[f.name] = list(value) if isinstance(value, tuple) else value
        return shown

    @property
    def rows_written(self) -> int:
        """Records the run wrote into data files (the runner's rows per second); 0 for services
        that write none (planning, clean, rollback)."""
        return 0

    def __getitem__(self, key: str) -> Any:
        # Python API users and the benchmarks read ``result.metrics["x"]``, as from the old dict.
        return self.as_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.as_dict()

    def __bool__(self) -> bool:
        # As the old dict: a result that reports nothing is falsy (render() prints no "; ...").
        return bool(self.as_dict())


# -- planning (schedule_compaction, schedule_log_compaction) ---------------------------------------
@dataclass(frozen=True)
class PlanMetrics(ServiceMetrics):
    """What a compaction or log compaction plan holds; the two planners add their own fields."""
    file_groups: int                      # operations in the plan, one per file group
    log_files: int                        # log files the plan's operations name


@dataclass(frozen=True)
class CompactionPlanMetrics(PlanMetrics):
    log_bytes: int                        # bytes of those log files
    skipped_in_pending_plans: int | None = None   # eligible file groups already in a pending plan (if any)
    left_for_later: int | None = None     # candidates past hoodie.compaction.target.io (if any)


@dataclass(frozen=True)
class LogCompactionPlanMetrics(PlanMetrics):
    log_blocks: int                       # valid log blocks the plan will stitch
    threshold: int                        # the block threshold in force (lowered when forced)
    skipped_in_pending_plans: int | None = None   # eligible file groups already in a pending plan (if any)
    below_threshold: int | None = None    # file groups with fewer valid blocks than the threshold (if any)


# -- execution --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompactionMetrics(ServiceMetrics):
    """A compaction that ran: one new base file per file group."""
    file_groups: int                      # file groups compacted
    log_files: int                        # log files merged into them
    log_bytes: int                        # bytes of those log files
    log_records: int                      # log records read (deletes included)
    records_written: int                  # rows in the new base files
    bytes_written: int                    # bytes of the new base files
    seconds: float                        # wall time of the run
    completion_time: str | None = None    # the instant's completion time (None on table version 6)

    @property
    def rows_written(self) -> int:
        return self.records_written


@dataclass(frozen=True)
class LogCompactionMetrics(ServiceMetrics):
    """A log compaction that ran: one compacted log block (and deletes) per file group."""
    file_groups: int                      # file groups log-compacted
    log_files: int                        # log files whose blocks were stitched
    log_blocks: int                       # log blocks read
    log_records: int                      # log records read
    records_written: int                  # records in the compacted blocks
    deletes_written: int                  # deletes in the compacted delete blocks
    bytes_written: int                    # bytes of the new log files
    seconds: float                        # wall time of the run
    completion_time: str | None = None    # the instant's completion time (None on table version 6)
    rolled_back: str | None = None        # the failed attempt rolled back first, if there was one

    @property
    def rows_written(self) -> int:
        return self.records_written


@dataclass(frozen=True)
class CleanMetrics(ServiceMetrics):
    """A clean; which fields are reported depends on the outcome:

    scheduled: files_to_delete; dry run: files_to_delete, files; nothing due: partitions_scanned;
    done: files_deleted, partitions, policy, earliest_commit_to_retain; some deletes failed (the
    clean stays pending): files_deleted, files_failed."""
    files_to_delete: int | None = None    # files the plan lists
    files: tuple[str, ...] | None = None  # their paths (dry run only; the CLI prints one a line)
    files_deleted: int | None = None      # files deleted (an already missing one counts)
    files_failed: int | None = None       # files whose delete failed
    partitions: int | None = None         # partitions the clean touched
    policy: str | None = None             # hoodie.cleaner.policy of the plan
    earliest_commit_to_retain: str | None = None  # "" when the policy keeps no commit
    partitions_scanned: int | None = None  # partitions the planner listed (0: decided from the timeline)

    def without_files(self) -> CleanMetrics:
        """The same numbers without the list of paths (the CLI prints those one a line)."""
        return replace(self, files=None)


@dataclass(frozen=True)
class RollbackMetrics(ServiceMetrics):
    """A rollback of instant ``target``; which other fields are reported depends on the outcome:

    dry run: files_to_delete, command_blocks; done: files_deleted, command_blocks, resumed,
    completion_time; a rollback whose last steps were finished: resumed; an instant left pending
    (``rollback --wait --json``): target alone."""
    target: str                           # the instant rolled back
    files_to_delete: int | None = None    # files the plan deletes (dry run)
    files_deleted: int | None = None      # files deleted
    command_blocks: int | None = None     # rollback command blocks appended (table version 6)
    resumed: bool | None = None           # an earlier, interrupted rollback of target was finished
    completion_time: str | None = None    # the rollback's completion time (None on table version 6)

    def as_dict(self) -> dict[str, Any]:
        shown = super().as_dict()
        if self.files_deleted is not None:
            # A rollback that ran names its completion time even where the layout has none (null).
            shown["completion_time"] = self.completion_time
        return shown


__all__ = ["CleanMetrics", "CompactionMetrics", "CompactionPlanMetrics", "LogCompactionMetrics",
           "LogCompactionPlanMetrics", "PlanMetrics", "RollbackMetrics", "ServiceMetrics"]
