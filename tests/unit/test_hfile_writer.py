"""The HFile writer (``tablesvc.hfile.writer``) and the HFILE_DATA block writer against Java's own
bytes: every HFile and metadata log block of the carried Apache-Hudi tables is decoded, its cells
written again with the same per-file values (codec, creation time, meta blocks, caller file info),
and the result must be the original bytes.

Two writers made the carried files.  Hudi 1.1+/1.2's native ``HFileWriterImpl`` (checksum type
NULL, HFile minor version 0) made every file of the v9 tables: those are compared byte for byte.
The v8 table's files were made by HBase's own writer, which Hudi 1.0 used (CRC32C checksums,
minor version 3, sorted file info, whole cell keys in the root index and in ``hfile.LASTKEY`` and
``hfile.AVG_KEY_LEN``, a total-uncompressed-bytes trailer field, the meta index chained to the
data index): tablesvc writes as 1.2 does, so those
are compared cell by cell and file-info entry by entry, and the test checks they are the HBase
kind (so that no native file hides among them).
"""

from __future__ import annotations

import io
import random
import struct

import fastavro
import pytest

from fixture_tables import all_fixture_names
from tablesvc.errors import LogFormatError
from tablesvc.hfile import Compression, HFileReader, HFileSettings, HFileWriter, write_hfile
from tablesvc.hfile.blocks import HEADER_SIZE, read_block
from tablesvc.hfile.java_hash_order import java_hashmap_order, java_string_hash
from tablesvc.logformat import (
    BlockType,
    KeyedRecord,
    LogBlock,
    block_deletes,
    block_keyed_records,
    delete_block,
    encode_block,
    hfile_data_block,
    parse_log_bytes,
    parse_avro_schema,
)

# HoodieAvroHFileWriter's order of appendFileInfo calls: schema when it opens, then (bloom filter
# on) minRecordKey, maxRecordKey, bloomFilterTypeCode when it closes
CALLER_FILE_INFO = ("schema", "minRecordKey", "maxRecordKey", "bloomFilterTypeCode")


def _metadata_files(fixture_root, pattern: str) -> list:
    out = []
    for name in all_fixture_names():
        out += sorted((fixture_root.path(name) / ".hoodie" / "metadata").glob(pattern))
    return out


def _is_native(data: bytes) -> bool:
    """Hudi's native writer: checksum type NULL in the first block, minor version 0."""
    return data[24] == 0 and data[-4] == 0


def _hfiles(fixture_root) -> list[tuple[str, bytes]]:
    """(where, bytes) of every base HFile and every HFile inside an HFILE_DATA block."""
    out = [(str(p), p.read_bytes()) for p in _metadata_files(fixture_root, "*/*.hfile")]
    for path in _metadata_files(fixture_root, "*/.*.log.*"):
        for block in parse_log_bytes(path.read_bytes(), str(path), raise_on_corrupt=True).blocks:
            if block.block_type == BlockType.HFILE_DATA:
                out.append((f"{path}@{block.offset}", block.content))
    return out


def _creation_time(reader: HFileReader) -> int:
    return struct.unpack(">q", reader.file_info["hfile.CREATE_TIME_TS"])[0]


def _rewrite(reader: HFileReader) -> bytes:
    return write_hfile(
        ((c.key, c.value) for c in reader.cells()),
        file_info=[(k, reader.file_info[k]) for k in CALLER_FILE_INFO if k in reader.file_info],
        meta_blocks=[(name, reader.meta_block(name)) for name in reader.meta_index],
        settings=HFileSettings(compression=reader.trailer.compression, creation_time_ms=_creation_time(reader)))


@pytest.fixture(scope="module")
def hfiles(fixture_root):
    return _hfiles(fixture_root)


def test_every_native_hfile_re_encodes_to_its_exact_bytes(hfiles):
    native = [(where, data) for where, data in hfiles if _is_native(data)]
    assert len(native) >= 300          # base files and log-block HFiles of the five v9 tables
    assert any(".hfile" in w and "@" not in w for w, _ in native) and any("@" in w for w, _ in native)
    assert any(HFileReader(d).entry_count == 0 for _, d in native)      # an empty record_index file
    assert any(HFileReader(d).meta_index for _, d in native)            # bloom filter meta blocks
    for where, data in native:
        out = _rewrite(HFileReader(data, where))
        assert out == data, f"{where}: first differing byte {_first_difference(out, data)}"


