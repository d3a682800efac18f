"""Reading an HFile (version 3, as Hudi's metadata table writes it): the trailer, the block
index (one root level, or root + intermediate + leaf levels), the file info, meta blocks, and
the cells of the data blocks, by key or all in key order.

Layout (Hudi's ``hudi-io`` README, package ``org.apache.hudi.io.hfile``; docs/metadata-table.md):

* **Trailer**, the last 4096 bytes: magic ``TRABLK"$``, a varint-length-prefixed
  ``TrailerProto`` (offsets of the load-on-open section and the file info, entry and index
  counts, index levels, compression codec), and the version in the last 4 bytes (minor in the
  first byte, major, 3, in the other three).
* **Load-on-open section** at ``load_on_open_data_offset``: the root data index block
  (``IDXROOT2``: per entry a long block offset, an int on-disk size, a vlong key length and the
  key), the meta index block (the same format, keyed by meta block name), the file info block
  (``FILEINF2``: ``PBUF`` then a length-prefixed ``InfoProto`` of byte pairs).
* With more than one index level the root entries point at intermediate (``IDXINTE2``) and
  then leaf (``IDXLEAF2``) blocks: an int entry count, count + 1 int offsets of the entries,
  then per entry a long block offset, an int size and the key bytes (no length prefix).
* **Data blocks** (``DATABLK*``) hold cells end to end: int key length, int value length, the
  key (a short row length, the row, then family, qualifier, timestamp and type, which Hudi does
  not use), the value, and a vlong MVCC timestamp when ``KEY_VALUE_VERSION`` is 1.  Hudi's
  key is the row, a UTF-8 record key; cells are sorted by it.

Any inconsistency (a size past the end, a wrong magic, gzip that does not inflate, a cell that
overruns its block, fewer cells than the trailer counts) is one ``CorruptHFileError`` naming
the file and the absolute byte offset.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from tablesvc.errors import CorruptHFileError
from tablesvc.hfile.blocks import (
    SUPPORTED_COMPRESSION,
    Block,
    BlockError,
    BlockType,
    Compression,
    read_block,
)
from tablesvc.hfile.wire import WireError, delimited_message, hadoop_vlong, protobuf_fields

TRAILER_SIZE = 4096
MAJOR_VERSION = 3
PBUF_MAGIC = b"PBUF"
FILE_INFO_KEY_VALUE_VERSION = "KEY_VALUE_VERSION"
FILE_INFO_MAX_MVCC = "MAX_MEMSTORE_TS_KEY"
FILE_INFO_SCHEMA = "schema"          # Hudi: the Avro schema of the values
_CELL_HEADER = struct.Struct(">ii")
_INDEX_ENTRY = struct.Struct(">qi")

# TrailerProto field numbers
_FILE_INFO_OFFSET, _LOAD_ON_OPEN, _DATA_INDEX_COUNT, _META_INDEX_COUNT = 1, 2, 5, 6
_ENTRY_COUNT, _INDEX_LEVELS, _FIRST_DATA_BLOCK, _LAST_DATA_BLOCK, _CODEC = 7, 8, 9, 10, 12


@dataclass(frozen=True)
class Trailer:
    major_version: int
    minor_version: int
    file_info_offset: int
    load_on_open_offset: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    compression: Compression


@dataclass(frozen=True)
class IndexEntry:
    offset: int
    size: int
    key: bytes          # the row (data index: the key's content; meta index: the block name)


@dataclass(frozen=True)
class Cell:
    key: str            # the record key
    value: bytes        # for the metadata table, one Avro-binary HoodieMetadataRecord
    offset: int         # absolute offset of the cell in its file


class HFileReader:
    """One HFile's bytes.  ``path`` and ``origin`` (where these bytes start in that file: an HFile
    inside a log block starts at the block's content) only word the errors."""

    def __init__(self, data: bytes, path: str = "<bytes>", origin: int = 0):
        self.data = data
        self.path = path
        self.origin = origin
        self.trailer = self._trailer()
        if self.trailer.compression not in SUPPORTED_COMPRESSION:
            raise self._error(len(data) - TRAILER_SIZE, f"compression {self.trailer.compression.name} is not "
                                                        "supported (NONE and GZ are)")
        root = self._block(self.trailer.load_on_open_offset, BlockType.ROOT_INDEX)
        roots = self._root_entries(root, self.trailer.data_index_count, data_index=True)
        self.data_index: tuple[IndexEntry, ...] = tuple(self._leaf_entries(roots, self.trailer.index_levels))
        meta = self._block(root.offset + root.on_disk_size, BlockType.ROOT_INDEX)
        self.meta_index = {e.key.decode("utf-8", "replace"): e
                           for e in self._root_entries(meta, self.trailer.meta_index_count, data_index=False)}
        self.file_info = self._file_info()
        version = self.file_info.get(FILE_INFO_KEY_VALUE_VERSION)
        self._mvcc = version is not None and len(version) == 4 and int.from_bytes(version, "big") == 1

    # -- errors ----------------------------------------------------------------------------------
    def _error(self, position: int, reason: str) -> CorruptHFileError:
        return CorruptHFileError(f"{self.path}: corrupt HFile at byte offset {self.origin + position}: {reason}")

    def _block(self, offset: int, *expect: BlockType) -> Block:
        try:
            return read_block(self.data, offset, self.trailer.compression, expect)
        except BlockError as exc:
            raise self._error(exc.position, exc.reason) from None

    # -- load on open ----------------------------------------------------------------------------
    def _trailer(self) -> Trailer:
        data = self.data
        if len(data) < TRAILER_SIZE:
            raise self._error(0, f"{len(data)} bytes, shorter than the {TRAILER_SIZE}-byte trailer")
        at = len(data) - TRAILER_SIZE
        if data[at:at + 8] != BlockType.TRAILER.value:
            raise self._error(at, f"no trailer magic (found {bytes(data[at:at + 8])!r})")
        minor, major = data[-4], int.from_bytes(data[-3:], "big")
        if major != MAJOR_VERSION:
            raise self._error(len(data) - 4, f"HFile version {major}.{minor}; only version 3 is read")
        try:
            start, end = delimited_message(data, at + 8)
            if end > len(data) - 4:
                raise WireError(at + 8, "trailer message overlaps the version")
            fields = {n: v for n, v, _ in protobuf_fields(data, start, end)}
        except WireError as exc:
            raise self._error(exc.position, f"trailer: {exc.reason}") from None

        def num(number: int, default: int = 0) -> int:
            value = fields.get(number, default)
            if not isinstance(value, int):
                raise self._error(at, f"trailer field {number} is not a number")
            return value
        try:
            codec = Compression(num(_CODEC, int(Compression.NONE)))
        except ValueError:
            raise self._error(at, f"trailer: unknown compression codec {fields.get(_CODEC)}") from None
        trailer = Trailer(major, minor, num(_FILE_INFO_OFFSET), num(_LOAD_ON_OPEN), num(_DATA_INDEX_COUNT),
                          num(_META_INDEX_COUNT), num(_ENTRY_COUNT), num(_INDEX_LEVELS, 1),
                          num(_FIRST_DATA_BLOCK), num(_LAST_DATA_BLOCK), codec)
        # (the data block offsets are -1, as unsigned, in a file without cells: not checked)
        for name in ("file_info_offset", "load_on_open_offset"):
            if getattr(trailer, name) > at:
                raise self._error(at, f"trailer: {name} {getattr(trailer, name)} is past the trailer ({at})")
        return trailer

    def _root_entries(self, block: Block, count: int, data_index: bool) -> list[IndexEntry]:
        body, pos, out = block.data, 0, []
        where = block.offset
        try:
            for _ in range(count):
                if pos + _INDEX_ENTRY.size > len(body):
                    raise WireError(pos, "index entry past the end of its block")
                offset, size = _INDEX_ENTRY.unpack_from(body, pos)
                length, pos = hadoop_vlong(body, pos + _INDEX_ENTRY.size)
                if length < 0 or pos + length > len(body):
                    raise WireError(pos, f"index key of {length} bytes past the end of its block")
                key = bytes(body[pos:pos + length])
                pos += length
                out.append(IndexEntry(offset, size, self._row(key, where) if data_index else key))
        except WireError as exc:
            raise self._error(where, f"{block.block_type.name} block, data byte {exc.position}: {exc.reason}") from None
        return out

    def _leaf_entries(self, entries: list[IndexEntry], levels: int) -> list[IndexEntry]:
        """Down the intermediate and leaf levels to the entries that point at data blocks."""
        for level in range(1, max(levels, 1)):
            below = []
            leaf = level == levels - 1
            for entry in entries:
                block = self._block(entry.offset, BlockType.LEAF_INDEX if leaf else BlockType.INTERMEDIATE_INDEX)
                below += self._non_root_entries(block)
            entries = below
        return entries

    def _non_root_entries(self, block: Block) -> list[IndexEntry]:
        body = block.data
        bad = self._error(block.offset, f"{block.block_type.name} block: entries overrun its data")
        if len(body) < 4:
            raise bad
        (count,) = struct.unpack_from(">i", body, 0)
        first = 4 + 4 * (count + 1)
        if count < 0 or first > len(body):
            raise bad
        starts = struct.unpack_from(f">{count + 1}i", body, 4)
        out = []
        for i in range(count):
            at, end = first + starts[i], first + starts[i + 1]
            if not (first <= at and at + _INDEX_ENTRY.size <= end <= len(body)):
                raise bad
            offset, size = _INDEX_ENTRY.unpack_from(body, at)
            out.append(IndexEntry(offset, size, self._row(bytes(body[at + _INDEX_ENTRY.size:end]), block.offset)))
        return out

    def _row(self, key: bytes, where: int) -> bytes:
        """The row of a cell key: a short length, then that many bytes."""
        if len(key) < 2:
            raise self._error(where, f"key of {len(key)} bytes has no row length")
        length = int.from_bytes(key[:2], "big")
        if 2 + length > len(key):
            raise self._error(where, f"key row of {length} bytes overruns its {len(key)}-byte key")
        return key[2:2 + length]

    def _file_info(self) -> dict[str, bytes]:
        block = self._block(self.trailer.file_info_offset, BlockType.FILE_INFO)
        if block.data[:4] != PBUF_MAGIC:
            raise self._error(block.offset, "file info block does not start with PBUF")
        info: dict[str, bytes] = {}
        try:
            start, end = delimited_message(block.data, 4)
            for number, pair, _ in protobuf_fields(block.data, start, end):
                if number != 1 or not isinstance(pair, bytes):
                    continue
                kv = {n: v for n, v, _ in protobuf_fields(pair)}
                key, value = kv.get(1, b""), kv.get(2, b"")
                if isinstance(key, bytes) and isinstance(value, bytes):
                    info[key.decode("utf-8", "replace")] = value
        except WireError as exc:
            raise self._error(block.offset, f"file info, data byte {exc.position}: {exc.reason}") from None
        return info

    # -- queries ---------------------------------------------------------------------------------
    @property
    def entry_count(self) -> int:
        return self.trailer.entry_count

    @cached_property
    def schema(self) -> str | None:
        """The Avro schema Hudi keeps in the file info (``schema``), when there is one."""
        raw = self.file_info.get(FILE_INFO_SCHEMA)
        return raw.decode("utf-8") if raw is not None else None

    def meta_block(self, name: str) -> bytes | None:
        entry = self.meta_index.get(name)
        return None if entry is None else self._block(entry.offset, BlockType.META).data

    def cells(self) -> Iterator[Cell]:
        """Every cell, in key order (a full scan of the data blocks)."""
        seen = 0
        for entry in self.data_index:
            for cell in self._block_cells(entry):
                seen += 1
                yield cell
        if seen != self.trailer.entry_count:
            raise self._error(len(self.data) - TRAILER_SIZE, f"the data blocks hold {seen} cells, the trailer "
                                                             f"counts {self.trailer.entry_count}")

    def get(self, key: str) -> bytes | None:
        """The value of ``key`` (the first cell with it), or None: one data block is read, the last
        whose first key is at or before ``key``."""
        want = key.encode("utf-8")
        firsts = [e.key for e in self.data_index]
        i = bisect_right(firsts, want) - 1
        if i < 0:
            return None
        for cell in self._block_cells(self.data_index[i]):
            row = cell.key.encode("utf-8")
            if row == want:
                return cell.value
            if row > want:
                return None
        return None

    def _block_cells(self, entry: IndexEntry) -> Iterator[Cell]:
        block = self._block(entry.offset, BlockType.DATA)
        body, pos, base = block.data, 0, block.offset
        while pos < len(body):
            if pos + _CELL_HEADER.size > len(body):
                raise self._error(base, f"DATA block, data byte {pos}: cell header past the end of the block")
            key_len, value_len = _CELL_HEADER.unpack_from(body, pos)
            key_at = pos + _CELL_HEADER.size
            value_at = key_at + key_len
            end = value_at + value_len
            if key_len < 2 or value_len < 0 or end > len(body):
                raise self._error(base, f"DATA block, data byte {pos}: cell of key {key_len} and value "
                                        f"{value_len} bytes overruns the block ({len(body)} bytes)")
            row = self._row(bytes(body[key_at:value_at]), base)
            try:
                text = row.decode("utf-8")
            except UnicodeDecodeError:
                raise self._error(base, f"DATA block, data byte {pos}: key is not UTF-8") from None
            yield Cell(text, bytes(body[value_at:end]), self.origin + base)
            pos = end
            if self._mvcc:
                try:
                    _ts, pos = hadoop_vlong(body, pos)
                except WireError as exc:
                    raise self._error(base, f"DATA block, data byte {exc.position}: MVCC timestamp: "
                                            f"{exc.reason}") from None


def read_hfile(storage, path: str) -> HFileReader:
    """The HFile at ``path`` of a ``Storage`` (``FileNotFoundError`` when it is absent)."""
    return HFileReader(storage.read_bytes(path), path)
