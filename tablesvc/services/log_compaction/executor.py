"""Executing a log compaction plan: a slice's log blocks -> one compacted block in a new log file.

Steps for a plan ``L`` (docs/log-compaction.md has the crash table):

1. ``L`` inflight?  Heartbeat alive -> ``ConflictError``.  Expired or missing -> roll it back
   (``tablesvc.services.rollback.rollback``: deletes the files its markers list, reverts L to
   requested), then *remove* the old plan and schedule a fresh one: Hudi treats log compaction
   plans as mutable, and the slice may have grown since.
2. Under the table lock: ``L`` must be requested; the heartbeat starts, then ``L.logcompaction.inflight``.
3. One task per operation (a Spark job, or in-process when ``spark`` is None): select and merge
   only the plan's log files' blocks as of ``L`` with the reader's own code (no base file), and
   write ``[data block][delete block]`` with ``INSTANT_TIME=L`` and ``COMPACTED_BLOCK_TIMES`` =
   the merged instants (newest first) as a new log file, after an APPEND marker.
4. Files with a marker but no write stat are deleted.
5. Under the lock, once its requirements hold (``requirements.py``: the lease, ``L`` still
   inflight, v6: no other log file was slotted between the planned logs and ours): complete
   ``L`` as ``deltacommit`` (``operationType=LOG_COMPACT``, ``extraMetadata.schema``).  Then
   markers and heartbeat go.

Steps 2, 4 and 5 are the one instant lifecycle (``services/lifecycle``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tablesvc.config.values import registered_value
from tablesvc.errors import ConflictError, InvalidInputError
from tablesvc.fsview.names import LogFileName
from tablesvc.logformat import (
    BlockType, DeleteRecord, HeaderKey, LogBlock, encode_blocks, encode_delete_records, new_header,
    with_compacted_block_times,
)
from tablesvc.merge import ReadContext, fold_log, log_inputs, select_blocks
from tablesvc.merge.schema import work_schema
from tablesvc.services.lifecycle import (
    LOG_COMPACTION_LIFECYCLE, InstantLifecycle, NoWriteInProgress, check_all, lease_requirements,
)
from tablesvc.services.lifecycle.collisions import collided_plan, collided_plans
from tablesvc.services.log_compaction.requirements import commit_requirements, slice_log_names, start_requirements
from tablesvc.services.plan_execution import (
    Fence, all_stats, heartbeat_settings, pending_plan, plans_on_timeline, plural, refuse_if_alive,
    refuse_shared_file_groups, run_plans, total,
)
from tablesvc.services.log_compaction.planner import ACTION, schedule_log_compaction
from tablesvc.services.metrics import LogCompactionMetrics
from tablesvc.services.result import ServiceResult, Status
from tablesvc.services.metadata_drops import drop_opted_out_partitions, prepend_drop
from tablesvc.table.writable import LOG_COMPACT, require_writable
from tablesvc.spark.file_group_tasks import run_file_group_tasks
from tablesvc.write.file_group_writer import log_data_block, write_new_log_file
from tablesvc.write.markers import rel_path
from tablesvc.write.schema_evolution import align_to_schema, with_meta_fields
from timeline.instant import Action, Instant, State
from timeline.payloads import CommitMetadata, CompactionPlan, WriteStat, encode_commit_metadata
from timeline.storage import Storage, join

OPERATION_TYPE = "LOG_COMPACT"


@dataclass(frozen=True)
class LogCompactionTask:
    """One plan operation, as plain values (pickled to a Spark task)."""

    instant: str
    partition: str
    file_id: str
    base_instant: str | None
    base_file: str | None               # name (not read; recorded in the write stat)
    log_files: tuple[str, ...]          # names, reader order
    log_bytes: int
    schema_json: str                    # data schema (no meta fields)
    table_version: int
    first_version: int                  # v6: max existing version + 1; v8/v9: 1
    block_format: str = "avro"          # of the compacted data block: hoodie.logfile.data.block.format

    @property
    def name_instant(self) -> str:
        if self.table_version >= 8:
            return self.instant
        if not self.base_instant:
            raise InvalidInputError(f"log compaction {self.instant}: file group {self.file_id} has no base instant")
        return self.base_instant


@dataclass(frozen=True)
class MergedLog:
    """The log side of a slice folded per key: surviving records and delete tombstones."""

    records: pa.Table                   # work schema, one row per live key, arrival order
    deletes: tuple[DeleteRecord, ...]   # keys whose final state is a delete
    instants: tuple[str, ...]           # instants of the merged blocks, newest first
    blocks: int
    log_records: int
    log_deletes: int


def merge_log_blocks(storage: Storage, ctx: ReadContext, log_paths: tuple[str, ...]) -> MergedLog:
    """Select the blocks of ``log_paths`` as the reader does and fold them per key with the
    merger's log step (``fold_log``, no base file): its surviving records, and its tombstones as
    the delete records to write.  The rules (ordering values, deletes against records, deletes
    without an ordering value) are the merger's alone."""
    schema = work_schema(ctx)
    selection = select_blocks(storage, log_paths, ctx)
    inputs, n_records, n_deletes = log_inputs(selection, schema)
    log = fold_log(inputs, merge_mode=ctx.effective_merge_mode, ordering_field=ctx.ordering_field, schema=schema,
                   record_key_field=ctx.record_key_field, append_only=ctx.append_only)
    instants = tuple(sorted({sb.block.instant_time for sb in selection.blocks if sb.block.instant_time},
                            reverse=True))
    return MergedLog(log.records, log.tombstones, instants, len(selection.blocks), n_records, n_deletes)


