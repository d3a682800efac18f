"""Scheduling a log compaction (RFC-48): choose file slices, persist ``L.logcompaction.requested``.

Under the table lock (the completed instants cannot change while the plan is built):

1. refuse tables tablesvc cannot compact (``table.writable.require_writable``);
2. while any write (deltacommit, commit, replacecommit, clustering, log compaction) is pending,
   schedule nothing: its log blocks would be placed *before* the compacted block in reader
   order although they are newer (docs/log-compaction.md, "Ordering");
3. candidates = latest slices whose valid log blocks (completed instants, not superseded by an
   earlier log compaction, not rolled back) number at least ``hoodie.log.compaction.blocks.threshold``
   (default 5; ``force`` lowers it to 2), minus file groups in a pending compaction, log
   compaction or clustering plan (``compaction.planner.pinned_file_groups``);
4. create ``L.logcompaction.requested``: ``HoodieCompactionPlan`` v2 with
   ``strategy.compactorClassName = LogCompactionExecutionHelper`` and ``preserveHoodieMetadata``.
"""

from __future__ import annotations

from typing import Any

from tablesvc.config.registry import REGISTRY
from tablesvc.config.values import describe_source, registered_value
from tablesvc.merge import ReadContext, select_blocks
from tablesvc.services.compaction.planner import (
    MB, pending_writes, pinned_file_groups,
)
from tablesvc.services.metrics import LogCompactionPlanMetrics
from tablesvc.services.plan_execution import schedule_plan
from tablesvc.services.result import ServiceResult
from tablesvc.services.metadata_drops import drop_opted_out_partitions, with_drop
from tablesvc.table.writable import LOG_COMPACT, require_writable
from timeline.active import Timeline
from timeline.instant import Action
from timeline.payloads import CompactionOperation, CompactionPlan
from timeline.payloads.compaction_plan import LOG_COMPACTION_EXECUTOR, CompactionStrategy

ACTION = "logcompaction"
THRESHOLD_KEY = "hoodie.log.compaction.blocks.threshold"
DEFAULT_THRESHOLD = REGISTRY[THRESHOLD_KEY].default   # one default, the registry's (Hudi's: 5)
FORCED_THRESHOLD = 2


def blocks_threshold(config: Any, force: bool = False) -> int:
    """The block threshold in force: the configured one (parsed and checked by the registry, a
    plain mapping's text too), lowered to ``FORCED_THRESHOLD`` when ``force``."""
    value = registered_value(config, THRESHOLD_KEY)
    return min(value, FORCED_THRESHOLD) if force else value


def threshold_origin(config: Any, force: bool = False) -> str:
    """Which threshold is in force and where it came from, for the "not due" reason."""
    configured, source = registered_value(config, THRESHOLD_KEY), describe_source(config, THRESHOLD_KEY)
    if force:
        where = ", the default" if source == "the default" else f" from {source}"
        return (f"threshold {blocks_threshold(config, force)} is forced (schedule --force, or run without a pending "
                f"plan), over the configured {configured}{where}")
    return f"threshold {configured} " + ("is the default" if source == "the default" else f"comes from {source}")


