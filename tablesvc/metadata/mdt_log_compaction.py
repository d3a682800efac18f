"""The metadata table's own log compaction, run as Hudi 1.2's writer runs it (table versions 8
and 9; version 6 as Hudi 0.15: ``schedule_v6``, below) when ``hoodie.metadata.log.compaction.enable``
is set in the committing command's configuration: inside a tablesvc commit, under the data
table's lock, after the metadata table's clean and compaction and before the metadata delta commit
of the data instant ``T`` that is completing (docs/metadata-table.md, "The metadata table's log
compaction"; whether, when and what: ``mdt_log_compaction_plan``).

Version 6: at ``<latest completed delta commit>005``, only when the metadata compaction was not
scheduled in the same commit; the new log file of each slice is named by the slice's base instant
at its next log version (the steps below otherwise the same; ``schedule_v6``, ``v6_log_file_name``).

One log compaction ``L`` (a new instant time, later than every instant of both timelines):

1. ``L.logcompaction.requested`` holds the plan (Avro ``HoodieCompactionPlan``, as the data
   table's log compaction writes it), then ``L.logcompaction.inflight`` (empty);
2. per operation, the records of the plan's log files only (no base file), the blocks chosen as
   every reader chooses them (``partition_reader``: block selection, the data table's valid
   instants), merged per key as ``HoodieMetadataPayload`` merges them (``mdt_compaction.merge_for``);
3. one new log file ``.<fileId>_L.log.1_<token>`` per operation: one HFILE_DATA block of the
   surviving records sorted by key (possibly empty) and, when a key's last word is a delete, a
   DELETE block after it; both with headers INSTANT_TIME ``L``, SCHEMA (the partition's record
   schema, ``MetadataTableWriter.partition_schema``) and COMPACTED_BLOCK_TIMES (the instants of the
   merged blocks, oldest first) (Java's ``FileGroupReaderBasedAppendHandle``);
4. ``L`` completes as a **deltacommit** (operation ``LOG_COMPACT``, the new log files' write stats).

Readers (tablesvc's ``merge.blocks`` selection, Java's log record reader, hudi-rs) then skip the
blocks COMPACTED_BLOCK_TIMES lists.  ``T``'s delta commit, written right after, completes after
``L``: it sorts after ``L``'s file by completion time (tablesvc, hudi-rs), and Java merges ``L``'s
block at the place of the newest block it replaced, before ``T``'s.

**A kill at any step** leaves a pending log compaction: readers ignore it (``L`` is not completed:
its log files are in no slice and its blocks are skipped).  The next tablesvc commit finishes it
before anything else of the metadata table's services (Java's ``runAnyPendingLogCompactions`` too):
the log files an earlier attempt left are deleted and the plan runs again.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from tablesvc.errors import TablesvcError
from tablesvc.fsview.model import FileSlice, LogFile
from tablesvc.fsview.names import LogFileName, looks_like_log_file
from tablesvc.logformat import (
    KeyedRecord, delete_block, hfile_data_block, read_log_file, with_compacted_block_times, write_log_file,
)
from tablesvc.metadata.mdt_compaction import merge_for, v6_gated_time
from tablesvc.metadata.mdt_compaction_plan import delta_commits_since_compaction, operation_paths
from tablesvc.metadata.mdt_log_compaction_plan import build_plan, log_compaction_due, settings, valid_blocks, why_not_now
from tablesvc.metadata.partition_reader import slice_records
from tablesvc.metadata.reader import MetadataTable
from tablesvc.metadata.writer import WRITE_TOKEN, MetadataTableWriter, commit_schema
from timeline.active import Timeline
from timeline.instant import Action, Instant, State
from timeline.payloads import CommitMetadata, CompactionOperation, CompactionPlan, WriteStat
from timeline.payloads import decode_compaction_plan, encode_commit_metadata, encode_compaction_plan
from timeline.storage import join

OPERATION = "LOG_COMPACT"
# log_compact_if_due (a new instant time) is versions 8 and 9's; version 6 is scheduled at
# <latest delta commit>005 (schedule_v6) and names its log files by the slice's base instant
FIRST_VERSION = 8
V6_LOG_COMPACTION_SUFFIX = "005"      # Hudi 0.15's OperationSuffix.LOG_COMPACTION


def log_file_name(file_id: str, instant: str) -> str:
    return LogFileName(file_id, instant, 1, WRITE_TOKEN).name


def log_compact_operation(mdt: MetadataTableWriter, reader: MetadataTable, timeline: Timeline,
                          op: CompactionOperation, instant: str, started: float) -> WriteStat:
    """Write one file group's compacted log file; its write stat."""
    partition, file_id = op.partition_path or "", op.file_id or ""
    _, paths = operation_paths(reader.base_path, op)
    chosen = valid_blocks(reader, paths)
    instants = sorted({sb.block.instant_time for sb in chosen})       # oldest first, as Java lists them
    if not instants:
        raise TablesvcError(f"{mdt.base_path}: log compaction {instant}: file group {partition}/{file_id} has no "
                         "valid log block in its planned log files")
    logs = tuple(LogFile(LogFileName.parse(p.rpartition("/")[2]), p, None) for p in paths)
    merged = slice_records(reader, FileSlice(partition, file_id, op.base_instant_time or "", None, logs),
                           merge_for(partition))
    live = [KeyedRecord(k, dict(v)) for k, v in merged.items() if v is not None]
    deleted = sorted(k for k, v in merged.items() if v is None)
    schema = mdt.partition_schema(partition, timeline)
    blocks = [with_compacted_block_times(hfile_data_block(instant, schema, live), instants)]
    if deleted:
        blocks.append(with_compacted_block_times(delete_block(instant, schema, [(k, partition) for k in deleted]),
                                                 instants))
    if mdt.config.version < 8:
        # v6 (Hudi 0.15's append handle): the slice's base instant, its next log version
        name = v6_log_file_name(mdt, partition, file_id, op.base_instant_time or "")
        base_file = (op.data_file_path or "").rpartition("/")[2]
    else:
        name, base_file = log_file_name(file_id, instant), ""     # Java names no base file here
    data = write_log_file(mdt.storage, join(mdt.base_path, partition, name), blocks)
    return WriteStat(
        file_id=file_id, path=f"{partition}/{name}", prev_commit=op.base_instant_time or "null",
        partition_path=partition, num_writes=len(live), num_deletes=len(deleted), num_update_writes=len(live),
        total_write_bytes=len(data), total_write_errors=0, file_size_in_bytes=len(data),
        log_version=LogFileName.parse(name).version, log_offset=0, base_file=base_file, log_files=(name,),
        total_log_files_compacted=len(paths), total_log_blocks=len(chosen),
        total_log_size_compacted=int((op.metrics or {}).get("TOTAL_LOG_FILES_SIZE", 0)),
        runtime_stats={"totalScanTime": 0, "totalUpsertTime": int((time.monotonic() - started) * 1000),
                       "totalCreateTime": 0})