def compacted_blocks(instant: str, schema_json: str, merged: MergedLog, block_format: str = "avro") -> list[LogBlock]:
    """``[data block]`` (always, possibly empty; Avro or Parquet) ``+ [delete block]`` (when a
    key ends deleted), both with ``INSTANT_TIME=instant`` and ``COMPACTED_BLOCK_TIMES``."""
    full_schema = with_meta_fields(schema_json)
    times = (HeaderKey.COMPACTED_BLOCK_TIMES, ",".join(merged.instants))
    data = log_data_block(block_format, instant, full_schema, align_to_schema(merged.records, full_schema))
    blocks = [with_compacted_block_times(data, merged.instants)]
    if merged.deletes:
        header = new_header([(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, full_schema), times])
        blocks.append(LogBlock(BlockType.DELETE, header, encode_delete_records(list(merged.deletes))))
    return blocks


def log_compact_file_group(storage: Storage, ctx: ReadContext, task: LogCompactionTask, token: str) -> WriteStat:
    """Merge one planned slice's log blocks and write them as one compacted log file."""
    started = time.monotonic()
    folder = join(ctx.base_path, task.partition)
    merged = merge_log_blocks(storage, ctx, tuple(join(folder, n) for n in task.log_files))
    if not merged.instants:
        raise ConflictError(f"log compaction {task.instant}: file group {task.file_id} has no valid log block "
                            "in its planned log files any more (rolled back?); roll it back and reschedule")
    scan_ms = int((time.monotonic() - started) * 1000)
    data = encode_blocks(compacted_blocks(task.instant, task.schema_json, merged, task.block_format))
    name, version = write_new_log_file(storage, ctx.base_path, task.instant, task.partition, task.file_id,
                                       task.name_instant, task.first_version, token, data)
    prev = task.base_instant if task.table_version < 8 else task.instant
    n = merged.records.num_rows
    return WriteStat(
        file_id=task.file_id, path=rel_path(task.partition, name), prev_commit=prev or "null",
        partition_path=task.partition, num_writes=n, num_update_writes=n, num_deletes=len(merged.deletes),
        total_write_bytes=len(data), total_write_errors=0, file_size_in_bytes=len(data), log_version=version,
        log_offset=0, base_file=task.base_file or "", log_files=task.log_files + (name,),
        total_log_records=merged.log_records + merged.log_deletes, total_log_files_compacted=len(task.log_files),
        total_log_size_compacted=task.log_bytes, total_log_blocks=merged.blocks,
        runtime_stats={"totalScanTime": scan_ms, "totalUpsertTime": int((time.monotonic() - started) * 1000) - scan_ms,
                       "totalCreateTime": 0})


# -- the driver ------------------------------------------------------------------------------------
def _tasks(table, plan: CompactionPlan, instant: str, schema_json: str,
           block_format: str = "avro") -> list[LogCompactionTask]:
    tasks = []
    version = table.config.version
    for op in plan.operations or ():
        if not op.file_id:
            raise InvalidInputError(f"log compaction {instant}: a plan operation has no fileId")
        logs = tuple(n.rsplit("/", 1)[-1] for n in op.delta_file_paths or ())
        if not logs:
            raise InvalidInputError(f"log compaction {instant}: the operation for {op.file_id} lists no log file")
        for n in logs:
            LogFileName.parse(n)
        partition = op.partition_path or ""
        first = 1
        if version < 8:
            existing = slice_log_names(table, partition, op.file_id, op.base_instant_time or "")
            first = max([ln.version for ln in existing] + [0]) + 1
        tasks.append(LogCompactionTask(
            instant=instant, partition=partition, file_id=op.file_id, base_instant=op.base_instant_time,
            base_file=op.data_file_path.rsplit("/", 1)[-1] if op.data_file_path else None, log_files=logs,
            log_bytes=int((op.metrics or {}).get("TOTAL_LOG_FILES_SIZE", 0)), schema_json=schema_json,
            table_version=version, first_version=first, block_format=block_format))
    return tasks


