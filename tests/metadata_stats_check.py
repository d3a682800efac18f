"""The metadata table's ``column_stats`` and ``partition_stats`` against a recomputation from the
files on storage (``tablesvc.metadata.stats_records``, checked field for field against Java's own
records in tests/unit/test_metadata_stats.py).  What the metadata-table write tests call after each
step:

* ``column_stats``: the keys whose merged record is live are exactly (every data file the
  metadata table lists, which the caller has checked equals storage) x (every indexed column); each
  record equals the one computed from its file (footer or log records).  (A file group without a
  base file shows only its newest log's records, to Java as to tablesvc: then live records must
  still each equal their file's, but files may lack one.)
* ``partition_stats``: each partition's record per column equals the one the last commit touching
  the partition computed (that commit's files plus the latest slices with it still pending, as Java
  does: the same rule as the Java comparison), and there is no other.
"""

from __future__ import annotations

import dataclasses

from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.indexed_columns import indexed_columns
from tablesvc.metadata.partition_reader import block_schema, partition_records
from tablesvc.metadata.stats_keys import column_stats_key
from tablesvc.metadata.stats_merge import merge_stats_records
from tablesvc.metadata.stats_records import (
    column_stats_record, commit_stats_records, file_ranges_from_storage, partition_stat_files,
)
from tablesvc.table.properties import read_properties
from timeline.active import Timeline


def _listed(table: Table) -> set[str]:
    return {p for p in table.config.props.get("hoodie.table.metadata.partitions", "").split(",") if p}


def _without_file_name(record):
    return {k: v for k, v in record.items() if k != "_hoodie_file_name"}


def check_column_stats(path, listing: dict[str, dict[str, int]]) -> int:
    """Compare; returns how many records were compared (0 when the table keeps no column_stats)."""
    table = Table.open(str(path))
    if "column_stats" not in _listed(table):
        return 0
    timeline = table.timeline()
    mdt = MetadataTable(table.storage, table.base_path, timeline)
    index = indexed_columns(table.storage, table.base_path, read_properties(table.storage, table.base_path),
                            table.schema(timeline))
    schema = block_schema(mdt, "column_stats")
    live = {k: r for k, r in partition_records(mdt, "column_stats", merge_stats_records).items()
            if r is not None and not r["ColumnStatsMetadata"]["isDeleted"]}
    expected = {}
    for partition, files in listing.items():
        for file_name in files:
            for r in file_ranges_from_storage(table.storage, table.base_path, partition, file_name, index):
                mine = column_stats_record(partition, r, index, schema_json=schema)
                assert mine.key == column_stats_key(r.column, partition, file_name)
                expected[mine.key] = mine.record
    missing = sorted({(expected[k]["ColumnStatsMetadata"]["fileName"]) for k in set(expected) - set(live)})
    if any(s.base_file is None for s in mdt.partition_slices("column_stats")):
        # A file group without a base file: each delta commit's log starts a slice of its own (Java's
        # HoodieFileGroup adds logs newest first; tablesvc's view does the same), so only the newest
        # log's records are read; Java's v9_nonpartitioned_rollback shows it.  Then only what is
        # read is compared.
        missing = []
    extra = sorted({(live[k]["ColumnStatsMetadata"]["fileName"]) for k in set(live) - set(expected)})
    assert not missing and not extra, f"column_stats: files without records {missing}, records of no file {extra}"
    for key, record in live.items():
        body = record["ColumnStatsMetadata"]
        assert _without_file_name(expected[key]) == _without_file_name(record), (body["fileName"], body["columnName"])
    return len(live)


def stored_partition_stats(path) -> dict:
    """The partition_stats partition's merged records (key -> record)."""
    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    return partition_records(mdt, "partition_stats", merge_stats_records)


def check_partition_stats(path, after_clean: bool = False) -> int:
    """Compare; returns how many records were compared (0 when the table keeps no partition_stats).
    ``after_clean``: a partition whose last commit's files a clean has since deleted cannot be
    recomputed; the caller compares its records with those from before the clean instead (a clean
    writes no partition stats)."""
    table = Table.open(str(path))
    if "partition_stats" not in _listed(table):
        return 0
    timeline = table.timeline()
    mdt = MetadataTable(table.storage, table.base_path, timeline)
    index = indexed_columns(table.storage, table.base_path, read_properties(table.storage, table.base_path),
                            table.schema(timeline))
    table.metadata_enabled = False                  # slices from storage, not from the table under test
    stored = {k: r for k, r in partition_records(mdt, "partition_stats", merge_stats_records).items()
              if r is not None}
    schema = block_schema(mdt, "partition_stats")
    last_write = {}
    for instant in timeline.completed_writes():
        metadata = timeline.commit_metadata(table.storage, instant)
        for partition in metadata.partitions():
            last_write[partition] = (instant, metadata)
    compared = set()
    for partition, (instant, metadata) in sorted(last_write.items()):
        pending = Timeline(timeline.base_path, timeline.layout, tuple(
            f for f in timeline.files
            if f.timestamp < instant.timestamp or (f.timestamp == instant.timestamp and not f.is_completed)))
        slices = [s for s in table.file_system_view(pending).latest_file_slices(table.storage)
                  if s.partition == partition]
        if after_clean and any(not table.storage.exists(f"{table.base_path}/{partition}/{n}" if partition
                                                        else f"{table.base_path}/{n}")
                               for n in partition_stat_files(slices, [st.path.rsplit("/", 1)[-1] for st in
                                                                      metadata.partition_to_write_stats[partition]
                                                                      if st.path])):
            compared |= {k for k, r in stored.items() if r["ColumnStatsMetadata"]["fileName"] == partition}
            continue
        # this partition's write stats only (the others' files may be gone)
        metadata = dataclasses.replace(metadata, partition_to_write_stats={
            partition: metadata.partition_to_write_stats[partition]})
        out = commit_stats_records(table.storage, table.base_path, instant.timestamp, metadata, index,
                                   {partition: slices}, schema_json=schema)
        for mine in out.partition_stats:
            body = mine.record["ColumnStatsMetadata"]
            if body["fileName"] != partition:
                continue
            assert mine.key in stored, ("no partition_stats record", partition, body["columnName"])
            assert _without_file_name(stored[mine.key]) == _without_file_name(mine.record), (
                partition, body["columnName"], instant.timestamp)
            compared.add(mine.key)
    assert compared == set(stored), f"partition_stats records of no partition: {sorted(set(stored) - compared)}"
    return len(compared)
