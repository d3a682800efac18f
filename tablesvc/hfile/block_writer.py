"""Encoding one HFile block as Hudi's native writer does (``HFileBlock.serialize`` in hudi-io):
the 33-byte header (``blocks.py`` has the layout), the data compressed as a whole, then one
4-byte checksum slot per 16 KiB of header + compressed data.

* Checksums: the writer's checksum type is NULL (0) and the slots are zero bytes; Hudi's writer
  refuses any other type.
* GZ: one gzip member per block, as ``java.util.zip.GZIPOutputStream`` (through aircompressor's
  ``JdkGzipHadoopStreams``) writes it: the fixed 10-byte header ``1f 8b 08 00 00000000 00 OS``
  (no name, no time), raw deflate at zlib's default level 6, then CRC-32 and the length,
  little-endian.  The OS byte depends on the writer's JDK: 0 up to Java 15 (every carried
  table), 255 ("unknown") from Java 16 on (JDK-8244706); 0 is the default.  Java's ``Deflater`` is zlib, so the same level gives the same bytes
  here; every GZ block of the carried fixtures re-encodes to its exact bytes
  (tests/unit/test_hfile_writer.py).
* The previous-block offset is whatever the caller says (Hudi's quirks live in ``writer.py``).
"""

from __future__ import annotations

import struct
import zlib

from tablesvc.hfile.blocks import HEADER_SIZE, BlockType, ChecksumType, Compression

BYTES_PER_CHECKSUM = 16384
GZIP_LEVEL = 6                       # java.util.zip.Deflater.DEFAULT_COMPRESSION is zlib's 6
_GZIP_HEADER = bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0])      # the OS byte follows
GZIP_OS_JAVA_8_TO_15, GZIP_OS_JAVA_16_ON = 0, 255
_HEADER = struct.Struct(">8siiqbii")
WRITABLE_COMPRESSION = frozenset({Compression.GZ, Compression.NONE})


def gzip_member(data: bytes, os_byte: int = GZIP_OS_JAVA_8_TO_15) -> bytes:
    """``data`` as the one gzip member Java's ``GZIPOutputStream`` writes for it."""
    deflater = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(data) + deflater.flush()
    return _GZIP_HEADER + bytes([os_byte]) + body + struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)


def compress(data: bytes, compression: Compression, gzip_os: int = GZIP_OS_JAVA_8_TO_15) -> bytes:
    if compression is Compression.NONE:
        return data
    if compression is Compression.GZ:
        return gzip_member(data, gzip_os)
    raise ValueError(f"HFile compression {compression.name} cannot be written (GZ and NONE can)")


def checksum_slots(size_with_header: int) -> int:
    """Number of 4-byte checksum slots for ``size_with_header`` bytes (a partial chunk counts)."""
    return -(-size_with_header // BYTES_PER_CHECKSUM)


def encode_block(block_type: BlockType, data: bytes, compression: Compression, previous_offset: int = -1,
                 gzip_os: int = GZIP_OS_JAVA_8_TO_15) -> bytes:
    """One whole block: header, compressed ``data``, zeroed checksum slots."""
    packed = compress(data, compression, gzip_os)
    with_header = HEADER_SIZE + len(packed)
    sums = 4 * checksum_slots(with_header)
    header = _HEADER.pack(block_type.value, len(packed) + sums, len(data), previous_offset,
                          int(ChecksumType.NULL), BYTES_PER_CHECKSUM, with_header)
    return b"".join((header, packed, bytes(sums)))
