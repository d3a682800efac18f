"""The metadata table's own compaction (table versions 8 and 9; version 6 as Hudi 0.15 schedules it:
``schedule_v6``), run as Hudi 1.x's writer runs it:
at the start of a write, under the data table's lock (docs/metadata-table.md, "The metadata
table's compaction"; when and at which instant: ``mdt_compaction_plan``).

tablesvc runs it in ``metadata.maintain``, under the lock ``InstantLifecycle.commit`` holds, just
before the metadata delta commit of the data instant ``T`` that is completing.  At that moment
``T`` is pending on the data table and its metadata delta commit is not written yet, so
``T``'s records cannot enter the new base files; ``T``'s delta commit then completes after the
compaction's instant and lands in the new slice.  Doing it after ``T`` completes would need a
second step in the lifecycle; doing it before keeps every step inside the one hook.

One compaction ``C``:

1. ``C.compaction.requested`` holds the plan (Avro ``HoodieCompactionPlan``), then
   ``C.compaction.inflight`` (empty, as Java leaves it);
2. per operation, the file group's records: the base file's, then the plan's log files' blocks
   chosen as every reader chooses them (``partition_reader``: the block selection, the data
   table's valid instants), merged per partition as ``HoodieMetadataPayload`` merges them
   (``files``: the file maps combine; ``column_stats``/``partition_stats``: ``stats_merge``; other
   partitions: the newer record wins).  A key whose last word is a DELETE block is left out; a
   ``files`` entry marked deleted stays, as Java keeps it.  Every record's ``_hoodie_file_name``
   names the new base file (Java fills it in; the other meta fields stay null);
3. one HFile base file ``<fileId>_<token>_C.hfile`` per file group (keys in UTF-8 byte order, the
   record schema of ``record_schema`` in its file info), an empty one too for a group whose logs
   hold no record (as Hudi 1.1's compactions in the v9 fixtures; Hudi 1.0's skipped those);
4. ``C``'s completed commit (operation ``COMPACT``, the base files' write stats).

**A kill at any step** leaves a pending compaction: readers ignore it (its base files belong to
an instant that is not completed, and v8+ slices logs by completion time, so no slice starts at
``C``).  The next tablesvc commit (or a Java writer: ``runAnyPendingCompactions``) finishes it:
the base files an earlier attempt left are deleted and the plan runs again.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from tablesvc.config.values import registered_value
from tablesvc.fsview.model import BaseFile, FileSlice, LogFile
from tablesvc.fsview.names import BaseFileName, LogFileName
from tablesvc.hfile import read_hfile
from tablesvc.hfile.java_hash_order import java_hashmap_order
from tablesvc.logformat import BlockType, read_log_file
from tablesvc.logformat.hfile_content import KeyedRecord, encode_hfile_records
from tablesvc.metadata.files_records import TYPE_FILE_LIST, TYPE_PARTITION_LIST
from tablesvc.metadata.mdt_compaction_plan import (
    DEFAULT_MAX_DELTA_COMMITS,
    MAX_DELTA_COMMITS_KEY,
    build_plan,
    compaction_instant_time,
    delta_commits_since_compaction,
    operation_paths,
    why_not_at,
)
from tablesvc.metadata.partition_reader import log_records, slice_records
from tablesvc.metadata.reader import MetadataTable
from tablesvc.metadata.record_schema import metadata_record_schema
from tablesvc.metadata.stats_merge import merge_stats_records
from tablesvc.metadata.writer import WRITE_TOKEN, MetadataTableWriter, commit_schema
from tablesvc.table.metadata_partitions import MetadataPartitionType
from timeline.active import Timeline
from timeline.instant import Action, Instant, State
from timeline.payloads import CommitMetadata, CompactionOperation, CompactionPlan, WriteStat
from timeline.payloads import decode_compaction_plan, encode_commit_metadata, encode_compaction_plan
from timeline.storage import join

OPERATION = "COMPACT"
V6_COMPACTION_SUFFIX = "001"       # HoodieTableMetadataUtil.OperationSuffix.COMPACTION (Hudi 0.x)
FILE_NAME_FIELD = "_hoodie_file_name"
Record = Mapping[str, Any]


# -- merging one key's records, per partition -----------------------------------------------------
def merge_files_records(newer: Record, older: Record) -> Record:
    """``HoodieMetadataPayload.combineFileSystemMetadata`` on raw records: older entries stay; a
    newer entry is added, removes the older one when it is a deletion, else keeps the larger size;
    a deletion of a name the older record lacks stays as a deletion."""
    combined = dict(older.get("filesystemMetadata") or {})
    for name, info in (newer.get("filesystemMetadata") or {}).items():
        before = combined.get(name)
        if before is None:
            combined[name] = info
        elif info.get("isDeleted"):
            del combined[name]
        else:
            combined[name] = {**info, "size": max(info["size"], before["size"]), "isDeleted": False}
    return {**newer, "filesystemMetadata": combined}


def _newer_wins(newer: Record, older: Record) -> Record:
    return newer


def merge_for(partition: str) -> Callable[[Record, Record], Record]:
    """How two records of one key merge in ``partition`` (``MetadataPartitionType.combineMetadataPayloads``)."""
    kind = MetadataPartitionType.of(partition)
    if kind is MetadataPartitionType.FILES:
        return merge_files_records
    if kind in (MetadataPartitionType.COLUMN_STATS, MetadataPartitionType.PARTITION_STATS,
                MetadataPartitionType.EXPRESSION_INDEX):
        return merge_stats_records
    return _newer_wins


def _as_written(record: Record, base_file_name: str) -> dict[str, Any]:
    """The record as the compacted base file holds it: ``_hoodie_file_name`` set, and a files
    record's map in the order Java's HashMap hands it to the Avro writer."""
    out = dict(record)
    out[FILE_NAME_FIELD] = base_file_name
    fs = out.get("filesystemMetadata")
    if fs and out.get("type") in (TYPE_PARTITION_LIST, TYPE_FILE_LIST):
        out["filesystemMetadata"] = {name: fs[name] for name in java_hashmap_order(fs)}
    return out


# -- one operation ---------------------------------------------------------------------------------
def _slice_of(mdt_base_path: str, op: CompactionOperation, with_base: bool = True) -> FileSlice:
    base_path, log_paths = operation_paths(mdt_base_path, op)
    base = (BaseFile(BaseFileName.parse(op.data_file_path), base_path, None)
            if with_base and base_path and op.data_file_path else None)
    logs = tuple(LogFile(LogFileName.parse(p.rpartition("/")[2]), p, None) for p in log_paths)
    return FileSlice(op.partition_path or "", op.file_id or "", op.base_instant_time or "", base, logs)


def base_file_name(file_id: str, instant: str) -> str:
    return BaseFileName(file_id, WRITE_TOKEN, instant, "hfile").name


def compacted_records(reader: MetadataTable, op: CompactionOperation) -> tuple[dict[str, Record | None], int, int]:
    """The merged records of one operation's slice (None: deleted), the number of log records
    read and the number of distinct keys the logs hold."""
    merge = merge_for(op.partition_path or "")
    logs_only = _slice_of(reader.base_path, op, with_base=False)
    log_count = sum(1 for _ in log_records(reader, [lf.path for lf in logs_only.log_files]))
    log_keys = slice_records(reader, logs_only, merge)
    merged = slice_records(reader, _slice_of(reader.base_path, op), merge)
    return merged, log_count, len(log_keys)


def compact_operation(reader: MetadataTable, op: CompactionOperation, instant: str, started: float,
                      creation_time_ms: int | None = None) -> WriteStat:
    """Write one file group's new base file; its write stat."""
    merged, log_count, log_keys = compacted_records(reader, op)
    name = base_file_name(op.file_id or "", instant)
    live = {k: _as_written(v, name) for k, v in merged.items() if v is not None}
    schema = _operation_schema(reader, op) if reader.config.version < 8 else metadata_record_schema()
    data = encode_hfile_records([KeyedRecord(k, v) for k, v in live.items()], schema,
                                creation_time_ms=creation_time_ms)
    partition = op.partition_path or ""
    reader.storage.write_new(join(reader.base_path, partition, name), data)
    in_base = 0
    if op.data_file_path is not None:
        base_only = slice_records(reader, FileSlice(partition, op.file_id or "", op.base_instant_time or "",
                                                    _slice_of(reader.base_path, op).base_file, ()), merge_for(partition))
        in_base = sum(1 for k in live if k in base_only)
    return WriteStat(
        file_id=op.file_id, path=f"{partition}/{name}",
        prev_commit=op.base_instant_time if op.data_file_path else "null", partition_path=partition,
        num_writes=len(live), num_deletes=len(merged) - len(live), num_update_writes=in_base,
        num_inserts=len(live) - in_base, total_write_bytes=len(data), file_size_in_bytes=len(data),
        total_log_records=log_count, total_log_files_compacted=len(op.delta_file_paths or ()),
        total_log_size_compacted=int((op.metrics or {}).get("TOTAL_LOG_FILES_SIZE", 0)),
        total_updated_records_compacted=log_keys, total_log_blocks=0, total_log_read_time_ms=0,
        runtime_stats={"totalScanTime": 0, "totalCreateTime": int((time.monotonic() - started) * 1000),
                       "totalUpsertTime": 0},
        extra={"numUpdates": 0})


