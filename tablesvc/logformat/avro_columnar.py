"""Column-at-a-time Avro codec (numpy + pyarrow) for AVRO_DATA block contents.

fastavro spends ~1-2 µs per field of every record, which is what made Avro log blocks the
bottleneck of log compaction and of reads.  This module decodes and encodes one *field of
all records* per numpy step instead: each record's read position is an element of an
int64 array, and a field is read (or written) for every record at once.

It covers the schemas Hudi tables actually use: primitives, ``["null", T]`` unions in either
order, enums, fixed, nested records, decimals (bytes and fixed), and the logical types that
are plain ints (date, time-*, timestamp-*, local-timestamp-*).  Anything else (arrays, maps,
uuid, multi-branch or recursive types) has no plan, and callers use the fastavro path.

Every function here either returns exactly what the fastavro path would, or signals
``None`` so the caller takes that path (which also words the errors).  Values fastavro
would refuse (a union index out of range, bad UTF-8, an out-of-range date, a record that
decodes from fewer bytes than its length...) are therefore never decoded here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.logformat.avro_types import LOGICAL_ARROW, PRIMITIVE_ARROW

# -- plans ----------------------------------------------------------------------------------------

# Raw value bounds (inclusive) inside which fastavro's logical readers succeed; outside
# them fastavro raises (datetime/date/time range), so such blocks take the fastavro path.
_US_PER_DAY = 86_400_000_000
_DAYS_0001_TO_1970 = 719_162  # date(1970, 1, 1).toordinal() - 1
_DAYS_1970_TO_9999_END = 2_932_896  # date(9999, 12, 31) - date(1970, 1, 1)
_MIN_US = -_DAYS_0001_TO_1970 * _US_PER_DAY
_MAX_US = (_DAYS_1970_TO_9999_END + 1) * _US_PER_DAY - 1
_BOUNDS: dict[tuple[str, str], tuple[int, int]] = {
    ("int", "date"): (-_DAYS_0001_TO_1970, _DAYS_1970_TO_9999_END),
    ("int", "time-millis"): (0, 86_400_000 - 1),
    ("long", "time-micros"): (0, _US_PER_DAY - 1),
    ("long", "timestamp-millis"): (_MIN_US // 1000, _MAX_US // 1000),
    ("long", "timestamp-micros"): (_MIN_US, _MAX_US),
    ("long", "local-timestamp-millis"): (_MIN_US // 1000, _MAX_US // 1000),
    ("long", "local-timestamp-micros"): (_MIN_US, _MAX_US),
}
# fastavro returns uuid.UUID objects, which do not convert to an Arrow string column.
_NO_PLAN_LOGICAL = {("string", "uuid")}
# Logical types the columnar encoder refuses: fastavro has no writer for them, so today's
# to_pylist + fastavro path decides what happens.
_NO_ENCODE_LOGICAL = {("long", "timestamp-nanos"), ("long", "local-timestamp-nanos")}
_INT_BOUNDS = {"int": (-(1 << 31), (1 << 31) - 1), "long": (-(1 << 63), (1 << 63) - 1)}


@dataclass(frozen=True)
class Leaf:
    """A primitive, enum, fixed or decimal value.  ``kind`` is the Avro base type."""

    kind: str  # or "bytes-decimal" / "fixed-decimal"
    arrow_type: pa.DataType
    bounds: tuple[int, int] | None = None  # for int/long: allowed raw values
    size: int = 0  # fixed, fixed-decimal
    symbols: tuple[str, ...] = ()  # enum
    encodable: bool = True


@dataclass(frozen=True)
class Nullable:
    """A union of "null" and one other type; ``value_index`` is that type's branch."""

    value: "Node"
    value_index: int
    null_index: int
    arrow_type: pa.DataType


@dataclass(frozen=True)
class Record:
    names: tuple[str, ...]
    children: tuple["Node", ...]
    arrow_type: pa.StructType


Node = Union[Leaf, Nullable, Record]


class _NoPlan(Exception):
    """The schema uses something this codec does not cover."""


class _Mismatch(Exception):
    """The data is not what the plan expects: let fastavro decide (and word the error)."""


# uuid is in the shared map, but _NO_PLAN_LOGICAL keeps it on the fastavro path
_PRIMITIVE_ARROW, _LOGICAL_ARROW = PRIMITIVE_ARROW, LOGICAL_ARROW


