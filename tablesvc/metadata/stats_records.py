"""The ``column_stats`` and ``partition_stats`` records of one data-table action, as Java Hudi
writes them into the metadata table (docs/metadata-table.md, "Column and partition stats").

What a caller (the metadata table's delta commit for instant T) asks for:

* ``commit_stats_records``: a delta commit, commit, compaction, log compaction or clustering —
  one ``column_stats`` record per (written file, indexed column), then one ``partition_stats``
  record per (touched partition, indexed column), recomputed over the files
  ``partition_stat_files`` picks (the committed latest slices, T still pending, plus T's files),
  the written files' ranges new, the others' from ``file_ranges`` (the metadata table's
  records) or storage;
* ``clean_stats_records``: a clean — per deleted file and indexed column, a deleted stub (Hudi
  1.x: a key for a DELETE block; 0.15: a data record with ``isDeleted`` true); no
  ``partition_stats``.

Pure apart from reading the data files (footers, log records) through ``storage``.  Records are
``KeyedRecord``s ready for ``logformat.hfile_data_block`` with the metadata record schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tablesvc.fsview.model import FileSlice
from tablesvc.logformat import BlockType, KeyedRecord, block_records, block_table, read_log_file
from tablesvc.metadata.column_stats import (
    ColumnRange,
    IndexVersion,
    base_file_ranges,
    log_file_ranges,
    read_footer,
    record_fields,
    stats_body,
)
from tablesvc.metadata.indexed_columns import ColumnStatsIndex
from tablesvc.metadata.record_schema import metadata_record_schema
from tablesvc.metadata.stats_keys import column_stats_key, partition_stats_key
from tablesvc.metadata.stats_merge import partition_ranges
from tablesvc.table.metadata_partitions import MetadataPartitionType
from timeline.payloads.clean import CleanMetadata
from timeline.payloads.commit_metadata import CommitMetadata
from timeline.storage import Storage, join

COLUMN_STATS_TYPE = MetadataPartitionType.COLUMN_STATS.value.record_type
PARTITION_STATS_TYPE = MetadataPartitionType.PARTITION_STATS.value.record_type
# (partition, file name) -> that file's ranges (None: unknown, compute from storage)
FileRanges = Callable[[str, str], "list[ColumnRange] | None"]


def is_log_file_name(file_name: str) -> bool:
    return file_name.startswith(".") and ".log." in file_name


def file_ranges_from_storage(storage: Storage, base_path: str, partition: str, file_name: str,
                             index: ColumnStatsIndex, instant: str | None = None) -> list[ColumnRange]:
    """A data file's ranges, from its footer (base file) or its data blocks' records (log file;
    with ``instant``, only the blocks that instant wrote: one append's records, as Java's write
    stats hold them)."""
    path = join(base_path, partition, file_name) if partition else join(base_path, file_name)
    if not is_log_file_name(file_name):
        return base_file_ranges(read_footer(storage.read_bytes(path)), file_name, index.columns)
    records: list[Mapping[str, Any]] = []
    for block in read_log_file(storage, path, raise_on_corrupt=True).blocks:
        if instant is not None and block.instant_time != instant:
            continue
        if block.block_type == BlockType.AVRO_DATA:
            records += block_records(block, path)
        elif block.block_type == BlockType.PARQUET_DATA:
            records += block_table(block, path).to_pylist()
    return log_file_ranges(records, file_name, index.columns)


@lru_cache(maxsize=8)
def _stats_fields(schema_json: str) -> frozenset[str]:
    return record_fields(schema_json, "HoodieMetadataColumnStats")


@lru_cache(maxsize=8)
def _field_names(schema_json: str) -> tuple[str, ...]:
    return tuple(f["name"] for f in json.loads(schema_json)["fields"])


def _record(schema_json: str, kind: int, body: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = dict.fromkeys(_field_names(schema_json))
    record.update(key="", type=kind, ColumnStatsMetadata=body)
    return record


def column_stats_record(partition: str, r: ColumnRange, index: ColumnStatsIndex, *,
                        schema_json: str | None = None, deleted: bool = False) -> KeyedRecord:
    """The ``column_stats`` record of one file's column."""
    schema_json = schema_json or metadata_record_schema()
    body = stats_body(r, index.version, deleted=deleted,
                      fields=_stats_fields(schema_json))
    return KeyedRecord(column_stats_key(r.column, partition, r.file_name), _record(schema_json, COLUMN_STATS_TYPE, body))


def partition_stats_record(partition: str, r: ColumnRange, index: ColumnStatsIndex, *,
                           schema_json: str | None = None) -> KeyedRecord:
    """The ``partition_stats`` record of one partition's column (``r.file_name`` is the partition)."""
    schema_json = schema_json or metadata_record_schema()
    body = stats_body(r, index.version, tight_bound=True,
                      fields=_stats_fields(schema_json))
    return KeyedRecord(partition_stats_key(r.column, partition), _record(schema_json, PARTITION_STATS_TYPE, body))


