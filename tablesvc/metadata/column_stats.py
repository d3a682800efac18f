"""Column statistics of one data file, as Java Hudi puts them into the metadata table's
``column_stats`` partition (one ``HoodieMetadataColumnStats`` per file and indexed column).

Where the numbers come from (``HoodieTableMetadataUtil``, ``ParquetUtils``):

* **a base file**: its Parquet footer.  Per column, over the row groups: min of the minima, max of
  the maxima, the sum of the null counts, of the value counts (nulls included: the column chunk's
  ``num_values``), of the compressed and of the uncompressed chunk sizes.  A chunk without
  statistics counts all its values as nulls.
* **a log file**: its records (the data blocks; delete blocks add nothing).  ``valueCount`` counts
  every record, ``nullCount`` the nulls, min/max range over the rest; both sizes are 0 (Hudi keeps
  Parquet's sizes apart from other encodings').  A log file without records gets 0 counts and no
  min/max.

How a value is written (``ValueType``, ``ValueMetadata``, ``HoodieAvroWrapperUtils``): the column
index has a version (``.hoodie/.index_defs/index.json``):

* **V2** (Hudi 1.1+): each value goes in the wrapper of its *primitive* type (a date as an
  ``IntWrapper`` of epoch days, a timestamp as a ``LongWrapper`` of its unit since the epoch, a
  decimal as a ``BytesWrapper`` of its unscaled value's minimal two's-complement bytes), and
  ``valueType`` records the logical type (``ValueType`` ordinal; ``"precision,scale"`` for a
  decimal).  A log file without records has type NULL.
* **V1**: the wrapper follows the Java class of the value; ``valueType`` is null.  Only the plain
  primitive types (boolean, int, long, float, double, string) are done here: for dates, decimals
  and timestamps V1 depends on which Java class each reader path produced, and no carried table
  shows it, so such a column is refused (``UnsupportedColumnType``) rather than guessed.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tablesvc.errors import UnsupportedTableError

WRAPPER_NAMESPACE = "org.apache.hudi.avro.model"
COLUMN_STATS_RECORD = f"{WRAPPER_NAMESPACE}.HoodieMetadataColumnStats"
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


class UnsupportedColumnType(UnsupportedTableError):
    """A column whose statistics tablesvc cannot yet write as Java would (exit 2: refused)."""


class IndexVersion(Enum):
    V1 = "V1"
    V2 = "V2"


class ValueType(Enum):
    """Hudi's ``org.apache.hudi.stats.ValueType``: the value is the ordinal Java persists."""
    V1 = 0
    NULL = 1
    BOOLEAN = 2
    INT = 3
    LONG = 4
    FLOAT = 5
    DOUBLE = 6
    STRING = 7
    BYTES = 8
    FIXED = 9
    DECIMAL = 10
    UUID = 11
    DATE = 12
    TIME_MILLIS = 13
    TIME_MICROS = 14
    TIMESTAMP_MILLIS = 15
    TIMESTAMP_MICROS = 16
    TIMESTAMP_NANOS = 17
    LOCAL_TIMESTAMP_MILLIS = 18
    LOCAL_TIMESTAMP_MICROS = 19
    LOCAL_TIMESTAMP_NANOS = 20


# The wrapper record each type's primitive value is written in.
_WRAPPER = {
    ValueType.BOOLEAN: "BooleanWrapper", ValueType.INT: "IntWrapper", ValueType.LONG: "LongWrapper",
    ValueType.FLOAT: "FloatWrapper", ValueType.DOUBLE: "DoubleWrapper", ValueType.STRING: "StringWrapper",
    ValueType.BYTES: "BytesWrapper", ValueType.FIXED: "BytesWrapper", ValueType.DECIMAL: "BytesWrapper",
    ValueType.UUID: "StringWrapper", ValueType.DATE: "IntWrapper", ValueType.TIME_MILLIS: "IntWrapper",
    ValueType.TIME_MICROS: "LongWrapper", ValueType.TIMESTAMP_MILLIS: "LongWrapper",
    ValueType.TIMESTAMP_MICROS: "LongWrapper", ValueType.TIMESTAMP_NANOS: "LongWrapper",
    ValueType.LOCAL_TIMESTAMP_MILLIS: "LongWrapper", ValueType.LOCAL_TIMESTAMP_MICROS: "LongWrapper",
    ValueType.LOCAL_TIMESTAMP_NANOS: "LongWrapper",
}
_V1_TYPES = frozenset({ValueType.BOOLEAN, ValueType.INT, ValueType.LONG, ValueType.FLOAT, ValueType.DOUBLE,
                       ValueType.STRING})
