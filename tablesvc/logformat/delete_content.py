"""DELETE block content: the keys a delta commit deletes.

Layout::

    int32 content version (3) | int32 payload length L | L bytes Avro binary HoodieDeleteRecordList

``HoodieDeleteRecordList = {deleteRecordList: array<{recordKey: null|string,
partitionPath: null|string, orderingVal: union}>}``, schema not embedded.

The Avro codec is written by hand for this one fixed schema because what matters
is the *branch index* of ``orderingVal``: Java (wrapper-record union) and hudi-rs
(primitive union) read the same index differently, so a decoded delete must
re-encode to the same index and bytes.  See ``WRITE_ORDERING_INDEX``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from tablesvc.errors import LogFormatError
from tablesvc.logformat.blocks import CONTENT_VERSION, BlockType, HeaderKey, LogBlock, new_header


class OrderingKind(Enum):
    """How the value of an ``orderingVal`` union branch is encoded (Java's wrapper union order)."""

    NULL = "null"
    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    FLOAT = "float"
    DOUBLE = "double"
    BYTES = "bytes"
    STRING = "string"


# Branch index -> value encoding, in the order Java 0.14-1.x writes the wrapper union:
# null, Boolean, Int, Long, Float, Double, Bytes, String, Date(int), Decimal(bytes),
# TimeMicros(long), TimestampMicros(long).  A wrapper record holds one field, so its
# binary form is just the value.  Later branches (array wrappers) are not supported.
ORDERING_BRANCHES: tuple[OrderingKind, ...] = (
    OrderingKind.NULL, OrderingKind.BOOLEAN, OrderingKind.INT, OrderingKind.LONG, OrderingKind.FLOAT,
    OrderingKind.DOUBLE, OrderingKind.BYTES, OrderingKind.STRING, OrderingKind.INT, OrderingKind.BYTES,
    OrderingKind.LONG, OrderingKind.LONG,
)

# The one ordering value new delete blocks carry: branch 2 with value 0.  Java reads
# it as IntWrapper(0), Hudi's "no ordering value" marker, so the delete wins over any
# earlier write; hudi-rs reads branch 2 as long 0 and treats zero the same way.
# Branch 3 (Java's long) would be read by hudi-rs as a float, and real long values
# >= 2^31 at branch 2 crash hudi-rs, hence one fixed value.
WRITE_ORDERING_INDEX = 2
WRITE_ORDERING_VALUE = 0

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass(frozen=True)
class DeleteRecord:
    """One deleted key.  ``ordering_index`` is the on-disk union branch of ``orderingVal``."""

    record_key: str | None
    partition_path: str | None
    ordering_index: int = WRITE_ORDERING_INDEX
    ordering_value: bool | int | float | bytes | str | None = WRITE_ORDERING_VALUE

    @property
    def ordering_kind(self) -> OrderingKind:
        return _kind(self.ordering_index, "")


def _kind(index: int, where: str) -> OrderingKind:
    if not 0 <= index < len(ORDERING_BRANCHES):
        raise LogFormatError(f"{where}orderingVal union branch {index} is not supported "
                             f"(known branches 0..{len(ORDERING_BRANCHES) - 1})")
    return ORDERING_BRANCHES[index]


# -- Avro binary primitives ---------------------------------------------------------------

def _zigzag(value: int) -> bytes:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise LogFormatError(f"value {value} does not fit an Avro long")
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len_prefixed(raw: bytes) -> bytes:
    return _zigzag(len(raw)) + raw


class _Cursor:
    """Reads Avro binary from the payload; offsets in messages are content offsets."""

    def __init__(self, data: bytes, base: int, where: str) -> None:
        self.data, self.pos, self.base, self.where = data, 0, base, where

    def fail(self, message: str) -> LogFormatError:
        return LogFormatError(f"{self.where}delete payload at content offset {self.base + self.pos}: {message}")

    def long(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data):
                raise self.fail("varint runs past the end of the payload")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 63:
                raise self.fail("varint longer than 10 bytes")
        return (result >> 1) ^ -(result & 1)

    def take(self, count: int) -> bytes:
        if count < 0 or self.pos + count > len(self.data):
            raise self.fail(f"{count} bytes requested, {len(self.data) - self.pos} left")
        raw = self.data[self.pos:self.pos + count]
        self.pos += count
        return raw

    def string(self) -> str:
        raw = self.take(self.long())
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("string is not UTF-8") from None

    def optional_string(self) -> str | None:
        branch = self.long()
        if branch == 0:
            return None
        if branch == 1:
            return self.string()
        raise self.fail(f"union branch {branch} of a null|string field")


def _read_ordering(cur: _Cursor) -> tuple[int, bool | int | float | bytes | str | None]:
    index = cur.long()
    kind = _kind(index, cur.where)
    if kind is OrderingKind.NULL:
        return index, None
    if kind is OrderingKind.BOOLEAN:
        flag = cur.take(1)[0]
        if flag > 1:
            raise cur.fail(f"boolean byte {flag}")
        return index, bool(flag)
    if kind in (OrderingKind.INT, OrderingKind.LONG):
        return index, cur.long()
    if kind is OrderingKind.FLOAT:
        return index, struct.unpack("<f", cur.take(4))[0]
    if kind is OrderingKind.DOUBLE:
        return index, struct.unpack("<d", cur.take(8))[0]
    if kind is OrderingKind.BYTES:
        return index, cur.take(cur.long())
    return index, cur.string()


def _write_ordering(index: int, value: object) -> bytes:
    kind = _kind(index, "")
    head = _zigzag(index)
    if kind is OrderingKind.NULL:
        if value is not None:
            raise LogFormatError(f"orderingVal branch {index} is null but a value {value!r} was given")
        return head
    if kind is OrderingKind.BOOLEAN and isinstance(value, bool):
        return head + (b"\x01" if value else b"\x00")
    if kind is OrderingKind.INT and isinstance(value, int) and not isinstance(value, bool):
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise LogFormatError(f"orderingVal {value} at int branch {index} does not fit 32 bits")
        return head + _zigzag(value)
    if kind is OrderingKind.LONG and isinstance(value, int) and not isinstance(value, bool):
        return head + _zigzag(value)
    if kind is OrderingKind.FLOAT and isinstance(value, (int, float)):
        return head + struct.pack("<f", value)
    if kind is OrderingKind.DOUBLE and isinstance(value, (int, float)):
        return head + struct.pack("<d", value)
    if kind is OrderingKind.BYTES and isinstance(value, (bytes, bytearray)):
        return head + _len_prefixed(bytes(value))
    if kind is OrderingKind.STRING and isinstance(value, str):
        return head + _len_prefixed(value.encode("utf-8"))
    raise LogFormatError(f"orderingVal {value!r} does not fit union branch {index} ({kind.value})")


def _write_optional_string(value: str | None) -> bytes:
    return b"\x00" if value is None else b"\x02" + _len_prefixed(value.encode("utf-8"))


# -- content ----------------------------------------------------------------------------

def decode_delete_records(content: bytes, source: str = "") -> list[DeleteRecord]:
    """Deleted keys of a DELETE block, with each ``orderingVal`` branch kept."""
    where = f"{source}: " if source else ""
    if len(content) < 8:
        raise LogFormatError(f"{where}delete content is {len(content)} bytes, shorter than its 8-byte prefix")
    version, length = struct.unpack_from(">ii", content, 0)
    if version != CONTENT_VERSION:
        raise LogFormatError(f"{where}delete content version {version} at content offset 0, expected "
                             f"{CONTENT_VERSION} (versions 1-2 are Java-serialised and not supported)")
    if length != len(content) - 8:
        raise LogFormatError(f"{where}delete payload length {length} at content offset 4, "
                             f"but {len(content) - 8} bytes follow")
    cur = _Cursor(content[8:], 8, where)
    records: list[DeleteRecord] = []
    while True:
        count = cur.long()
        if count == 0:
            break
        if count < 0:
            # Avro allows a negative item count followed by the block's byte size.
            count = -count
            cur.long()
        for _ in range(count):
            key = cur.optional_string()
            partition = cur.optional_string()
            index, value = _read_ordering(cur)
            records.append(DeleteRecord(key, partition, index, value))
    if cur.pos != len(cur.data):
        raise cur.fail(f"{len(cur.data) - cur.pos} bytes after the end of the record list")
    return records


def encode_delete_records(records: Iterable[DeleteRecord]) -> bytes:
    """DELETE content as Java writes it: one array block with a positive count, then 0."""
    items = list(records)
    body = bytearray()
    if items:
        body += _zigzag(len(items))
        for r in items:
            body += _write_optional_string(r.record_key)
            body += _write_optional_string(r.partition_path)
            body += _write_ordering(r.ordering_index, r.ordering_value)
    body += b"\x00"
    return struct.pack(">ii", CONTENT_VERSION, len(body)) + bytes(body)


def delete_records_for_keys(keys: Iterable[tuple[str, str]]) -> list[DeleteRecord]:
    """Delete records for ``(record_key, partition_path)`` pairs with the safe ordering value."""
    return [DeleteRecord(k, p, WRITE_ORDERING_INDEX, WRITE_ORDERING_VALUE) for k, p in keys]


def delete_block(instant: str, schema_json: str | None, keys: Iterable[tuple[str, str]]) -> LogBlock:
    """A new DELETE block for ``(record_key, partition_path)`` pairs.

    Java also puts the table's SCHEMA on delete blocks; pass ``None`` to omit it
    (the metadata table's own delete blocks carry only INSTANT_TIME).
    """
    pairs = [(HeaderKey.INSTANT_TIME, instant)]
    if schema_json is not None:
        pairs.append((HeaderKey.SCHEMA, schema_json))
    return LogBlock(BlockType.DELETE, new_header(pairs), encode_delete_records(delete_records_for_keys(keys)))


__all__ = [
    "DeleteRecord", "delete_block", "ORDERING_BRANCHES", "OrderingKind", "WRITE_ORDERING_INDEX", "WRITE_ORDERING_VALUE",
    "decode_delete_records", "delete_records_for_keys", "encode_delete_records",
]
