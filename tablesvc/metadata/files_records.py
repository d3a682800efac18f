"""Records of the metadata table's ``files`` partition and how Hudi merges them.

A ``HoodieMetadataRecord`` of the ``files`` partition is keyed by ``__all_partitions__`` (type 1,
the partition list: one entry per partition, size 0; ``.`` names the one partition of a
non-partitioned table) or by a partition path (type 2, that partition's files: name -> size).
Each entry says ``isDeleted`` too: a write adds its files, a clean or rollback marks the files it
removed.

Merging, as ``HoodieMetadataPayload.preCombine`` does (Hudi 1.x), a newer record over an older
one of the same key:

* a deleted record (the key in a DELETE block) wins over whatever came before, and a record
  after a deleted one starts afresh;
* otherwise the file maps combine: every older entry stays, then each newer entry is put in;
  where both have a name, a newer deletion removes the name (the tombstone goes too), a newer
  addition keeps the larger size (sizes only grow);  a deletion of a name the older record does
  not hold stays as a tombstone, since the older state may still come (Hudi merges the log
  records first, then the merged log record over the base file's).

Readers list the entries that are not deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tablesvc.errors import LogFormatError

PARTITION_LIST_KEY = "__all_partitions__"
NON_PARTITIONED = "."            # the partition identifier of a non-partitioned table's "" partition
TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2


def partition_key(partition: str) -> str:
    """The ``files`` record key of a data-table partition path."""
    return partition or NON_PARTITIONED


def partition_of(identifier: str) -> str:
    """The data-table partition path of a partition-list entry or record key."""
    return "" if identifier == NON_PARTITIONED else identifier


@dataclass(frozen=True)
class FileInfo:
    size: int
    deleted: bool


@dataclass(frozen=True)
class FilesRecord:
    key: str
    kind: int | None                              # TYPE_PARTITION_LIST or TYPE_FILE_LIST; None when deleted
    entries: Mapping[str, FileInfo] | None        # None: the record is deleted

    @property
    def is_deleted(self) -> bool:
        return self.entries is None

    @classmethod
    def deleted_record(cls, key: str) -> "FilesRecord":
        return cls(key, None, None)

    @classmethod
    def from_avro(cls, key: str, record: Mapping[str, Any], where: str) -> "FilesRecord":
        kind = record.get("type")
        if kind not in (TYPE_PARTITION_LIST, TYPE_FILE_LIST):
            raise LogFormatError(f"{where}: record {key!r} of the files partition has type {kind!r}, "
                                 f"not {TYPE_PARTITION_LIST} or {TYPE_FILE_LIST}")
        raw = record.get("filesystemMetadata") or {}
        entries = {}
        for name, info in raw.items():
            if not isinstance(info, Mapping) or info.get("size") is None:
                raise LogFormatError(f"{where}: record {key!r}, file {name!r}: no size")
            entries[name] = FileInfo(int(info["size"]), bool(info.get("isDeleted")))
        return cls(key, kind, MappingProxyType(entries))

    def over(self, older: "FilesRecord") -> "FilesRecord":
        """This (newer) record merged over ``older`` of the same key (module docstring)."""
        if self.is_deleted or older.is_deleted:
            return self
        combined = dict(older.entries)            # type: ignore[arg-type]
        for name, info in self.entries.items():   # type: ignore[union-attr]
            before = combined.get(name)
            if before is None:
                combined[name] = info
            elif info.deleted:
                del combined[name]
            else:
                combined[name] = FileInfo(max(info.size, before.size), False)
        return FilesRecord(self.key, self.kind, MappingProxyType(combined))

    def live(self) -> dict[str, int]:
        """Name -> size of every entry that is not deleted."""
        if self.entries is None:
            return {}
        return {name: info.size for name, info in self.entries.items() if not info.deleted}


def merge_in_order(records: list[FilesRecord]) -> dict[str, FilesRecord]:
    """Per key, the records (oldest first) merged: each newer one over the merge before it."""
    out: dict[str, FilesRecord] = {}
    for record in records:
        before = out.get(record.key)
        out[record.key] = record if before is None else record.over(before)
    return out