class _Planner:
    """Builds the plan of one schema; the Arrow types agree with ``avro_schema_to_arrow``."""

    def __init__(self) -> None:
        self.named: dict[str, Node] = {}

    @staticmethod
    def _fullname(name: str, namespace: str) -> str:
        return name if "." in name or not namespace else f"{namespace}.{name}"

    def _register(self, node: Mapping[str, Any], namespace: str, plan: Node) -> None:
        self.named[self._fullname(node["name"], node.get("namespace", namespace) or "")] = plan
        self.named.setdefault(node["name"], plan)

    def plan(self, node: Any, namespace: str) -> Node:
        if isinstance(node, str):
            if node in _PRIMITIVE_ARROW:
                return Leaf(node, _PRIMITIVE_ARROW[node])
            found = self.named.get(self._fullname(node, namespace)) or self.named.get(node)
            if found is None:  # unknown, or a record referring to itself while being defined
                raise _NoPlan(node)
            return found
        if isinstance(node, list):
            return self._union(node, namespace)
        if not isinstance(node, Mapping):
            raise _NoPlan(node)
        kind = node.get("type")
        if isinstance(kind, (list, Mapping)):
            return self.plan(kind, namespace)
        if kind == "record":
            return self._record(node, namespace)
        if kind == "enum":
            leaf = Leaf("enum", pa.utf8(), symbols=tuple(node["symbols"]))
            self._register(node, namespace, leaf)
            return leaf
        if kind == "fixed":
            size = int(node["size"])
            decimal = node.get("logicalType") == "decimal"
            leaf = Leaf("fixed-decimal", _decimal_type(node), size=size) if decimal else \
                Leaf("fixed", pa.binary(size), size=size)
            self._register(node, namespace, leaf)
            return leaf
        if kind in ("array", "map") or not isinstance(kind, str):
            raise _NoPlan(kind)
        if kind == "bytes" and node.get("logicalType") == "decimal":
            return Leaf("bytes-decimal", _decimal_type(node))
        return self._logical(kind, node.get("logicalType"), namespace)

    def _logical(self, kind: str, logical: Any, namespace: str) -> Node:
        key = (kind, logical)
        if key in _NO_PLAN_LOGICAL:
            raise _NoPlan(logical)
        if key in _LOGICAL_ARROW:
            return Leaf(kind, _LOGICAL_ARROW[key], bounds=_BOUNDS.get(key, _INT_BOUNDS[kind]),
                        encodable=key not in _NO_ENCODE_LOGICAL)
        # Unknown logical types read as their base type, as in fastavro and avro_schema_to_arrow.
        return self.plan(kind, namespace)

    def _union(self, branches: list, namespace: str) -> Node:
        others = [i for i, b in enumerate(branches) if b != "null"]
        nulls = [i for i, b in enumerate(branches) if b == "null"]
        if len(others) != 1 or len(nulls) != 1:
            raise _NoPlan("union")
        value = self.plan(branches[others[0]], namespace)
        return Nullable(value, others[0], nulls[0], value.arrow_type)

    def _record(self, node: Mapping[str, Any], namespace: str) -> Record:
        ns = node.get("namespace", namespace) or ""
        if "." in node["name"]:
            ns = node["name"].rsplit(".", 1)[0]
        names, children, fields = [], [], []
        for f in node.get("fields", []):
            child = self.plan(f["type"], ns)
            names.append(f["name"])
            children.append(child)
            fields.append(pa.field(f["name"], child.arrow_type, nullable=_nullable(child)))
        record = Record(tuple(names), tuple(children), pa.struct(fields))
        self._register(node, namespace, record)
        return record


def _decimal_type(node: Mapping[str, Any]) -> pa.DataType:
    precision, scale = int(node["precision"]), int(node.get("scale", 0))
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


def _nullable(node: Node) -> bool:
    return isinstance(node, Nullable) or (isinstance(node, Leaf) and node.kind == "null")


@lru_cache(maxsize=64)
def columnar_plan(schema_text: str) -> Record | None:
    """The plan of a record schema, or None when this codec does not cover it."""
    if sys.byteorder != "little":  # Avro and Arrow buffers are both read here as native = little-endian
        return None
    try:
        node = json.loads(schema_text)
        if not isinstance(node, Mapping) or node.get("type") != "record":
            return None
        return _Planner()._record(node, "")
    except (_NoPlan, KeyError, TypeError, ValueError):
        return None


