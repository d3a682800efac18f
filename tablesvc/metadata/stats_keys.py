"""Record keys of the metadata table's ``column_stats`` and ``partition_stats`` partitions, and
the file group a key lands in.

Hudi (``HoodieMetadataPayload.getColumnStatsIndexKey``, ``HoodieTableMetadataUtil
.getPartitionStatsIndexKey``, ``HashID``, ``Base64CodecUtil``) builds them from hashes, each
Base64-encoded (standard alphabet, padded):

* column stats: ``b64(xxh64(column)) + b64(xxh64(partition)) + b64(md5(file name))``
  (12 + 12 + 24 = 48 characters);
* partition stats: the first two parts (24 characters).

``xxh64`` is XXH64 over the string's UTF-8 bytes with Hudi's fixed seed -625288518 (a Java long,
so sign-extended to 64 bits), its 8-byte result written big-endian (``IOUtils.toBytes(long)``).
The partition is ``.`` for a non-partitioned table's ``""`` (``getPartitionIdentifier``); the file
name is the bare name (a log file's includes its leading dot).

The file group: ``abs(String.hashCode(key)) % n`` over the partition's n file groups
(``mapRecordKeyToFileGroupIndex``, which takes ``abs`` of the hash first and of the remainder
after, so ``Integer.MIN_VALUE`` stays negative until the second ``abs``).

XXH64 is written here (about forty lines, the published algorithm) rather than taken from the
``xxhash`` package: the project venv does not carry it and the keys are short.
"""

from __future__ import annotations

import base64
import hashlib
import struct

from tablesvc.hfile.java_hash_order import java_string_hash
from tablesvc.metadata.files_records import partition_key

MASK64 = (1 << 64) - 1
XXH64_SEED = -625288518 & MASK64          # HashID's seed, a Java long sign-extended
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & MASK64


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & MASK64
    return (_rotl(acc, 31) * _P1) & MASK64


def _merge_round(acc: int, val: int) -> int:
    acc ^= _round(0, val)
    return (acc * _P1 + _P4) & MASK64


def xxh64(data: bytes, seed: int = XXH64_SEED) -> int:
    """XXH64 of ``data`` as an unsigned 64-bit int."""
    n = len(data)
    pos = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & MASK64
        v2 = (seed + _P2) & MASK64
        v3 = seed
        v4 = (seed - _P1) & MASK64
        while pos + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, pos)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            pos += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & MASK64
        for v in (v1, v2, v3, v4):
            h = _merge_round(h, v)
    else:
        h = (seed + _P5) & MASK64
    h = (h + n) & MASK64
    while pos + 8 <= n:
        (lane,) = struct.unpack_from("<Q", data, pos)
        h ^= _round(0, lane)
        h = (_rotl(h, 27) * _P1 + _P4) & MASK64
        pos += 8
    if pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        h ^= (word * _P1) & MASK64
        h = (_rotl(h, 23) * _P2 + _P3) & MASK64
        pos += 4
    while pos < n:
        h ^= (data[pos] * _P5) & MASK64
        h = (_rotl(h, 11) * _P1) & MASK64
        pos += 1
    h ^= h >> 33
    h = (h * _P2) & MASK64
    h ^= h >> 29
    h = (h * _P3) & MASK64
    h ^= h >> 32
    return h


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def hash_id(text: str) -> str:
    """``b64(xxh64(text))``: 8 bytes big-endian, 12 characters."""
    return _b64(xxh64(text.encode("utf-8")).to_bytes(8, "big"))


def file_name_id(file_name: str) -> str:
    """``b64(md5(file name))``: 24 characters."""
    return _b64(hashlib.md5(file_name.encode("utf-8")).digest())


def partition_stats_key(column: str, partition: str) -> str:
    return hash_id(column) + hash_id(partition_key(partition))


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    return partition_stats_key(column, partition) + file_name_id(file_name)


def file_group_index(key: str, file_group_count: int) -> int:
    """The index of the file group (of ``file_group_count``) a record key belongs to."""
    if file_group_count == 1:
        return 0
    unsigned = java_string_hash(key)
    signed = unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned
    # Java's Math.abs(Integer.MIN_VALUE) stays negative; Java's % keeps the dividend's sign, and
    # the outer abs then makes the index positive.
    first = -signed if signed != -(1 << 31) else signed
    remainder = abs(first) % file_group_count
    return remainder
