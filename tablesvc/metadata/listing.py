"""The metadata table's ``files`` partition as a ``FileListing`` (``fsview/listing.py``): the
partitions from the ``__all_partitions__`` record, each partition's files (name -> size) from
its own record, deleted entries left out.  Read once, when first asked."""

from __future__ import annotations

from functools import cached_property

from tablesvc.metadata.files_records import PARTITION_LIST_KEY, FilesRecord, partition_key, partition_of
from tablesvc.metadata.reader import MetadataTable
from tablesvc.table.config import TableConfig
from timeline.active import Timeline
from timeline.storage import Storage

FILES_PARTITION = "files"


def lists_files(config: TableConfig) -> bool:
    """True when the table's metadata table holds a complete ``files`` partition: Java's
    ``isMetadataTableAvailable`` (``files`` in ``hoodie.table.metadata.partitions``)."""
    return FILES_PARTITION in config.metadata_partitions


class MetadataFileListing:
    def __init__(self, storage: Storage, base_path: str, data_timeline: Timeline):
        self.table = MetadataTable(storage, base_path, data_timeline)

    @cached_property
    def _records(self) -> dict[str, FilesRecord]:
        return self.table.files_records()

    def partitions(self) -> list[str]:
        record = self._records.get(PARTITION_LIST_KEY)
        return sorted(partition_of(p) for p in (record.live() if record is not None else {}))

    def files(self, partition: str) -> dict[str, int]:
        record = self._records.get(partition_key(partition))
        return record.live() if record is not None else {}
