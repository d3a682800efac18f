"""HFILE_DATA block content (the metadata table's log blocks): the bytes of a whole HFile
(``tablesvc.hfile``), no prefix.  Each cell's key is a record key and its value one record in
plain Avro binary, written with the block's ``SCHEMA`` header (for the metadata table,
``HoodieMetadataRecord``, whose own ``key`` field Hudi leaves empty: the cell key is the key).

Hudi's ``HoodieHFileDataBlock`` writes the cells sorted by key, one per key; a key written twice
in one block keeps its first cell, as Hudi's reader does when it looks a key up.

Writing (``encode_hfile_records``, ``hfile_data_block``) follows Hudi 1.x
(``HoodieAppendHandle.getDataBlock`` sorts the records by key, ``HFileUtils.serializeRecordsToLogBlock``
writes them): a 1 MiB block size, the codec of ``hoodie.hfile.compression.algorithm`` (GZ), each
value the record in Avro binary with its ``key`` field set to ``""``, the file info ``schema`` set
to the block's schema, a key given twice refused; the block's header is INSTANT_TIME and SCHEMA.
Keys are sorted by their UTF-8 bytes, the order HFile readers search; Java sorts the strings by
UTF-16 code units, which differs only for keys mixing characters above U+FFFF with U+E000-U+FFFF.
A value in a union of several record types (the metadata record's min/max value wrappers:
FloatWrapper, DoubleWrapper, ...) must name its branch, as fastavro's ``(name, value)`` tuple or
``"-type"`` key: a bare dict goes to the first branch it fits (a double written as a float).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import fastavro

from tablesvc.errors import LogFormatError
from tablesvc.hfile import HFileReader
from tablesvc.hfile.blocks import Compression
from tablesvc.hfile.writer import DEFAULT_BLOCK_SIZE, HFileSettings, HFileWriter
from tablesvc.logformat.avro_content import decode_one_record, parse_avro_schema
from tablesvc.logformat.blocks import BlockType, HeaderKey, LogBlock, new_header

# the metadata table's record key field (hoodie.table.recordkey.fields=key of its hoodie.properties)
METADATA_KEY_FIELD = "key"
# the file info entry holding the values' Avro schema (HFileUtils: the reader schema)
SCHEMA_FILE_INFO = "schema"


@dataclass(frozen=True)
class KeyedRecord:
    key: str
    record: dict[str, Any]


def decode_hfile_records(content: bytes, schema_json: str, path: str, origin: int) -> list[KeyedRecord]:
    """The records of an HFILE_DATA block's content, in key order.  ``origin`` is the content's
    offset in the log file ``path``: a corrupt HFile is a ``CorruptHFileError`` naming both."""
    return decode_hfile(HFileReader(content, path, origin), schema_json)


def decode_hfile(reader: HFileReader, schema_json: str) -> list[KeyedRecord]:
    """The records of an HFile (a base file of the metadata table: its schema is in its file
    info), each value decoded with ``schema_json`` and checked to use all its bytes."""
    schema = parse_avro_schema(schema_json)
    out: list[KeyedRecord] = []
    seen: set[str] = set()
    for cell in reader.cells():
        if cell.key in seen:
            continue
        seen.add(cell.key)
        out.append(KeyedRecord(cell.key, _decode(cell.value, schema, reader.path, cell.offset, cell.key)))
    return out


def _decode(value: bytes, schema: Any, path: str, offset: int, key: str) -> dict[str, Any]:
    return decode_one_record(value, schema, f"{path}: HFile data block at byte offset {offset}, key {key!r}")


def encode_hfile_records(records: Iterable[KeyedRecord], schema_json: str, *,
                         compression: Compression = Compression.GZ, creation_time_ms: int | None = None,
                         key_field: str = METADATA_KEY_FIELD, block_size: int = DEFAULT_BLOCK_SIZE) -> bytes:
    """The content of an HFILE_DATA block: an HFile of ``records`` sorted by key, each value the
    record in Avro binary with ``key_field`` (when the schema has it) written as ``""``.
    ``creation_time_ms`` (the file info's ``hfile.CREATE_TIME_TS``) defaults to now."""
    schema = parse_avro_schema(schema_json)
    has_key_field = any(f.get("name") == key_field for f in schema.get("fields", ()))
    ordered = sorted(records, key=lambda r: r.key.encode("utf-8"))
    for before, after in zip(ordered, ordered[1:]):
        if before.key == after.key:
            raise LogFormatError(f"HFILE_DATA block: record key {after.key!r} given twice (Hudi refuses "
                                 "duplicate keys in one metadata block)")
    settings = HFileSettings(block_size=block_size, compression=compression,
                             **({} if creation_time_ms is None else {"creation_time_ms": creation_time_ms}))
    writer = HFileWriter(settings)
    for record in ordered:
        writer.append(record.key, _encode(record, schema, key_field if has_key_field else None))
    writer.add_file_info(SCHEMA_FILE_INFO, schema_json.encode("utf-8"))
    return writer.finish()


def hfile_data_block(instant: str, schema_json: str, records: Iterable[KeyedRecord], *,
                     compression: Compression = Compression.GZ, creation_time_ms: int | None = None) -> LogBlock:
    """A new HFILE_DATA block of the metadata table: header INSTANT_TIME and SCHEMA (Hudi drops
    the record-positions header for HFile blocks), content ``encode_hfile_records``."""
    header = new_header([(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, schema_json)])
    content = encode_hfile_records(records, schema_json, compression=compression, creation_time_ms=creation_time_ms)
    return LogBlock(BlockType.HFILE_DATA, header, content)


def _encode(record: KeyedRecord, schema: Any, key_field: str | None) -> bytes:
    values = record.record if key_field is None else {**record.record, key_field: ""}
    buf = io.BytesIO()
    try:
        fastavro.schemaless_writer(buf, schema, values)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        raise LogFormatError(f"HFILE_DATA block: record {record.key!r} does not encode with the schema: {exc}") from exc
    return buf.getvalue()
