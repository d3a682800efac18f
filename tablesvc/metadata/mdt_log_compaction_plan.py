"""When the metadata table log-compacts itself, at which instant, and what its plan holds (Hudi 1.2,
table versions 8 and 9; docs/metadata-table.md, "The metadata table's log compaction").

* **Whether** (``HoodieMetadataConfig``): ``hoodie.metadata.log.compaction.enable`` (default
  false) and ``hoodie.metadata.log.compaction.blocks.threshold`` (default 5), read as the metadata
  clean reads its keys: from the committing command's configuration (defaults < the table's
  ``.hoodie/tablesvc.yaml`` < ``--config`` < ``--conf`` / the API's options;
  ``maintain.metadata_services_config``).
* **When** (``HoodieBackedTableMetadataWriter.compactIfNecessary``, then
  ``ScheduleCompactionActionExecutor.needLogCompact``): after the metadata compaction's turn, when
  no compaction or log compaction of the metadata table is pending, and
  min(completed delta commits since the latest compaction, delta commits completed after the
  latest log compaction) is at least the threshold.  The latest log compaction is the newest
  instant with a ``logcompaction`` file in any state (``CompactionUtils.getLastLogCompaction``);
  while it is pending nothing is due.  Without any log compaction every delta commit counts.
* **At which instant**: a new instant time (``scheduleLogCompaction(Option.empty())``).  tablesvc
  schedules none while a data instant is pending whose metadata delta commit completed (a writer
  died between its two commits): a log compaction later than that delta commit would hold it
  (``MetadataTableWriter.holder_of``) and the rollback of the dead write could not take it out.
* **What** (``HoodieLogCompactionPlanGenerator``): the latest slice of every file group (all the
  logs of a group without a base file: ``mdt_compaction_plan.group_slices``) that has at least
  ``threshold`` log files or valid log blocks (the reader's block selection and the data table's
  valid instants), with its log files that completed before the instant; never a group of a
  pending compaction or log compaction.  tablesvc also leaves out a slice whose merged blocks
  include a delta commit (other than a log compaction's) at or after the earliest pending data
  instant (the committing ``T`` included): that instant's delta commit, written later, sorts
  before the compacted block in Java's reader (log files by the instant in their name; the
  compacted block takes the place of the newest block it replaced), so Java would merge the
  compacted, older records over it (a clean's deleted files, a write's deleted keys would come
  back).  Earlier log compactions in the slice were planned under the same rule, so their own
  blocks are below every instant pending now.  One ``HoodieCompactionOperation`` each (the metrics of
  the unbounded compaction strategy, as the metadata compaction's), plan version 2, strategy
  ``LogCompactionExecutionHelper``, ``preserveHoodieMetadata`` true.
"""

from __future__ import annotations

from typing import Any

from tablesvc.config.loader import load_config
from tablesvc.config.values import registered_value
from tablesvc.fsview.view import FileSystemView
from tablesvc.logformat import read_log_file
from tablesvc.merge.blocks import select_from_contents
from tablesvc.metadata.mdt_compaction_plan import (
    PlannedSlice,
    delta_commits_since_compaction,
    group_slices,
    metadata_partitions,
)
from tablesvc.metadata.reader import MetadataTable
from timeline.active import Timeline
from timeline.instant import Action
from timeline.payloads import CompactionPlan
from timeline.payloads.compaction_plan import LOG_COMPACTION_EXECUTOR, CompactionStrategy

ENABLE_KEY = "hoodie.metadata.log.compaction.enable"
THRESHOLD_KEY = "hoodie.metadata.log.compaction.blocks.threshold"
PLAN_VERSION = 2


def settings(table: Any, config: Any = None) -> tuple[bool, int]:
    """(enabled, threshold): from ``config``, the committing command's configuration
    (``maintain.metadata_services_config``); None: ``table``'s ``.hoodie/tablesvc.yaml`` over the
    defaults."""
    if config is None:
        config = load_config(table.storage, table_path=table.base_path)
    return bool(registered_value(config, ENABLE_KEY)), int(registered_value(config, THRESHOLD_KEY))


def latest_log_compaction(mdt: Timeline) -> tuple[str, bool] | None:
    """The newest log compaction of the metadata table (instant, completed?), or None."""
    for instant in reversed(mdt.instants):
        files = mdt.files_of(instant.timestamp)
        if any(f.action is Action.LOG_COMPACTION for f in files):
            return instant.timestamp, any(f.is_completed for f in files)
    return None


