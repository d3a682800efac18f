"""What one data-table commit writes into the metadata table's ``column_stats`` and
``partition_stats`` partitions (docs/metadata-table.md, "Writing"): ``metadata.maintain`` adds
these to the delta commit at the data instant's time ``T``, beside the ``files`` records.

* a delta commit (write, log compaction) or a compaction's commit: ``stats_records.
  commit_stats_records`` — a ``column_stats`` record per written file and indexed column, and
  (when ``partition_stats`` is listed) a ``partition_stats`` record per touched partition and
  column, recomputed over that partition's latest merged slices with ``T`` still pending plus
  ``T``'s files.  Those slices come from a storage listing under the data timeline as it is now
  (``T`` inflight), and every file's ranges from the file itself: the truth on storage, which is
  what the metadata table's records of those files hold when it is true;
* a clean: per deleted file and indexed column, its ``column_stats`` key in a DELETE block
  (Hudi 1.x); nothing for ``partition_stats`` (Java's clean writes none).  Version 6 (Hudi 0.15):
  every column of the writer schema is indexed (``v6_indexed_columns``), and a clean writes, per
  deleted Parquet file and column, a stub record with ``isDeleted`` (``v6_clean_stats_records``).

A partition is written only when ``hoodie.table.metadata.partitions`` lists it (complete).  The
records are built with the schema the partition already uses, so they carry only its fields.
"""

from __future__ import annotations

from typing import Any

from tablesvc.fsview.view import FileSystemView
from tablesvc.logformat import KeyedRecord
from tablesvc.metadata.column_stats import ColumnRange
from tablesvc.metadata.indexed_columns import ColumnStatsIndex, indexed_columns, v6_indexed_columns
from tablesvc.metadata.stats_records import clean_stats_records, column_stats_record, commit_stats_records
from tablesvc.metadata.writer import MetadataTableWriter, PartitionRecords
from tablesvc.table.metadata_partitions import MetadataPartitionType
from timeline.active import Timeline
from timeline.payloads import CleanMetadata, CommitMetadata

COLUMN_STATS = MetadataPartitionType.COLUMN_STATS.value.folder
PARTITION_STATS = MetadataPartitionType.PARTITION_STATS.value.folder
PROPERTY = "hoodie.table.metadata.partitions"


def _complete_partitions(props: dict[str, str]) -> set[str]:
    return {p for p in (props.get(PROPERTY) or "").split(",") if p}


def keeps_stats(props: dict[str, str]) -> bool:
    return bool({COLUMN_STATS, PARTITION_STATS} & _complete_partitions(props))


def stats_changes(table: Any, mdt: MetadataTableWriter, ts: str,
                  decoded: CommitMetadata | CleanMetadata) -> tuple[dict[str, PartitionRecords], dict[str, str]]:
    """(metadata partition -> what ``T`` writes into it, metadata partition -> record schema)."""
    props = dict(table.config.props)
    listed = _complete_partitions(props)
    wanted = [p for p in (COLUMN_STATS, PARTITION_STATS) if p in listed]
    if not wanted:
        return {}, {}
    mdt_timeline = mdt.timeline()
    schemas = {p: mdt.partition_schema(p, mdt_timeline) for p in wanted}
    timeline = Timeline.load(table.storage, table.base_path, table.config.layout)
    table_schema = None
    if isinstance(decoded, CommitMetadata):
        table_schema = (decoded.extra_metadata or {}).get("schema") or None
    table_schema = table_schema or timeline.latest_schema(table.storage) or table.config.create_schema
    if table.config.version < 8:
        index = v6_indexed_columns(table_schema, f"{table.base_path}: the table schema")
    else:
        index = indexed_columns(table.storage, table.base_path, props, table_schema)
    out: dict[str, PartitionRecords] = {}
    if isinstance(decoded, CleanMetadata) and table.config.version < 8:
        if COLUMN_STATS in wanted:
            records = v6_clean_stats_records(decoded, index, schemas[COLUMN_STATS])
            if records:
                out[COLUMN_STATS] = PartitionRecords(records=records)
        return out, schemas
    if isinstance(decoded, CleanMetadata):
        if COLUMN_STATS in wanted:
            keys = clean_stats_records(decoded, index).column_stats_deletes
            if keys:
                out[COLUMN_STATS] = PartitionRecords(deleted_keys=keys)
        return out, schemas
    touched = [p for p, stats in (decoded.partition_to_write_stats or {}).items() if any(s.path for s in stats)]
    if not touched:
        return out, schemas
    # the data table's latest merged slices with T still pending (T is inflight on this timeline)
    view = FileSystemView.build(table.storage, table.base_path, table.config, timeline, touched, sizes=False)
    committed = {p: view.latest_file_slices(table.storage, partition=p) for p in touched}
    with_partition_stats = PARTITION_STATS in wanted
    records = commit_stats_records(table.storage, table.base_path, ts, decoded, index, committed,
                                   schema_json=schemas.get(COLUMN_STATS) or schemas[PARTITION_STATS],
                                   with_partition_stats=with_partition_stats)
    if COLUMN_STATS in wanted and records.column_stats:
        out[COLUMN_STATS] = PartitionRecords(records=records.column_stats)
    partition_records = records.partition_stats
    if with_partition_stats and schemas.get(COLUMN_STATS, schemas[PARTITION_STATS]) != schemas[PARTITION_STATS]:
        # the two partitions hold different record schemas (written by different Hudi versions)
        partition_records = commit_stats_records(table.storage, table.base_path, ts, decoded, index, committed,
                                                 schema_json=schemas[PARTITION_STATS]).partition_stats
    if with_partition_stats and partition_records:
        out[PARTITION_STATS] = PartitionRecords(records=partition_records)
    return out, schemas


def v6_clean_stats_records(clean: CleanMetadata, index: ColumnStatsIndex, schema_json: str) -> tuple[KeyedRecord, ...]:
    """A version-6 clean's ``column_stats`` records, as Hudi 0.15 writes them
    (``HoodieTableMetadataUtil.convertMetadataToColumnStatsRecords``): per deleted Parquet base file
    (log files get none) and indexed column, a data record holding ``HoodieColumnRangeMetadata.stub``
    (no range, every count -1) with ``isDeleted`` true, in the HFile data block (0.15's payload
    is no delete: only 1.x writes DELETE blocks for them)."""
    out: list[KeyedRecord] = []
    for partition, part in (clean.partition_metadata or {}).items():
        for deleted in part.delete_path_patterns or ():
            file_name = deleted.rsplit("/", 1)[-1]
            if not file_name.endswith(".parquet"):
                continue
            for column, ctype in index.columns.items():
                stub = ColumnRange(file_name, column, ctype, None, None, -1, -1, -1, -1)
                out.append(column_stats_record(partition, stub, index, schema_json=schema_json, deleted=True))
    return tuple(out)


__all__ = ["keeps_stats", "stats_changes", "v6_clean_stats_records"]