# -- decoding -------------------------------------------------------------------------------------

_PAD = 16  # zero bytes after the content, so a varint read may look past a record's end


@dataclass(frozen=True)
class _Cursor:
    """Read positions of the records being decoded, and where each of them ends."""

    buf: np.ndarray  # uint8: content + _PAD zero bytes
    buf_arrow: pa.Buffer  # the same bytes, for Arrow arrays that slice them
    pos: np.ndarray  # int64 per record
    end: np.ndarray  # int64 per record

    def subset(self, rows: np.ndarray) -> "_Cursor":
        return _Cursor(self.buf, self.buf_arrow, self.pos[rows], self.end[rows])

    def moved(self, pos: np.ndarray) -> "_Cursor":
        if pos.size and (pos > self.end).any():
            raise _Mismatch("read past a record's end")
        return _Cursor(self.buf, self.buf_arrow, pos, self.end)


def _read_varints(cur: _Cursor) -> tuple[np.ndarray, _Cursor]:
    """Zig-zag varints (Avro int/long) at every position, as int64."""
    first = cur.buf[cur.pos]
    more = np.flatnonzero(first & 0x80)
    if not more.size:  # one byte each: union branches, small ints, short string lengths
        small = first.astype(np.int64)
        return (small >> 1) ^ -(small & 1), cur.moved(cur.pos + 1)
    acc = (first & 0x7F).astype(np.uint64)
    width = np.ones(cur.pos.size, dtype=np.int64)
    shift = 7
    while more.size:
        if shift > 63:  # an 11th byte: not a 64-bit value
            raise _Mismatch("varint longer than 10 bytes")
        byte = cur.buf[cur.pos[more] + width[more]]
        if shift == 63 and (byte > 1).any():
            raise _Mismatch("varint overflows 64 bits")
        acc[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        width[more] += 1
        more = more[(byte & 0x80) != 0]
        shift += 7
    values = (acc >> np.uint64(1)).view(np.int64) ^ -(acc & np.uint64(1)).view(np.int64)
    return values, cur.moved(cur.pos + width)


def _gather_fixed(cur: _Cursor, width: int) -> tuple[np.ndarray, _Cursor]:
    """``width`` bytes at every position, as a (records, width) matrix."""
    after = cur.pos + width
    if after.size and (after > cur.end).any():
        raise _Mismatch("fixed-width value runs past a record's end")
    # Rows of a sliding-window view: numpy copies each row in one go (no per-byte index).
    return np.lib.stride_tricks.sliding_window_view(cur.buf, width)[cur.pos], cur.moved(after)


def _gather_ragged(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The bytes ``buf[starts[i]:starts[i] + lengths[i]]`` of every i, concatenated."""
    offsets = np.cumsum(lengths) - lengths
    return buf[np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))]


def _slices(arrow_type: pa.DataType, cur: _Cursor, lengths: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    """The byte ranges ``[pos[i], pos[i] + lengths[i])`` as a binary/string array, spread over
    the rows of ``valid`` (null elsewhere) when given.

    The ranges increase through the content, so an array over the whole content whose
    elements alternate gap, range, gap, range... is valid Arrow; ``take`` of its odd
    elements then copies the ranges in C++ (about 3x faster than a numpy byte gather)."""
    n = lengths.size
    wide = len(cur.buf) > np.iinfo(np.int32).max
    offsets = np.empty(2 * n + 1, dtype=np.int64 if wide else np.int32)
    offsets[0] = 0
    offsets[1::2] = cur.pos
    offsets[2::2] = cur.pos + lengths
    whole_type = (pa.large_binary() if arrow_type == pa.binary() else pa.large_utf8()) if wide else arrow_type
    whole = pa.Array.from_buffers(whole_type, 2 * n, [None, pa.py_buffer(offsets), cur.buf_arrow])
    odd = 2 * np.arange(n) + 1
    index = pa.array(odd) if valid is None else pa.array(odd[np.cumsum(valid) - 1], mask=~valid)
    taken = whole.take(index)
    if wide:
        try:
            taken = taken.cast(arrow_type)
        except pa.ArrowInvalid as exc:
            raise _Mismatch("more than 2 GiB in one column") from exc
    return taken


def _decode_ints(leaf: Leaf, cur: _Cursor) -> tuple[pa.Array, _Cursor]:
    values, cur = _read_varints(cur)
    lo, hi = leaf.bounds or _INT_BOUNDS[leaf.kind]
    if values.size and (values.min() < lo or values.max() > hi):
        raise _Mismatch("value outside what fastavro converts")
    dtype = np.int32 if leaf.kind == "int" else np.int64
    return pa.Array.from_buffers(leaf.arrow_type, values.size, [None, pa.py_buffer(values.astype(dtype))]), cur


def _decode_binary(leaf: Leaf, cur: _Cursor, valid: np.ndarray | None = None) -> tuple[pa.Array, _Cursor]:
    """Bytes or strings; with ``valid``, spread over those rows (null elsewhere) in the same copy."""
    lengths, cur = _read_varints(cur)
    if lengths.size and (lengths.min() < 0 or (cur.pos + lengths > cur.end).any()):
        raise _Mismatch("bytes/string length out of its record")
    array = _slices(leaf.arrow_type, cur, lengths, valid)
    if leaf.kind == "string":
        try:
            array.validate(full=True)  # UTF-8, which fastavro's strict decode also requires
        except pa.ArrowInvalid as exc:
            raise _Mismatch("invalid UTF-8") from exc
    return array, cur.moved(cur.pos + lengths)


def _decode_decimal(leaf: Leaf, cur: _Cursor) -> tuple[pa.Array, _Cursor]:
    """Big-endian two's complement unscaled values (a bytes length first, or ``size`` bytes)
    into Arrow's little-endian 16/32-byte decimals."""
    width = leaf.arrow_type.byte_width
    if leaf.kind == "fixed-decimal":
        lengths = np.full(cur.pos.size, leaf.size, dtype=np.int64)
    else:
        lengths, cur = _read_varints(cur)
    if lengths.size and (lengths.min() < 0 or lengths.max() > width or (cur.pos + lengths > cur.end).any()):
        raise _Mismatch("decimal bytes out of range")
    cols = np.arange(width)
    present = cols >= (width - lengths)[:, None]  # big-endian columns that hold value bytes
    big = cur.buf[np.where(present, cur.pos[:, None] + lengths[:, None] - width + cols, 0)]
    negative = (lengths > 0) & (cur.buf[cur.pos] >= 0x80)
    big = np.where(present, big, np.where(negative, 0xFF, 0).astype(np.uint8)[:, None])
    array = pa.Array.from_buffers(leaf.arrow_type, lengths.size, [None, pa.py_buffer(np.ascontiguousarray(big[:, ::-1]))])
    try:
        array.validate(full=True)  # the precision: what pa.array of fastavro's Decimals refuses
    except pa.ArrowInvalid as exc:
        raise _Mismatch("decimal exceeds its precision") from exc
    return array, cur.moved(cur.pos + lengths)


def _decode_leaf(leaf: Leaf, cur: _Cursor) -> tuple[pa.Array, _Cursor]:
    n = cur.pos.size
    if leaf.kind in ("bytes-decimal", "fixed-decimal"):
        return _decode_decimal(leaf, cur)
    if leaf.kind == "null":
        return pa.nulls(n), cur
    if leaf.kind in ("int", "long"):
        return _decode_ints(leaf, cur)
    if leaf.kind in ("bytes", "string"):
        return _decode_binary(leaf, cur)
    if leaf.kind == "boolean":
        raw, cur = _gather_fixed(cur, 1)
        if raw.size and raw.max() > 1:
            raise _Mismatch("boolean byte other than 0/1")
        return pa.array(raw.ravel().astype(bool), pa.bool_()), cur
    if leaf.kind in ("float", "double"):
        width = 4 if leaf.kind == "float" else 8
        raw, cur = _gather_fixed(cur, width)
        return pa.Array.from_buffers(leaf.arrow_type, n, [None, pa.py_buffer(raw)]), cur
    if leaf.kind == "fixed":
        raw, cur = _gather_fixed(cur, leaf.size)
        return pa.Array.from_buffers(leaf.arrow_type, n, [None, pa.py_buffer(raw)]), cur
    if leaf.kind == "enum":
        index, cur = _read_varints(cur)
        if index.size and (index.min() < 0 or index.max() >= len(leaf.symbols)):
            raise _Mismatch("enum index out of range")
        return pa.array(leaf.symbols, pa.utf8()).take(pa.array(index)), cur
    raise _Mismatch(leaf.kind)


def _with_nulls(values: pa.Array, valid: np.ndarray) -> pa.Array:
    """``values`` (one per valid row) spread over all rows, null where ``valid`` is False."""
    index = np.cumsum(valid) - 1
    return values.take(pa.array(index, mask=~valid))


def _decode_nullable(node: Nullable, cur: _Cursor) -> tuple[pa.Array, _Cursor]:
    branch, cur = _read_varints(cur)
    valid = branch == node.value_index
    if not (valid | (branch == node.null_index)).all():
        raise _Mismatch("union branch out of range")
    if valid.all():
        return _decode(node.value, cur)
    if not valid.any():
        return pa.nulls(branch.size, node.arrow_type), cur
    rows = np.flatnonzero(valid)
    if isinstance(node.value, Leaf) and node.value.kind in ("bytes", "string"):
        spread, sub = _decode_binary(node.value, cur.subset(rows), valid)
    else:
        values, sub = _decode(node.value, cur.subset(rows))
        spread = _with_nulls(values, valid)
    pos = cur.pos.copy()
    pos[rows] = sub.pos
    return spread, cur.moved(pos)


def _decode_fields(node: Record, cur: _Cursor) -> tuple[list[pa.Array], _Cursor]:
    arrays = []
    for child in node.children:
        array, cur = _decode(child, cur)
        arrays.append(array)
    return arrays, cur


def _decode(node: Node, cur: _Cursor) -> tuple[pa.Array, _Cursor]:
    if isinstance(node, Nullable):
        return _decode_nullable(node, cur)
    if isinstance(node, Record):
        arrays, cur = _decode_fields(node, cur)
        return pa.StructArray.from_arrays(arrays, fields=list(node.arrow_type)), cur
    return _decode_leaf(node, cur)


def decode_columns(content: bytes, starts: np.ndarray, ends: np.ndarray, plan: Record,
                   schema: pa.Schema) -> pa.Table | None:
    """The records at ``content[starts[i]:ends[i]]`` as a table with ``schema``, or None when
    the fastavro path must decide (the data does not follow the plan exactly)."""
    padded = bytes(content) + bytes(_PAD)
    try:
        cursor = _Cursor(np.frombuffer(padded, dtype=np.uint8), pa.py_buffer(padded), starts, ends)
        arrays, cur = _decode_fields(plan, cursor)
        if not np.array_equal(cur.pos, ends):  # every record must use exactly its length
            return None
        return pa.Table.from_arrays(arrays, schema=schema)
    except _Mismatch:
        return None


# -- encoding -------------------------------------------------------------------------------------
#
# A record's bytes are its fields' bytes in schema order, so the content is built from
# "pieces", each holding the bytes of every record at one place of the schema, then
# scattered into the output record by record.  Union branches, varints and fixed-width
# values are small per record: they are kept as 2-D byte cells, and neighbouring cells
# merge into one piece (one copy each, when the next variable-length piece comes).  A
# string/bytes field whose values all have one length (keys, ids, commit times, file names)
# is cells too, so a schema costs one scatter per string/bytes field of varying length: on a
# 10k-record block of the benchmark's rows, 5.9 -> 5.0 ms, and 4.0 ms with the content and
# the frame copied once each (``_content``, ``framing.encode_block``; docs/performance.md).

@dataclass(frozen=True)
class _Cells:
    """Up to ``values.shape[1]`` bytes per record: row i writes ``values[i][used[i]]``."""

    values: np.ndarray  # (records, k) uint8
    used: np.ndarray | None  # (records, k) bool; None: every cell

    def lengths(self) -> np.ndarray:
        n, k = self.values.shape
        return np.full(n, k, dtype=np.int64) if self.used is None else self.used.sum(axis=1)

    @staticmethod
    def joined(cells: list["_Cells"]) -> "_Cells":
        """One piece of neighbouring cells: a record's cells side by side (one copy of each)."""
        if len(cells) == 1:
            return cells[0]
        used = None
        if any(c.used is not None for c in cells):
            used = np.hstack([np.ones(c.values.shape, dtype=bool) if c.used is None else c.used for c in cells])
        return _Cells(np.hstack([c.values for c in cells]), used)


@dataclass(frozen=True)
class _Ragged:
    """``lengths[i]`` bytes for record i, the bytes of all records concatenated in order."""

    lengths: np.ndarray  # int64 per record
    data: np.ndarray  # uint8


_Piece = Union[_Cells, _Ragged]
# Widest string/bytes value kept as cells when all of a field's values have one length.
_MAX_CELL_WIDTH = 128


def _varint_cells(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Zig-zag varint encoding of int64 ``values``: a (values, k) byte matrix and which of its
    cells each value uses (None when all do)."""
    v = values.astype(np.int64)
    zz = (v << 1).view(np.uint64) ^ (v >> 63).view(np.uint64)
    top = int(zz.max()) if zz.size else 0
    if top < 0x80:  # one byte each: union branches, small ints, short string lengths
        return zz.astype(np.uint8)[:, None], None
    widths = np.ones(zz.size, dtype=np.int64)
    shift = 7
    while shift < 64 and top >> shift:
        widths += zz >= np.uint64(1 << shift)
        shift += 7
    cols = np.arange(shift // 7)
    groups = (zz[:, None] >> (np.uint64(7) * cols.astype(np.uint64))) & np.uint64(0x7F)
    used = cols < widths[:, None]
    groups |= np.where(cols < (widths - 1)[:, None], np.uint64(0x80), np.uint64(0))
    return groups.astype(np.uint8), None if used.all() else used


class _Encoder:
    """Encodes the columns of one table into pieces, in schema order."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.all_rows = np.arange(n)
        self._pieces: list[_Piece] = []
        self._open: list[_Cells] = []  # cells since the last ragged piece, joined once (``pieces``)

    @property
    def pieces(self) -> list[_Piece]:
        self._close()
        return self._pieces

    def _close(self) -> None:
        if self._open:
            self._pieces.append(_Cells.joined(self._open))
            self._open = []

    def _add_ragged(self, piece: _Ragged) -> None:
        self._close()
        self._pieces.append(piece)

    def _spread(self, rows: np.ndarray, values: np.ndarray, fill: Any) -> np.ndarray:
        """Per-row ``values`` of ``rows`` as values of all records (``fill`` elsewhere)."""
        if rows.size == self.n:
            return values
        full = np.full((self.n, *values.shape[1:]), fill, dtype=values.dtype)
        full[rows] = values
        return full

    def add_cells(self, rows: np.ndarray, values: np.ndarray, used: np.ndarray | None) -> None:
        if rows.size != self.n:
            used = self._spread(rows, np.ones(values.shape, dtype=bool) if used is None else used, False)
        self._open.append(_Cells(self._spread(rows, values, 0), used))

    def add_varints(self, rows: np.ndarray, values: np.ndarray) -> None:
        self.add_cells(rows, *_varint_cells(values))

    def encode(self, node: Node, array: pa.Array, rows: np.ndarray) -> None:
        if isinstance(node, Nullable):
            self._nullable(node, array, rows)
            return
        if isinstance(node, Leaf) and node.kind == "null":
            return  # no bytes; its Arrow column is all nulls
        if array.null_count and not array.is_valid().to_numpy(zero_copy_only=False)[rows].all():
            raise _Mismatch("null in a field that is not nullable")
        if isinstance(node, Record):
            for child, values in zip(node.children, array.flatten()):
                self.encode(child, values, rows)
        else:
            self._leaf(node, array, rows)

    def _nullable(self, node: Nullable, array: pa.Array, rows: np.ndarray) -> None:
        valid = array.is_valid().to_numpy(zero_copy_only=False)[rows]
        self.add_varints(rows, np.where(valid, node.value_index, node.null_index))
        if valid.any():
            self.encode(node.value, array, rows[valid])

    def _leaf(self, leaf: Leaf, array: pa.Array, rows: np.ndarray) -> None:
        if leaf.kind in ("int", "long"):
            dtype = np.int32 if leaf.kind == "int" else np.int64
            self.add_varints(rows, _fixed_values(array, dtype)[rows])
        elif leaf.kind in ("float", "double", "fixed"):
            width = {"float": 4, "double": 8}.get(leaf.kind, leaf.size)
            self.add_cells(rows, _fixed_values(array, np.uint8, width)[rows], None)
        elif leaf.kind == "boolean":
            values = array.fill_null(False).to_numpy(zero_copy_only=False)[rows]
            self.add_cells(rows, values.astype(np.uint8)[:, None], None)
        elif leaf.kind in ("bytes", "string"):
            self._binary(array, rows)
        elif leaf.kind in ("bytes-decimal", "fixed-decimal"):
            self._decimal(leaf, array, rows)
        elif leaf.kind == "enum":
            index = pc.index_in(array, value_set=pa.array(leaf.symbols, pa.utf8()))
            if not index.is_valid().to_numpy(zero_copy_only=False)[rows].all():
                raise _Mismatch("value is not one of the enum's symbols")
            self.add_varints(rows, index.fill_null(0).to_numpy(zero_copy_only=False)[rows].astype(np.int64))
        else:
            raise _Mismatch(leaf.kind)

    def _decimal(self, leaf: Leaf, array: pa.Array, rows: np.ndarray) -> None:
        """fastavro's decimal bytes: bytes-decimal takes ceil((bit length of |unscaled| + 1) / 8)
        bytes (one more than minimal for -2^(8k-1)), fixed-decimal ``size`` bytes, sign-extended."""
        width = leaf.arrow_type.byte_width
        little = _fixed_values(array, np.uint8, width)[rows]
        big = np.ascontiguousarray(little[:, ::-1])
        counts = _decimal_byte_counts(little)
        if leaf.kind == "fixed-decimal":
            if leaf.size > width or (counts > leaf.size).any():
                raise _Mismatch("decimal does not fit its fixed size")
            counts = np.full(counts.size, leaf.size, dtype=np.int64)
        else:
            self.add_varints(rows, counts)
        self.add_cells(rows, big, np.arange(width) >= (width - counts)[:, None])

    def _binary(self, array: pa.Array, rows: np.ndarray) -> None:
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset:array.offset + len(array) + 1]
        data = np.frombuffer(array.buffers()[2], dtype=np.uint8) if array.buffers()[2] else np.zeros(0, np.uint8)
        starts, lengths = offsets[:-1][rows].astype(np.int64), np.diff(offsets)[rows].astype(np.int64)
        self.add_varints(rows, lengths)
        if rows.size == self.n and offsets[-1] - offsets[0] == lengths.sum():
            chosen = data[offsets[0]:offsets[-1]]  # every row, no bytes under nulls: the buffer as is
        else:
            chosen = _gather_ragged(data, starts, lengths)
        width = int(lengths[0]) if lengths.size else 0
        if width <= _MAX_CELL_WIDTH and (lengths == width).all():
            # Values of one length (keys, ids, commit times, file names...): cells, which join
            # their neighbours' cells instead of costing a piece of their own; none if empty.
            if width:
                self.add_cells(rows, chosen.reshape(-1, width), None)
        else:
            self._add_ragged(_Ragged(self._spread(rows, lengths, 0), chosen))


def _decimal_byte_counts(little: np.ndarray) -> np.ndarray:
    """Per value (rows of little-endian two's complement bytes): ceil((bits of |v| + 1) / 8), at least 1."""
    negative = little[:, -1] >= 0x80
    magnitude = np.where(negative[:, None], ~little, little).astype(np.uint16)
    carry = negative.astype(np.uint16)  # |v| = ~v + 1 for negative v
    for col in range(little.shape[1]):
        total = magnitude[:, col] + carry
        magnitude[:, col] = total & 0xFF
        carry = total >> 8
    big = magnitude[:, ::-1]
    nonzero = big != 0
    first = nonzero.argmax(axis=1)  # leading zero bytes
    top = big[np.arange(big.shape[0]), first]
    counts = little.shape[1] - first + (top >= 0x80)  # one more byte when the top bit would read as a sign
    return np.where(nonzero.any(axis=1), counts, 1).astype(np.int64)


def _fixed_values(array: pa.Array, dtype: Any, width: int = 1) -> np.ndarray:
    """The value buffer of a fixed-width array, one ``dtype`` element (or a row of ``width`` of
    them) per slot, nulls included."""
    slots = array.offset + len(array)
    values = np.frombuffer(array.buffers()[1], dtype=dtype, count=slots * width)
    return (values.reshape(slots, width) if width > 1 else values)[array.offset:]


def _same_type(node: Node, actual: pa.DataType) -> bool:
    """Whether a column of type ``actual`` encodes here exactly as ``to_pylist`` + fastavro would."""
    expected = node.arrow_type
    if isinstance(node, Nullable):
        return _same_type(node.value, actual)
    if isinstance(node, Record):
        return (pa.types.is_struct(actual) and actual.num_fields == len(node.children)
                and all(actual.field(i).name == name and _same_type(child, actual.field(i).type)
                        for i, (name, child) in enumerate(zip(node.names, node.children))))
    if not node.encodable:
        return False
    if pa.types.is_timestamp(expected) and expected.tz is not None:
        # Any zone: the stored values are UTC instants either way, as fastavro computes them.
        return pa.types.is_timestamp(actual) and actual.unit == expected.unit and actual.tz is not None
    return actual == expected


def _piece_array(n: int, lengths: np.ndarray, data: np.ndarray) -> pa.Array:
    """``n`` records' bytes of one piece as a binary array (int64 offsets: no size limit)."""
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.large_binary(), n,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))])


