"""Writing the metadata table (``<table>/.hoodie/metadata``): one delta commit at a data instant's
time ``T``, as Hudi 1.x writes it for table versions 8 and 9 (docs/metadata-table.md, "Writing").

The caller holds the data table's lock (``InstantLifecycle.commit``): the metadata table's
timeline is changed under that lock, as Java's write client does, so no lock of its own is taken.

One delta commit:

1. as Java's ``commitInternal`` (after its EAGER failed-writes pass, which ``maintain`` runs): an
   earlier attempt at ``T`` (a run killed before its data instant completed) rolled back with a
   rollback instant on the metadata table at a new time (``mdt_rollback.roll_back_before_rewrite``);
2. ``T.deltacommit.requested`` (empty), then ``T.deltacommit.inflight`` (commit metadata without
   write stats, operation ``UPSERT_PREPPED``, as the fixtures hold);
3. per touched file group of a partition, a NEW log file ``.<fileId>_T.log.1_<token>`` holding
   one HFILE_DATA block (headers INSTANT_TIME and SCHEMA, records sorted by key) and/or, after
   it, one DELETE block of the keys deleted (a clean's column stats; headers INSTANT_TIME and
   SCHEMA, each key's partition the metadata partition, as Java's append handle writes them): on
   v8/v9 every delta commit writes its own log file; on version 6 the file is named by the base
   instant of the group's latest slice, at the slice's next free log version, as Hudi 0.15 writes
   on a storage without appends (``_write_v6_log``).  The SCHEMA is the one the partition already
   uses (``partition_schema``: its newest block's, else its base file's), so a table Hudi 1.0
   wrote keeps 1.0's record schema (readers such as hudi-rs reconcile a slice's blocks by it).  A key goes to file group
   ``|javaHash(key) % n|`` of the n groups the partition has (``file_group_index``);
4. ``T``'s completed file, with the write stats of those log files and the record schema
   (without meta fields) in ``extraMetadata.schema``.

The metadata table's instant ``T`` may be older than instants already on its timeline (a
compaction planned long ago commits after later writes): Hudi allows that, so the requested
file is created directly rather than by ``TimelineWriter.request``, which only creates times
after the latest.  Completion times come from the data table's generator, so the metadata
table's completion is earlier than the data instant's.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Mapping, Sequence

from tablesvc.errors import TableConfigError
from tablesvc.fsview.names import UNKNOWN_WRITE_TOKEN, LogFileName, looks_like_log_file
from tablesvc.fsview.view import FileSystemView
from tablesvc.hfile import read_hfile
from tablesvc.logformat import BlockType, KeyedRecord, delete_block, hfile_data_block, read_log_file, write_log_file
from tablesvc.metadata.files_changes import FilesChange
from tablesvc.metadata.reader import metadata_base_path
from tablesvc.metadata.record_schema import files_record, metadata_record_schema
from tablesvc.table.config import TableConfig
from tablesvc.table.properties import read_properties
from timeline.active import Timeline
from timeline.errors import InvalidInstantError
from timeline.instant import Action, Instant, State
from timeline.instant_time import InstantTimeGenerator
from timeline.payloads import CommitMetadata, WriteStat, encode_commit_metadata
from timeline.storage import Storage, join
from timeline.transitions import TimelineWriter

OPERATION = "UPSERT_PREPPED"     # what Hudi's metadata writer records for its delta commits
# No Spark task writes these files (the driver does, under the lock): Hudi's token for such files.
WRITE_TOKEN = UNKNOWN_WRITE_TOKEN
# a version-6 log name taken by another writer between the listing and the write: the next version
_MAX_V6_LOG_PROBES = 100


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: 31-based over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def file_group_index(key: str, groups: int) -> int:
    """Which of ``groups`` file groups holds ``key`` (``HoodieTableMetadataUtil.
    mapRecordKeyToFileGroupIndex``: ``Math.abs(Math.abs(hash) % groups)``).  Java's remainder
    keeps the dividend's sign and the outer ``abs`` drops it, so even ``Integer.MIN_VALUE``
    (whose ``abs`` stays negative) comes out as ``|hash| mod groups``."""
    if groups < 1:
        raise ValueError("a metadata partition has at least one file group")
    return abs(java_string_hash(key)) % groups


@lru_cache(maxsize=4)
def commit_schema(record_schema: str | None = None) -> str:
    """``extraMetadata.schema`` of Hudi's metadata delta commits: the record schema (default the
    bundled one) without the ``_hoodie_*`` meta fields, compact JSON (equal to the fixture's, tested)."""
    schema = json.loads(record_schema or metadata_record_schema())
    schema["fields"] = [f for f in schema["fields"] if not f["name"].startswith("_hoodie_")]
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class PartitionRecords:
    """What one delta commit writes into a metadata partition other than ``files``: records
    already built with that partition's schema (``MetadataTableWriter.partition_schema``) and
    keys deleted (a DELETE block)."""

    records: tuple[KeyedRecord, ...] = ()
    deleted_keys: tuple[str, ...] = ()
    # the text whose hash picks a key's file group (None: the key itself); secondary indexes of
    # version V2 hash the key's value prefix only (``secondary_index.group_key``)
    group_key: Callable[[str], str] | None = None


class _HeldLock(contextlib.AbstractContextManager):
    """The data table's lock, which the caller already holds (``InstantLifecycle.commit``)."""

    def __exit__(self, *exc) -> None:
        return None


@dataclass(frozen=True)
class MetadataTableWriter:
    """The metadata table of one data table, for writing under the data table's lock."""

    storage: Storage
    base_path: str                 # <data>/.hoodie/metadata
    config: TableConfig
    timeline_writer: TimelineWriter
    # the partitions the data table's properties list (completed and inflight): the only folders
    # a pending delta commit's log files are looked for in; empty: every folder
    partitions: tuple[str, ...] = ()

    @classmethod
    def of(cls, storage: Storage, data_base_path: str, generator: InstantTimeGenerator,
           partitions: Sequence[str] = ()) -> "MetadataTableWriter":
        base = metadata_base_path(data_base_path)
        where = f"{base}/.hoodie/hoodie.properties"
        try:
            config = TableConfig.from_properties(read_properties(storage, base), where)
        except FileNotFoundError:
            raise TableConfigError(f"{where}: the data table lists metadata partitions but the metadata "
                                   "table has no hoodie.properties") from None
        writer = TimelineWriter(storage, base, config.layout, generator, _HeldLock)
        return cls(storage, base, config, writer, tuple(partitions))

    def timeline(self) -> Timeline:
        return Timeline.load(self.storage, self.base_path, self.config.layout)

    # -- what holds an instant ------------------------------------------------------------------
    def holder_of(self, ts: str, timeline: Timeline | None = None) -> Instant | None:
        """The metadata table's compaction or log compaction (any state) that holds the completed
        delta commit ``ts``: one whose instant is later than ``ts``'s completion, so its plan may
        have taken ``ts``'s log files (Java's plan generators take the log files completed before
        the plan's instant).  None when ``ts`` is not completed or nothing holds it."""
        timeline = timeline or self.timeline()
        completed = next((f for f in timeline.files_of(ts)
                          if f.is_completed and f.action.completed_action is Action.DELTA_COMMIT), None)
        if completed is None:
            return None
        after = completed.completion_time or ts
        holders = (Action.COMPACTION, Action.LOG_COMPACTION)
        for instant in timeline.instants:
            if instant.timestamp > after and (
                    instant.action is Action.COMMIT      # only compactions commit on a metadata table
                    or any(f.action in holders for f in timeline.files_of(instant.timestamp))):
                return instant
        return None

    # -- one delta commit ----------------------------------------------------------------------
    def file_groups(self, partition: str, timeline: Timeline) -> list[str]:
        """The file ids of ``partition``'s file groups, sorted (Hudi maps keys over them in order)."""
        view = FileSystemView.build(self.storage, self.base_path, self.config, timeline, [partition], sizes=False)
        ids = sorted({s.file_id for s in view.latest_file_slices(self.storage)})
        if not ids:
            raise TableConfigError(f"{join(self.base_path, partition)}: the metadata table's {partition} partition "
                                   "has no file group")
        return ids

    def partition_schema(self, partition: str, timeline: Timeline) -> str:
        """The ``HoodieMetadataRecord`` schema ``partition`` is written with: the SCHEMA header of
        the newest block of its latest slices (log files newest first: on v8/v9 each holds one
        delta commit), else its base HFile's file-info schema, else (a partition without records
        yet) the bundled one.  Hudi writes each block with its own version's schema; a writer
        that keeps the table's version keeps every reader's view of a slice one schema."""
        view = FileSystemView.build(self.storage, self.base_path, self.config, timeline, [partition], sizes=False)
        slices = view.latest_file_slices(self.storage)
        logs = sorted((lf for s in slices for lf in s.log_files),
                      key=lambda lf: (lf.name.instant, lf.name.version), reverse=True)
        for log_file in logs:
            for block in reversed(read_log_file(self.storage, log_file.path).blocks):
                if block.block_type in (BlockType.HFILE_DATA, BlockType.DELETE) and block.schema:
                    return block.schema
        for file_slice in sorted(slices, key=lambda s: s.base_instant, reverse=True):
            if file_slice.base_file is not None:
                schema = read_hfile(self.storage, file_slice.base_file.path).schema
                if schema:
                    return schema
        return metadata_record_schema()

    def write_delta_commit(self, ts: str, changes: Mapping[str, "Sequence[FilesChange] | PartitionRecords"],
                           schemas: Mapping[str, str] | None = None) -> Instant:
        """The delta commit ``ts`` of ``changes`` (metadata partition -> ``files`` records, or a
        ``PartitionRecords`` built with ``schemas[partition]``); returns its completed instant."""
        from tablesvc.metadata.mdt_rollback import roll_back_before_rewrite   # it imports this module

        started = time.monotonic()
        roll_back_before_rewrite(self, ts)
        timeline = self.timeline()
        requested = Instant(ts, Action.DELTA_COMMIT, State.REQUESTED)
        if timeline.files_of(ts):
            raise InvalidInstantError(f"{self.base_path}: instant {ts} is on the metadata table's timeline as "
                                      f"{', '.join(f.file_name() for f in timeline.files_of(ts))}; cannot write "
                                      "its delta commit")
        self.storage.write_new(timeline.path_of(requested), b"")
        inflight = self.timeline_writer.start(requested, self._encode(CommitMetadata(
            partition_to_write_stats={}, extra_metadata={}, operation_type=OPERATION, version=None)))
        stats: dict[str, list[WriteStat]] = {}
        record_schemas: list[str] = []
        for partition, change in changes.items():
            schema = (schemas or {}).get(partition) or self.partition_schema(partition, timeline)
            record_schemas.append(schema)
            hashed: Callable[[str], str] = lambda k: k
            if isinstance(change, PartitionRecords):
                keyed, deleted = list(change.records), list(change.deleted_keys)
                hashed = change.group_key or hashed
            else:
                keyed = [KeyedRecord(r.key, files_record(r.kind, r.entries, schema)) for r in change]
                deleted = []
            groups = self.file_groups(partition, timeline)
            by_group = _by_file_group(keyed, groups, key=lambda r: hashed(r.key))
            deletes_by_group = _by_file_group(deleted, groups, key=hashed)
            for file_id in sorted(set(by_group) | set(deletes_by_group)):
                stats.setdefault(partition, []).append(self._write_log(
                    partition, file_id, ts, schema, by_group.get(file_id, []), deletes_by_group.get(file_id, []),
                    started))
        metadata = CommitMetadata(
            partition_to_write_stats={p: tuple(s) for p, s in stats.items()}, compacted=False,
            extra_metadata={"schema": commit_schema(record_schemas[0] if record_schemas else None)},
            operation_type=OPERATION, version=None)
        return self.timeline_writer.complete(inflight, self._encode(metadata))

    def _write_log(self, partition: str, file_id: str, ts: str, schema: str, records: list[KeyedRecord],
                   deleted_keys: list[str], started: float) -> WriteStat:
        blocks = []
        if records:
            blocks.append(hfile_data_block(ts, schema, records))
        if deleted_keys:     # after the data block, as Java's append handle orders them
            blocks.append(delete_block(ts, schema, [(key, partition) for key in sorted(set(deleted_keys))]))
        if self.config.version < 8:
            name, prev, base_file, data = self._write_v6_log(partition, file_id, blocks)
        else:
            name, prev, base_file = LogFileName(file_id, ts, 1, WRITE_TOKEN).name, ts, ""
            data = write_log_file(self.storage, join(self.base_path, partition, name), blocks)
        size = len(data)
        return WriteStat(
            file_id=file_id, path=f"{partition}/{name}", prev_commit=prev, partition_path=partition,
            num_writes=len(records), num_deletes=len(set(deleted_keys)), num_update_writes=len(records),
            total_write_bytes=size,
            file_size_in_bytes=size, total_log_read_time_ms=0, log_version=LogFileName.parse(name).version,
            log_offset=0, base_file=base_file,
            log_files=(name,),
            runtime_stats={"totalScanTime": 0, "totalUpsertTime": int((time.monotonic() - started) * 1000),
                           "totalCreateTime": 0},
            extra={"numUpdates": 0})

    def _write_v6_log(self, partition: str, file_id: str, blocks: list) -> tuple[str, str, str, bytes]:
        """A version-6 metadata table's new log file (name, its slice's base instant, base file
        name, bytes): named by the base instant of the group's latest slice, at the next free log
        version of that slice, as Hudi 0.15's append handle rolls over to a new file on a storage
        that cannot append (the ``file`` scheme; ``HoodieLogFormatWriter``); never appended to.
        A group in a pending compaction ``C``'s plan has its latest slice at ``C`` (no base file
        yet), as Java's file-system view adds an empty slice at a pending compaction's instant
        (``addNewFileSliceAtInstant``): the log is named by ``C``, so it stays out of ``C``'s plan
        (which lists its log files) and lands in the slice ``C``'s base file starts."""
        timeline = self.timeline()
        view = FileSystemView.build(self.storage, self.base_path, self.config, timeline, [partition], sizes=False)
        # the group's own latest slice (not latest_file_slices: it merges a pending compaction's
        # slice into the one before it, for readers)
        group = next((g for g in view.file_groups(partition) if g.file_id == file_id), None)
        latest = group.latest_slice() if group is not None else None
        compaction = self._pending_compaction_of(timeline, partition, file_id)
        if compaction is not None and (latest is None or compaction > latest.base_instant):
            base_instant, base_file = compaction, ""
        elif latest is not None:
            base_instant = latest.base_instant
            base_file = latest.base_file.file_name if latest.base_file is not None else ""
        else:
            raise TableConfigError(f"{join(self.base_path, partition)}: the metadata table's file group {file_id} "
                                   "has no file slice to append a log file to")
        folder = join(self.base_path, partition)
        # Java's Hadoop file system leaves a ``.<name>.crc`` beside each log file it wrote: not a log file
        version = 1 + max((n.version for n in (LogFileName.parse(x) for x in self.storage.list_names(folder)
                                                 if looks_like_log_file(x) and not x.endswith(".crc"))
                           if n.file_id == file_id and n.instant == base_instant), default=0)
        for attempt in range(_MAX_V6_LOG_PROBES):
            name = LogFileName(file_id, base_instant, version + attempt, WRITE_TOKEN).name
            try:
                return name, base_instant, base_file, write_log_file(self.storage, join(folder, name), blocks)
            except FileExistsError:
                continue
        raise TableConfigError(f"{folder}: no free log version for file group {file_id} after {_MAX_V6_LOG_PROBES} "
                               "tries")

    def _pending_compaction_of(self, timeline: Timeline, partition: str, file_id: str) -> str | None:
        """The pending compaction whose plan holds ``partition``'s file group ``file_id`` (a group
        is in at most one), or None."""
        for instant in timeline.pending_compactions():
            if (partition, file_id) in {(p or "", f) for p, f in timeline.plan_of(self.storage, instant).file_ids()}:
                return instant.timestamp
        return None

    def _encode(self, metadata: CommitMetadata) -> bytes:
        return encode_commit_metadata(metadata, self.config.layout)


def _by_file_group(records: Iterable, groups: list[str], key=lambda r: r.key) -> dict[str, list]:
    out: dict[str, list] = {}
    for record in records:
        out.setdefault(groups[file_group_index(key(record), len(groups))], []).append(record)
    return out


__all__ = ["MetadataTableWriter", "PartitionRecords", "commit_schema", "file_group_index", "java_string_hash"]
