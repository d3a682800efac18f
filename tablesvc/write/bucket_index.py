"""Hudi's simple bucket index: a record's file group is a hash of its key.

Java (``BucketIdentifier.getBucketId``) turns the record key back into the list of
hash-field values, takes ``List<String>.hashCode()`` and maps it to a bucket with
``(hash & Integer.MAX_VALUE) % numBuckets``.  ``List.hashCode`` is ``31 * h + e.hashCode()``
from ``h = 1`` (a null element counts 0) and ``String.hashCode`` is the same
polynomial over the string's UTF-16 code units, all in wrapping 32-bit arithmetic.

Turning a key into values follows ``KeyGenUtils.extractRecordKeysByFields`` of current
Hudi: a key without ``,`` or without ``:`` is one value (the whole key); otherwise it is
read as ``field:value`` pairs (values may hold ``:``), keeping the hash fields'
values, ``__null__`` → null and ``__empty__`` → ``""``.  Releases before 1.0 parsed
keys holding ``:`` differently, so tables whose single-field keys contain ``:`` get
other buckets from those releases.

A bucket's file id is ``<8-digit bucket><rest of a random UUID>-0``: Java takes a UUID,
replaces its first 8 characters by the zero-padded bucket number and adds ``-0``
(``FSUtils.createNewFileId``).  ``bucket_of_file_id`` reads the number back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import InvalidInputError, UnsupportedTableError

_MASK32 = 0xFFFFFFFF
_U64_MASK32 = pa.scalar(_MASK32, pa.uint64())
_NULL_PLACEHOLDER = "__null__"
_EMPTY_PLACEHOLDER = "__empty__"


# -- Java hash codes -------------------------------------------------------------------------

def java_string_hash(text: str) -> int:
    """``String.hashCode()`` as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def java_list_hash(values: Iterable[str | None]) -> int:
    """``List<String>.hashCode()`` as a signed 32-bit int."""
    h = 1
    for v in values:
        h = (31 * h + (0 if v is None else java_string_hash(v))) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def hash_values(record_key: str, hash_fields: Sequence[str]) -> list[str | None]:
    """The values Java hashes for ``record_key`` (``KeyGenUtils.extractRecordKeysByFields``)."""
    if "," not in record_key or ":" not in record_key:
        return [record_key]
    wanted = set(hash_fields)
    take_all = not wanted or wanted == {""}
    values: list[str | None] = []
    pos, n = 0, len(record_key)
    while pos < n:
        sep1 = record_key.find(":", pos)
        if sep1 < 0:  # a part without ':'; Java would fail here, we keep the whole key
            break
        field = record_key[pos:sep1]
        sep2 = record_key.find(":", sep1 + 1)
        if sep2 < 0:
            value, next_pos = record_key[sep1 + 1:], n
        else:
            comma = record_key.rfind(",", 0, sep2 + 1)
            # skip ':' inside a value until a ',' lies between this value and the next ':'
            while comma < sep1 and sep2 > 0:
                sep2 = record_key.find(":", sep2 + 1)
                comma = record_key.rfind(",", 0, sep2 + 1) if sep2 >= 0 else -1  # Java: lastIndexOf(",", -1)
            if comma > 0 and comma > sep1:
                value, next_pos = record_key[sep1 + 1:comma], comma + 1
            else:
                value, next_pos = record_key[sep1 + 1:], n
        if take_all or field in wanted:
            values.append(None if value == _NULL_PLACEHOLDER else "" if value == _EMPTY_PLACEHOLDER else value)
        pos = next_pos
    return values or [record_key]


def bucket_id(record_key: str, hash_fields: Sequence[str], num_buckets: int) -> int:
    """``BucketIdentifier.getBucketId`` for one key."""
    return (java_list_hash(hash_values(record_key, hash_fields)) & 0x7FFFFFFF) % num_buckets


def _ascii_string_hashes(keys: pa.Array) -> pa.Array:
    """Unsigned 32-bit ``String.hashCode`` of every (ASCII, non-null) string, vectorised.

    For ASCII text the UTF-8 bytes are the UTF-16 code units, so the hash is
    ``sum(byte_i * 31^(len-1-i)) mod 2^32`` computed over the array's byte buffer.
    """
    keys = keys.cast(pa.string())
    n = len(keys)
    if n == 0:
        return pa.array([], pa.uint64())
    raw_offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, keys.buffers()[1]], offset=keys.offset)
    start = raw_offsets[0].as_py()
    offsets = pc.subtract(raw_offsets, start)
    lengths = pc.binary_length(keys).cast(pa.int64())
    total = pc.sum(lengths).as_py() or 0
    if total == 0:
        return pa.array([0] * n, pa.uint64())
    data = keys.buffers()[2]
    raw = pa.Array.from_buffers(pa.uint8(), total, [None, data.slice(start, total)])
    lists = pa.ListArray.from_arrays(offsets.cast(pa.int32()), raw)
    parent = pc.list_parent_indices(lists)
    row_start = pc.take(offsets.cast(pa.int64()), parent)
    row_len = pc.take(lengths, parent)
    position = pc.subtract(pa.array(range(total), pa.int64()), row_start)
    exponent = pc.subtract(pc.subtract(row_len, position), 1)
    max_len = pc.max(lengths).as_py()
    powers, p = [], 1
    for _ in range(max_len):
        powers.append(p)
        p = (p * 31) & _MASK32
    weight = pc.take(pa.array(powers, pa.uint64()), exponent)
    term = pc.bit_wise_and(pc.multiply(raw.cast(pa.uint64()), weight), _U64_MASK32)
    # Per-string sums as differences of one running sum; uint64 arithmetic wraps mod 2^64,
    # which keeps every difference right mod 2^32.
    running = pa.concat_arrays([pa.array([0], pa.uint64()), pc.cumulative_sum(term)])
    ends = pc.take(running, offsets.slice(1).cast(pa.int64()))
    starts = pc.take(running, offsets.slice(0, n).cast(pa.int64()))
    return pc.bit_wise_and(pc.subtract(ends, starts), _U64_MASK32)