def build_log_compaction_plan(table, timeline: Timeline, config: Any = None, *,
                              force: bool = False
                              ) -> tuple[CompactionPlan | None, str, LogCompactionPlanMetrics | None]:
    """The plan for the table as ``timeline`` shows it and its metrics, or (None, why not, None)."""
    writes = pending_writes(table, timeline, config)
    if writes:
        return None, (f"write {writes[0]} is pending; its log blocks could not be ordered after the compacted "
                      "block, so nothing is scheduled until it completes or is rolled back"), None
    threshold = blocks_threshold(config, force)
    pinned = pinned_file_groups(table, timeline)
    ctx = ReadContext.for_table(table, timeline)
    ops: list[CompactionOperation] = []
    skipped_pinned = below = single = 0
    most = 0
    for s in table.file_system_view(timeline).latest_file_slices(table.storage):
        if not s.log_files:
            continue
        selection = select_blocks(table.storage, tuple(lf.path for lf in s.log_files), ctx)
        n_blocks = len(selection.blocks)
        if not n_blocks:
            continue
        if (s.partition, s.file_id) in pinned:
            skipped_pinned += 1
            continue
        if n_blocks < threshold:
            below += 1
            most = max(most, n_blocks)
            continue
        if len({sb.block.instant_time for sb in selection.blocks}) < 2:
            single += 1  # all blocks of one instant (a write's [data][delete], or an earlier log compaction)
            continue
        used_paths = {sb.path for sb in selection.blocks}
        logs = [lf for lf in s.log_files if lf.path in used_paths]
        log_bytes = sum(lf.size for lf in logs)
        metrics = {"TOTAL_LOG_FILES": float(len(logs)), "TOTAL_LOG_FILES_SIZE": float(log_bytes),
                   "TOTAL_LOG_BLOCKS": float(n_blocks), "TOTAL_IO_READ_MB": log_bytes / MB,
                   "TOTAL_IO_WRITE_MB": log_bytes / MB, "TOTAL_IO_MB": 2 * log_bytes / MB}
        ops.append(CompactionOperation(base_instant_time=s.base_instant, file_id=s.file_id, partition_path=s.partition,
                                       data_file_path=s.base_file.file_name if s.base_file else None,
                                       delta_file_paths=tuple(lf.file_name for lf in logs), metrics=metrics))
    if not ops:
        parts = []
        if below:   # the threshold decided: which one, and where it came from
            parts.append(f"{below} file group{'s' if below != 1 else ''} with log blocks below the threshold "
                         f"(at most {most} valid log block{'s' if most != 1 else ''} < {threshold}, {THRESHOLD_KEY}); "
                         + threshold_origin(config, force))
        if skipped_pinned:
            parts.append(f"{skipped_pinned} file group{'s' if skipped_pinned != 1 else ''} already in a pending "
                         "compaction, log compaction or clustering plan")
        if single:
            parts.append(f"{single} file group{'s' if single != 1 else ''} whose valid log blocks all come from "
                         "one instant (nothing to stitch)")
        return None, ("; ".join(parts) if parts else "no file group has log blocks of completed delta commits"), None
    ops.sort(key=lambda op: (op.partition_path or "", op.file_id or ""))
    plan = CompactionPlan(operations=tuple(ops), extra_metadata=None, version=2,
                          strategy=CompactionStrategy(LOG_COMPACTION_EXECUTOR, None, 1), preserve_hoodie_metadata=True)
    metrics = LogCompactionPlanMetrics(
        file_groups=len(ops), log_files=sum(len(op.delta_file_paths or ()) for op in ops),
        log_blocks=int(sum(op.metrics["TOTAL_LOG_BLOCKS"] for op in ops)),  # type: ignore[index]
        threshold=threshold, skipped_in_pending_plans=skipped_pinned or None, below_threshold=below or None)
    return plan, "", metrics


def schedule_log_compaction(table, config: Any = None, *, force: bool = False,
                            instant: str | None = None) -> ServiceResult:
    """Write a log compaction plan (``SCHEDULED``) or say why not (``NOTHING_TO_DO``).

    ``force`` lowers the block threshold to 2; ``instant`` fixes L (later than every time)."""
    dropped = drop_opted_out_partitions(table, LOG_COMPACT, config)
    require_writable(table, LOG_COMPACT)
    return with_drop(schedule_plan(table, Action.LOG_COMPACTION, ACTION,
                                   lambda timeline: build_log_compaction_plan(table, timeline, config, force=force),
                                   instant, planned="planned for log compaction"), dropped)


__all__ = ["ACTION", "DEFAULT_THRESHOLD", "THRESHOLD_KEY", "blocks_threshold", "build_log_compaction_plan",
           "schedule_log_compaction", "threshold_origin"]