def _slice_logs(mdt: MetadataTableWriter, partition: str, file_id: str, base_instant: str) -> list[LogFileName]:
    folder = join(mdt.base_path, partition)
    # Java's Hadoop file system leaves a ``.<name>.crc`` checksum beside each log file it wrote
    names = (LogFileName.parse(x) for x in mdt.storage.list_names(folder)
             if looks_like_log_file(x) and not x.endswith(".crc"))
    return [n for n in names if n.file_id == file_id and n.instant == base_instant]


def v6_log_file_name(mdt: MetadataTableWriter, partition: str, file_id: str, base_instant: str) -> str:
    """A version-6 log compaction's new log file: named by the slice's base instant, at the log
    version after the slice's highest (Hudi 0.15 names every log of a slice so)."""
    version = 1 + max((n.version for n in _slice_logs(mdt, partition, file_id, base_instant)), default=0)
    return LogFileName(file_id, base_instant, version, WRITE_TOKEN).name


def _v6_leftovers(mdt: MetadataTableWriter, instant: str, plan: CompactionPlan) -> list[str]:
    """v6: the log files an earlier attempt at ``instant`` left: in a planned slice, above the
    planned versions, whose every block is ``instant``'s (the name does not say the instant)."""
    out = []
    for op in plan.operations or ():
        partition, file_id, base = op.partition_path or "", op.file_id or "", op.base_instant_time or ""
        planned = max((LogFileName.parse(p.rpartition("/")[2]).version for p in op.delta_file_paths or ()),
                      default=0)
        for name in _slice_logs(mdt, partition, file_id, base):
            if name.version <= planned:
                continue
            path = join(mdt.base_path, partition, name.name)
            blocks = read_log_file(mdt.storage, path).blocks
            if blocks and all(b.instant_time == instant for b in blocks):
                out.append(path)
    return out


