"""Writing an HFile (version 3) byte for byte as Apache Hudi 1.x's native writer does
(``org.apache.hudi.io.hfile.HFileWriterImpl`` in hudi-io, which writes the metadata table's
base files and the HFiles inside its HFILE_DATA log blocks).  The file, in order:

1. **Data blocks** (``DATABLK*``): cells end to end, each ``int key length, int value length,
   short row length, row, 0 (family length), long Long.MAX_VALUE (timestamp), 4 (type Put),
   value, 0 (MVCC timestamp as a vlong)``.  A block is cut before a cell when the block's
   running size (key + value + 21 per cell: Hudi's estimate, not the 22 bytes the cell takes)
   would pass the block size, unless the cell's key equals the block's last key (a key's cells
   never straddle two blocks).  The first block's previous-block offset is -1; every later
   block's is its *own* offset (Hudi's writer passes the offset the new block will start at).
2. **Meta blocks** (``METABLKc``), one per name, in Java ``HashMap`` order of the names.
3. **Load-on-open section**: the root data index (``IDXROOT2``; per data block a long offset,
   an int on-disk size, a vlong of the key length + 2, a short key length and the key), the
   meta index (also ``IDXROOT2``; long offset, int size, vlong name length, name) and the file
   info (``FILEINF2``: ``PBUF``, a varint length, an ``InfoProto`` of name/value pairs in Java
   ``HashMap`` order).  The file info always holds ``MAX_MEMSTORE_TS_KEY`` (long 0),
   ``hfile.LASTKEY`` (short length + last key; empty without cells), ``hfile.AVG_KEY_LEN`` and
   ``hfile.AVG_VALUE_LEN`` (ints, integer division over the cells), ``hfile.CREATE_TIME_TS``
   (long, milliseconds) and ``KEY_VALUE_VERSION`` (int 1), plus what the caller adds (Hudi:
   ``schema``; base files with a bloom filter also ``minRecordKey``, ``maxRecordKey``,
   ``bloomFilterTypeCode``).
4. **Trailer**, 4096 bytes: ``TRABLK"$``, a varint-length-prefixed ``TrailerProto`` (file info
   offset, load-on-open offset, the summed size estimate of step 1 as uncompressed data index
   size, data and meta index counts, entry count, 1 index level, first and last data block
   offsets — -1 and 0 without cells — the comparator class name, the codec id), zeros, and the
   version: minor 0 and major 3 in the last four bytes.

Every block but the trailer is compressed with the file's codec (``block_writer.py``).
Where a value is inherently per file (the creation time), the caller passes it.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

from tablesvc.hfile.block_writer import GZIP_OS_JAVA_8_TO_15, GZIP_OS_JAVA_16_ON, WRITABLE_COMPRESSION, encode_block
from tablesvc.hfile.blocks import BlockType, Compression
from tablesvc.hfile.java_hash_order import java_hashmap_order
from tablesvc.hfile.reader import PBUF_MAGIC, TRAILER_SIZE
from tablesvc.hfile.wire import hadoop_vlong_bytes, protobuf_bytes_field, protobuf_varint_field, varint_bytes

# Hudi's defaults for the metadata table: hoodie.hfile.block.size (base files) and the size
# HFileUtils.serializeRecordsToLogBlock fixes for log blocks are both 1 MiB;
# hoodie.hfile.compression.algorithm is GZ for both.
DEFAULT_BLOCK_SIZE = 1024 * 1024
DEFAULT_COMPRESSION = Compression.GZ
COMPARATOR_CLASS_NAME = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
MAX_KEY_LENGTH = 0x7FFF            # the row length is a signed short
_CELL_OVERHEAD_ESTIMATE = 21       # what Hudi adds per cell to its block-size estimate
_LATEST_TIMESTAMP = (1 << 63) - 1
_PUT = 4

# file info names the writer sets itself (HFileInfo's constants)
LAST_KEY = "hfile.LASTKEY"
AVG_KEY_LEN = "hfile.AVG_KEY_LEN"
AVG_VALUE_LEN = "hfile.AVG_VALUE_LEN"
CREATE_TIME = "hfile.CREATE_TIME_TS"
KEY_VALUE_VERSION = "KEY_VALUE_VERSION"
MAX_MVCC = "MAX_MEMSTORE_TS_KEY"

# TrailerProto field numbers (HBase's HFile.proto)
_T_FILE_INFO, _T_LOAD_ON_OPEN, _T_UNCOMPRESSED_INDEX, _T_DATA_INDEX_COUNT, _T_META_INDEX_COUNT = 1, 2, 3, 5, 6
_T_ENTRIES, _T_LEVELS, _T_FIRST_DATA, _T_LAST_DATA, _T_COMPARATOR, _T_CODEC = 7, 8, 9, 10, 11, 12


@dataclass(frozen=True)
class HFileSettings:
    block_size: int = DEFAULT_BLOCK_SIZE
    compression: Compression = DEFAULT_COMPRESSION
    creation_time_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # the gzip header's OS byte, which depends on the writing JDK (block_writer.py)
    gzip_os: int = GZIP_OS_JAVA_8_TO_15

    def __post_init__(self) -> None:
        if self.gzip_os not in (GZIP_OS_JAVA_8_TO_15, GZIP_OS_JAVA_16_ON):
            raise ValueError(f"gzip OS byte {self.gzip_os}: Java writes {GZIP_OS_JAVA_8_TO_15} or {GZIP_OS_JAVA_16_ON}")
        if self.compression not in WRITABLE_COMPRESSION:
            raise ValueError(f"HFile compression {self.compression.name} cannot be written (GZ and NONE can)")
        if self.block_size <= 0:
            raise ValueError(f"HFile block size must be positive, got {self.block_size}")


def _long(value: int) -> bytes:
    return struct.pack(">q", value)


def _int(value: int) -> bytes:
    return struct.pack(">i", value)


class HFileWriter:
    """Collects cells (in ascending key order), meta blocks and file info; ``finish`` returns the
    file's bytes.  One use: ``finish`` may be called once."""

    def __init__(self, settings: HFileSettings | None = None):
        self.settings = settings or HFileSettings()
        self._out: list[bytes] = []
        self._offset = 0
        self._block_cells: list[tuple[bytes, bytes]] = []
        self._block_estimate = 0
        self._total_estimate = 0
        self._index: list[tuple[bytes, int, int]] = []     # first key, offset, on-disk size
        self._first_data_offset = -1
        self._last_data_offset = 0
        self._entries = 0
        self._key_bytes = 0
        self._value_bytes = 0
        self._last_key = b""
        self._meta: dict[str, bytes] = {}
        self._meta_order: list[str] = []
        # Java's HashMap keeps the first place of a name put twice: track the put order
        self._info: dict[str, bytes] = {MAX_MVCC: _long(0)}
        self._info_order: list[str] = [MAX_MVCC]
        self._finished = False

    # -- input -----------------------------------------------------------------------------------
    def append(self, key: str, value: bytes) -> None:
        raw = key.encode("utf-8")
        if len(raw) > MAX_KEY_LENGTH:
            raise ValueError(f"HFile key of {len(raw)} bytes is longer than {MAX_KEY_LENGTH}: {key[:80]!r}")
        if raw < self._last_key:
            raise ValueError(f"HFile keys must ascend (UTF-8 byte order): {key!r} after "
                             f"{self._last_key.decode('utf-8', 'replace')!r}")
        self._last_key = raw
        self._key_bytes += len(raw)
        self._value_bytes += len(value)
        estimate = len(raw) + len(value) + _CELL_OVERHEAD_ESTIMATE
        last_in_block = self._block_cells[-1][0] if self._block_cells else b""
        if last_in_block != raw and self._block_estimate + estimate > self.settings.block_size:
            self._flush_data_block()
            self._block_estimate = 0
        self._block_cells.append((raw, bytes(value)))
        self._block_estimate += estimate
        self._total_estimate += estimate

    def add_file_info(self, name: str, value: bytes) -> None:
        if name not in self._info:
            self._info_order.append(name)
        self._info[name] = bytes(value)

    def add_meta_block(self, name: str, value: bytes) -> None:
        if name not in self._meta:
            self._meta_order.append(name)
        self._meta[name] = bytes(value)

    # -- output ----------------------------------------------------------------------------------
    def _write(self, chunk: bytes) -> None:
        self._out.append(chunk)
        self._offset += len(chunk)

    def _block(self, block_type: BlockType, data: bytes, previous_offset: int = -1) -> bytes:
        return encode_block(block_type, data, self.settings.compression, previous_offset, self.settings.gzip_os)

    def _flush_data_block(self) -> None:
        if not self._block_cells:
            return
        offset = self._offset
        if self._first_data_offset < 0:
            self._first_data_offset = offset
            previous = -1
        else:
            previous = offset          # Hudi's quirk: the block's own offset (module docstring)
        self._last_data_offset = offset
        self._entries += len(self._block_cells)
        body = b"".join(_cell(k, v) for k, v in self._block_cells)
        block = self._block(BlockType.DATA, body, previous)
        self._write(block)
        self._index.append((self._block_cells[0][0], offset, len(block)))
        self._block_cells = []

    def finish(self) -> bytes:
        if self._finished:
            raise RuntimeError("HFileWriter.finish called twice")
        self._finished = True
        self._flush_data_block()
        meta_index = []
        for name in java_hashmap_order(self._meta_order):
            offset = self._offset
            block = self._block(BlockType.META, self._meta[name])
            self._write(block)
            meta_index.append((name.encode("utf-8"), offset, len(block)))
        load_on_open = self._offset
        self._write(self._block(BlockType.ROOT_INDEX, b"".join(
            _long(o) + _int(s) + hadoop_vlong_bytes(len(k) + 2) + struct.pack(">h", len(k)) + k
            for k, o, s in self._index)))
        self._write(self._block(BlockType.ROOT_INDEX, b"".join(
            _long(o) + _int(s) + hadoop_vlong_bytes(len(k)) + k for k, o, s in meta_index)))
        file_info_offset = self._offset
        self._write(self._block(BlockType.FILE_INFO, self._file_info()))
        self._write(self._trailer(file_info_offset, load_on_open, len(meta_index)))
        return b"".join(self._out)

    def _file_info(self) -> bytes:
        entries = self._entries
        self.add_file_info(LAST_KEY, struct.pack(">h", len(self._last_key)) + self._last_key if self._last_key else b"")
        self.add_file_info(AVG_KEY_LEN, _int(self._key_bytes // entries if entries else 0))
        self.add_file_info(CREATE_TIME, _long(self.settings.creation_time_ms))
        self.add_file_info(AVG_VALUE_LEN, _int(self._value_bytes // entries if entries else 0))
        self.add_file_info(KEY_VALUE_VERSION, _int(1))
        message = b"".join(
            protobuf_bytes_field(1, protobuf_bytes_field(1, name.encode("utf-8")) + protobuf_bytes_field(2, self._info[name]))
            for name in java_hashmap_order(self._info_order))
        return PBUF_MAGIC + varint_bytes(len(message)) + message

    def _trailer(self, file_info_offset: int, load_on_open: int, meta_count: int) -> bytes:
        message = b"".join((
            protobuf_varint_field(_T_FILE_INFO, file_info_offset),
            protobuf_varint_field(_T_LOAD_ON_OPEN, load_on_open),
            protobuf_varint_field(_T_UNCOMPRESSED_INDEX, self._total_estimate),
            protobuf_varint_field(_T_DATA_INDEX_COUNT, len(self._index)),
            protobuf_varint_field(_T_META_INDEX_COUNT, meta_count),
            protobuf_varint_field(_T_ENTRIES, self._entries),
            protobuf_varint_field(_T_LEVELS, 1),
            protobuf_varint_field(_T_FIRST_DATA, self._first_data_offset),
            protobuf_varint_field(_T_LAST_DATA, self._last_data_offset),
            protobuf_bytes_field(_T_COMPARATOR, COMPARATOR_CLASS_NAME.encode("ascii")),
            protobuf_varint_field(_T_CODEC, int(self.settings.compression)),
        ))
        head = BlockType.TRAILER.value + varint_bytes(len(message)) + message
        if len(head) > TRAILER_SIZE - 4:
            raise ValueError(f"HFile trailer message of {len(message)} bytes does not fit in {TRAILER_SIZE} bytes")
        return head + bytes(TRAILER_SIZE - 1 - len(head)) + b"\x03"


def _cell(key: bytes, value: bytes) -> bytes:
    return b"".join((struct.pack(">iih", len(key) + 12, len(value), len(key)), key,
                     struct.pack(">bqb", 0, _LATEST_TIMESTAMP, _PUT), value, b"\x00"))


def write_hfile(cells, *, file_info=(), meta_blocks=(), settings: HFileSettings | None = None) -> bytes:
    """The bytes of an HFile holding ``cells`` ((key, value) pairs in ascending key order),
    ``file_info`` and ``meta_blocks`` ((name, value) pairs, in the order the caller would put
    them: it matters only between names that share a HashMap bucket)."""
    writer = HFileWriter(settings)
    for name, value in file_info:
        writer.add_file_info(name, value)
    for key, value in cells:
        writer.append(key, value)
    for name, value in meta_blocks:
        writer.add_meta_block(name, value)
    return writer.finish()
