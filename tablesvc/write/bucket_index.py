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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import InvalidInputError, UnsupportedTableError

_MASK32 = 0xFFFFFFFF
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


# -- vectorised hashing ----------------------------------------------------------------------
#
# Every hash here is a polynomial in 31 over 32-bit words: ``String.hashCode`` over UTF-16 code
# units, ``List.hashCode`` over element hashes (plus ``31**len`` for its start value 1).
# numpy's uint32 arithmetic wraps exactly as Java's int arithmetic does, so whole arrays are
# hashed at once; ``bucket_id`` above stays the per-key reference the tests compare against.

_INVERSE_31 = pow(31, -1, 1 << 32)  # 31 is odd, hence invertible mod 2**32
# Keys of a few lengths (the usual case) are hashed by Horner's rule, one column at a time;
# other mixes by running sums (no Python loop over lengths).
_MAX_LENGTH_GROUPS = 16
_MAX_HORNER_LENGTH = 256


def _powers(base: int, count: int) -> np.ndarray:
    """``base**0 .. base**(count - 1)`` mod 2**32."""
    out = np.full(count, base, np.uint32)
    if count:
        out[0] = 1
        out = np.multiply.accumulate(out, dtype=np.uint32)
    return out


def _polynomial_hashes(words: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``sum(w_i * 31**(len-1-i)) mod 2**32`` (uint32) of every segment ``words[offsets[s]:offsets[s+1]]``."""
    lengths = np.diff(offsets)
    present = np.flatnonzero(np.bincount(lengths)) if len(lengths) else lengths
    if len(present) > _MAX_LENGTH_GROUPS or (len(present) and present[-1] > _MAX_HORNER_LENGTH):
        return _running_sum_polynomials(words, offsets)
    if len(present) == 1:  # one length (generated ids, UUIDs): the words form a matrix as they lie
        return _horner(words[offsets[0]:offsets[-1]].reshape(len(lengths), int(present[0])))
    out = np.empty(len(lengths), np.uint32)
    for length in present:
        rows = np.flatnonzero(lengths == length)
        out[rows] = _horner(words[offsets[rows, None] + np.arange(length)])
    return out


def _horner(matrix: np.ndarray) -> np.ndarray:
    """The polynomial of every row of a (rows, length) matrix: one multiply-add per column."""
    h = np.zeros(matrix.shape[0], np.uint32)
    for column in range(matrix.shape[1]):
        h *= np.uint32(31)
        h += matrix[:, column]
    return h


def _running_sum_polynomials(words: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``_polynomial_hashes`` for any mix of lengths, in O(words) whatever the longest segment.

    ``w_j * 31**(end-1-j) == 31**(end-1) * (w_j * 31**-j)``, so one running sum of
    ``w_j * 31**-j`` over all words serves every segment.
    """
    total = len(words)
    running = np.zeros(total + 1, np.uint32)
    np.cumsum(words.astype(np.uint32) * _powers(_INVERSE_31, total), dtype=np.uint32, out=running[1:])
    starts, ends = offsets[:-1], offsets[1:]
    scale = _powers(31, total + 1)[np.maximum(ends - 1, 0)]  # an empty segment's sum is 0 anyway
    return (running[ends] - running[starts]) * scale


def _utf8_buffers(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of a string array without nulls, and int64 offsets (n + 1) from 0."""
    if strings.type != pa.string():
        strings = strings.cast(pa.string())
    n = len(strings)
    _validity, offset_buffer, data_buffer = strings.buffers()
    offsets = np.frombuffer(offset_buffer, np.int32, count=n + 1, offset=strings.offset * 4).astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    if last == first:
        return np.empty(0, np.uint8), offsets - first
    return np.frombuffer(data_buffer, np.uint8, count=last - first, offset=first), offsets - first


def _utf16_code_units(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes (valid UTF-8) as the UTF-16 code units Java hashes, and offsets counted in units."""
    if not len(data) or int(data.max()) < 0x80:
        return data, offsets  # ASCII: every byte is one code unit
    lead = np.flatnonzero((data & 0xC0) != 0x80)  # the first byte of every character
    padded = np.concatenate([data, np.zeros(3, np.uint8)]).astype(np.uint32)
    b0 = padded[lead]
    c1, c2, c3 = (padded[lead + k] & 0x3F for k in (1, 2, 3))
    code = np.select([b0 < 0x80, b0 < 0xE0, b0 < 0xF0],
                     [b0, ((b0 & 0x1F) << 6) | c1, ((b0 & 0x0F) << 12) | (c1 << 6) | c2],
                     ((b0 & 0x07) << 18) | (c1 << 12) | (c2 << 6) | c3)
    pair = code >= 0x10000  # outside the BMP: a surrogate pair, two code units
    width = 1 + pair.astype(np.int64)
    first_unit = np.cumsum(width) - width
    units = np.empty(int(first_unit[-1] + width[-1]), np.uint32)
    above = code - 0x10000  # wraps for BMP characters, which do not use it
    units[first_unit] = np.where(pair, 0xD800 + (above >> 10), code)
    units[first_unit[pair] + 1] = 0xDC00 + (above[pair] & 0x3FF)
    # Units before byte k: the widths of the characters that start before k.
    per_byte = np.zeros(len(data) + 1, np.int64)
    per_byte[lead + 1] = width
    return units, np.cumsum(per_byte)[offsets]


def _string_hashes(strings: pa.Array) -> np.ndarray:
    """``String.hashCode`` (as uint32) of every string; a null hashes 0, as ``""`` and a null list
    element both do."""
    if strings.null_count:
        strings = pc.fill_null(strings, "")
    data, offsets = _utf8_buffers(strings)
    units, unit_offsets = _utf16_code_units(data, offsets)
    return _polynomial_hashes(units, unit_offsets)


def _list_hashes(element_hashes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``List.hashCode`` (uint32) of every list, given its elements' hashes: ``31**len + polynomial``."""
    lengths = np.diff(offsets)
    start = _powers(31, int(lengths.max(initial=0)) + 1)[lengths]
    return start + _polynomial_hashes(element_hashes, offsets)


def _field_value_list_hashes(keys: pa.Array, hash_fields: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """List hashes of compound keys that are plain ``field:value`` pairs (each ``,``-part holds
    exactly one ``:``), which ``hash_values`` reads as the hash fields' values; and a mask of the
    keys so computed.  Keys it leaves out (values holding ``:`` or ``,``, no hash field present)
    need the per-key port."""
    n = len(keys)
    parts = pc.split_pattern(keys, ",")
    owner = pc.list_parent_indices(parts).to_numpy()
    flat = pc.list_flatten(parts)
    plain_part = pc.equal(pc.count_substring(flat, ":"), 1).to_numpy(zero_copy_only=False)
    simple = np.bincount(owner[~plain_part], minlength=n) == 0
    take = simple[owner]
    pairs = pc.split_pattern(flat.filter(pa.array(take)), ":", max_splits=1)
    fields, values = pc.list_element(pairs, 0), pc.list_element(pairs, 1)
    owner = owner[take]
    wanted = set(hash_fields)
    if wanted and wanted != {""}:
        keep = pc.is_in(fields, value_set=pa.array(sorted(wanted), pa.string())).to_numpy(zero_copy_only=False)
        values, owner = values.filter(pa.array(keep)), owner[keep]
    # __null__ -> null and __empty__ -> "" both hash 0.
    placeholder = pc.is_in(values, value_set=pa.array([_NULL_PLACEHOLDER, _EMPTY_PLACEHOLDER]))
    element_hashes = np.where(placeholder.to_numpy(zero_copy_only=False), np.uint32(0), _string_hashes(values))
    counts = np.bincount(owner, minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return _list_hashes(element_hashes, offsets), simple & (counts > 0)


def _key_list_hashes(keys: pa.Array, hash_fields: Sequence[str]) -> np.ndarray:
    """``List<String>.hashCode`` (uint32) of the hash values of every record key."""
    data, _offsets = _utf8_buffers(keys)
    if not (data == ord(",")).any() or not (data == ord(":")).any():  # the usual case: no key is compound
        return np.uint32(31) + _string_hashes(keys)  # [k].hashCode() = 31 * 1 + k.hashCode()
    whole = pc.or_(pc.invert(pc.match_substring(keys, ",")), pc.invert(pc.match_substring(keys, ":")))
    whole = whole.to_numpy(zero_copy_only=False)
    out = np.empty(len(keys), np.uint32)
    single = np.flatnonzero(whole)
    out[single] = np.uint32(31) + _string_hashes(keys.take(pa.array(single)))
    compound = np.flatnonzero(~whole)
    hashes, done = _field_value_list_hashes(keys.take(pa.array(compound)), hash_fields)
    out[compound[done]] = hashes[done]
    for i in compound[~done]:  # rare: values holding ':' or ','
        out[i] = java_list_hash(hash_values(keys[int(i)].as_py(), hash_fields)) & _MASK32
    return out


def _as_string_array(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    keys = keys.cast(pa.string())
    if keys.null_count:
        raise InvalidInputError(f"record key is null at row {pc.index(pc.is_null(keys), True).as_py()}")
    if not pc.all(pc.string_is_ascii(keys)).as_py():
        try:
            keys.validate(full=True)  # the UTF-16 transcoding assumes valid UTF-8
        except pa.ArrowInvalid as exc:
            raise InvalidInputError(f"record keys are not valid UTF-8: {exc}") from None
    return keys


def bucket_ids(keys: pa.Array | pa.ChunkedArray, hash_fields: Sequence[str], record_key_fields: Sequence[str],
               num_buckets: int) -> pa.Array:
    """Bucket id (int32) of every record key, as ``bucket_id`` computes it key by key."""
    if num_buckets < 1:
        raise InvalidInputError(f"number of buckets {num_buckets} must be at least 1")
    missing = [f for f in hash_fields if f not in record_key_fields]
    if missing:
        raise InvalidInputError(f"bucket hash field(s) {', '.join(missing)} are not record key fields "
                                f"({', '.join(record_key_fields)})")
    keys = _as_string_array(keys)
    if len(keys) == 0:
        return pa.array([], pa.int32())
    hashes = _key_list_hashes(keys, hash_fields)
    return pa.array(((hashes & np.uint32(0x7FFFFFFF)) % np.uint32(num_buckets)).astype(np.int32))


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