def delta_commits_since_log_compaction(mdt: Timeline) -> int:
    """Completed delta commits (log compactions included) that completed after the latest log
    compaction's instant, other than itself; 0 while it is pending; all without one."""
    latest = latest_log_compaction(mdt)
    done = mdt.completed(Action.DELTA_COMMIT)
    if latest is None:
        return len(done)
    ts, completed = latest
    if not completed:
        return 0
    return sum(1 for d in done if d.timestamp != ts and (d.completion_time or d.timestamp) > ts)


def log_compaction_due(mdt: Timeline, threshold: int) -> bool:
    return min(delta_commits_since_compaction(mdt), delta_commits_since_log_compaction(mdt)) >= threshold


def why_not_now(data: Timeline, mdt: Timeline) -> str | None:
    """Why no log compaction may be scheduled now (None: it may)."""
    pending = mdt.pending_compactions() + mdt.pending_log_compactions()
    if pending:
        return f"the metadata table's {pending[0].action.value} {pending[0].timestamp} is pending"
    done_on_mdt = {i.timestamp for i in mdt.completed()}
    stuck = sorted(i.timestamp for i in data.pending() if i.timestamp in done_on_mdt)
    if stuck:
        return (f"data instant {stuck[0]} is pending while its metadata delta commit completed; a log "
                "compaction would hold that delta commit")
    return None


def valid_blocks(reader: MetadataTable, paths: list[str]) -> list:
    """The blocks of the log files ``paths`` a reader of the metadata table merges."""
    contents = [read_log_file(reader.storage, p) for p in paths]
    selection = select_from_contents(contents, reader.log_read_context(), hfile_blocks=True)
    valid = reader.valid_instants
    return [sb for sb in selection.blocks if sb.block.instant_time in valid]


def _log_compaction_times(mdt: Timeline) -> frozenset[str]:
    return frozenset(i.timestamp for i in mdt.instants
                     if any(f.action is Action.LOG_COMPACTION for f in mdt.files_of(i.timestamp)))


def build_plan(reader: MetadataTable, mdt: Timeline, instant: str, threshold: int,
               earliest_pending: str | None = None, *, blocks_only: bool = False) -> CompactionPlan | None:
    """The plan of a log compaction at ``instant``, or None when no slice qualifies.
    ``earliest_pending``: the earliest pending data instant (the one committing included); a slice
    whose merged blocks include a delta commit at or after it is left out (module doc).
    ``blocks_only`` (version 6, Hudi 0.15): a slice qualifies by its valid blocks alone, not by
    its number of log files."""
    completion = mdt.completion_times()
    compactions = _log_compaction_times(mdt)
    storage, base = reader.storage, reader.base_path
    view = FileSystemView.build(storage, base, reader.config, mdt, metadata_partitions(storage, base))
    planned: list[PlannedSlice] = []
    for s in sorted(group_slices(view), key=lambda x: (x.partition, x.file_id)):
        if not s.log_files:
            continue
        if ((blocks_only or len(s.log_files) < threshold)
                and len(valid_blocks(reader, [lf.path for lf in s.log_files])) < threshold):
            continue
        # an archived delta commit (absent from the active timeline) completed long before
        logs = [lf for lf in s.log_files if completion.get(lf.name.instant, lf.name.instant) < instant]
        chosen = valid_blocks(reader, [lf.path for lf in logs]) if logs else []
        if not chosen:
            continue
        originals = {sb.block.instant_time for sb in chosen} - compactions
        if earliest_pending is not None and any(t >= earliest_pending for t in originals):
            continue
        planned.append(PlannedSlice(s, tuple(lf.file_name for lf in logs), sum(lf.size or 0 for lf in logs),
                                    (s.base_file.size or 0) if s.base_file else 0))
    if not planned:
        return None
    return CompactionPlan(operations=tuple(p.operation() for p in planned), extra_metadata={},
                          version=PLAN_VERSION, strategy=CompactionStrategy(LOG_COMPACTION_EXECUTOR, None, 1),
                          preserve_hoodie_metadata=True, missing_schedule_partitions=())


__all__ = ["ENABLE_KEY", "THRESHOLD_KEY", "build_plan", "delta_commits_since_log_compaction", "latest_log_compaction",
           "log_compaction_due", "settings", "valid_blocks", "why_not_now"]