@dataclass(frozen=True)
class StatsRecords:
    column_stats: tuple[KeyedRecord, ...]
    partition_stats: tuple[KeyedRecord, ...]
    column_stats_deletes: tuple[str, ...] = ()      # keys for a DELETE block (Hudi 1.x cleans)


def _file_id(file_name: str) -> str:
    """The file group of a data file name: ``<id>_<token>_<instant>.parquet``, ``.<id>_<instant>.log.*``."""
    return file_name.lstrip(".").split("_", 1)[0]


def partition_stat_files(committed: Iterable[FileSlice], written: Iterable[str]) -> list[str]:
    """The files whose ranges make a partition's stats, as Java picks them
    (``HoodieMetadataWriteUtils.getFilesToFetchColumnStats``): the latest merged slices of the
    committed view, T still pending, with T's written files added as if T were complete (its
    base file starts a new slice of its group; its log files join the group's latest slice).
    File groups T replaces stay in: Java's filter compares file names with file-group ids and
    never matches, and the replacement is not complete yet."""
    groups: dict[str, list[str]] = {}
    for file_slice in committed:
        groups.setdefault(file_slice.file_id, []).extend(file_slice.file_names)
    new_logs: dict[str, list[str]] = {}
    for file_name in dict.fromkeys(written):
        if is_log_file_name(file_name):
            new_logs.setdefault(_file_id(file_name), []).append(file_name)
        else:
            groups[_file_id(file_name)] = [file_name]
    for file_id, logs in new_logs.items():
        groups.setdefault(file_id, []).extend(n for n in logs if n not in groups[file_id])
    return [name for names in groups.values() for name in names]


def commit_stats_records(storage: Storage, base_path: str, instant: str, metadata: CommitMetadata,
                         index: ColumnStatsIndex, committed_slices: Mapping[str, Iterable[FileSlice]], *,
                         file_ranges: FileRanges | None = None, schema_json: str | None = None,
                         with_partition_stats: bool = True) -> StatsRecords:
    """The stats records of commit ``instant`` (its ``metadata``'s write stats).
    ``committed_slices``: per partition the commit touched, the latest merged file slices of the
    data table with ``instant`` still pending (``partition_stat_files`` adds its files).
    ``file_ranges`` gives the ranges of those other files (the metadata table's records); files it
    does not know are read from storage."""
    written: dict[str, dict[str, list[ColumnRange]]] = {}
    for partition, stats in (metadata.partition_to_write_stats or {}).items():
        files = written.setdefault(partition, {})
        for stat in stats:
            if not stat.path:
                continue
            file_name = stat.path.rsplit("/", 1)[-1]
            if file_name not in files:
                files[file_name] = file_ranges_from_storage(
                    storage, base_path, partition, file_name, index, instant if is_log_file_name(file_name) else None)
    column_records = [column_stats_record(partition, r, index, schema_json=schema_json)
                      for partition, files in written.items() for ranges in files.values() for r in ranges]
    partition_records: list[KeyedRecord] = []
    if with_partition_stats:
        for partition, files in written.items():
            ranges: list[ColumnRange] = []
            for file_name in partition_stat_files(committed_slices.get(partition, ()), files):
                known = files.get(file_name)
                if known is None and file_ranges is not None:
                    known = file_ranges(partition, file_name)
                if known is None:
                    known = file_ranges_from_storage(storage, base_path, partition, file_name, index)
                ranges += known
            partition_records += [partition_stats_record(partition, r, index, schema_json=schema_json)
                                  for r in partition_ranges(partition, ranges)]
    return StatsRecords(tuple(column_records), tuple(partition_records))


def clean_stats_records(clean: CleanMetadata, index: ColumnStatsIndex, *, tombstones: bool = True,
                        schema_json: str | None = None) -> StatsRecords:
    """The column-stats side of a clean: every deleted file (base and log) and indexed column.
    ``tombstones`` (Hudi 1.x): keys for a DELETE block; otherwise (0.15) data records holding a
    stub (no range, zero counts) with ``isDeleted`` true.  The deleted files are the partition's
    ``deletePathPatterns``, as Java's ``convertMetadataToColumnStatsRecords`` and ``files_changes.
    from_clean`` take them: every file the plan deleted or found already gone (``successDeleteFiles``
    lacks those a re-run found missing, whose records must go all the same)."""
    keys: list[str] = []
    records: list[KeyedRecord] = []
    for partition, part in clean.partition_metadata.items():
        for deleted in part.delete_path_patterns or ():
            file_name = deleted.rsplit("/", 1)[-1]
            for column, ctype in index.columns.items():
                stub = ColumnRange(file_name, column, ctype, None, None, 0, 0, 0, 0)
                if tombstones:
                    keys.append(column_stats_key(column, partition, file_name))
                else:
                    records.append(column_stats_record(partition, stub, index, schema_json=schema_json, deleted=True))
    return StatsRecords(tuple(records), (), tuple(keys))


__all__ = ["IndexVersion", "StatsRecords", "clean_stats_records", "column_stats_record", "commit_stats_records",
           "file_ranges_from_storage", "partition_stat_files", "partition_stats_record"]