_LONG_LOGICAL = {"timestamp-millis": ValueType.TIMESTAMP_MILLIS, "timestamp-micros": ValueType.TIMESTAMP_MICROS,
                 "timestamp-nanos": ValueType.TIMESTAMP_NANOS, "local-timestamp-millis": ValueType.LOCAL_TIMESTAMP_MILLIS,
                 "local-timestamp-micros": ValueType.LOCAL_TIMESTAMP_MICROS,
                 "local-timestamp-nanos": ValueType.LOCAL_TIMESTAMP_NANOS, "time-micros": ValueType.TIME_MICROS}
_UNIT_PER_SECOND = {ValueType.TIMESTAMP_MILLIS: 1000, ValueType.TIMESTAMP_MICROS: 1_000_000,
                    ValueType.TIMESTAMP_NANOS: 1_000_000_000, ValueType.LOCAL_TIMESTAMP_MILLIS: 1000,
                    ValueType.LOCAL_TIMESTAMP_MICROS: 1_000_000, ValueType.LOCAL_TIMESTAMP_NANOS: 1_000_000_000}


@dataclass(frozen=True)
class ColumnType:
    """A column's value type; ``precision``/``scale`` for decimals."""
    value_type: ValueType
    precision: int | None = None
    scale: int | None = None

    @property
    def additional_info(self) -> str | None:
        return f"{self.precision},{self.scale}" if self.value_type == ValueType.DECIMAL else None

    @classmethod
    def of_avro(cls, field_schema: Any) -> "ColumnType | None":
        """The type of an Avro field schema (a nullable union counts as its other branch);
        None for types Hudi does not index (record, array, map, enum, null, unions of several)."""
        node = field_schema
        if isinstance(node, list):
            branches = [b for b in node if b != "null"]
            if len(branches) != 1:
                return None
            node = branches[0]
        if isinstance(node, str):
            node = {"type": node}
        if not isinstance(node, Mapping) or not isinstance(node.get("type"), str):
            return None
        kind, logical = node["type"], node.get("logicalType")
        if logical == "decimal" and kind in ("bytes", "fixed"):
            return cls(ValueType.DECIMAL, int(node["precision"]), int(node.get("scale", 0)))
        if kind == "int":
            return cls({"date": ValueType.DATE, "time-millis": ValueType.TIME_MILLIS}.get(logical, ValueType.INT))
        if kind == "long":
            return cls(_LONG_LOGICAL.get(logical, ValueType.LONG))
        if kind == "string":
            return cls(ValueType.UUID if logical == "uuid" else ValueType.STRING)
        simple = {"boolean": ValueType.BOOLEAN, "float": ValueType.FLOAT, "double": ValueType.DOUBLE,
                  "bytes": ValueType.BYTES, "fixed": ValueType.FIXED}
        return cls(simple[kind]) if kind in simple else None


@dataclass(frozen=True)
class ColumnRange:
    """The statistics of one column of one file (``HoodieColumnRangeMetadata``).  ``min_value``
    and ``max_value`` are primitive values (module docstring), None when there is none."""
    file_name: str
    column: str
    column_type: ColumnType | None        # None: no record in the file (V2 writes type NULL)
    min_value: Any
    max_value: Any
    null_count: int
    value_count: int
    total_size: int
    total_uncompressed_size: int


# -- ordering (Java's compareTo on the primitive) ------------------------------------------------------
def _sort_key(value: Any) -> Any:
    if isinstance(value, float):
        # Double.compare: -0.0 < 0.0, NaN above everything (all NaNs equal).
        if math.isnan(value):
            return (1, 0.0)
        return (0, value, math.copysign(1.0, value))
    return value


def stat_min(a: Any, b: Any) -> Any:
    """The smaller of two stats values in Java's order (None: absent, the other wins)."""
    if a is None:
        return b
    if b is None:
        return a
    return b if _sort_key(b) < _sort_key(a) else a