def _operation_schema(reader: MetadataTable, op: CompactionOperation) -> str:
    """The record schema a version-6 operation's slice is written with (its newest log block's,
    else its base file's, else the bundled one): a Hudi 0.x table keeps 0.x's ``HoodieMetadataRecord``."""
    base_path, log_paths = operation_paths(reader.base_path, op)
    for path in reversed(sorted(log_paths, key=lambda p: LogFileName.parse(p.rpartition("/")[2]).version)):
        for block in reversed(read_log_file(reader.storage, path).blocks):
            if block.block_type in (BlockType.HFILE_DATA, BlockType.DELETE) and block.schema:
                return block.schema
    if base_path is not None:
        schema = read_hfile(reader.storage, base_path).schema
        if schema:
            return schema
    return metadata_record_schema()


# -- the instant -----------------------------------------------------------------------------------
def _leftovers(mdt: MetadataTableWriter, instant: str, plan: CompactionPlan) -> list[str]:
    """Base files of ``instant`` an earlier attempt at the plan left (none are visible: the
    instant is pending)."""
    out = []
    for partition in sorted({op.partition_path or "" for op in plan.operations or ()}):
        folder = join(mdt.base_path, partition)
        out += [join(folder, n) for n in mdt.storage.list_names(folder) if n.endswith(f"_{instant}.hfile")]
    return out