def _leftovers(mdt: MetadataTableWriter, instant: str, plan: CompactionPlan) -> list[str]:
    """Log files of ``instant`` an earlier attempt at the plan left (none is visible: the instant
    is pending)."""
    if mdt.config.version < 8:
        return _v6_leftovers(mdt, instant, plan)
    out = []
    for op in plan.operations or ():
        path = join(mdt.base_path, op.partition_path or "", log_file_name(op.file_id or "", instant))
        if mdt.storage.exists(path):
            out.append(path)
    return out


def execute(mdt: MetadataTableWriter, data_base_path: str, data: Timeline, instant: str) -> Instant:
    """Run the pending log compaction ``instant`` of the metadata table to its completed delta commit."""
    started = time.monotonic()
    timeline = mdt.timeline()
    requested = Instant(instant, Action.LOG_COMPACTION, State.REQUESTED)
    plan = decode_compaction_plan(mdt.storage.read_bytes(timeline.path_of(requested)),
                                  f"{mdt.base_path}: {requested.file_name()}")
    for path in _leftovers(mdt, instant, plan):
        mdt.storage.delete(path)
    states = {f.state for f in timeline.files_of(instant)}
    inflight = (Instant(instant, Action.LOG_COMPACTION, State.INFLIGHT) if State.INFLIGHT in states
                else mdt.timeline_writer.start(requested))
    reader = MetadataTable(mdt.storage, data_base_path, data)
    stats: dict[str, list[WriteStat]] = {}
    schemas: list[str] = []
    for op in plan.operations or ():
        stat = log_compact_operation(mdt, reader, timeline, op, instant, started)
        stats.setdefault(op.partition_path or "", []).append(stat)
        schemas.append(mdt.partition_schema(op.partition_path or "", timeline))
    metadata = CommitMetadata(partition_to_write_stats={p: tuple(s) for p, s in stats.items()}, compacted=False,
                              extra_metadata={"schema": commit_schema(schemas[0] if schemas else None)},
                              operation_type=OPERATION, version=None)
    return mdt.timeline_writer.complete(inflight, encode_commit_metadata(metadata, mdt.config.layout))


def schedule(mdt: MetadataTableWriter, data_base_path: str, data: Timeline, threshold: int,
             new_time: Callable[[], str]) -> str | None:
    """Write the plan of a log compaction when one is due and possible; its instant (None: none)."""
    timeline = mdt.timeline()
    if why_not_now(data, timeline) is not None or not log_compaction_due(timeline, threshold):
        return None
    instant = new_time()
    if timeline.files_of(instant):
        return None
    reader = MetadataTable(mdt.storage, data_base_path, data)
    pending = data.pending()
    plan = build_plan(reader, timeline, instant, threshold, min((i.timestamp for i in pending), default=None))
    if plan is None:
        return None
    mdt.storage.write_new(timeline.path_of(Instant(instant, Action.LOG_COMPACTION, State.REQUESTED)),
                          encode_compaction_plan(plan))
    return instant


