"""AVRO_DATA block content, and the Avro -> Arrow type mapping.

Content layout::

    int32 content version (3) | int32 record count N | N x (int32 length | Avro binary record)

Each record is bare Avro binary (no container, no schema) written with the
schema in the block's SCHEMA header.  fastavro does the record codec; this file
only adds the Hudi framing around it and the type mapping other modules reuse.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import fastavro
import pyarrow as pa

from tablesvc.errors import LogFormatError
from tablesvc.logformat.blocks import CONTENT_VERSION, BlockType, HeaderKey, LogBlock, new_header

_I32 = struct.Struct(">i")


def _schema_text(schema_json: str | Mapping[str, Any]) -> str:
    return schema_json if isinstance(schema_json, str) else json.dumps(schema_json, sort_keys=True)


@lru_cache(maxsize=64)
def _parsed(schema_text: str) -> Any:
    # Cached because every block of a file usually repeats the same (large) schema.
    try:
        return fastavro.parse_schema(json.loads(schema_text))
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise LogFormatError(f"invalid Avro schema in SCHEMA header: {exc}") from exc


def parse_avro_schema(schema_json: str | Mapping[str, Any]) -> Any:
    """The fastavro-parsed form of a SCHEMA header (cached)."""
    return _parsed(_schema_text(schema_json))


def _where(source: str) -> str:
    return f"{source}: " if source else ""


def iter_avro_record_bytes(content: bytes, source: str = "") -> list[bytes]:
    """The raw Avro bytes of each record, after checking the content framing."""
    if len(content) < 8:
        raise LogFormatError(f"{_where(source)}avro data content is {len(content)} bytes, shorter than its 8-byte prefix")
    version, count = struct.unpack_from(">ii", content, 0)
    if version != CONTENT_VERSION:
        raise LogFormatError(f"{_where(source)}avro data content version {version} at content offset 0, "
                             f"expected {CONTENT_VERSION}")
    if count < 0:
        raise LogFormatError(f"{_where(source)}negative record count {count} at content offset 4")
    out, pos = [], 8
    for index in range(count):
        if pos + 4 > len(content):
            raise LogFormatError(f"{_where(source)}record {index} length at content offset {pos} is past the end")
        (length,) = _I32.unpack_from(content, pos)
        pos += 4
        if length < 0 or pos + length > len(content):
            raise LogFormatError(f"{_where(source)}record {index} length {length} at content offset {pos - 4} "
                                 f"runs past the content end {len(content)}")
        out.append(content[pos:pos + length])
        pos += length
    if pos != len(content):
        raise LogFormatError(f"{_where(source)}{len(content) - pos} unexpected bytes after the last record "
                             f"at content offset {pos}")
    return out


def decode_avro_records(content: bytes, schema_json: str | Mapping[str, Any], source: str = "") -> list[dict]:
    """Records as dicts (fastavro logical types: datetime, date, Decimal...)."""
    schema = parse_avro_schema(schema_json)
    records = []
    for index, raw in enumerate(iter_avro_record_bytes(content, source)):
        buf = io.BytesIO(raw)
        try:
            record = fastavro.schemaless_reader(buf, schema, None)
        except (EOFError, ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError) as exc:
            raise LogFormatError(f"{_where(source)}record {index} does not decode with the block schema: {exc}") from exc
        if buf.tell() != len(raw):
            # A shorter read means the header schema is not the one the writer used.
            raise LogFormatError(f"{_where(source)}record {index} decoded from {buf.tell()} of its {len(raw)} bytes")
        records.append(record)
    return records


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


def encode_avro_records(records: Iterable[Mapping[str, Any]], schema_json: str | Mapping[str, Any]) -> bytes:
    """Content bytes of an AVRO_DATA block holding ``records``."""
    schema = parse_avro_schema(schema_json)
    raw_schema = json.loads(schema_json) if isinstance(schema_json, str) else schema_json
    convert_maps = _has_map(raw_schema)
    parts = []
    for index, record in enumerate(records):
        buf = io.BytesIO()
        try:
            fastavro.schemaless_writer(buf, schema, _maps_as_dicts(raw_schema, record) if convert_maps else record)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise LogFormatError(f"record {index} does not match the block schema: {exc}") from exc
        raw = buf.getvalue()
        parts.append(_I32.pack(len(raw)))
        parts.append(raw)
    count = len(parts) // 2  # two parts (length, bytes) per record
    return _I32.pack(CONTENT_VERSION) + _I32.pack(count) + b"".join(parts)


# -- Avro -> Arrow ------------------------------------------------------------------

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.utf8(),
}

# (base type, logicalType) -> Arrow type.  Avro's timestamp-* are UTC instants, which
# is also how Spark writes Hudi base files (timestamp[us, tz=UTC]); local-timestamp-*
# have no zone.
_LOGICAL: dict[tuple[str, str], pa.DataType] = {
    ("int", "date"): pa.date32(),
    ("int", "time-millis"): pa.time32("ms"),
    ("long", "time-micros"): pa.time64("us"),
    ("long", "timestamp-millis"): pa.timestamp("ms", tz="UTC"),
    ("long", "timestamp-micros"): pa.timestamp("us", tz="UTC"),
    ("long", "timestamp-nanos"): pa.timestamp("ns", tz="UTC"),
    ("long", "local-timestamp-millis"): pa.timestamp("ms"),
    ("long", "local-timestamp-micros"): pa.timestamp("us"),
    ("long", "local-timestamp-nanos"): pa.timestamp("ns"),
    ("string", "uuid"): pa.utf8(),
}


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
    node = json.loads(schema_json) if isinstance(schema_json, str) else schema_json
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
    """AVRO_DATA content straight to an Arrow table."""
    return records_to_arrow(decode_avro_records(content, schema_json, source), schema_json)




def avro_data_block(instant: str, schema_json: str | Mapping[str, Any], records: Iterable[Mapping[str, Any]],
                    extra_header: Iterable[tuple[HeaderKey, str]] = ()) -> LogBlock:
    """A new AVRO_DATA block; header INSTANT_TIME, SCHEMA (+ extras), ascending by key code."""
    schema_text = _schema_text(schema_json)
    content = encode_avro_records(records, schema_text)
    header = new_header([(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, schema_text), *extra_header])
    return LogBlock(BlockType.AVRO_DATA, header, content)


__all__ = [
    "avro_data_block", "avro_schema_to_arrow", "decode_avro_records", "decode_to_arrow", "encode_avro_records",
    "iter_avro_record_bytes", "parse_avro_schema", "records_to_arrow",
]