def _content(n: int, pieces: list[_Piece]) -> bytes | np.ndarray | pa.Buffer:
    """Per record, its int32 length and its pieces in order.

    Each piece becomes a binary array of one value per record, and Arrow's element-wise join
    concatenates them record by record: the joined values' buffer is the framed records.
    Scattering the pieces with numpy index arithmetic cost 3-4x more (an 8-byte index per
    output byte).  Returned as whatever holds the bytes (not copied into ``bytes`` here: the
    caller joins the chunks)."""
    if n == 0:
        return b""
    lengths = np.zeros(n, dtype=np.int64)
    for piece in pieces:
        lengths += piece.lengths() if isinstance(piece, _Cells) else piece.lengths
    if lengths.max() > np.iinfo(np.int32).max:
        raise _Mismatch("record over 2 GiB")
    prefix = _Cells(lengths.astype(">i4").view(np.uint8).reshape(n, 4), None)
    if pieces and isinstance(pieces[0], _Cells):
        pieces = [_Cells.joined([prefix, pieces[0]]), *pieces[1:]]
    else:
        pieces = [prefix, *pieces]
    if len(pieces) == 1:  # every field fixed-width: the cells, row by row, are the records
        only = pieces[0]
        return only.values.reshape(-1) if only.used is None else only.values[only.used]
    arrays = []
    for piece in pieces:
        if isinstance(piece, _Cells):
            piece_lengths = piece.lengths()
            # row-major: each record's used cells, in column order
            data = piece.values.reshape(-1) if piece.used is None else piece.values[piece.used]
        else:
            piece_lengths, data = piece.lengths, piece.data
        arrays.append(_piece_array(n, piece_lengths, data))
    joined = pc.binary_join_element_wise(*arrays, pa.scalar(b"", pa.large_binary()))
    return joined.buffers()[2][:4 * n + int(lengths.sum())]


