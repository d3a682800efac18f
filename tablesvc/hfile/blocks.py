"""HFile blocks: the 33-byte header every block but the trailer starts with, decompression and
checksums.  Layout as Hudi's ``hudi-io`` documents it (package ``org.apache.hudi.io.hfile``)
and HBase writes it for HFile version 3:

| bytes | field |
|---|---|
| 8 | magic: the block type (``BlockType``) |
| 4 | on-disk size without header: compressed data + checksum bytes |
| 4 | uncompressed size without header: the data once decompressed |
| 8 | offset of the previous block of the same type (-1 for none) |
| 1 | checksum type: 0 none, 1 CRC32, 2 CRC32C |
| 4 | bytes per checksum chunk |
| 4 | on-disk data size with header: header + compressed data, the bytes the checksums cover |

then the (compressed) data, then one 4-byte big-endian checksum per chunk of ``bytes per
checksum`` bytes of header + data.  Hudi's writers put checksum type 0 and still leave the
4-byte slots; the slots are skipped then, and checked for types 1 and 2.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import Enum, IntEnum

HEADER_SIZE = 33
_HEADER = struct.Struct(">8siiqbii")


class BlockType(Enum):
    """HBase's block magics (``BlockType``): the ones an HFile of Hudi can hold."""

    DATA = b"DATABLK*"
    ENCODED_DATA = b"DATABLKE"
    LEAF_INDEX = b"IDXLEAF2"
    BLOOM_CHUNK = b"BLMFBLK2"
    META = b"METABLKc"
    INTERMEDIATE_INDEX = b"IDXINTE2"
    ROOT_INDEX = b"IDXROOT2"
    FILE_INFO = b"FILEINF2"
    GENERAL_BLOOM_META = b"BLMFMET2"
    DELETE_FAMILY_BLOOM_META = b"DFBLMET2"
    TRAILER = b'TRABLK"$'


class Compression(IntEnum):
    """``compression_codec`` of the trailer (HBase's ``Compression.Algorithm`` ordinals)."""

    LZO = 0
    GZ = 1
    NONE = 2
    SNAPPY = 3
    LZ4 = 4
    BZIP2 = 5
    ZSTD = 6


SUPPORTED_COMPRESSION = frozenset({Compression.GZ, Compression.NONE})


class ChecksumType(IntEnum):
    NULL = 0
    CRC32 = 1
    CRC32C = 2


class BlockError(ValueError):
    """A block that does not decode; ``position`` is relative to the bytes given."""

    def __init__(self, position: int, reason: str):
        super().__init__(reason)
        self.position = position
        self.reason = reason


@dataclass(frozen=True)
class Block:
    offset: int                   # of the magic, in the HFile's bytes
    block_type: BlockType
    on_disk_size: int             # header + compressed data + checksums: where the next block starts
    data: bytes                   # uncompressed


def read_block(data: bytes, offset: int, compression: Compression,
               expect: tuple[BlockType, ...] = ()) -> Block:
    """The block at ``offset`` of an HFile's bytes, decompressed and its checksums checked."""
    if offset < 0 or offset + HEADER_SIZE > len(data):
        raise BlockError(offset, f"block header of {HEADER_SIZE} bytes does not fit in the file "
                                 f"({len(data)} bytes)")
    magic, on_disk, uncompressed, _prev, checksum, per_chunk, with_header = _HEADER.unpack_from(data, offset)
    try:
        block_type = BlockType(magic)
    except ValueError:
        raise BlockError(offset, f"unknown block magic {magic!r}") from None
    if expect and block_type not in expect:
        raise BlockError(offset, f"expected a {'/'.join(t.name for t in expect)} block, found {block_type.name}")
    end = offset + HEADER_SIZE + on_disk
    if on_disk < 0 or uncompressed < 0 or end > len(data):
        raise BlockError(offset, f"{block_type.name} block of {on_disk} bytes after its header runs past "
                                 f"the end of the file ({len(data)} bytes)")
    if not HEADER_SIZE <= with_header <= HEADER_SIZE + on_disk:
        raise BlockError(offset + 29, f"{block_type.name} block: data size with header {with_header} is not "
                                      f"between {HEADER_SIZE} and {HEADER_SIZE + on_disk}")
    _check_sums(data, offset, block_type, checksum, per_chunk, with_header, end)
    raw = data[offset + HEADER_SIZE:offset + with_header]
    if compression is Compression.NONE:
        body = bytes(raw[:uncompressed]) if uncompressed <= len(raw) else None
    else:
        body = _gunzip(raw, offset + HEADER_SIZE, block_type)
    if body is None or len(body) != uncompressed:
        raise BlockError(offset + HEADER_SIZE, f"{block_type.name} block holds {len(raw) if body is None else len(body)} "
                                               f"bytes of data, its header says {uncompressed}")
    return Block(offset, block_type, HEADER_SIZE + on_disk, body)


def _gunzip(raw: bytes, at: int, block_type: BlockType) -> bytes:
    """Hadoop's GzipCodec output: one or more gzip members (zlib with a gzip header)."""
    out = []
    rest = bytes(raw)
    try:
        while rest:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out.append(inflater.decompress(rest))
            if not inflater.eof:
                raise BlockError(at, f"{block_type.name} block: gzip data ends before its end marker")
            rest = inflater.unused_data
    except zlib.error as exc:
        raise BlockError(at, f"{block_type.name} block: gzip data does not inflate ({exc})") from None
    return b"".join(out)


def _check_sums(data: bytes, offset: int, block_type: BlockType, kind: int, per_chunk: int,
                with_header: int, end: int) -> None:
    if kind == ChecksumType.NULL:
        return
    if kind not in (ChecksumType.CRC32, ChecksumType.CRC32C):
        raise BlockError(offset + 24, f"{block_type.name} block: unknown checksum type {kind}")
    if per_chunk <= 0:
        raise BlockError(offset + 25, f"{block_type.name} block: {per_chunk} bytes per checksum")
    chunks = -(-with_header // per_chunk)
    sums_at = offset + with_header
    if sums_at + 4 * chunks > end:
        raise BlockError(sums_at, f"{block_type.name} block: {chunks} checksums do not fit in the block")
    crc = zlib.crc32 if kind == ChecksumType.CRC32 else crc32c
    for i in range(chunks):
        start = offset + i * per_chunk
        chunk = data[start:min(start + per_chunk, offset + with_header)]
        stored = int.from_bytes(data[sums_at + 4 * i:sums_at + 4 * i + 4], "big")
        if crc(chunk) & 0xFFFFFFFF != stored:
            raise BlockError(start, f"{block_type.name} block: checksum of chunk {i} does not match")


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(chunk: bytes) -> int:
    """CRC-32C (Castagnoli), which HBase's default checksum type uses; no package offers it here,
    and the blocks of the metadata table's ``files`` partition are small."""
    crc = 0xFFFFFFFF
    table = _CRC32C
    for byte in chunk:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
