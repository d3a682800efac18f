"""The metadata table (``<table>/.hoodie/metadata``) as a reader of its ``files`` partition sees it.

The metadata table is itself a merge-on-read Hudi table, with its own ``hoodie.properties`` and
timeline: HFile base files and log files of HFILE_DATA blocks (and empty DELETE blocks).  Its
``files`` partition is read like any file slice, with the metadata table's own rules:

1. **The slice**: the file-system view of the metadata table (``FileSystemView`` over its base
   path and timeline: only files of its completed instants, logs into slices by completion time
   on v8+ or by the instant in their name on v6), the latest slice of each file group of the
   ``files`` partition (one group, ``files-0000-0``, in every table written so far).
2. **Blocks**: the data reader's selection (``merge.blocks.select_from_contents``: rollback
   command blocks, failed appends, log compaction) against the metadata table's timeline, then
   only blocks whose instant is valid for the data table too (``valid_instants``).
3. **Records**: the base HFile's records (the schema in its file info), then the log blocks'
   records merged in order, then the merged log record over the base record
   (``files_records``: Hudi's two-stage merge).
"""

from __future__ import annotations

from functools import cached_property

from tablesvc.errors import LogFormatError, TableConfigError
from tablesvc.fsview.view import FileSlice, FileSystemView
from tablesvc.hfile import read_hfile
from tablesvc.logformat import BlockType, block_deletes, block_keyed_records, decode_hfile, read_log_file
from tablesvc.merge.blocks import select_from_contents
from tablesvc.merge.context import COMMIT_TIME_ORDERING, ReadContext
from tablesvc.metadata.files_records import FilesRecord, merge_in_order
from tablesvc.metadata.valid_instants import valid_instants
from tablesvc.storage import storage_for_tasks
from tablesvc.table.config import TableConfig
from tablesvc.table.properties import read_properties
from timeline.active import Timeline
from timeline.storage import Storage, join

METADATA_FOLDER = ".hoodie/metadata"
FILES_PARTITION = "files"


def metadata_base_path(data_base_path: str) -> str:
    return join(data_base_path, METADATA_FOLDER)


class MetadataTable:
    """The metadata table of the data table at ``data_base_path``, read as of ``data_timeline``."""

    def __init__(self, storage: Storage, data_base_path: str, data_timeline: Timeline):
        self.storage = storage
        self.base_path = metadata_base_path(data_base_path)
        where = f"{self.base_path}/.hoodie/hoodie.properties"
        try:
            self.config = TableConfig.from_properties(read_properties(storage, self.base_path), where)
        except FileNotFoundError:
            raise TableConfigError(f"{where}: the data table lists metadata partitions but the metadata "
                                   "table has no hoodie.properties") from None
        self.timeline = Timeline.load(storage, self.base_path, self.config.layout)
        self.data_timeline = data_timeline

    @cached_property
    def valid_instants(self) -> frozenset[str]:
        return valid_instants(self.storage, self.data_timeline, self.timeline)

    def files_slices(self) -> list[FileSlice]:
        """The latest slice of each file group of the ``files`` partition, by file id."""
        view = FileSystemView.build(self.storage, self.base_path, self.config, self.timeline,
                                    [FILES_PARTITION], sizes=False)
        return sorted(view.latest_file_slices(self.storage), key=lambda s: s.file_id)

    def partition_slices(self, partition: str) -> list[FileSlice]:
        """The latest slice of each file group of any partition (``column_stats``: ``col-stats-0000-0``,
        ``col-stats-0001-0``, ...), by file id; ``metadata.partition_reader`` reads their records."""
        view = FileSystemView.build(self.storage, self.base_path, self.config, self.timeline,
                                    [partition], sizes=False)
        return sorted(view.latest_file_slices(self.storage), key=lambda s: s.file_id)

    def log_read_context(self) -> ReadContext:
        """The block-selection context of the metadata table's own logs (any partition)."""
        return self._read_context()

    def files_records(self) -> dict[str, FilesRecord]:
        """Every key of the ``files`` partition, merged (deleted records included)."""
        out: dict[str, FilesRecord] = {}
        for file_slice in self.files_slices():
            out.update(self._slice_records(file_slice))
        return out

    # -- one slice ---------------------------------------------------------------------------
    def _slice_records(self, file_slice: FileSlice) -> dict[str, FilesRecord]:
        base: dict[str, FilesRecord] = {}
        if file_slice.base_file is not None:
            path = file_slice.base_file.path
            reader = read_hfile(self.storage, path)
            if reader.schema is None:
                raise LogFormatError(f"{path}: the HFile's file info holds no Avro schema")
            base = {r.key: FilesRecord.from_avro(r.key, r.record, path) for r in decode_hfile(reader, reader.schema)}
        logs = merge_in_order(self._log_records([lf.path for lf in file_slice.log_files]))
        merged = dict(base)
        for key, record in logs.items():
            before = merged.get(key)
            merged[key] = record if before is None else record.over(before)
        return merged

    def _log_records(self, paths: list[str]) -> list[FilesRecord]:
        contents = [read_log_file(self.storage, p) for p in paths]
        selection = select_from_contents(contents, self._read_context(), hfile_blocks=True)
        valid = self.valid_instants
        out: list[FilesRecord] = []
        for chosen in selection.blocks:
            block, path = chosen.block, chosen.path
            if block.instant_time not in valid:
                continue
            if block.block_type == BlockType.HFILE_DATA:
                where = f"{path}: HFILE_DATA block at offset {block.offset}"
                out += [FilesRecord.from_avro(r.key, r.record, where) for r in block_keyed_records(block, path)]
            elif block.block_type == BlockType.DELETE:
                out += [FilesRecord.deleted_record(d.record_key) for d in block_deletes(block, path)
                        if d.record_key is not None]
            else:
                raise LogFormatError(f"{path}: {block.block_type.name} block at offset {block.offset} in the "
                                     "metadata table's files partition (only HFILE_DATA and DELETE are)")
        return out

    def _read_context(self) -> ReadContext:
        timeline = self.timeline
        return ReadContext(base_path=self.base_path, table_version=self.config.version, ordering_field=None,
                           merge_mode=COMMIT_TIME_ORDERING,
                           completed_instants=frozenset(i.timestamp for i in timeline.instants if i.is_completed),
                           timeline_start=timeline.start, table_schema_json=None,
                           storage=storage_for_tasks(self.storage))