def bucket_ids(keys: pa.Array | pa.ChunkedArray, hash_fields: Sequence[str], record_key_fields: Sequence[str],
               num_buckets: int) -> pa.Array:
    """Bucket id (int32) of every record key; vectorised for keys that are one plain value."""
    if num_buckets < 1:
        raise InvalidInputError(f"number of buckets {num_buckets} must be at least 1")
    missing = [f for f in hash_fields if f not in record_key_fields]
    if missing:
        raise InvalidInputError(f"bucket hash field(s) {', '.join(missing)} are not record key fields "
                                f"({', '.join(record_key_fields)})")
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    keys = keys.cast(pa.string())
    if keys.null_count:
        raise InvalidInputError(f"record key is null at row {pc.index(pc.is_null(keys), True).as_py()}")
    plain = pc.or_(pc.invert(pc.match_substring(keys, ",")), pc.invert(pc.match_substring(keys, ":")))
    fast = pc.and_(plain, pc.string_is_ascii(keys))
    if pc.all(fast).as_py():
        list_hash = pc.bit_wise_and(pc.add(_ascii_string_hashes(keys), pa.scalar(31, pa.uint64())),
                                    pa.scalar(0x7FFFFFFF, pa.uint64()))  # [k].hashCode()
        return pc.cast(_mod(list_hash, num_buckets), pa.int32())
    # Mixed: compound keys and non-ASCII keys go through the per-key Java port.
    fast_idx = pc.indices_nonzero(fast)
    out = [0] * len(keys)
    if len(fast_idx):
        fast_ids = bucket_ids(pc.take(keys, fast_idx), hash_fields, record_key_fields, num_buckets)
        for i, b in zip(fast_idx.to_pylist(), fast_ids.to_pylist()):
            out[i] = b
    slow_idx = pc.indices_nonzero(pc.invert(fast))
    for i, key in zip(slow_idx.to_pylist(), pc.take(keys, slow_idx).to_pylist()):
        out[i] = bucket_id(key, hash_fields, num_buckets)
    return pa.array(out, pa.int32())


def _mod(values: pa.Array, divisor: int) -> pa.Array:
    quotient = pc.divide(values, pa.scalar(divisor, pa.uint64()))  # integer division for ints
    return pc.subtract(values, pc.multiply(quotient, pa.scalar(divisor, pa.uint64())))


# -- file ids --------------------------------------------------------------------------------

def bucket_file_id(bucket: int) -> str:
    """A new file id for ``bucket``: ``<8-digit bucket>`` + the rest of a random UUID + ``-0``."""
    if not 0 <= bucket <= 99_999_999:
        raise InvalidInputError(f"bucket {bucket} does not fit 8 digits")
    return f"{bucket:08d}{str(uuid.uuid4())[8:]}-0"


def bucket_of_file_id(file_id: str) -> int | None:
    """The bucket number a file id starts with, or None when it does not start with 8 digits."""
    head = file_id[:8]
    if len(head) == 8 and head.isascii() and head.isdigit():
        return int(head)
    return None


# -- table properties ------------------------------------------------------------------------

@dataclass(frozen=True)
class BucketSpec:
    num_buckets: int
    hash_fields: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "hash_fields", tuple(self.hash_fields))
        if self.num_buckets < 1:
            raise InvalidInputError(f"hoodie.bucket.index.num.buckets: {self.num_buckets} must be at least 1")
        if not self.hash_fields:
            raise InvalidInputError("hoodie.bucket.index.hash.field: no hash field")

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> "BucketSpec | None":
        """The bucket spec of a table, or None when the table is not bucket-indexed."""
        if (props.get("hoodie.index.type") or "").strip().upper() != "BUCKET":
            return None
        engine = (props.get("hoodie.index.bucket.engine") or "SIMPLE").strip().upper()
        if engine != "SIMPLE":
            raise UnsupportedTableError(f"hoodie.index.bucket.engine={engine}: only the SIMPLE bucket engine is "
                                        "supported")
        raw = (props.get("hoodie.bucket.index.num.buckets") or "").strip()
        if not raw.isdigit():
            raise InvalidInputError(f"hoodie.bucket.index.num.buckets: expected a positive number, got {raw!r}")
        fields = (props.get("hoodie.bucket.index.hash.field") or "").strip() or \
            (props.get("hoodie.table.recordkey.fields") or "").strip()
        return cls(int(raw), tuple(f.strip() for f in fields.split(",") if f.strip()))

    def bucket_ids(self, keys: pa.Array | pa.ChunkedArray, record_key_fields: Sequence[str]) -> pa.Array:
        return bucket_ids(keys, self.hash_fields, record_key_fields, self.num_buckets)


__all__ = [
    "BucketSpec", "bucket_file_id", "bucket_id", "bucket_ids", "bucket_of_file_id", "hash_values",
    "java_list_hash", "java_string_hash",
]