def stat_max(a: Any, b: Any) -> Any:
    """The larger of two stats values in Java's order (None: absent, the other wins)."""
    if a is None:
        return b
    if b is None:
        return a
    return b if _sort_key(b) > _sort_key(a) else a


# -- primitive values -------------------------------------------------------------------------------
def _decimal_unscaled(value: Any, scale: int) -> int:
    if isinstance(value, decimal.Decimal):
        return int(value.scaleb(scale).to_integral_value())
    if isinstance(value, (bytes, bytearray)):
        return int.from_bytes(value, "big", signed=True)
    return int(value)


def _to_primitive(value: Any, ctype: ColumnType) -> Any:
    """A value from Parquet statistics (physical) or an Avro record (fastavro's logical types) as
    the primitive Hudi compares and stores; decimals as their unscaled int."""
    vt = ctype.value_type
    if vt == ValueType.DECIMAL:
        return _decimal_unscaled(value, ctype.scale or 0)
    if vt == ValueType.DATE and isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days
    if vt in _UNIT_PER_SECOND and isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        delta = moment - _EPOCH
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return micros * _UNIT_PER_SECOND[vt] // 1_000_000
    if vt == ValueType.TIME_MICROS and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    if vt == ValueType.TIME_MILLIS and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if vt in (ValueType.STRING, ValueType.UUID):
        return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)
    if vt == ValueType.FLOAT:
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    if vt == ValueType.DOUBLE:
        return float(value)
    if vt in (ValueType.BYTES, ValueType.FIXED):
        return bytes(value)
    if vt == ValueType.BOOLEAN:
        return bool(value)
    return int(value)


def _stored(value: Any, ctype: ColumnType) -> Any:
    """The wrapper's ``value``: a decimal's unscaled int as ``BigInteger.toByteArray`` bytes."""
    if ctype.value_type == ValueType.DECIMAL:
        length = (value + (value < 0)).bit_length() // 8 + 1
        return value.to_bytes(length, "big", signed=True)
    return value


# -- base files: the Parquet footer -----------------------------------------------------------------
def base_file_ranges(footer: pq.FileMetaData, file_name: str,
                     columns: Mapping[str, ColumnType]) -> list[ColumnRange]:
    """One range per column of ``columns`` the file holds (a top-level column), summed over row groups."""
    out: dict[str, ColumnRange] = {}
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            name = chunk.path_in_schema
            ctype = columns.get(name)
            if ctype is None:
                continue
            stats = chunk.statistics
            has_range = stats is not None and stats.has_min_max
            nulls = stats.null_count if stats is not None and stats.has_null_count else None
            if nulls is None or (not has_range and nulls == 0 and chunk.num_values):
                nulls = chunk.num_values if not has_range else 0
            lo = _to_primitive(stats.min_raw, ctype) if has_range else None
            hi = _to_primitive(stats.max_raw, ctype) if has_range else None
            part = ColumnRange(file_name, name, ctype, lo, hi, nulls, chunk.num_values,
                               chunk.total_compressed_size, chunk.total_uncompressed_size)
            before = out.get(name)
            out[name] = part if before is None else _merge_ranges(before, part)
    return [out[name] for name in columns if name in out]


def _merge_ranges(a: ColumnRange, b: ColumnRange) -> ColumnRange:
    return ColumnRange(a.file_name, a.column, a.column_type or b.column_type, stat_min(a.min_value, b.min_value),
                       stat_max(a.max_value, b.max_value), a.null_count + b.null_count, a.value_count + b.value_count,
                       a.total_size + b.total_size, a.total_uncompressed_size + b.total_uncompressed_size)


def read_footer(data: bytes) -> pq.FileMetaData:
    return pq.ParquetFile(pa.BufferReader(data)).metadata


# -- log files: their records -----------------------------------------------------------------------
def log_file_ranges(records: Iterable[Mapping[str, Any]], file_name: str,
                    columns: Mapping[str, ColumnType]) -> list[ColumnRange]:
    """One range per column over ``records`` (the log file's data-block records, any order)."""
    mins: dict[str, Any] = dict.fromkeys(columns)
    maxs: dict[str, Any] = dict.fromkeys(columns)
    nulls = dict.fromkeys(columns, 0)
    count = 0
    for record in records:
        count += 1
        for name, ctype in columns.items():
            value = record.get(name)
            if value is None:
                nulls[name] += 1
                continue
            value = _to_primitive(value, ctype)
            mins[name] = stat_min(mins[name], value)
            maxs[name] = stat_max(maxs[name], value)
    return [ColumnRange(file_name, name, ctype if count else None, mins[name], maxs[name], nulls[name], count, 0, 0)
            for name, ctype in columns.items()]


