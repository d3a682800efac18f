"""The merged records of ANY partition of the metadata table (``column_stats``,
``partition_stats``, ...), as raw ``HoodieMetadataRecord`` dicts.

The same steps as the ``files`` reader (``reader.MetadataTable``: the latest slice of each file
group, the block selection, the data table's valid instants), with two differences:

* values are decoded naming the branch of every union of several record types
  (``(full name, value)``, fastavro's ``return_record_name_override``), so a column-stats
  ``minValue`` says which wrapper Java wrote (``LongWrapper`` vs ``TimestampMicrosWrapper``), and
  records so decoded encode back to the same bytes;
* the merge of two records of one key is the caller's (``stats_merge.merge_stats_records`` for
  the stats partitions), applied as Hudi does: log records oldest first, then the merged log record
  over the base file's.  A key in a DELETE block is a tombstone (``None``): it beats what came
  before, and a later record starts afresh.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import fastavro

from tablesvc.errors import LogFormatError
from tablesvc.fsview.model import FileSlice
from tablesvc.hfile import HFileReader, read_hfile
from tablesvc.logformat import BlockType, block_deletes, read_log_file
from tablesvc.logformat.avro_content import parse_avro_schema
from tablesvc.merge.blocks import select_from_contents
from tablesvc.metadata.reader import MetadataTable

Record = Mapping[str, Any]
# newer, older -> merged (neither is None: tombstones are handled here)
MergeFn = Callable[[Record, Record], Record]


def decode_named(reader: HFileReader, schema_json: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, record) of every cell, first cell of a key only, unions of records as (name, value)."""
    schema = parse_avro_schema(schema_json)
    seen: set[str] = set()
    for cell in reader.cells():
        if cell.key in seen:
            continue
        seen.add(cell.key)
        buf = io.BytesIO(cell.value)
        where = f"{reader.path}: HFile cell at byte offset {cell.offset}, key {cell.key!r}"
        try:
            record = fastavro.schemaless_reader(buf, schema, None, return_record_name=True,
                                                return_record_name_override=True)
        except (EOFError, ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError, OverflowError) as exc:
            raise LogFormatError(f"{where} does not decode with the schema: {exc}") from exc
        if buf.tell() != len(cell.value):
            raise LogFormatError(f"{where} decoded from {buf.tell()} of its {len(cell.value)} bytes")
        yield cell.key, record


def _over(newer: Record | None, older: Record | None, merge: MergeFn) -> Record | None:
    if newer is None or older is None:
        return newer
    return merge(newer, older)


def partition_records(mdt: MetadataTable, partition: str, merge: MergeFn) -> dict[str, Record | None]:
    """Every key of ``partition``, merged; ``None`` for a key whose last word is a DELETE block."""
    out: dict[str, Record | None] = {}
    for file_slice in mdt.partition_slices(partition):
        out.update(slice_records(mdt, file_slice, merge))
    return out


def slice_records(mdt: MetadataTable, file_slice: FileSlice, merge: MergeFn) -> dict[str, Record | None]:
    """The merged records of one file slice (one file group) of the metadata table."""
    base: dict[str, Record | None] = {}
    if file_slice.base_file is not None:
        path = file_slice.base_file.path
        reader = read_hfile(mdt.storage, path)
        if reader.schema is None:
            raise LogFormatError(f"{path}: the HFile's file info holds no Avro schema")
        base = dict(decode_named(reader, reader.schema))
    logs: dict[str, Record | None] = {}
    for key, record in _log_records(mdt, [lf.path for lf in file_slice.log_files]):
        logs[key] = _over(record, logs[key], merge) if key in logs else record
    for key, record in logs.items():
        base[key] = _over(record, base[key], merge) if key in base else record
    return base


def _log_records(mdt: MetadataTable, paths: list[str]) -> Iterator[tuple[str, Record | None]]:
    contents = [read_log_file(mdt.storage, p) for p in paths]
    selection = select_from_contents(contents, mdt.log_read_context(), hfile_blocks=True)
    valid = mdt.valid_instants
    for chosen in selection.blocks:
        block, path = chosen.block, chosen.path
        if block.instant_time not in valid:
            continue
        if block.block_type == BlockType.HFILE_DATA:
            if block.schema is None:
                raise LogFormatError(f"{path}: HFILE_DATA block at offset {block.offset} has no SCHEMA header")
            yield from decode_named(HFileReader(block.content, path, block.content_offset), block.schema)
        elif block.block_type == BlockType.DELETE:
            for deleted in block_deletes(block, path):
                if deleted.record_key is not None:
                    yield deleted.record_key, None
        else:
            raise LogFormatError(f"{path}: {block.block_type.name} block at offset {block.offset} in the "
                                 "metadata table (only HFILE_DATA and DELETE are)")


def log_records(mdt: MetadataTable, paths: list[str]) -> Iterator[tuple[str, Record | None]]:
    """Every (key, record) the chosen blocks of the log files ``paths`` hold, oldest first
    (``None``: a DELETE-block key); what the metadata table's compaction counts."""
    return _log_records(mdt, paths)


def block_schema(mdt: MetadataTable, partition: str) -> str | None:
    """The ``HoodieMetadataRecord`` schema Java wrote into ``partition``'s newest HFILE_DATA block
    (or base file): the exact writer schema, for encoding new records of this table."""
    found: str | None = None
    for file_slice in mdt.partition_slices(partition):
        if file_slice.base_file is not None:
            found = found or read_hfile(mdt.storage, file_slice.base_file.path).schema
        for log_file in file_slice.log_files:
            for block in read_log_file(mdt.storage, log_file.path).blocks:
                if block.block_type == BlockType.HFILE_DATA and block.schema:
                    found = block.schema
    return found
