"""Executing a compaction plan: base file + log files -> one new base file per file group.

Steps for a plan ``C`` (docs/compaction.md has the crash table):

1. ``C`` inflight?  Its heartbeat alive -> ``ConflictError`` (another process runs it);
   expired or missing -> roll it back (``tablesvc.services.rollback.rollback``: deletes the
   files its markers list, reverts C to requested, keeps the plan), then run it again.
2. Under the table lock: ``C`` must be requested; the heartbeat starts, then ``C.compaction.inflight``.
3. Spark job over the operations (packed into tasks by bytes, ``spark/task_packing.py``): merge
   the slice restricted to the plan's base file and log files with
   ``tablesvc.merge.open_merged_slice`` (the reader's one merge code path, as of ``C`` so later
   blocks are never merged), and stream the rows, a row group at a time, into
   ``<fileId>_<token>_<C>.parquet`` with the one base-file writer (``write/base_file_writer``: a
   CREATE marker, then ``Storage.write_new_from``); the merge counts the inserts, updates and
   deletes on the way.  Tasks return write stats only.
4. Files with a marker but no stat (failed task attempts) are deleted.
5. Under the lock, once its requirements hold (``requirements.py``: the lease, ``C`` still
   inflight, v6: no write into a planned slice): complete ``C`` as ``commit`` (``compacted=true``,
   ``COMPACT``, ``extraMetadata.schema``); then delete the markers and the heartbeat.

Steps 2, 4 and 5 are the one instant lifecycle (``services/lifecycle``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tablesvc.errors import InvalidInputError
from tablesvc.fsview.names import BaseFileName, LogFileName
from tablesvc.logformat import avro_schema_to_arrow
from tablesvc.merge import ReadContext, SliceSpec, open_merged_slice
from tablesvc.services.compaction.planner import ACTION, schedule_compaction
from tablesvc.services.compaction.requirements import commit_requirements
from tablesvc.services.lifecycle import COMPACTION_LIFECYCLE, InstantLifecycle, lease_requirements
from tablesvc.services.plan_execution import (
    Fence, all_stats, heartbeat_settings, pending_plan, plans_on_timeline, plural, refuse_if_alive,
    refuse_shared_file_groups, run_plans, total,
)
from tablesvc.services.metrics import CompactionMetrics
from tablesvc.services.result import ServiceResult, Status
from tablesvc.table.meta_fields import FILE_NAME
from tablesvc.services.metadata_drops import drop_opted_out_partitions, prepend_drop
from tablesvc.table.writable import COMPACT, require_writable
from tablesvc.spark.file_group_tasks import run_file_group_tasks
from tablesvc.write.base_file_writer import row_groups, sorted_row_groups, write_base_file
from tablesvc.write.markers import rel_path
from tablesvc.write.parquet_encoding import align_keeping_encodings, constant_strings, encoded_columns
from tablesvc.write.schema_evolution import with_meta_fields
from timeline.instant import Action, Instant, State
from timeline.payloads import CommitMetadata, CompactionPlan, WriteStat, encode_commit_metadata
from timeline.storage import Storage, join


# -- one file group (runs inside a Spark task, or anywhere) -------------------------------------------
@dataclass(frozen=True)
class CompactionTask:
    """One plan operation, as plain values (pickled to a Spark task)."""

    instant: str
    partition: str
    file_id: str
    base_instant: str | None
    base_file: str | None            # name
    log_files: tuple[str, ...]       # names, reader order
    log_bytes: int
    schema_json: str                 # data schema (no meta fields) the base file is written with
    table_version: int
    sort_columns: tuple[str, ...] = ()
    read_bytes: int = 0              # base + logs, from the plan's TOTAL_IO_READ_MB (packs tasks; 0: unknown)

    def slice_spec(self, base_path: str) -> SliceSpec:
        folder = join(base_path, self.partition)
        return SliceSpec(self.partition, self.file_id, join(folder, self.base_file) if self.base_file else None,
                         tuple(join(folder, n) for n in self.log_files))


def compact_file_group(storage: Storage, ctx: ReadContext, task: CompactionTask, token: str) -> WriteStat:
    """Merge one planned slice exactly as the reader does and write it as the new base file,
    streaming: base rows go from the old base file to the new one a batch at a time."""
    started = time.monotonic()
    spec = task.slice_spec(ctx.base_path)
    merged = open_merged_slice(storage, spec, ctx)       # the log side, folded (a bad log raises here)
    fold_s = time.monotonic() - started
    name = BaseFileName(task.file_id, token, task.instant).name
    schema_json = with_meta_fields(task.schema_json)
    target = avro_schema_to_arrow(schema_json)

    # Sorting needs plain columns; otherwise the dictionary-read ones stay encoded into the writer.
    keep_encodings = not task.sort_columns

    def out_tables() -> Iterator[pa.Table]:
        encoded: frozenset[str] | None = None
        for table in merged.tables(decode_dictionaries=not keep_encodings):
            table = table.set_column(table.schema.get_field_index(FILE_NAME), FILE_NAME,
                                     constant_strings(name, table.num_rows, keep_encodings))
            if encoded is None:         # the first table (base rows first) fixes the file's Arrow schema
                encoded = encoded_columns(table.schema, target)
            yield align_keeping_encodings(table, schema_json, encoded)

    groups = sorted_row_groups(out_tables(), task.sort_columns) if task.sort_columns else row_groups(out_tables())
    rows, size = write_base_file(storage, ctx.base_path, task.instant, task.partition, name, target, groups)
    scan_ms = int((fold_s + merged.read_seconds) * 1000)
    metrics, counts = merged.metrics, merged.counts
    extra_v8 = {"prev_base_file": task.base_file, "total_log_read_time_ms": scan_ms} if task.table_version >= 8 else {}
    return WriteStat(
        file_id=task.file_id, path=rel_path(task.partition, name), prev_commit=task.base_instant or "null",
        partition_path=task.partition, num_writes=rows, num_deletes=counts.deletes,
        num_update_writes=counts.updates, num_inserts=counts.inserts, total_write_bytes=size, total_write_errors=0,
        file_size_in_bytes=size, total_log_records=metrics.log_records + metrics.log_deletes,
        total_log_files_compacted=len(task.log_files), total_log_size_compacted=task.log_bytes,
        total_updated_records_compacted=counts.updates, total_log_blocks=metrics.log_blocks_read,
        total_corrupt_log_block=metrics.corrupt_spans, total_rollback_blocks=metrics.command_blocks,
        runtime_stats={"totalScanTime": scan_ms, "totalUpsertTime": 0,
                       "totalCreateTime": max(0, int((time.monotonic() - started) * 1000) - scan_ms)},
        **extra_v8)


# -- the driver ------------------------------------------------------------------------------------
def _tasks(table, plan: CompactionPlan, instant: str, schema_json: str, sort_columns: tuple[str, ...]):
    tasks = []
    for op in plan.operations or ():
        if not op.file_id:
            raise InvalidInputError(f"compaction {instant}: a plan operation has no fileId")
        logs = tuple(op.delta_file_paths or ())
        for n in logs:
            LogFileName.parse(n.rsplit("/", 1)[-1])  # plan version 1 held paths: refuse nonsense early
        tasks.append(CompactionTask(
            instant=instant, partition=op.partition_path or "", file_id=op.file_id,
            base_instant=op.base_instant_time, base_file=op.data_file_path.rsplit("/", 1)[-1]
            if op.data_file_path else None, log_files=tuple(n.rsplit("/", 1)[-1] for n in logs),
            log_bytes=int((op.metrics or {}).get("TOTAL_LOG_FILES_SIZE", 0)), schema_json=schema_json,
            table_version=table.config.version, sort_columns=sort_columns,
            read_bytes=int((op.metrics or {}).get("TOTAL_IO_READ_MB", 0) * (1 << 20))))
    return tasks


def _check_sort_columns(sort_columns: tuple[str, ...], schema_json: str, instant: str) -> None:
    names = {f["name"] for f in json.loads(with_meta_fields(schema_json))["fields"]}
    unknown = [c for c in sort_columns if c not in names]
    if unknown:
        raise InvalidInputError(f"compaction {instant}: unknown sort column(s) {', '.join(unknown)}; "
                                f"the table has {', '.join(sorted(names))}")


def _recover_inflight(table, instant: Instant, config: Any, fence: Fence | None) -> None:
    refuse_if_alive(table, instant, "compaction", config)
    if fence is not None:
        fence()  # the rollback below deletes files: only the job's owner may do that
    from tablesvc.services.rollback import rollback

    # Deletes the files C's markers list and reverts C to requested; the plan stays.
    rollback(table, instant.timestamp, config=config) if config is not None else rollback(table, instant.timestamp)


def _execute(table, instant_ts: str, spark, sort_columns: tuple[str, ...], config: Any,
             fence: Fence | None, in_process: bool = False) -> ServiceResult:
    started = time.monotonic()
    current = pending_plan(table, instant_ts, Action.COMPACTION, ACTION, "compaction")
    if isinstance(current, ServiceResult):
        return current
    timeline = table.timeline()
    plan: CompactionPlan = timeline.plan_of(table.storage, current)
    refuse_shared_file_groups(table, timeline, instant_ts, plan, "compaction")
    recovered = current.state is State.INFLIGHT
    if recovered:
        _recover_inflight(table, current, config, fence)
    # On failure C stays inflight without a heartbeat: the next run rolls it back and re-executes it.
    lease = lease_requirements(fence)
    life = InstantLifecycle(table, COMPACTION_LIFECYCLE, heartbeat_interval_ms=heartbeat_settings(config)[0],
                            config=config)
    with life.start(Instant(instant_ts, Action.COMPACTION, State.REQUESTED), lease):
        timeline = table.timeline()
        ctx = ReadContext.for_table(table, timeline, as_of=instant_ts)
        schema_json = ctx.table_schema_json or table.schema(timeline)
        if not schema_json:
            raise InvalidInputError(f"compaction {instant_ts}: the table has no schema")
        _check_sort_columns(sort_columns, schema_json, instant_ts)
        tasks = _tasks(table, plan, instant_ts, schema_json, sort_columns)
        stats = run_file_group_tasks(table, ctx, tasks, compact_file_group, spark, in_process=in_process,
                                     label=f"compaction {instant_ts}")
        life.remove_orphans(stats, lease)
        latest_schema = table.schema(table.timeline()) or schema_json
        metadata = CommitMetadata(partition_to_write_stats={p: tuple(v) for p, v in stats.items()}, compacted=True,
                                  extra_metadata={"schema": latest_schema}, operation_type="COMPACT")
        done = life.commit(encode_commit_metadata(metadata, table.config.layout),
                           commit_requirements(table, plan, instant_ts, fence))
    written = all_stats(stats)
    metrics = CompactionMetrics(
        file_groups=len(written), log_files=total(written, "total_log_files_compacted"),
        log_bytes=total(written, "total_log_size_compacted"), log_records=total(written, "total_log_records"),
        records_written=total(written, "num_writes"), bytes_written=total(written, "file_size_in_bytes"),
        seconds=round(time.monotonic() - started, 3), completion_time=done.completion_time or None)
    reason = f"{plural(len(written), 'file group')} compacted into new base files"
    if recovered:
        reason += " (an earlier failed attempt was rolled back first)"
    return ServiceResult(ACTION, Status.DONE, instant_ts, reason, metrics)


def run_compaction(table, instant: str | None = None, *, spark=None, sort_columns=(), config: Any = None,
                   fence: Fence | None = None, in_process: bool = False) -> list[ServiceResult]:
    """Run ``instant``'s plan; else every pending plan, oldest first; else schedule one (ignoring
    the trigger) and run it.  ``spark``: a SparkSession, a function returning one, or None
    (``get_spark()``), needed only when there is a plan to run.  ``in_process``: run the file
    groups in this process one after the other, through the table's own storage, and start no
    Spark (small tables; the model-based test, which injects crashes through that storage)."""
    dropped = drop_opted_out_partitions(table, COMPACT, config)
    require_writable(table, COMPACT)
    sort_columns = tuple(c.strip() for c in (sort_columns or ()) if c and c.strip())
    return prepend_drop(dropped, run_plans(instant, lambda: [i.timestamp for i in table.timeline().pending_compactions()],
                     lambda: schedule_compaction(table, config, force=True),
                     lambda ts: _execute(table, ts, spark, sort_columns, config, fence, in_process)))


def list_compactions(table) -> list[dict[str, Any]]:
    """Pending and completed compactions, oldest first, with the size of their plans."""
    return [{"instant": instant.timestamp, "state": instant.state.value, "completion_time": instant.completion_time,
             "file_groups": len(ops), "log_files": sum(len(op.delta_file_paths or ()) for op in ops),
             "log_bytes": int(sum((op.metrics or {}).get("TOTAL_LOG_FILES_SIZE", 0) for op in ops))}
            for instant, ops in plans_on_timeline(table, Action.COMPACTION)]


__all__ = ["CompactionTask", "compact_file_group", "list_compactions", "run_compaction"]