# -- the Avro record ------------------------------------------------------------------------------------
def wrap(value: Any, ctype: ColumnType | None, version: IndexVersion, column: str) -> Any:
    """The ``minValue``/``maxValue`` union value: ``(wrapper full name, {"value": v})`` or None."""
    if value is None or ctype is None:
        return None
    if version == IndexVersion.V1 and ctype.value_type not in _V1_TYPES:
        raise UnsupportedColumnType(f"column {column!r}: {ctype.value_type.name} values of a V1 column-stats "
                                    "index are not written by tablesvc (only boolean, int, long, float, double, "
                                    "string)")
    return (f"{WRAPPER_NAMESPACE}.{_WRAPPER[ctype.value_type]}", {"value": _stored(value, ctype)})


def unwrap(wrapped: Any, ctype: ColumnType | None) -> Any:
    """The primitive value of a ``wrap`` result (decimal bytes back to the unscaled int)."""
    if wrapped is None:
        return None
    _, body = wrapped
    value = body["value"]
    if ctype is not None and ctype.value_type == ValueType.DECIMAL:
        return int.from_bytes(value, "big", signed=True)
    return value


def column_type_of_value_type_info(info: Any) -> ColumnType | None:
    """The ``ColumnType`` a record's ``valueType`` names (None: absent, V1, or NULL)."""
    if info is None:
        return None
    body = info[1] if isinstance(info, tuple) else info      # (name, value) when decoded so
    vt = ValueType(body["typeOrdinal"])
    if vt in (ValueType.V1, ValueType.NULL):
        return None
    if vt == ValueType.DECIMAL:
        precision, scale = (int(x) for x in body["additionalInfo"].split(","))
        return ColumnType(vt, precision, scale)
    return ColumnType(vt)


def stats_body(r: ColumnRange, version: IndexVersion, *, fields: frozenset[str],
               deleted: bool = False, tight_bound: bool = False) -> dict[str, Any]:
    """The ``HoodieMetadataColumnStats`` of a range, with the fields the writer schema has
    (``fields``: Hudi 1.0 added ``isTightBound``, 1.1 ``valueType``).  V1 writes ``valueType``
    null; V2 the column's type, or NULL (ordinal 1) when the file had no record."""
    body: dict[str, Any] = {
        "fileName": r.file_name, "columnName": r.column,
        "minValue": wrap(r.min_value, r.column_type, version, r.column),
        "maxValue": wrap(r.max_value, r.column_type, version, r.column),
        "valueCount": r.value_count, "nullCount": r.null_count, "totalSize": r.total_size,
        "totalUncompressedSize": r.total_uncompressed_size, "isDeleted": deleted,
    }
    if "isTightBound" in fields:
        body["isTightBound"] = tight_bound
    if "valueType" in fields:
        ctype = r.column_type
        body["valueType"] = None if version == IndexVersion.V1 else {
            "typeOrdinal": (ctype.value_type if ctype else ValueType.NULL).value,
            "additionalInfo": ctype.additional_info if ctype else None}
    return body


def record_fields(schema_json: str, record_name: str) -> frozenset[str]:
    """The field names of the named record (anywhere in ``schema_json``); empty when absent."""
    def walk(node: Any) -> frozenset[str] | None:
        if isinstance(node, list):
            for n in node:
                found = walk(n)
                if found is not None:
                    return found
            return None
        if isinstance(node, Mapping):
            if node.get("type") == "record" and record_name in (node.get("name"), _full(node)):
                return frozenset(f.get("name") for f in node.get("fields", ()))
            for v in node.values():
                if isinstance(v, (list, Mapping)):
                    found = walk(v)
                    if found is not None:
                        return found
        return None
    return walk(json.loads(schema_json)) or frozenset()


def _full(node: Mapping[str, Any]) -> str:
    name, ns = node.get("name", ""), node.get("namespace")
    return f"{ns}.{name}" if ns and "." not in name else name
