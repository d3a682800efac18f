"""AVRO_DATA block content, and the Avro -> Arrow type mapping.

Content layout::

    int32 content version (3) | int32 record count N | N x (int32 length | Avro binary record)

Each record is bare Avro binary (no container, no schema) written with the
schema in the block's SCHEMA header.  Two codecs do the records: the column-at-a-time
one in ``avro_columnar`` (numpy/pyarrow, many times faster) for the schemas and Arrow
inputs it covers, and fastavro, one record at a time, for everything else.  fastavro
is also the reference: whenever the columnar codec meets anything unexpected it gives
up and fastavro decides, so results and error messages are those of the fastavro path.
This file adds the Hudi framing around the records and the type mapping other modules reuse.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NoReturn

import fastavro
import numpy as np
import pyarrow as pa

from tablesvc.errors import LogFormatError
from tablesvc.logformat.avro_types import LOGICAL_ARROW, PRIMITIVE_ARROW
from tablesvc.logformat.avro_columnar import columnar_plan, decode_columns, encode_columns
from tablesvc.logformat.blocks import CONTENT_VERSION, BlockType, HeaderKey, LogBlock, new_header

_I32 = struct.Struct(">i")


def _schema_text(schema_json: str | Mapping[str, Any]) -> str:
    return schema_json if isinstance(schema_json, str) else json.dumps(schema_json, sort_keys=True)


def _without_uuid_logical(node: Any) -> Any:
    """The schema with ``logicalType: uuid`` dropped: fastavro would hand out ``uuid.UUID``
    objects, which Arrow's string columns refuse; the encoding is the same string either way."""
    if isinstance(node, list):
        return [_without_uuid_logical(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _without_uuid_logical(v) for k, v in node.items() if k != "logicalType" or v != "uuid"}
    return out


@lru_cache(maxsize=64)
def _parsed(schema_text: str) -> Any:
    # Cached because every block of a file usually repeats the same (large) schema.
    try:
        return fastavro.parse_schema(_without_uuid_logical(json.loads(schema_text)))
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise LogFormatError(f"invalid Avro schema in SCHEMA header: {exc}") from exc


def parse_avro_schema(schema_json: str | Mapping[str, Any]) -> Any:
    """The fastavro-parsed form of a SCHEMA header (cached)."""
    return _parsed(_schema_text(schema_json))


def _where(source: str) -> str:
    return f"{source}: " if source else ""


@dataclass(frozen=True)
class RecordSpans:
    """Where each record's Avro bytes lie in a block's content: ``content[starts[i]:ends[i]]``."""

    starts: np.ndarray  # int64
    ends: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.starts)


def record_spans(content: bytes, source: str = "") -> RecordSpans:
    """The records' positions, after checking the content framing."""
    if len(content) < 8:
        raise LogFormatError(f"{_where(source)}avro data content is {len(content)} bytes, shorter than its 8-byte prefix")
    version, count = struct.unpack_from(">ii", content, 0)
    if version != CONTENT_VERSION:
        raise LogFormatError(f"{_where(source)}avro data content version {version} at content offset 0, "
                             f"expected {CONTENT_VERSION}")
    if count < 0:
        raise LogFormatError(f"{_where(source)}negative record count {count} at content offset 4")
    ends = _record_ends(content, count)
    if ends is None:
        _raise_framing_error(content, count, source)
    end_array = np.array(ends, dtype=np.int64)
    # Record i starts after its 4-byte length, which follows the end of record i-1 (or the prefix).
    starts = np.concatenate(([8], end_array[:-1])).astype(np.int64) + 4 if ends else end_array
    return RecordSpans(starts, end_array)


def _record_ends(content: bytes, count: int) -> list[int] | None:
    """Where each record ends, or None when the framing is broken.  The loop is kept minimal
    (it runs once per record); the bounds are checked on the result, all at once."""
    size = len(content)
    if count > (size - 8) // 4:  # every record takes at least its 4-byte length
        return None
    ends, unpack, pos = [], _I32.unpack_from, 8
    append = ends.append
    try:
        for _ in range(count):
            pos += 4 + unpack(content, pos)[0]
            append(pos)
    except struct.error:  # a length pointed past the end
        return None
    # Each record at least 4 bytes past the previous end (no negative length) and the last
    # ending exactly at the content end: then every length read above was inside the content.
    previous = np.array([8] + ends[:-1], dtype=np.int64)
    if count and ((np.array(ends, dtype=np.int64) - previous < 4).any() or ends[-1] != size):
        return None
    if not count and size != 8:
        return None
    return ends