def _stale_v6_plan(table, plan: CompactionPlan) -> str | None:
    """v6: the first log file written into a planned slice after the plan (a version above the
    planned ones that the plan does not list), or None.  Such a plan can only be refused at its
    commit (``NoLogBetweenPlannedAndCompacted``: the compacted log would sort after the newer one),
    so it is dropped and planned afresh instead of run; it happens when a plan waited, requested,
    while a Hudi 0.x writer kept writing (``v6-no-write-in-progress``)."""
    for op in plan.operations or ():
        base = op.base_instant_time or ""
        planned = {n.rsplit("/", 1)[-1] for n in op.delta_file_paths or ()}
        planned_max = max((LogFileName.parse(n).version for n in planned if LogFileName.parse(n).instant == base),
                          default=0)
        for ln in slice_log_names(table, op.partition_path or "", op.file_id, base):
            if ln.version > planned_max and ln.name not in planned:
                return ln.name
    return None


def _recover_inflight(table, instant: Instant, config: Any, fence: Fence | None) -> str:
    """Roll back a dead attempt (or, for a stale requested v6 plan, nothing), drop its plan and
    schedule a fresh one; returns the new instant or ''."""
    if instant.state is not State.REQUESTED:
        refuse_if_alive(table, instant, "log compaction", config)
    if fence is not None:
        fence()  # the rollback below deletes files: only the job's owner may do that
    from tablesvc.services.rollback import rollback

    # v6: a Hudi 0.x write in progress may have loaded the timeline with this plan on it and read
    # the plan file later (its file-system view does): dropping it then fails that write with
    # "Could not read commit details ... logcompaction.requested" (seen in scenario 3).  So the
    # plan is rolled back and dropped only while no write is in progress; else retry later.
    quiet = ((NoWriteInProgress(instant.timestamp, "log compaction", _window_ms(config)),)
             if table.config.version < 8 else ())
    with table.timeline_writer.lock():
        check_all(quiet, table)
    if instant.state is not State.REQUESTED:
        rollback(table, instant.timestamp, config=config) if config is not None else rollback(table, instant.timestamp)
    writer = table.timeline_writer
    with writer.lock():
        check_all(quiet, table)
        now = table.timeline().get(instant.timestamp)
        if now is not None and now.state is State.REQUESTED and now.action is Action.LOG_COMPACTION:
            writer.remove_pending(now)  # the plan is mutable (Hudi): drop it, plan afresh
    scheduled = schedule_log_compaction(table, config, force=True)
    return scheduled.instant if scheduled.status is Status.SCHEDULED else ""


def _abandon_collided_plans(table) -> None:
    """v6: give up the requested plans whose time a Hudi 0.x write took (``collided_plan``); the
    timeline may show such a plan as that write's instant, so no listing of pending log compactions
    would find it.  What is left to run is scheduled afresh, with a new time."""
    for ts in collided_plans(table.timeline(), Action.LOG_COMPACTION):
        try:
            collided_plan(table, ts, Action.LOG_COMPACTION, "log compaction")
        except ConflictError:
            pass    # abandoned (InstantTimeCollision), or left for later: this run goes on to the others


def _window_ms(config: Any) -> int:
    interval, misses = heartbeat_settings(config)
    return interval * misses


