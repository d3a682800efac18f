"""The HFile reader (``tablesvc.hfile``) on every HFile the carried Apache-Hudi tables hold (the
metadata tables' base files and the HFiles inside their HFILE_DATA log blocks), and damaged
copies of them: each damage is one ``CorruptHFileError`` naming the file and the byte offset."""

from __future__ import annotations

import gzip
import re
import struct

import pytest

from fixture_tables import all_fixture_names
from tablesvc.errors import CorruptHFileError, TablesvcError
from tablesvc.hfile import Compression, HFileReader
from tablesvc.hfile.blocks import HEADER_SIZE
from tablesvc.logformat import BlockType, block_keyed_records, parse_log_bytes


def _metadata_files(fixture_root, pattern: str) -> list:
    out = []
    for name in all_fixture_names():
        out += sorted((fixture_root.path(name) / ".hoodie" / "metadata").glob(pattern))
    return out


@pytest.fixture(scope="module")
def base_hfiles(fixture_root):
    files = _metadata_files(fixture_root, "*/*.hfile")
    assert len(files) >= 100      # every metadata partition of the six tables: files, column_stats, indexes
    return files


def _check(reader: HFileReader) -> int:
    cells = list(reader.cells())
    assert len(cells) == reader.entry_count
    keys = [c.key for c in cells]
    assert keys == sorted(keys, key=lambda k: k.encode())
    for cell in cells:
        assert reader.get(cell.key) == cell.value
    assert reader.get("\x00no such key") is None and reader.get("\U0010ffff") is None
    return len(cells)


def test_every_base_hfile_decodes(base_hfiles):
    total = 0
    for path in base_hfiles:
        reader = HFileReader(path.read_bytes(), str(path))
        assert reader.trailer.major_version == 3
        assert reader.trailer.compression in (Compression.GZ, Compression.NONE)
        total += _check(reader)
    assert total > 0


def test_every_hfile_data_block_decodes(fixture_root):
    blocks = 0
    for path in _metadata_files(fixture_root, "*/.*.log.*"):
        for block in parse_log_bytes(path.read_bytes(), str(path), raise_on_corrupt=True).blocks:
            if block.block_type == BlockType.HFILE_DATA:
                blocks += 1
                content = HFileReader(block.content, str(path), block.content_offset)
                _check(content)
                records = block_keyed_records(block, str(path))
                assert [r.key for r in records] == [c.key for c in content.cells()]
                assert all(isinstance(r.record.get("type"), int) for r in records)
    assert blocks >= 100


def _files_hfile(base_hfiles):
    return next(p for p in base_hfiles if p.parent.name == "files" and "00000000000000000" not in p.name)


def _error(data: bytes, path: str) -> str:
    with pytest.raises(CorruptHFileError) as caught:
        list(HFileReader(data, path).cells())
    message = str(caught.value)
    assert message.startswith(f"{path}: corrupt HFile at byte offset ") and "\n" not in message
    assert isinstance(caught.value, TablesvcError) and caught.value.exit_code == 1
    return message


def _offset(message: str) -> int:
    return int(re.search(r"at byte offset (\d+)", message).group(1))


def test_a_truncated_hfile_names_the_trailer(base_hfiles):
    path = _files_hfile(base_hfiles)
    data = path.read_bytes()
    for cut in (1, 100, len(data) - 10):
        message = _error(data[:-cut], str(path))
        assert _offset(message) in (0, len(data) - cut - 4096, len(data) - cut - 4)


def test_a_flipped_data_block_magic_names_the_block(base_hfiles):
    path = _files_hfile(base_hfiles)
    data = bytearray(path.read_bytes())
    assert data[:8] == b"DATABLK*"
    data[3] ^= 0x20
    message = _error(bytes(data), str(path))
    assert _offset(message) == 0 and "magic" in message


def test_bad_gzip_names_the_block_data(base_hfiles):
    path = _files_hfile(base_hfiles)
    data = bytearray(path.read_bytes())
    (with_header,) = struct.unpack_from(">i", data, 29)
    assert data[HEADER_SIZE:HEADER_SIZE + 2] == gzip.compress(b"")[:2]   # a gzip member starts the data
    for i in range(HEADER_SIZE + 12, with_header - 8):
        data[i] ^= 0xFF
    data[24] = 0      # checksum type NULL: the damage must reach the inflater, not the checksum
    message = _error(bytes(data), str(path))
    assert _offset(message) == HEADER_SIZE and "gzip" in message


def test_a_cell_overrunning_its_block_names_the_block(base_hfiles):
    """A cell length past its block (given to the cell decoder as the block's data)."""
    path = _files_hfile(base_hfiles)
    reader = HFileReader(path.read_bytes(), str(path))
    first = reader.data_index[0]
    body = reader._block(first.offset).data
    broken = struct.pack(">i", len(body) + 5) + body[4:]
    with pytest.raises(CorruptHFileError, match=r"at byte offset \d+: DATA block, data byte 0: cell"):
        list(_cells_of(reader, broken, first.offset))


def _cells_of(reader: HFileReader, body: bytes, offset: int):
    from tablesvc.hfile.blocks import Block, BlockType as HBlockType

    block = Block(offset, HBlockType.DATA, 0, body)
    reader._block = lambda *_a, **_k: block     # this reader's bytes stay; only the block is made up
    return reader._block_cells(reader.data_index[0])


def test_a_corrupt_hfile_in_a_log_block_names_the_log_file_and_its_offset(fixture_root):
    path = next(p for p in _metadata_files(fixture_root, "files/.*.log.*")
                if any(b.block_type == BlockType.HFILE_DATA for b in parse_log_bytes(p.read_bytes()).blocks))
    data = path.read_bytes()
    block = next(b for b in parse_log_bytes(data).blocks if b.block_type == BlockType.HFILE_DATA)
    damaged = bytearray(data)
    damaged[block.content_offset + 2] ^= 0x20          # the HFile's first block magic
    block = next(b for b in parse_log_bytes(bytes(damaged)).blocks if b.block_type == BlockType.HFILE_DATA)
    with pytest.raises(CorruptHFileError) as caught:
        block_keyed_records(block, str(path))
    assert str(caught.value).startswith(f"{path}: corrupt HFile at byte offset {block.content_offset}: ")


def test_a_damaged_byte_under_a_crc32c_checksum_names_its_chunk(base_hfiles):
    path = next(p for p in base_hfiles if p.read_bytes()[24] == 2)      # CRC32C, as HBase's writer sums
    data = bytearray(path.read_bytes())
    data[HEADER_SIZE + 3] ^= 0x01
    message = _error(bytes(data), str(path))
    assert _offset(message) == 0 and "checksum of chunk 0" in message