def schedule_v6(mdt: MetadataTableWriter, data_base_path: str, data: Timeline, threshold: int) -> str | None:
    """A version-6 metadata table's log compaction, as Hudi 0.15 schedules it when its compaction
    was not scheduled (``HoodieBackedTableMetadataWriter.compactIfNecessary``): at ``<latest
    completed delta commit>005`` (``createLogCompactionTimestamp``), under the v6 gate of the
    compaction (``validateTimelineBeforeSchedulingCompaction``: no data instant at or before that
    delta commit requested or inflight, no compaction or log compaction of the metadata table
    pending) and the write client's (``ScheduleCompactionActionExecutor``: no pending delta commit
    at or before the instant, no write at or after it, at least one delta commit since the latest
    compaction); the plan: ``build_plan`` with blocks only counting (0.15's
    ``HoodieLogCompactionPlanGenerator``).  The plan's instant (None: none scheduled)."""
    timeline = mdt.timeline()
    instant = v6_gated_time(timeline, data, V6_LOG_COMPACTION_SUFFIX)
    if instant is None or delta_commits_since_compaction(timeline) < 1 or timeline.files_of(instant):
        return None
    writes = (Action.DELTA_COMMIT, Action.COMMIT, Action.COMPACTION, Action.LOG_COMPACTION)
    for i in timeline.instants:
        if i.action.completed_action not in writes and i.action not in writes:
            continue
        if i.timestamp >= instant or (i.is_pending and i.timestamp <= instant):
            return None
    reader = MetadataTable(mdt.storage, data_base_path, data)
    plan = build_plan(reader, timeline, instant, threshold, None, blocks_only=True)
    if plan is None:
        return None
    mdt.storage.write_new(timeline.path_of(Instant(instant, Action.LOG_COMPACTION, State.REQUESTED)),
                          encode_compaction_plan(plan))
    return instant


def log_compact_v6_if_due(table: Any, mdt: MetadataTableWriter, *, config: Any = None) -> list[Instant]:
    """A version-6 metadata table's log compaction at its turn in a tablesvc commit, when its
    compaction was not scheduled in the same commit (the caller's to know) and
    ``hoodie.metadata.log.compaction.enable`` is set: ``schedule_v6``, then run it."""
    enabled, threshold = settings(table, config)
    if not enabled:
        return []
    data = Timeline.load(table.storage, table.base_path, table.config.layout)
    instant = schedule_v6(mdt, table.base_path, data, threshold)
    return [execute(mdt, table.base_path, data, instant)] if instant is not None else []


def finish_pending_log_compactions(table: Any, mdt: MetadataTableWriter) -> list[Instant]:
    """Run the metadata table's pending log compactions to completion (Java's
    ``runPendingTableServicesOperationsAndRefreshTimeline``, after the pending compactions),
    whether log compaction is enabled or not."""
    pending = mdt.timeline().pending_log_compactions()
    if not pending:
        return []
    data = Timeline.load(table.storage, table.base_path, table.config.layout)
    return [execute(mdt, table.base_path, data, p.timestamp) for p in pending]


def log_compact_if_due(table: Any, mdt: MetadataTableWriter, *, enabled: bool | None = None,
                       threshold: int | None = None, config: Any = None) -> list[Instant]:
    """The metadata table's log compaction at its turn in a tablesvc commit (after its compaction):
    finish pending ones, then, when enabled (default: ``config``, the committing command's
    configuration; None: the table's ``.hoodie/tablesvc.yaml`` over the defaults) and due, schedule
    one at a new instant and run it.  Returns the log compactions completed."""
    done = finish_pending_log_compactions(table, mdt)
    if table.config.version < FIRST_VERSION:
        return done
    if enabled is None or threshold is None:
        configured = settings(table, config)
        enabled = configured[0] if enabled is None else enabled
        threshold = configured[1] if threshold is None else threshold
    if not enabled:
        return done
    data = Timeline.load(table.storage, table.base_path, table.config.layout)
    timeline = mdt.timeline()
    after = max((t for t in (timeline.max_time(), data.max_time()) if t is not None), default=None)
    instant = schedule(mdt, table.base_path, data, threshold, lambda: table.instant_times.next(after=after))
    if instant is not None:
        done.append(execute(mdt, table.base_path, data, instant))
    return done


__all__ = ["execute", "finish_pending_log_compactions", "log_compact_if_due", "log_compact_operation",
           "log_compact_v6_if_due", "log_file_name", "schedule", "schedule_v6", "v6_log_file_name"]