# Records per encoding step: bounds the temporaries (the pieces, their offsets) and keeps them
# in cache; 4k-64k measured alike, a whole 100k-record block 1.4x slower (with the earlier
# numpy scatter; not measured again since the join).
_ENCODE_CHUNK = 16_384


def encode_columns(table: pa.Table, plan: Record, header: bytes) -> bytes | None:
    """AVRO_DATA content (``header`` = version and count) of ``table``, or None when a column
    is missing, has another Arrow type than the plan's, or holds a value that needs the
    fastavro path (a null in a non-nullable field, an unknown enum symbol...)."""
    names = table.schema.names
    for name, child in zip(plan.names, plan.children):
        if names.count(name) != 1 or not _same_type(child, table.schema.field(name).type):
            return None
    parts = [header]
    try:
        for start in range(0, table.num_rows, _ENCODE_CHUNK):
            parts.append(_encode_chunk(table.slice(start, _ENCODE_CHUNK), plan))
    except _Mismatch:
        return None
    return b"".join(parts)


def _encode_chunk(table: pa.Table, plan: Record) -> bytes | np.ndarray | pa.Buffer:
    """The framed records (int32 length + Avro bytes each) of all rows of ``table``, in any
    bytes-like holder (``encode_columns`` joins the chunks into one ``bytes``)."""
    encoder = _Encoder(table.num_rows)
    for name, child in zip(plan.names, plan.children):
        column = table.column(name)
        array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        encoder.encode(child, array, encoder.all_rows)
    return _content(table.num_rows, encoder.pieces)


__all__ = ["Leaf", "Nullable", "Record", "columnar_plan", "decode_columns", "encode_columns"]