def _execute(table, instant_ts: str, spark, config: Any, fence: Fence | None) -> ServiceResult:
    started = time.monotonic()
    # as a write's; a malformed value fails here, before anything moves
    block_format = registered_value(config, "hoodie.logfile.data.block.format")
    current = pending_plan(table, instant_ts, Action.LOG_COMPACTION, ACTION, "log compaction")
    if isinstance(current, ServiceResult):
        return current
    recovered_from = replaced = None     # the plan a fresh one replaces, and why
    if current.state is State.INFLIGHT:
        replaced = f"the failed attempt {instant_ts} was rolled back and its plan dropped"
    elif table.config.version < 8 and _stale_v6_plan(
            table, table.timeline().plan_of(table.storage, current)) is not None:
        replaced = f"the log compaction plan {instant_ts} went stale (a write added logs to its slices) and was dropped"
    if replaced:
        recovered_from = instant_ts      # the metrics name the instant a fresh plan replaced
        fresh = _recover_inflight(table, current, config, fence)
        if not fresh:
            return ServiceResult(ACTION, Status.NOTHING_TO_DO, None,
                                 f"{replaced}; nothing is eligible for a fresh plan")
        instant_ts = fresh
    timeline = table.timeline()
    plan: CompactionPlan = timeline.plan_of(table.storage, timeline.require(instant_ts))
    refuse_shared_file_groups(table, timeline, instant_ts, plan, "log compaction")
    # On failure L stays inflight without a heartbeat: the next run rolls it back and reschedules.
    lease = lease_requirements(fence)
    interval, misses = heartbeat_settings(config)
    life = InstantLifecycle(table, LOG_COMPACTION_LIFECYCLE, heartbeat_interval_ms=interval, config=config)
    with life.start(Instant(instant_ts, Action.LOG_COMPACTION, State.REQUESTED),
                    start_requirements(table, instant_ts, interval * misses, fence)):
        timeline = table.timeline()
        ctx = ReadContext.for_table(table, timeline, as_of=instant_ts)
        schema_json = ctx.table_schema_json or table.schema(timeline)
        if not schema_json:
            raise InvalidInputError(f"log compaction {instant_ts}: the table has no schema")
        tasks = _tasks(table, plan, instant_ts, schema_json, block_format)
        stats = run_file_group_tasks(table, ctx, tasks, log_compact_file_group, spark, in_process=spark is None,
                                     label=f"log compaction {instant_ts}")
        life.remove_orphans(stats, lease)
        latest_schema = table.schema(table.timeline()) or schema_json
        metadata = CommitMetadata(partition_to_write_stats={p: tuple(v) for p, v in stats.items()}, compacted=False,
                                  extra_metadata={"schema": latest_schema}, operation_type=OPERATION_TYPE)
        done = life.commit(encode_commit_metadata(metadata, table.config.layout),
                           commit_requirements(table, instant_ts, tasks, stats, fence,
                                               heartbeat_window_ms=interval * misses))
    written = all_stats(stats)
    metrics = LogCompactionMetrics(
        file_groups=len(written), log_files=total(written, "total_log_files_compacted"),
        log_blocks=total(written, "total_log_blocks"), log_records=total(written, "total_log_records"),
        records_written=total(written, "num_writes"), deletes_written=total(written, "num_deletes"),
        bytes_written=total(written, "file_size_in_bytes"), seconds=round(time.monotonic() - started, 3),
        completion_time=done.completion_time or None, rolled_back=recovered_from or None)
    reason = f"{plural(len(written), 'file group')} log-compacted into one block each"
    if replaced:
        reason += f" ({replaced}, and a fresh plan scheduled)"
    return ServiceResult(ACTION, Status.DONE, instant_ts, reason, metrics)


def run_log_compaction(table, instant: str | None = None, *, spark=None, config: Any = None,
                       fence: Fence | None = None) -> list[ServiceResult]:
    """Run ``instant``'s plan; else every pending plan, oldest first; else schedule one (threshold
    lowered as by ``force``) and run it.  ``spark``: a SparkSession, a function returning one,
    or None (run the tasks in this process)."""
    dropped = drop_opted_out_partitions(table, LOG_COMPACT, config)
    require_writable(table, LOG_COMPACT)
    if instant is None and table.config.version < 8:
        _abandon_collided_plans(table)
    return prepend_drop(dropped, run_plans(
        instant, lambda: [i.timestamp for i in table.timeline().pending_log_compactions()],
        lambda: schedule_log_compaction(table, config, force=True), lambda ts: _execute(table, ts, spark, config, fence)))


def list_log_compactions(table) -> list[dict[str, Any]]:
    """Pending and completed log compactions, oldest first, with the size of their plans."""
    return [{"instant": inst.timestamp, "state": inst.state.value, "completion_time": inst.completion_time,
             "file_groups": len(ops), "log_files": sum(len(op.delta_file_paths or ()) for op in ops),
             "log_blocks": int(sum((op.metrics or {}).get("TOTAL_LOG_BLOCKS", 0) for op in ops))}
            for inst, ops in plans_on_timeline(table, Action.LOG_COMPACTION)]


__all__ = ["LogCompactionTask", "MergedLog", "compacted_blocks", "list_log_compactions", "log_compact_file_group",
           "merge_log_blocks", "run_log_compaction"]