def execute(mdt: MetadataTableWriter, data_base_path: str, data: Timeline, instant: str, *,
            creation_time_ms: int | None = None) -> Instant:
    """Run the pending compaction ``instant`` of the metadata table to its completed commit."""
    started = time.monotonic()
    timeline = mdt.timeline()
    requested = Instant(instant, Action.COMPACTION, State.REQUESTED)
    plan = decode_compaction_plan(mdt.storage.read_bytes(timeline.path_of(requested)),
                                  f"{mdt.base_path}: {requested.file_name()}")
    for path in _leftovers(mdt, instant, plan):
        mdt.storage.delete(path)
    states = {f.state for f in timeline.files_of(instant)}
    inflight = (Instant(instant, Action.COMPACTION, State.INFLIGHT) if State.INFLIGHT in states
                else mdt.timeline_writer.start(requested))
    reader = MetadataTable(mdt.storage, data_base_path, data)
    stats: dict[str, list[WriteStat]] = {}
    for op in plan.operations or ():
        stat = compact_operation(reader, op, instant, started, creation_time_ms)
        stats.setdefault(op.partition_path or "", []).append(stat)
    metadata = CommitMetadata(partition_to_write_stats={p: tuple(s) for p, s in stats.items()}, compacted=True,
                              extra_metadata={"schema": commit_schema(_operation_schema(reader, plan.operations[0])
                                                                      if mdt.config.version < 8 and plan.operations
                                                                      else None)},
                              operation_type=OPERATION, version=None)
    return mdt.timeline_writer.complete(inflight, encode_commit_metadata(metadata, mdt.config.layout))


def schedule(mdt: MetadataTableWriter, data: Timeline, new_time: Callable[[], str]) -> str | None:
    """Write the plan of a compaction when one is due; its instant (None: none due or possible)."""
    timeline = mdt.timeline()
    if timeline.pending_log_compactions():
        return None
    instant = compaction_instant_time(data, timeline, new_time())
    if why_not_at(timeline, instant) is not None:
        return None
    plan = build_plan(mdt.storage, mdt.base_path, mdt.config, timeline, instant)
    if plan is None:
        return None
    mdt.storage.write_new(timeline.path_of(Instant(instant, Action.COMPACTION, State.REQUESTED)),
                          encode_compaction_plan(plan))
    return instant