def test_hbase_written_hfiles_keep_their_cells_and_file_info(hfiles):
    hbase = [(where, data) for where, data in hfiles if not _is_native(data)]
    assert hbase and all("/v8_trips_8i3u1d/" in where for where, _ in hbase)
    for where, data in hbase:
        original = HFileReader(data, where)
        assert data[24] == 2 and data[-4] == 3          # CRC32C sums, minor version 3: HBase's writer
        again = HFileReader(_rewrite(original), where)
        assert [(c.key, c.value) for c in again.cells()] == [(c.key, c.value) for c in original.cells()]
        # same entries and values but the two where HBase counts the whole cell key (row + family
        # length + timestamp + type: 12 bytes more) and Hudi's writer the row alone
        mine, theirs = dict(again.file_info), dict(original.file_info)
        last = mine.pop("hfile.LASTKEY")
        if original.entry_count == 0:           # HBase leaves it out of a file without cells
            assert last == b"" and "hfile.LASTKEY" not in theirs
        else:
            assert last + b"\x00" + struct.pack(">q", (1 << 63) - 1) + b"\x04" == theirs.pop("hfile.LASTKEY")
        assert struct.unpack(">i", mine.pop("hfile.AVG_KEY_LEN"))[0] + (12 if original.entry_count else 0) == \
            struct.unpack(">i", theirs.pop("hfile.AVG_KEY_LEN"))[0]
        assert mine == theirs
        assert {n: again.meta_block(n) for n in again.meta_index} == {
            n: original.meta_block(n) for n in original.meta_index}


def _first_difference(a: bytes, b: bytes) -> int:
    return next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))


def test_every_hfile_data_block_re_encodes_to_its_exact_bytes(fixture_root):
    """The whole log block (framing, header, HFile) from its decoded records.  Java keeps the
    header in a HashMap keyed by enum constants (identity hashes: the order changes from one JVM
    to the next, both orders are in the fixtures), so the header order is taken from the original;
    tablesvc itself writes ascending key codes."""
    compared = hbase = 0
    for path in _metadata_files(fixture_root, "*/.*.log.*"):
        data = path.read_bytes()
        for block in parse_log_bytes(data, str(path), raise_on_corrupt=True).blocks:
            if block.block_type != BlockType.HFILE_DATA:
                continue
            content = HFileReader(block.content, str(path), block.content_offset)
            records = _named_records(content, block.schema)
            assert all(r.record["key"] == "" for r in records)          # Hudi writes the Avro key empty
            made = hfile_data_block(block.instant_time, block.schema, records,
                                    compression=content.trailer.compression,
                                    creation_time_ms=_creation_time(content))
            assert [k.name for k, _ in made.header] == ["INSTANT_TIME", "SCHEMA"]     # ascending codes
            assert sorted(made.header) == sorted(block.header)
            again = encode_block(LogBlock(made.block_type, block.header, made.content, made.footer))
            if _is_native(block.content):
                assert again == data[block.offset:block.end], f"{path}: block at {block.offset}"
                compared += 1
            else:
                assert block_keyed_records(parse_log_bytes(again).blocks[0]) == block_keyed_records(block)
                hbase += 1
    assert compared >= 200 and hbase > 0


def _named_records(content: HFileReader, schema_json: str) -> list[KeyedRecord]:
    """The block's records with each union branch named (``(name, value)``, fastavro's
    ``return_record_name``): the metadata record's min/max values are unions of one-field
    wrapper records (FloatWrapper, DoubleWrapper, ...) that a bare dict cannot tell apart."""
    schema = parse_avro_schema(schema_json)
    return [KeyedRecord(c.key, fastavro.schemaless_reader(io.BytesIO(c.value), schema, None, return_record_name=True))
            for c in content.cells()]


def test_metadata_delete_blocks_re_encode_with_the_delete_block_writer(fixture_root):
    """The metadata table's DELETE blocks (record_index and secondary-index keys, most of them
    empty) are what ``delete_block`` writes: no new writer is needed for them."""
    compared = with_keys = 0
    for path in _metadata_files(fixture_root, "*/.*.log.*"):
        data = path.read_bytes()
        for block in parse_log_bytes(data, str(path), raise_on_corrupt=True).blocks:
            if block.block_type != BlockType.DELETE:
                continue
            deletes = block_deletes(block, str(path))
            made = delete_block(block.instant_time, block.schema, [(d.record_key, d.partition_path) for d in deletes])
            assert encode_block(LogBlock(made.block_type, block.header, made.content)) == data[block.offset:block.end]
            compared += 1
            with_keys += bool(deletes)
    assert compared >= 150 and with_keys > 0


# -- several data blocks -------------------------------------------------------------------------

