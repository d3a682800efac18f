"""What one data-table instant changes in the metadata table's ``files`` partition, derived from
that instant's own metadata the way Hudi 1.x converts it (``HoodieTableMetadataUtil``,
``convertMetadataToFilesPartitionRecords``; docs/metadata-table-write-research.md §1.3):

* **commit metadata** (a delta commit, a compaction's commit, a log compaction's delta commit):
  one ``__all_partitions__`` record naming every partition the instant wrote (``.`` for a
  non-partitioned table), then per partition one record adding each file the instant wrote,
  with its size (the larger one when a file appears twice).  Files the instant replaced are not
  named: they stay listed until a clean deletes them.
* **clean metadata**: per cleaned partition, one record marking every file of its delete list
  (base and log files) deleted, size 0; a partition the clean deleted whole is also marked
  deleted in an ``__all_partitions__`` record;
* rollback metadata, version 6 only (``from_rollback``): the log files a rollback appended to.

Each change is a value: record key -> (type, name -> (size, deleted)).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from tablesvc.metadata.files_records import (
    PARTITION_LIST_KEY, TYPE_FILE_LIST, TYPE_PARTITION_LIST, partition_key,
)
from timeline.payloads import CleanMetadata, CommitMetadata, RollbackMetadata


@dataclass(frozen=True)
class FilesChange:
    """One record of the ``files`` partition an instant writes."""

    key: str
    kind: int                                        # TYPE_PARTITION_LIST or TYPE_FILE_LIST
    entries: Mapping[str, tuple[int, bool]]          # name -> (size, deleted)


def _file_name(path: str, partition: str) -> str:
    """A write stat's path (relative to the table) without its partition folder (Hudi's
    ``FSUtils.getFileName``): the bare file name."""
    prefix = f"{partition}/" if partition else ""
    name = path[len(prefix):] if prefix and path.startswith(prefix) else path
    return name.lstrip("/")


def from_commit(metadata: CommitMetadata) -> tuple[FilesChange, ...]:
    stats = metadata.partition_to_write_stats or {}
    partitions = MappingProxyType({partition_key(p): (0, False) for p in stats})
    out = [FilesChange(PARTITION_LIST_KEY, TYPE_PARTITION_LIST, partitions)]
    for partition, partition_stats in stats.items():
        sizes: dict[str, int] = {}
        for stat in partition_stats:
            if stat.path is None:        # Hudi skips a stat without a path (an empty partition)
                continue
            name = _file_name(stat.path, partition)
            sizes[name] = max(sizes.get(name, 0), int(stat.file_size_in_bytes or 0))
        out.append(FilesChange(partition_key(partition), TYPE_FILE_LIST,
                               MappingProxyType({n: (s, False) for n, s in sizes.items()})))
    return tuple(out)


def from_clean(metadata: CleanMetadata) -> tuple[FilesChange, ...]:
    out: list[FilesChange] = []
    deleted_partitions: list[str] = []
    for partition, pm in (metadata.partition_metadata or {}).items():
        names = {_file_name(p, partition): (0, True) for p in (pm.delete_path_patterns or ())}
        out.append(FilesChange(partition_key(partition), TYPE_FILE_LIST, MappingProxyType(names)))
        if pm.is_partition_deleted:
            deleted_partitions.append(partition_key(partition))
    if deleted_partitions:
        out.append(FilesChange(PARTITION_LIST_KEY, TYPE_PARTITION_LIST,
                               MappingProxyType({p: (0, True) for p in deleted_partitions})))
    return tuple(out)


def from_rollback(metadata: RollbackMetadata) -> tuple[FilesChange, ...]:
    """A version-6 rollback's ``files`` records (Hudi 0.15 ``HoodieTableMetadataUtil.
    processRollbackMetadata``; 1.x writes none): per partition that has rollback log files (files
    that received a rollback command block), those and the failed commit's log files, added with
    their sizes (the larger one when a file appears twice); no deletions, no
    ``__all_partitions__`` record."""
    out: list[FilesChange] = []
    for pm in (metadata.partition_metadata or {}).values():
        if not pm.rollback_log_files:
            continue
        sizes: dict[str, int] = {}
        for path, size in (*pm.rollback_log_files.items(), *(pm.log_files_from_failed_commit or {}).items()):
            name = path.rsplit("/", 1)[-1]
            sizes[name] = max(sizes.get(name, int(size)), int(size))
        out.append(FilesChange(partition_key(pm.partition_path), TYPE_FILE_LIST,
                               MappingProxyType({n: (s, False) for n, s in sizes.items()})))
    return tuple(out)


__all__ = ["FilesChange", "from_clean", "from_commit", "from_rollback"]
