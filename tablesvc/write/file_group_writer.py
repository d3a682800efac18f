"""Writing one file group's share of a delta commit: a new base file, or one new log file.

Runs inside one Spark task (or on the driver): plain values in, files and
``WriteStat``s out.  Every data file is announced by a marker first and created with
``Storage.write_new``, so a crash leaves either no file or a whole one under its name,
and the marker tells a rollback it may exist.

* New file group, upsert/insert: one base parquet file
  ``<fileId>_<token>_<instant>.parquet`` (meta columns, then data columns in schema
  order), written by the one base-file writer (``base_file_writer``) that compaction uses
  too.  A delete for a group that does not exist writes nothing.
* Existing file group: one new log file with one block: an Avro (or Parquet) data
  block for upserts/inserts, a delete block for deletes.  Log names: v6
  ``.<fileId>_<slice base instant>.log.<next version>_<token>``, v8/v9
  ``.<fileId>_<instant>.log.1_<token>``.  Should the name exist already (a second
  write into the group in the same commit, a re-run task), the next version is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import ConflictError, InvalidInputError
from tablesvc.fsview.names import BaseFileName, LogFileName, write_token
from tablesvc.logformat import LogBlock, avro_data_block, delete_block, encode_blocks, parquet_data_block
from tablesvc.table.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME
from tablesvc.write.base_file_writer import write_base_file
from tablesvc.write.keys import PARTITION_PATH_COLUMN, RECORD_KEY_COLUMN
from tablesvc.write.markers import IOType, create_marker
from tablesvc.write.markers import rel_path as _rel
from tablesvc.write.parquet_encoding import dictionary_columns
from tablesvc.write.schema_evolution import align_to_schema, with_meta_fields
from timeline.payloads import WriteStat
from timeline.storage import Storage, join

if TYPE_CHECKING:
    from tablesvc.fsview.view import FileSlice

OPERATIONS = ("upsert", "insert", "delete")
LOG_BLOCK_FORMATS = ("avro", "parquet")
_MAX_LOG_VERSION_PROBES = 1000


@dataclass(frozen=True)
class WriteContext:
    """What every task of one delta commit shares."""

    base_path: str
    table_name: str
    table_version: int
    instant: str
    data_schema_json: str          # table schema without meta fields, already reconciled
    ordering_field: str | None
    log_block_format: str = "avro"
    operation: str = "upsert"
    stage_id: int = 0
    # what tasks write through (``tablesvc.storage.storage_for_tasks``): an object store's task form, or None
    storage: "Storage | None" = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise InvalidInputError(f"write operation {self.operation!r}: expected one of {', '.join(OPERATIONS)}")
        if self.log_block_format not in LOG_BLOCK_FORMATS:
            raise InvalidInputError(f"log block format {self.log_block_format!r}: expected avro or parquet")
        if self.table_version not in (6, 8, 9):
            raise InvalidInputError(f"table version {self.table_version}: expected 6, 8 or 9")

    @property
    def names_logs_by_base_instant(self) -> bool:
        return self.table_version < 8


@dataclass(frozen=True)
class FileGroupTarget:
    """The file group a task writes: a new one, or the latest slice of an existing one."""

    partition: str
    file_id: str
    existing: bool
    base_instant: str | None = None
    base_file_name: str | None = None
    log_file_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_file_names", tuple(self.log_file_names))

    @classmethod
    def new(cls, partition: str, file_id: str) -> "FileGroupTarget":
        return cls(partition, file_id, False)

    @classmethod
    def from_slice(cls, file_slice: "FileSlice") -> "FileGroupTarget":
        return cls(file_slice.partition, file_slice.file_id, True, file_slice.base_instant,
                   file_slice.base_file.file_name if file_slice.base_file else None,
                   tuple(lf.file_name for lf in file_slice.log_files))


def _with_meta(records: pa.Table, ctx: WriteContext, task_partition: int, file_name: str) -> pa.Table:
    """Records with all five meta columns set for this write, aligned to the block/file schema."""
    n = records.num_rows
    seq = pc.binary_join_element_wise(f"{ctx.instant}_{task_partition}",
                                      pa.array(np.arange(n, dtype=np.int64)).cast(pa.string()), "_")
    names = records.schema.names
    columns = {name: records.column(i) for i, name in enumerate(names)}
    columns[COMMIT_TIME] = pa.repeat(pa.scalar(ctx.instant, pa.string()), n)  # no Python list of n
    columns[COMMIT_SEQNO] = seq
    columns[FILE_NAME] = pa.repeat(pa.scalar(file_name, pa.string()), n)
    return align_to_schema(pa.table(columns), with_meta_fields(ctx.data_schema_json))


def _check_records(records: pa.Table, target: FileGroupTarget) -> None:
    for column in (RECORD_KEY_COLUMN, PARTITION_PATH_COLUMN):
        if column not in records.schema.names:
            raise InvalidInputError(f"column {column!r} is missing; add the key columns first")
    if records.column(RECORD_KEY_COLUMN).null_count:
        raise InvalidInputError(f"{RECORD_KEY_COLUMN} is null in records for file group {target.file_id}")
    wrong = pc.invert(pc.fill_null(pc.equal(records.column(PARTITION_PATH_COLUMN), target.partition), False))
    if pc.any(wrong).as_py():
        row = pc.index(wrong, True).as_py()
        raise InvalidInputError(f"row {row}: partition path differs from the target partition "
                                f"{target.partition!r} of file group {target.file_id}")


def _write_base(storage: Storage, ctx: WriteContext, target: FileGroupTarget, records: pa.Table,
                task_partition: int, token: str) -> WriteStat:
    name = BaseFileName(target.file_id, token, ctx.instant).name
    table = _with_meta(records, ctx, task_partition, name)
    # One table, one feed: the writer splits it into row groups of ROW_GROUP_ROWS, as
    # ``pq.write_table`` did; the file may be the first of a new partition.
    n, size = write_base_file(storage, ctx.base_path, ctx.instant, target.partition, name, table.schema, [table],
                              new_partition=True)
    return WriteStat(file_id=target.file_id, path=_rel(target.partition, name), prev_commit="null",
                     partition_path=target.partition, num_writes=n, num_inserts=n,
                     total_write_bytes=size, file_size_in_bytes=size)


def _log_name_instant(ctx: WriteContext, target: FileGroupTarget) -> str:
    if not ctx.names_logs_by_base_instant:
        return ctx.instant
    if not target.base_instant:
        raise InvalidInputError(f"file group {target.file_id}: a v6 log write needs the slice's base instant")
    return target.base_instant


def _first_log_version(target: FileGroupTarget, name_instant: str) -> int:
    versions = [0]
    for existing in target.log_file_names:
        parsed = LogFileName.parse(existing)
        if parsed.file_id == target.file_id and parsed.instant == name_instant:
            versions.append(parsed.version)
    return max(versions) + 1


def log_data_block(block_format: str, instant: str, schema_json: str, table: pa.Table) -> LogBlock:
    """The data block of a new log file in ``block_format`` (``hoodie.logfile.data.block.format``:
    avro or parquet), from the Arrow table (Avro: the column-wise encoder, no per-row dicts;
    Parquet: a dictionary only for repeated columns, as base files).  Writes and log compaction."""
    if block_format == "parquet":
        return parquet_data_block(instant, schema_json, table, dictionary_columns(table.schema, table))
    return avro_data_block(instant, schema_json, table)


def _write_log(storage: Storage, ctx: WriteContext, target: FileGroupTarget, records: pa.Table,
               task_partition: int, token: str, present_keys: int | None = None) -> WriteStat:
    schema = with_meta_fields(ctx.data_schema_json)
    n = records.num_rows
    if ctx.operation == "delete":
        pairs = zip(records.column(RECORD_KEY_COLUMN).to_pylist(), records.column(PARTITION_PATH_COLUMN).to_pylist())
        block = delete_block(ctx.instant, schema, pairs)
        counts = {"num_writes": 0, "num_deletes": n}
    else:
        table = _with_meta(records, ctx, task_partition, target.file_id)
        block = log_data_block(ctx.log_block_format, ctx.instant, schema, table)
        # As Hudi's append handle counts: a key the group held before is an update, the others inserts.
        updates = n if present_keys is None else present_keys
        counts = {"num_writes": n, "num_update_writes": updates, "num_inserts": n - updates}
    data = encode_blocks([block])
    name_instant = _log_name_instant(ctx, target)
    name, version = write_new_log_file(storage, ctx.base_path, ctx.instant, target.partition, target.file_id,
                                       name_instant, _first_log_version(target, name_instant), token, data)
    prev = target.base_instant if ctx.names_logs_by_base_instant else ctx.instant
    return WriteStat(file_id=target.file_id, path=_rel(target.partition, name), prev_commit=prev,
                     partition_path=target.partition, total_write_bytes=len(data), file_size_in_bytes=len(data),
                     log_version=version, log_offset=0, base_file=target.base_file_name or "",
                     log_files=target.log_file_names + (name,), total_log_blocks=1, **counts)


def write_file_group(storage: Storage, ctx: WriteContext, target: FileGroupTarget, records: pa.Table,
                     task_partition: int, attempt: int, present_keys: int | None = None) -> list[WriteStat]:
    """Write ``records`` (data columns + ``_hoodie_record_key`` + ``_hoodie_partition_path``,
    already de-duplicated) into one file group; returns the stats of the files written.

    ``present_keys``: how many of the records' keys an existing group held before (updates; the
    rest are inserts); None when every one of them is known to be there (the lookup index
    routed them to the group)."""
    if isinstance(records, pa.RecordBatch):
        records = pa.Table.from_batches([records])
    if records.num_rows == 0:
        return []
    _check_records(records, target)
    token = write_token(task_partition, ctx.stage_id, attempt)
    if not target.existing:
        if ctx.operation == "delete":
            return []
        return [_write_base(storage, ctx, target, records, task_partition, token)]
    return [_write_log(storage, ctx, target, records, task_partition, token, present_keys)]


__all__ = [
    "FileGroupTarget", "LOG_BLOCK_FORMATS", "OPERATIONS", "WriteContext", "log_data_block", "write_file_group",
]


def write_new_log_file(storage: Storage, base_path: str, instant: str, partition: str, file_id: str,
                       name_instant: str, first_version: int, token: str, data: bytes) -> tuple[str, int]:
    """Create a new log file at the first free version from ``first_version`` on; returns (name, version).

    Never marks a file that is already there: it may belong to an earlier commit (v6 names
    carry the slice's base instant), and a rollback deletes marked files.  The marker is
    created before the file; the file appears whole (``write_new``).
    """
    version = first_version
    for _ in range(_MAX_LOG_VERSION_PROBES):
        name = LogFileName(file_id, name_instant, version, token).name
        path = join(base_path, partition, name)
        if not storage.exists(path):
            create_marker(storage, base_path, instant, partition, name, IOType.APPEND)
            try:
                storage.write_new(path, data)
                return name, version
            except FileExistsError:
                pass
        version += 1
    raise ConflictError(f"file group {file_id}: no free log version after {_MAX_LOG_VERSION_PROBES} tries")