def v6_gated_time(timeline: Timeline, data: Timeline, suffix: str) -> str | None:
    """``<latest completed metadata delta commit><suffix>``, or None where Hudi 0.15's gate
    (``validateTimelineBeforeSchedulingCompaction``) stops a version-6 metadata compaction or log
    compaction: none completed yet, a compaction or log compaction of the metadata table pending,
    or a data instant at or before that delta commit still requested or inflight (v6 slices logs
    by the base instant in their name, so its log would be merged in)."""
    latest = timeline.latest_completed(Action.DELTA_COMMIT)
    if latest is None or timeline.pending_compactions() or timeline.pending_log_compactions():
        return None
    if any(i.timestamp <= latest.timestamp for i in data.pending()):
        return None
    return latest.timestamp + suffix


def schedule_v6(mdt: MetadataTableWriter, data: Timeline) -> str | None:
    """A version-6 metadata table's compaction, as Hudi 0.15 schedules it (``HoodieBackedTableMetadataWriter.
    performTableServices``): at ``<latest completed delta commit>001`` (``createCompactionTimestamp``),
    only when no data instant at or before that delta commit is requested or inflight and no
    compaction or log compaction of the metadata table is pending
    (``validateTimelineBeforeSchedulingCompaction``: v6 slices logs by the base instant in their
    name, so a pending data instant's log would be merged into the base file); not again when that
    instant is already on the metadata timeline.  Its plan takes every log file of the latest slices
    (``build_plan``).  The plan's instant (None: none scheduled)."""
    timeline = mdt.timeline()
    instant = v6_gated_time(timeline, data, V6_COMPACTION_SUFFIX)
    if instant is None or why_not_at(timeline, instant) is not None:
        return None
    plan = build_plan(mdt.storage, mdt.base_path, mdt.config, timeline, instant)
    if plan is None:
        return None
    mdt.storage.write_new(timeline.path_of(Instant(instant, Action.COMPACTION, State.REQUESTED)),
                          encode_compaction_plan(plan))
    return instant


def finish_pending_compactions(table: Any, mdt: MetadataTableWriter) -> list[Instant]:
    """Run the metadata table's pending compactions to completion (Java's
    ``runPendingTableServicesOperationsAndRefreshTimeline``, the first of its table services)."""
    pending = mdt.timeline().pending_compactions()
    if not pending:
        return []
    data = Timeline.load(table.storage, table.base_path, table.config.layout)
    return [execute(mdt, table.base_path, data, p.timestamp) for p in pending]


def compact_if_due(table: Any, mdt: MetadataTableWriter, *, max_delta_commits: int | None = None,
                   config: Any = None) -> list[Instant]:
    """The metadata table's table service at the start of a tablesvc commit (under the data
    table's lock): finish pending compactions, then compact when ``max_delta_commits`` delta
    commits completed since the last one (default: ``hoodie.metadata.compact.max.delta.commits``
    of ``config``, the committing command's configuration; None: the default 10).  Returns the
    compactions completed."""
    if max_delta_commits is None:
        max_delta_commits = (DEFAULT_MAX_DELTA_COMMITS if config is None
                             else int(registered_value(config, MAX_DELTA_COMMITS_KEY)))
    done = finish_pending_compactions(table, mdt)
    data = Timeline.load(table.storage, table.base_path, table.config.layout)
    if delta_commits_since_compaction(mdt.timeline()) < max_delta_commits:
        return done
    if mdt.config.version < 8:
        instant = schedule_v6(mdt, data)
        if instant is not None:
            done.append(execute(mdt, table.base_path, data, instant))
        return done
    timeline = mdt.timeline()
    after = max((t for t in (timeline.max_time(), data.max_time()) if t is not None), default=None)
    instant = schedule(mdt, data, lambda: table.instant_times.next(after=after))
    if instant is not None:
        done.append(execute(mdt, table.base_path, data, instant))
    return done


__all__ = ["base_file_name", "compact_if_due", "compact_operation", "compacted_records", "execute",
           "finish_pending_compactions", "merge_files_records", "merge_for", "schedule", "schedule_v6"]