def _cells(count: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    keys = sorted({f"{rng.randrange(10**12):012d}/{rng.choice(['ü', 'x', '日本'])}" for _ in range(count)},
                  key=lambda k: k.encode())
    return [(k, rng.randbytes(rng.randrange(20, 400))) for k in keys]


@pytest.mark.parametrize("compression", [Compression.GZ, Compression.NONE])
def test_a_big_hfile_spans_data_blocks_and_reads_back(compression):
    cells = _cells(25_000, 7)
    data = write_hfile(cells, file_info=[("schema", b"{}")],
                       settings=HFileSettings(compression=compression, creation_time_ms=1))
    assert len(data) > (4_000_000 if compression is Compression.NONE else 3_000_000)
    reader = HFileReader(data, "big.hfile")
    assert len(reader.data_index) >= 4 and reader.trailer.index_levels == 1
    assert [(c.key, c.value) for c in reader.cells()] == cells
    for key, value in cells[::997]:
        assert reader.get(key) == value
    assert reader.get("0") is None and reader.schema == "{}"
    for entry in reader.data_index:       # each block stays within the 1 MiB size Hudi estimates
        block = read_block(data, entry.offset, compression)
        assert block.on_disk_size == entry.size and len(block.data) <= 1024 * 1024 + 22


def test_a_key_written_twice_never_straddles_two_blocks():
    value = bytes(300)
    cells = [(f"k{i:03d}", value) for i in range(10)] + [("k009", value)] * 5 + [("k010", value)]
    reader = HFileReader(write_hfile(cells, settings=HFileSettings(block_size=1000, creation_time_ms=0)))
    blocks = [[c.key for c in reader._block_cells(e)] for e in reader.data_index]
    assert [k for b in blocks for k in b] == [k for k, _ in cells]
    holding = [i for i, b in enumerate(blocks) if "k009" in b]
    assert len(holding) == 1 and blocks[holding[0]].count("k009") == 6


def test_the_gzip_os_byte_follows_the_setting():
    """0 as Java up to 15 writes it (every carried file), 255 as Java 16+ (JDK-8244706)."""
    for os_byte in (0, 255):
        data = write_hfile([("k", b"v")], settings=HFileSettings(creation_time_ms=0, gzip_os=os_byte))
        assert data[HEADER_SIZE:HEADER_SIZE + 10] == bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, os_byte])
        assert [(c.key, c.value) for c in HFileReader(data).cells()] == [("k", b"v")]


def test_an_empty_hfile_has_no_data_block_and_reads_back():
    data = write_hfile([], file_info=[("schema", b"{}")], settings=HFileSettings(creation_time_ms=5))
    reader = HFileReader(data)
    assert list(reader.cells()) == [] and reader.get("a") is None
    assert data[:8] == b"IDXROOT2" and reader.file_info["hfile.LASTKEY"] == b""


def test_bad_writer_input_is_refused():
    writer = HFileWriter(HFileSettings(creation_time_ms=0))
    writer.append("b", b"1")
    with pytest.raises(ValueError, match="ascend"):
        writer.append("a", b"2")
    with pytest.raises(ValueError, match="SNAPPY"):
        HFileSettings(compression=Compression.SNAPPY)
    with pytest.raises(ValueError, match="gzip OS byte 3"):
        HFileSettings(gzip_os=3)
    with pytest.raises(ValueError, match="longer than"):
        HFileWriter().append("x" * 40_000, b"")
    schema = '{"type":"record","name":"R","fields":[{"name":"key","type":"string"},{"name":"v","type":"int"}]}'
    with pytest.raises(LogFormatError, match="'a' given twice"):
        hfile_data_block("1", schema, [KeyedRecord("a", {"key": "a", "v": 1}), KeyedRecord("a", {"key": "a", "v": 2})])
    with pytest.raises(LogFormatError, match="'b' does not encode"):
        hfile_data_block("1", schema, [KeyedRecord("b", {"key": "b", "v": "nope"})])


def test_a_new_hfile_data_block_reads_back_sorted_with_empty_avro_keys():
    schema = '{"type":"record","name":"R","fields":[{"name":"key","type":"string"},{"name":"v","type":"int"}]}'
    block = hfile_data_block("20250101000000000", schema,
                             [KeyedRecord(k, {"key": k, "v": i}) for i, k in enumerate(["b", "é", "a"])])
    assert [k.name for k, _ in block.header] == ["INSTANT_TIME", "SCHEMA"]
    back = parse_log_bytes(encode_block(block)).blocks[0]
    assert [(r.key, r.record) for r in block_keyed_records(back)] == [
        ("a", {"key": "", "v": 2}), ("b", {"key": "", "v": 0}), ("é", {"key": "", "v": 1})]
    assert HFileReader(back.content).schema == schema
    assert back.content[:8] == b"DATABLK*" and back.content[HEADER_SIZE:HEADER_SIZE + 2] == b"\x1f\x8b"


# -- Java's HashMap order ------------------------------------------------------------------------

def test_java_string_hash_matches_java():
    # values of "".hashCode(), "hello".hashCode(), "polygenelubricants".hashCode() (Integer.MIN_VALUE)
    # and a character outside the BMP (two UTF-16 units) as Java computes them
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == 0x80000000
    assert java_string_hash("\U0001F600") == (0xD83D * 31 + 0xDE00)


def test_java_hashmap_order_resizes_like_java():
    keys = [f"k{i}" for i in range(40)]
    order = java_hashmap_order(keys)
    assert sorted(order) == sorted(keys)
    # 40 keys: the table doubled from 16 to 64 buckets; order by bucket, then insertion
    spread = {k: (java_string_hash(k) ^ (java_string_hash(k) >> 16)) & 63 for k in keys}
    assert order == sorted(keys, key=lambda k: (spread[k], keys.index(k)))
    assert java_hashmap_order(["a", "b", "a"]) == java_hashmap_order(["a", "b"])