def _raise_framing_error(content: bytes, count: int, source: str) -> NoReturn:
    """Walks the framing record by record to name what is wrong and where."""
    size = len(content)
    # Every record takes at least its 4-byte length, so a larger count fails in the loop below
    # by this index anyway; capping it keeps a corrupt count from looping for long.
    count = min(count, (size - 8) // 4 + 1)
    unpack, pos = _I32.unpack_from, 8
    for index in range(count):
        if pos + 4 > size:
            raise LogFormatError(f"{_where(source)}record {index} length at content offset {pos} is past the end")
        (length,) = unpack(content, pos)
        if length < 0 or pos + 4 + length > size:
            raise LogFormatError(f"{_where(source)}record {index} length {length} at content offset {pos} "
                                 f"runs past the content end {size}")
        pos += 4 + length
    if pos != size:
        raise LogFormatError(f"{_where(source)}{size - pos} unexpected bytes after the last record "
                             f"at content offset {pos}")
    raise AssertionError("_record_ends refused a framing that walks cleanly")  # never: both check the same


def iter_avro_record_bytes(content: bytes, source: str = "") -> list[bytes]:
    """The raw Avro bytes of each record, after checking the content framing."""
    spans = record_spans(content, source)
    return [content[start:end] for start, end in zip(spans.starts.tolist(), spans.ends.tolist())]


def decode_avro_records(content: bytes, schema_json: str | Mapping[str, Any], source: str = "") -> list[dict]:
    """Records as dicts (fastavro logical types: datetime, date, Decimal...)."""
    schema = parse_avro_schema(schema_json)
    return _fastavro_decode(content, record_spans(content, source), schema, source)


def _fastavro_decode(content: bytes, spans: RecordSpans, schema: Any, source: str) -> list[dict]:
    """The reference decoder: one fastavro call per record, each checked to use all its bytes."""
    records = []
    view = memoryview(content)
    for index, (start, end) in enumerate(zip(spans.starts.tolist(), spans.ends.tolist())):
        records.append(decode_one_record(view[start:end], schema, f"{_where(source)}record {index}"))
    return records


def decode_one_record(raw, schema: Any, where: str) -> dict[str, Any]:
    """One schemaless Avro record that must take exactly ``raw``; ``LogFormatError`` names ``where``."""
    buf = io.BytesIO(raw)
    try:
        record = fastavro.schemaless_reader(buf, schema, None)
    except (EOFError, ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError, OverflowError) as exc:
        # OverflowError: fastavro's C reader given an int past 32 bits or a varint past 64.
        raise LogFormatError(f"{where} does not decode with the block schema: {exc}") from exc
    if buf.tell() != len(raw):
        # A shorter read means the header schema is not the one the writer used.
        raise LogFormatError(f"{where} decoded from {buf.tell()} of its {len(raw)} bytes")
    return record


def _has_map(schema: Any) -> bool:
    if isinstance(schema, list):
        return any(_has_map(s) for s in schema)
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "map":
            return True
        if kind == "record":
            return any(_has_map(f["type"]) for f in schema.get("fields", ()))
        if kind == "array":
            return _has_map(schema.get("items"))
        return isinstance(kind, (list, dict)) and _has_map(kind)
    return False


def _maps_as_dicts(schema: Any, value: Any) -> Any:
    """Arrow's ``to_pylist`` gives map values as lists of (key, value) tuples; Avro wants dicts.
    Walks ``value`` along ``schema`` (Hudi's unions are ``["null", T]``: the first non-null branch)."""
    if value is None:
        return None
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        return _maps_as_dicts(branches[0], value) if len(branches) == 1 else value
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if kind == "map":
        items = value.items() if isinstance(value, dict) else value
        return {k: _maps_as_dicts(schema.get("values"), v) for k, v in items}
    if kind == "record" and isinstance(value, dict):
        return {**value, **{f["name"]: _maps_as_dicts(f["type"], value.get(f["name"]))
                            for f in schema.get("fields", ()) if f["name"] in value}}
    if kind == "array" and isinstance(value, list):
        return [_maps_as_dicts(schema.get("items"), v) for v in value]
    if isinstance(kind, (list, dict)):
        return _maps_as_dicts(kind, value)
    return value


ArrowRecords = pa.Table | pa.RecordBatch


def encode_avro_records(records: Iterable[Mapping[str, Any]] | ArrowRecords,
                        schema_json: str | Mapping[str, Any]) -> bytes:
    """Content bytes of an AVRO_DATA block holding ``records``: dicts, or the rows of an Arrow
    table / record batch (columns by field name; much faster, no per-row Python objects)."""
    schema = parse_avro_schema(schema_json)
    if isinstance(records, (pa.Table, pa.RecordBatch)):
        plan = columnar_plan(_schema_text(schema_json))
        if plan is not None:
            table = pa.Table.from_batches([records]) if isinstance(records, pa.RecordBatch) else records
            content = encode_columns(table, plan, _content_prefix(table.num_rows))
            if content is not None:
                return content
        # Not covered (or a value only fastavro can judge): the row path, with its error messages.
        records = records.to_pylist()
    return _fastavro_encode(records, schema, schema_json)


def _content_prefix(count: int) -> bytes:
    return _I32.pack(CONTENT_VERSION) + _I32.pack(count)


def _fastavro_encode(records: Iterable[Mapping[str, Any]], schema: Any, schema_json: str | Mapping[str, Any]) -> bytes:
    """The reference encoder: fastavro, one record at a time, into one buffer (record ends from ``tell``)."""
    raw_schema = json.loads(schema_json) if isinstance(schema_json, str) else schema_json
    convert_maps = _has_map(raw_schema)
    buf, ends = io.BytesIO(), [0]
    for index, record in enumerate(records):
        try:
            fastavro.schemaless_writer(buf, schema, _maps_as_dicts(raw_schema, record) if convert_maps else record)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise LogFormatError(f"record {index} does not match the block schema: {exc}") from exc
        ends.append(buf.tell())
    data = buf.getbuffer()
    parts = [_content_prefix(len(ends) - 1)]
    for start, end in zip(ends, ends[1:]):
        parts.append(_I32.pack(end - start))
        parts.append(data[start:end])
    content = b"".join(parts)
    del data  # release the export before the buffer goes away
    return content


# -- Avro -> Arrow ------------------------------------------------------------------

_PRIMITIVES = PRIMITIVE_ARROW
_LOGICAL = LOGICAL_ARROW


def _decimal(node: Mapping[str, Any]) -> pa.DataType:
    precision, scale = int(node["precision"]), int(node.get("scale", 0))
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


class _Mapper:
    """Walks one schema, remembering named types so later references resolve."""

    def __init__(self) -> None:
        self.named: dict[str, pa.DataType] = {}

    @staticmethod
    def _fullname(name: str, namespace: str) -> str:
        return name if "." in name or not namespace else f"{namespace}.{name}"

    def _register(self, node: Mapping[str, Any], namespace: str, arrow_type: pa.DataType) -> None:
        full = self._fullname(node["name"], node.get("namespace", namespace) or "")
        self.named[full] = arrow_type
        self.named.setdefault(node["name"], arrow_type)

    def convert(self, node: Any, namespace: str) -> tuple[pa.DataType, bool]:
        """(Arrow type, nullable) of an Avro schema node."""
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return _PRIMITIVES[node], node == "null"
            found = self.named.get(self._fullname(node, namespace)) or self.named.get(node)
            if found is None:
                raise LogFormatError(f"Avro schema references unknown type {node!r}")
            return found, False
        if isinstance(node, list):
            branches = [b for b in node if b != "null"]
            if len(branches) == 0:
                return pa.null(), True
            if len(branches) > 1:
                raise LogFormatError(f"Avro union {json.dumps(node)[:200]} has several non-null branches; "
                                     "there is no Arrow column type for it here")
            arrow_type, _ = self.convert(branches[0], namespace)
            return arrow_type, len(branches) != len(node)
        if not isinstance(node, Mapping):
            raise LogFormatError(f"unexpected Avro schema node {node!r}")
        kind = node.get("type")
        if isinstance(kind, (list, Mapping)):
            return self.convert(kind, namespace)
        logical = node.get("logicalType")
        if kind == "record":
            ns = node.get("namespace", namespace) or ""
            if "." in node["name"]:
                ns = node["name"].rsplit(".", 1)[0]
            fields = []
            for f in node.get("fields", []):
                arrow_type, nullable = self.convert(f["type"], ns)
                fields.append(pa.field(f["name"], arrow_type, nullable=nullable))
            struct = pa.struct(fields)
            self._register(node, namespace, struct)
            return struct, False
        if kind == "enum":
            self._register(node, namespace, pa.utf8())
            return pa.utf8(), False
        if kind == "fixed":
            arrow_type = _decimal(node) if logical == "decimal" else pa.binary(int(node["size"]))
            self._register(node, namespace, arrow_type)
            return arrow_type, False
        if kind == "array":
            item_type, item_nullable = self.convert(node["items"], namespace)
            # "element" is the item name Spark/Parquet use, so log and base schemas compare equal.
            return pa.list_(pa.field("element", item_type, nullable=item_nullable)), False
        if kind == "map":
            value_type, value_nullable = self.convert(node["values"], namespace)
            return pa.map_(pa.field("key", pa.utf8(), nullable=False),
                           pa.field("value", value_type, nullable=value_nullable)), False
        if kind == "bytes" and logical == "decimal":
            return _decimal(node), False
        if isinstance(kind, str) and logical and (kind, logical) in _LOGICAL:
            return _LOGICAL[(kind, logical)], False
        if isinstance(kind, str):
            # Unknown logical types fall back to their base type, as Avro readers do.
            return self.convert(kind, namespace)
        raise LogFormatError(f"unexpected Avro schema node {json.dumps(node)[:200]}")


def avro_schema_to_arrow(schema_json: str | Mapping[str, Any]) -> pa.Schema:
    """Arrow schema of a record schema; a field is nullable iff its Avro type is a union with null."""
    return _arrow_schema(_schema_text(schema_json))


@lru_cache(maxsize=64)
def _arrow_schema(schema_text: str) -> pa.Schema:
    # Cached like _parsed: every block decode needs it, and pa.Schema is immutable.
    node = json.loads(schema_text)
    if not isinstance(node, Mapping) or node.get("type") != "record":
        raise LogFormatError("a block schema must be an Avro record")
    struct, _ = _Mapper().convert(node, "")
    return pa.schema([struct.field(i) for i in range(struct.num_fields)])


def records_to_arrow(records: list[Mapping[str, Any]], schema_json: str | Mapping[str, Any]) -> pa.Table:
    """Decoded Avro records as an Arrow table with the mapped schema."""
    schema = avro_schema_to_arrow(schema_json)
    try:
        return pa.Table.from_pylist(list(records), schema=schema)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise LogFormatError(f"records do not convert to the Arrow form of their schema: {exc}") from exc


def decode_to_arrow(content: bytes, schema_json: str | Mapping[str, Any], source: str = "") -> pa.Table:
    """AVRO_DATA content straight to an Arrow table (the columnar codec where it applies)."""
    schema = parse_avro_schema(schema_json)  # an invalid schema fails here, as on the fastavro path
    spans = record_spans(content, source)
    plan = columnar_plan(_schema_text(schema_json))
    if plan is not None and len(spans):
        table = decode_columns(content, spans.starts, spans.ends, plan, avro_schema_to_arrow(schema_json))
        if table is not None:
            return table
    return records_to_arrow(_fastavro_decode(content, spans, schema, source), schema_json)




def avro_data_block(instant: str, schema_json: str | Mapping[str, Any],
                    records: Iterable[Mapping[str, Any]] | ArrowRecords,
                    extra_header: Iterable[tuple[HeaderKey, str]] = ()) -> LogBlock:
    """A new AVRO_DATA block; header INSTANT_TIME, SCHEMA (+ extras), ascending by key code.
    ``records``: dicts, or an Arrow table / record batch (the fast path: pass the table, not
    its ``to_pylist()``)."""
    schema_text = _schema_text(schema_json)
    content = encode_avro_records(records, schema_text)
    header = new_header([(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, schema_text), *extra_header])
    return LogBlock(BlockType.AVRO_DATA, header, content)


__all__ = [
    "RecordSpans", "avro_data_block", "avro_schema_to_arrow", "decode_avro_records", "decode_to_arrow",
    "encode_avro_records", "iter_avro_record_bytes", "parse_avro_schema", "record_spans", "records_to_arrow",
]
