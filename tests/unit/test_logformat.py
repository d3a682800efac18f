"""Hudi log format: framing, contents, corruption handling, builders, hudi-rs compatibility."""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import random
import shutil
import struct
import zipfile
from decimal import Decimal
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from tablesvc.errors import CorruptLogBlockError, LogFormatError
from tablesvc.logformat import (
    MAGIC,
    BlockType,
    CorruptBlock,
    DeleteRecord,
    HeaderKey,
    LogBlock,
    avro_data_block,
    avro_schema_to_arrow,
    block_deletes,
    block_records,
    block_table,
    decode_avro_records,
    decode_delete_records,
    decode_parquet,
    decode_to_arrow,
    delete_block,
    encode_avro_records,
    encode_block,
    encode_blocks,
    encode_delete_records,
    iter_blocks,
    parquet_data_block,
    parse_log_bytes,
    read_log_file,
    records_to_arrow,
    rollback_block,
    with_compacted_block_times,
    write_log_file,
)
from tablesvc.logformat import avro_columnar
from tablesvc.logformat.avro_content import record_spans
from tablesvc.storage.local import LocalStorage
from fixture_tables import LOG_FILES_DIR, TABLES_DIR, ZIPS_DIR, copy_table, zip_names



def _is_log_name(name: str) -> bool:
    return name.startswith(".") and ".log." in name


def _extracted_log_files() -> list[Path]:
    found = []
    for base in (LOG_FILES_DIR, TABLES_DIR):
        if base.is_dir():
            for root, _dirs, files in os.walk(base):
                found += [Path(root) / f for f in files if _is_log_name(f)]
    return sorted(found)


EXTRACTED_LOGS = _extracted_log_files()
AVRO_LOG = next(LOG_FILES_DIR.glob("valid_log_avro_data/.*.log.*"))
DELETE_LOG = next(LOG_FILES_DIR.glob("valid_log_delete/.*.log.*"))
PARQUET_LOG = next(LOG_FILES_DIR.glob("valid_log_parquet_data/.*.log.*"))
ROLLBACK_LOG = next(LOG_FILES_DIR.glob("valid_log_rollback/.*.log.*"))
TRIPS_8I1U = TABLES_DIR / "v6_trips_8i1u"
TRIPS_UPDATE_LOG = next(TRIPS_8I1U.glob("city=san_francisco/.*.log.*"))


def _check_whole_file(data: bytes, path: str) -> dict[BlockType, int]:
    """Frames, round-trips and decodes one real log file; returns block counts per type."""
    result = parse_log_bytes(data, path)
    assert result.corrupt == (), result.describe_corrupt()
    assert result.size == len(data)
    # Blocks tile the file: each starts where the previous ended, the last ends at EOF.
    expected_offset = 0
    for block in result.blocks:
        assert block.offset == expected_offset
        assert encode_block(block) == data[block.offset:block.end]
        expected_offset = block.end
    assert expected_offset == len(data)
    assert encode_blocks(result.blocks) == data

    counts: dict[BlockType, int] = {}
    for block in result.blocks:
        counts[block.block_type] = counts.get(block.block_type, 0) + 1
        if block.block_type == BlockType.AVRO_DATA:
            records = block_records(block, path)
            assert encode_avro_records(records, block.schema) == block.content
            table = block_table(block, path)
            # The columnar codec (where the schema allows) agrees with fastavro both ways.
            assert _same_rows(table, records_to_arrow(records, block.schema))
            assert encode_avro_records(table, block.schema) == block.content
        elif block.block_type == BlockType.DELETE:
            deletes = block_deletes(block, path)
            assert encode_delete_records(deletes) == block.content
        elif block.block_type == BlockType.PARQUET_DATA:
            table = block_table(block, path)
            assert table.num_rows > 0
            # The Avro SCHEMA header maps to exactly the Arrow schema Spark wrote into the parquet.
            assert avro_schema_to_arrow(block.schema).equals(table.schema.remove_metadata())
        elif block.block_type == BlockType.HFILE_DATA:
            # Metadata-table HFiles are not decoded here; their framing is checked above.
            assert ".hoodie/metadata/" in path.replace(os.sep, "/")
            assert block.content.startswith(b"DATABLK*")
        elif block.block_type == BlockType.COMMAND:
            assert block.is_rollback and block.content == b""
        else:
            pytest.fail(f"{path}: unexpected block type {block.block_type.name}")
    return counts


def _normalised(value):
    """A value with floats by their repr, so NaN equals NaN and -0.0 differs from 0.0."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {k: _normalised(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalised(v) for v in value]
    return value


def _same_rows(a: pa.Table, b: pa.Table) -> bool:
    """Same schema and values (``Table.equals`` but NaN-aware and sign-of-zero-aware)."""
    return a.schema.equals(b.schema) and _normalised(a.to_pylist()) == _normalised(b.to_pylist())


# -- every real log file -----------------------------------------------------------------------

def test_fixture_inventory_is_not_empty():
    assert len(EXTRACTED_LOGS) >= 100
    assert len(zip_names()) >= 5


@pytest.mark.parametrize("path", EXTRACTED_LOGS, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_extracted_log_file_round_trips(path: Path):
    _check_whole_file(path.read_bytes(), str(path))


@pytest.mark.parametrize("stem", zip_names())
def test_zipped_log_files_round_trip(stem, fixture_root):
    table = fixture_root.path(f"zips:{stem}")
    logs = [Path(r) / f for r, _d, files in os.walk(table) for f in files if _is_log_name(f)]
    with zipfile.ZipFile(ZIPS_DIR / f"{stem}.zip") as zf:
        in_zip = [n for n in zf.namelist() if _is_log_name(n.rsplit("/", 1)[-1]) and not n.startswith("__MACOSX")]
    assert len(logs) == len(in_zip)  # the no-meta-fields parquet table has no logs at all
    totals: dict[BlockType, int] = {}
    for log in logs:
        for kind, n in _check_whole_file(log.read_bytes(), str(log)).items():
            totals[kind] = totals.get(kind, 0) + n
    assert totals.get(BlockType.HFILE_DATA, 0) > 0 or not logs


# -- known values --------------------------------------------------------------------------------

def test_avro_fixture_values():
    data = AVRO_LOG.read_bytes()
    (block,) = parse_log_bytes(data, str(AVRO_LOG)).blocks
    assert block.block_type == BlockType.AVRO_DATA
    assert block.instant_time == "20250316025828811"
    assert [k for k, _ in block.header] == [HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA]
    assert block.content[:8] == struct.pack(">ii", 3, 1)
    (record,) = block_records(block)
    assert record["_hoodie_commit_time"] == "20250316025828811"
    assert record["rider"] == "rider-A" and record["fare"] == 29.1
    assert block.size == len(data) == 1172


def test_delete_fixture_values():
    data = DELETE_LOG.read_bytes()
    (block,) = parse_log_bytes(data).blocks
    assert block.block_type == BlockType.DELETE
    assert block.instant_time == "20250618054714114"
    # Java wrote SCHEMA before INSTANT_TIME (HashMap order); the round trip must keep that.
    assert [k for k, _ in block.header] == [HeaderKey.SCHEMA, HeaderKey.INSTANT_TIME]
    deletes = block_deletes(block)
    assert [d.record_key for d in deletes] == [
        "e96c4396-3fad-413a-a942-4cb36106d721",
        "9909a8b1-2d15-4d3d-8ec9-efc48c536a00",
        "334e26e9-8355-45cc-97c6-c31daf0df330",
    ]
    assert {d.partition_path for d in deletes} == {"city=san_francisco"}
    assert {(d.ordering_index, d.ordering_value) for d in deletes} == {(2, 0)}
    payload = block.content[8:]
    assert struct.unpack(">ii", block.content[:8]) == (3, len(payload))
    assert payload[0] == 0x06  # one array block of 3 items
    assert payload.endswith(b"\x04\x00\x00")  # orderingVal branch 2, value 0, end of array
    # Our builder writes the same content for the same keys.
    rebuilt = delete_block("20250618054714114", block.schema, [(d.record_key, d.partition_path) for d in deletes])
    assert rebuilt.content == block.content


def test_rollback_fixture_values():
    data = ROLLBACK_LOG.read_bytes()
    assert len(data) == 105
    (block,) = parse_log_bytes(data).blocks
    assert block.block_type == BlockType.COMMAND and block.is_rollback
    assert block.instant_time == "20250126040936578"
    assert block.target_instant_time == "20250126040826878"
    assert block.header == (
        (HeaderKey.INSTANT_TIME, "20250126040936578"),
        (HeaderKey.COMMAND_BLOCK_TYPE, "0"),
        (HeaderKey.TARGET_INSTANT_TIME, "20250126040826878"),
    )
    assert block.block_length == 91 == struct.unpack(">q", data[6:14])[0]
    assert struct.unpack(">q", data[-8:])[0] == 97
    built = rollback_block("20250126040936578", "20250126040826878")
    assert [k for k, _ in built.header] == [HeaderKey.INSTANT_TIME, HeaderKey.TARGET_INSTANT_TIME,
                                            HeaderKey.COMMAND_BLOCK_TYPE]
    assert len(encode_block(built)) == 105
    assert sorted(built.header) == sorted(block.header)


def test_update_log_has_rider_d_fare_25():
    (block,) = read_log_file(LocalStorage(), str(TRIPS_UPDATE_LOG)).blocks
    assert block.instant_time == "20250331030645735"
    table = block_table(block)
    rows = {r["rider"]: r["fare"] for r in table.to_pylist()}
    assert rows == {"rider-D": 25.0}


def test_update_log_rebuilt_byte_for_byte():
    data = TRIPS_UPDATE_LOG.read_bytes()
    (block,) = parse_log_bytes(data).blocks
    rebuilt = avro_data_block(block.instant_time, block.schema, block_records(block))
    assert encode_block(rebuilt) == data


def test_parquet_fixture_values():
    (block,) = parse_log_bytes(PARQUET_LOG.read_bytes()).blocks
    assert block.block_type == BlockType.PARQUET_DATA
    assert block.instant_time == "20250113230424191"
    assert block.content.startswith(b"PAR1") and block.content.endswith(b"PAR1")
    assert block_table(block).num_rows >= 1


def test_v9_decimal_and_timestamp_values():
    log = next(TABLES_DIR.glob("v9_txns_simple_nometa/region=apac/.*.log.*"))
    (block,) = parse_log_bytes(log.read_bytes()).blocks
    table = block_table(block)
    assert table.schema.field("fee_amount").type == pa.decimal128(10, 2)
    assert table.schema.field("txn_datetime").type == pa.timestamp("us", tz="UTC")
    (row,) = table.to_pylist()
    assert row["txn_id"] == "TXN-007" and row["fee_amount"] == Decimal("75.00")


# -- corruption ------------------------------------------------------------------------------------

def _two_block_file() -> tuple[bytes, int]:
    first = TRIPS_UPDATE_LOG.read_bytes()
    return first + DELETE_LOG.read_bytes(), len(first)


def _split(data: bytes, path: str = "f") -> tuple[list[LogBlock], list[CorruptBlock]]:
    items = list(iter_blocks(data, path))
    return [b for b in items if isinstance(b, LogBlock)], [c for c in items if isinstance(c, CorruptBlock)]


def test_zero_length_file_has_no_blocks():
    assert list(iter_blocks(b"", "empty")) == []
    result = parse_log_bytes(b"", "empty", raise_on_corrupt=True)
    assert result.blocks == () and result.corrupt == () and result.ok


@pytest.mark.parametrize("cut", [1, 13, 14, 200, -9, -1])
def test_truncated_second_block(cut):
    data, first_len = _two_block_file()
    end = first_len + cut if cut > 0 else len(data) + cut
    blocks, corrupt = _split(data[:end])
    assert [b.offset for b in blocks] == [0]
    assert encode_block(blocks[0]) == data[:first_len]
    assert corrupt == [CorruptBlock(first_len, end - first_len, corrupt[0].reason)]


def test_truncated_only_block():
    data = DELETE_LOG.read_bytes()[:500]
    blocks, corrupt = _split(data)
    assert blocks == [] and [(c.offset, c.length) for c in corrupt] == [(0, 500)]
    assert "block length" in corrupt[0].reason


# Where to damage the first block: (offset inside the block, what the reason must mention).
_FLIPS = {
    "block_length": (10, "block length"),
    "version": (17, "version"),
    "type": (21, "type"),
    "header_count": (24, "header count"),
    "header_value_length": (31, "header value length"),
    "reverse_pointer": (-3, "reverse pointer"),
}


@pytest.mark.parametrize("field", sorted(_FLIPS))
def test_flipped_frame_bytes_resync_to_second_block(field):
    data, first_len = _two_block_file()
    where, mention = _FLIPS[field]
    pos = where if where >= 0 else first_len + where
    damaged = bytearray(data)
    damaged[pos] ^= 0x5A
    blocks, corrupt = _split(bytes(damaged))
    assert [(c.offset, c.length) for c in corrupt] == [(0, first_len)]
    assert mention in corrupt[0].reason
    assert [b.offset for b in blocks] == [first_len]
    assert blocks[0].block_type == BlockType.DELETE and blocks[0].instant_time == "20250618054714114"


def test_flipped_content_length_in_middle_is_detected():
    data, first_len = _two_block_file()
    (block,) = parse_log_bytes(data[:first_len]).blocks
    header_bytes = 4 + sum(8 + len(v.encode()) for _, v in block.header)
    pos = 6 + 8 + 4 + 4 + header_bytes + 6  # low bytes of the int64 content length
    damaged = bytearray(data)
    damaged[pos] ^= 0x01
    blocks, corrupt = _split(bytes(damaged))
    assert [(c.offset, c.length) for c in corrupt] == [(0, first_len)]
    assert [b.offset for b in blocks] == [first_len]


def test_flipped_content_byte_is_a_decode_error_not_framing():
    data = DELETE_LOG.read_bytes()
    (block,) = parse_log_bytes(data).blocks
    damaged = bytearray(data)
    damaged[block.end - 8 - 4 - 1] = 0x05  # the final end-of-array byte of the delete payload
    (bad,) = parse_log_bytes(bytes(damaged), "d.log").blocks  # no checksum: framing still fine
    with pytest.raises(LogFormatError, match=r"d\.log: DELETE block at offset 0.*content offset"):
        block_deletes(bad, "d.log")


def test_duplicated_magic():
    data = AVRO_LOG.read_bytes()
    blocks, corrupt = _split(MAGIC + data)
    assert [(c.offset, c.length) for c in corrupt] == [(0, 6)]
    assert [b.offset for b in blocks] == [6]
    assert encode_block(blocks[0]) == data


def test_trailing_garbage_after_last_block():
    data = AVRO_LOG.read_bytes()
    for tail in (b"garbage bytes", b"#HU", b"\x00"):
        blocks, corrupt = _split(data + tail)
        assert [b.offset for b in blocks] == [0]
        assert [(c.offset, c.length) for c in corrupt] == [(len(data), len(tail))]


def test_garbage_before_and_between_blocks():
    a, b = AVRO_LOG.read_bytes(), ROLLBACK_LOG.read_bytes()
    data = b"xx" + a + b"junk" + b
    blocks, corrupt = _split(data)
    assert [blk.offset for blk in blocks] == [2, 2 + len(a) + 4]
    assert [(c.offset, c.length) for c in corrupt] == [(0, 2), (2 + len(a), 4)]
    assert "expected block magic" in corrupt[0].reason


def test_legacy_version_zero_is_reported():
    data = bytearray(ROLLBACK_LOG.read_bytes())
    data[14:18] = struct.pack(">i", 0)
    _, corrupt = _split(bytes(data))
    assert corrupt[0].offset == 0 and "version 0" in corrupt[0].reason


def test_random_damage_never_crashes_and_spans_tile_the_file():
    rng = random.Random(20250331)
    data = AVRO_LOG.read_bytes() + ROLLBACK_LOG.read_bytes() + DELETE_LOG.read_bytes()
    for _ in range(400):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        damaged = damaged[:rng.randint(0, len(damaged))] if rng.random() < 0.3 else damaged
        items = list(iter_blocks(bytes(damaged), "fuzz"))
        pos = 0
        for item in items:
            assert item.offset == pos
            pos = item.end
        assert pos == len(damaged)
        for item in items:
            if isinstance(item, LogBlock):
                assert encode_block(item) == bytes(damaged[item.offset:item.end])


def test_raise_on_corrupt_names_path_and_offset(tmp_path):
    data, first_len = _two_block_file()
    path = tmp_path / ".f_1.log.1_0-0-0"
    path.write_bytes(data[:first_len + 100])
    storage = LocalStorage()
    soft = read_log_file(storage, str(path))
    assert len(soft.blocks) == 1 and soft.corrupt[0].offset == first_len
    assert soft.describe_corrupt()[0].startswith(f"{path}: corrupt log block at offset {first_len}: ")
    with pytest.raises(CorruptLogBlockError, match=rf"^{path}: corrupt log block at offset {first_len}: "):
        read_log_file(storage, str(path), raise_on_corrupt=True)
    with pytest.raises(CorruptLogBlockError):
        list(iter_blocks(b"xx" + data, "x", raise_on_corrupt=True))


# -- contents and builders ----------------------------------------------------------------------------

TRIPS_SCHEMA = parse_log_bytes(TRIPS_UPDATE_LOG.read_bytes()).blocks[0].schema


def _trip(key: str, rider: str, fare: float, instant: str) -> dict:
    return {
        "_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_1", "_hoodie_record_key": key,
        "_hoodie_partition_path": "city=san_francisco", "_hoodie_file_name": "f-0", "ts": 1, "uuid": key,
        "rider": rider, "driver": "driver-Z", "fare": fare, "city": "san_francisco",
    }


def test_builders_write_and_read_back(tmp_path):
    recs = [_trip("k1", "rider-X", 1.5, "20990101000000000"), _trip("k2", "rider-Y", 2.5, "20990101000000000")]
    data_blk = avro_data_block("20990101000000000", TRIPS_SCHEMA, recs)
    compacted = with_compacted_block_times(
        avro_data_block("20990101000000500", TRIPS_SCHEMA, recs[:1]), ["20990101000000000", "20980101000000000"])
    dele = delete_block("20990101000000100", TRIPS_SCHEMA, [("k2", "city=san_francisco")])
    dele_no_schema = delete_block("20990101000000150", None, [])
    rollback = rollback_block("20990101000000200", "20990101000000100")
    assert [k for k, _ in compacted.header] == [HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA,
                                                HeaderKey.COMPACTED_BLOCK_TIMES]
    assert compacted.get(HeaderKey.COMPACTED_BLOCK_TIMES) == "20990101000000000,20980101000000000"
    # An empty delete block is what the metadata table writes: 3, 1, end-of-array.
    assert dele_no_schema.content == b"\x00\x00\x00\x03\x00\x00\x00\x01\x00"
    assert dele_no_schema.header == ((HeaderKey.INSTANT_TIME, "20990101000000150"),)

    path = str(tmp_path / ".f-0_20990101000000000.log.1_0-0-0")
    storage = LocalStorage()
    written = write_log_file(storage, path, [data_blk, compacted, dele, dele_no_schema, rollback])
    back = read_log_file(storage, path, raise_on_corrupt=True)
    assert encode_blocks(back.blocks) == written == Path(path).read_bytes()
    got_data, got_compacted, got_delete, got_empty, got_rollback = back.blocks
    assert got_data.offset == 0 and got_compacted.offset == got_data.end
    assert block_records(got_data, path) == recs
    assert got_compacted.compacted_block_times == ("20990101000000000", "20980101000000000")
    assert block_deletes(got_delete) == [DeleteRecord("k2", "city=san_francisco", 2, 0)]
    assert block_deletes(got_empty) == []
    assert got_rollback.is_rollback and got_rollback.target_instant_time == "20990101000000100"
    assert got_rollback.compacted_block_times == ()
    with pytest.raises(FileExistsError):
        write_log_file(storage, path, [rollback])


def test_parquet_block_round_trip():
    table = pa.table({"a": pa.array([1, 2], pa.int32()), "b": ["x", None]})
    blk = parquet_data_block("20990101000000000", '{"type":"record","name":"r","fields":[]}', table)
    (back,) = parse_log_bytes(encode_block(blk)).blocks
    assert decode_parquet(back.content).equals(table)
    with pytest.raises(LogFormatError, match="PAR1"):
        decode_parquet(b"PAR1 torn")
    # both magics in place, a damaged footer between them: still one LogFormatError naming the block
    good = back.content
    with pytest.raises(LogFormatError, match="some.log: parquet data content does not read"):
        decode_parquet(good[:-8] + b"\xff\xff\xff\x7f" + good[-4:], "some.log")
    with pytest.raises(LogFormatError, match="does not read"):
        decode_parquet(b"PAR1" + bytes(64) + b"PAR1")


def test_builder_header_rules():
    with pytest.raises(LogFormatError, match="repeats"):
        avro_data_block("1", TRIPS_SCHEMA, [], extra_header=[(HeaderKey.INSTANT_TIME, "2")])
    with pytest.raises(LogFormatError):
        with_compacted_block_times(rollback_block("1", "0"), ["0"])
    with pytest.raises(LogFormatError):
        with_compacted_block_times(avro_data_block("1", TRIPS_SCHEMA, []), ["a,b"])
    with pytest.raises(LogFormatError):
        encode_block(LogBlock(BlockType.CORRUPT))
    with pytest.raises(LogFormatError):
        LogBlock(BlockType.COMMAND, header=((99, "x"),))


def test_avro_content_errors_name_content_offsets():
    good = encode_avro_records([_trip("k", "r", 1.0, "1")], TRIPS_SCHEMA)
    assert decode_avro_records(good, TRIPS_SCHEMA)[0]["uuid"] == "k"
    with pytest.raises(LogFormatError, match="version 2"):
        decode_avro_records(struct.pack(">ii", 2, 0), TRIPS_SCHEMA)
    with pytest.raises(LogFormatError, match="content offset 8"):
        decode_avro_records(good[:8] + struct.pack(">i", 10_000) + good[12:], TRIPS_SCHEMA)
    with pytest.raises(LogFormatError, match="unexpected bytes"):
        decode_avro_records(good + b"\x00", TRIPS_SCHEMA)
    with pytest.raises(LogFormatError):
        encode_avro_records([{"uuid": 5}], TRIPS_SCHEMA)


def test_delete_ordering_branches_round_trip():
    records = [
        DeleteRecord("a", "p", 0, None),
        DeleteRecord("b", None, 1, True),
        DeleteRecord(None, "p", 2, -7),
        DeleteRecord("c", "p", 3, 1695332066204),
        DeleteRecord("d", "p", 4, 1.5),
        DeleteRecord("e", "p", 5, 2.25),
        DeleteRecord("f", "p", 6, b"\x00\xff"),
        DeleteRecord("g", "p", 7, "zz"),
        DeleteRecord("h", "p", 11, 1700000000000000),
    ]
    content = encode_delete_records(records)
    assert decode_delete_records(content) == records
    assert encode_delete_records(decode_delete_records(content)) == content
    with pytest.raises(LogFormatError, match="32 bits"):
        encode_delete_records([DeleteRecord("a", "p", 2, 1 << 31)])
    with pytest.raises(LogFormatError, match="branch 12"):
        encode_delete_records([DeleteRecord("a", "p", 12, 0)])
    with pytest.raises(LogFormatError, match="does not fit"):
        encode_delete_records([DeleteRecord("a", "p", 7, 3)])


def test_delete_negative_array_block_count_decodes():
    item = b"\x02\x02k" + b"\x02\x02p" + b"\x04\x00"
    payload = b"\x01" + bytes([len(item) * 2]) + item + b"\x00"  # count -1 (zig-zag 1), then byte size
    content = struct.pack(">ii", 3, len(payload)) + payload
    assert decode_delete_records(content) == [DeleteRecord("k", "p", 2, 0)]
    with pytest.raises(LogFormatError, match="payload length"):
        decode_delete_records(struct.pack(">ii", 3, 99) + payload)
    with pytest.raises(LogFormatError, match="version 2"):
        decode_delete_records(struct.pack(">ii", 2, len(payload)) + payload)


def test_avro_schema_to_arrow_mapping():
    schema = {
        "type": "record", "name": "r", "namespace": "ns", "fields": [
            {"name": "s", "type": "string"},
            {"name": "i", "type": ["null", "int"]},
            {"name": "l", "type": "long"},
            {"name": "f", "type": "float"},
            {"name": "d", "type": "double"},
            {"name": "b", "type": "boolean"},
            {"name": "by", "type": "bytes"},
            {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
            {"name": "fdec", "type": {"type": "fixed", "name": "fx", "size": 5, "logicalType": "decimal",
                                      "precision": 10, "scale": 2}},
            {"name": "fx2", "type": "fx"},
            {"name": "raw", "type": {"type": "fixed", "name": "raw16", "size": 16}},
            {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
            {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "arr", "type": {"type": "array", "items": ["null", "long"]}},
            {"name": "m", "type": ["null", {"type": "map", "values": "double"}]},
            {"name": "st", "type": {"type": "record", "name": "inner", "fields": [{"name": "x", "type": "int"}]}},
            {"name": "st2", "type": ["null", "ns.inner"]},
        ],
    }
    got = avro_schema_to_arrow(json.dumps(schema))
    inner = pa.struct([pa.field("x", pa.int32(), nullable=False)])
    expected = pa.schema([
        pa.field("s", pa.utf8(), False), pa.field("i", pa.int32(), True), pa.field("l", pa.int64(), False),
        pa.field("f", pa.float32(), False), pa.field("d", pa.float64(), False), pa.field("b", pa.bool_(), False),
        pa.field("by", pa.binary(), False), pa.field("dec", pa.decimal128(12, 3), False),
        pa.field("fdec", pa.decimal128(10, 2), False), pa.field("fx2", pa.decimal128(10, 2), False),
        pa.field("raw", pa.binary(16), False), pa.field("dt", pa.date32(), False),
        pa.field("tsu", pa.timestamp("us", tz="UTC"), False), pa.field("tsm", pa.timestamp("ms", tz="UTC"), False),
        pa.field("lts", pa.timestamp("us"), False), pa.field("e", pa.utf8(), False),
        pa.field("arr", pa.list_(pa.field("element", pa.int64(), True)), False),
        pa.field("m", pa.map_(pa.field("key", pa.utf8(), False), pa.field("value", pa.float64(), False)), True),
        pa.field("st", inner, False), pa.field("st2", inner, True),
    ])
    assert got.equals(expected), f"{got}\n!=\n{expected}"
    with pytest.raises(LogFormatError, match="several non-null"):
        avro_schema_to_arrow({"type": "record", "name": "u", "fields": [{"name": "x", "type": ["int", "string"]}]})
    with pytest.raises(LogFormatError, match="record"):
        avro_schema_to_arrow('"string"')


def test_decode_to_arrow_nested_values():
    schema = json.dumps({
        "type": "record", "name": "r", "fields": [
            {"name": "arr", "type": ["null", {"type": "array", "items": "int"}], "default": None},
            {"name": "m", "type": ["null", {"type": "map", "values": "string"}], "default": None},
            {"name": "st", "type": ["null", {"type": "record", "name": "s", "fields": [
                {"name": "x", "type": ["null", "double"]}]}]},
        ],
    })
    recs = [{"arr": [1, 2], "m": {"k": "v"}, "st": {"x": 1.5}}, {"arr": None, "m": None, "st": None}]
    table = decode_to_arrow(encode_avro_records(recs, schema), schema)
    assert table.column("arr").to_pylist() == [[1, 2], None]
    assert table.column("m").to_pylist() == [[("k", "v")], None]
    assert table.column("st").to_pylist() == [{"x": 1.5}, None]


# -- hudi-rs compatibility ---------------------------------------------------------------------------

def _read_with_hudi_rs(table_path: Path) -> pa.Table:
    pytest.importorskip("hudi")
    from oracles.hudi_rs import read_table

    return read_table(table_path)


def _add_completed_deltacommit(table: Path, instant: str) -> None:
    hoodie = table / ".hoodie"
    (hoodie / f"{instant}.deltacommit.requested").write_bytes(b"")
    (hoodie / f"{instant}.deltacommit.inflight").write_bytes(b"")
    shutil.copyfile(hoodie / "20250331030645735.deltacommit", hoodie / f"{instant}.deltacommit")


def test_hudi_rs_reads_our_blocks(tmp_path):
    table = copy_table(TRIPS_8I1U, tmp_path)
    before = _read_with_hudi_rs(table).to_pylist()
    assert len(before) == 8
    rider_e = next(r for r in before if r["rider"] == "rider-E")
    storage = LocalStorage()

    # 1. Our re-encoding of the existing update log is the file itself.
    log = next(table.glob("city=san_francisco/.*.log.*"))
    original = log.read_bytes()
    reencoded = encode_blocks(read_log_file(storage, str(log), raise_on_corrupt=True).blocks)
    assert reencoded == original
    storage.write_replace(str(log), reencoded)

    # 2. A new log version in rider-E's file group with a delete block at a new instant.
    partition = table / rider_e["_hoodie_partition_path"]
    base_name = rider_e["_hoodie_file_name"]
    file_id, base_instant = base_name.split("_")[0], base_name.rsplit("_", 1)[1].split(".")[0]
    versions = [int(p.name.split(".log.")[1].split("_")[0]) for p in partition.glob(f".{file_id}_{base_instant}.log.*")]
    new_log = partition / f".{file_id}_{base_instant}.log.{max(versions, default=0) + 1}_0-0-0"
    assert new_log.name == ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.2_0-0-0"
    instant = "20250331030700000"
    blk = delete_block(instant, TRIPS_SCHEMA, [(rider_e["uuid"], rider_e["_hoodie_partition_path"])])
    write_log_file(storage, str(new_log), [blk])
    _add_completed_deltacommit(table, instant)

    after = {r["rider"]: r for r in _read_with_hudi_rs(table).to_pylist()}
    assert len(after) == 7 and "rider-E" not in after
    assert after["rider-D"]["fare"] == 25.0

    # 3. A data block followed by a rollback block for its instant: hudi-rs drops the data.
    bad_instant, rollback_instant = "20250331030710000", "20250331030720000"
    update = dict(block_records(parse_log_bytes(original).blocks[0])[0], fare=1.0,
                  _hoodie_commit_time=bad_instant, _hoodie_commit_seqno=f"{bad_instant}_0_1")
    write_log_file(storage, str(new_log.with_name(new_log.name.replace(".log.2_", ".log.3_"))),
                   [avro_data_block(bad_instant, TRIPS_SCHEMA, [update])])
    write_log_file(storage, str(new_log.with_name(new_log.name.replace(".log.2_0-0-0", ".log.4_1-0-1"))),
                   [rollback_block(rollback_instant, bad_instant)])
    rolled = {r["rider"]: r for r in _read_with_hudi_rs(table).to_pylist()}
    assert rolled["rider-D"]["fare"] == 25.0 and len(rolled) == 7


def test_map_columns_from_arrow_rows_encode_and_read_back():
    """``pa.Table.to_pylist`` gives a map as (key, value) tuples; Avro blocks need dicts."""
    from tablesvc.logformat.avro_content import decode_avro_records, encode_avro_records

    schema = {"type": "record", "name": "r", "fields": [
        {"name": "k", "type": "string"},
        {"name": "m", "type": ["null", {"type": "map", "values": "long"}], "default": None},
        {"name": "nested", "type": {"type": "array", "items": {"type": "map", "values": "string"}}}]}
    arrow = pa.table({"k": ["a", "b"],
                       "m": pa.array([[("x", 1), ("y", 2)], None], pa.map_(pa.string(), pa.int64())),
                       "nested": pa.array([[[("p", "q")], []], []], pa.list_(pa.map_(pa.string(), pa.string())))})
    content = encode_avro_records(arrow.to_pylist(), json.dumps(schema))
    assert list(decode_avro_records(content, json.dumps(schema))) == [
        {"k": "a", "m": {"x": 1, "y": 2}, "nested": [{"p": "q"}, {}]}, {"k": "b", "m": None, "nested": []}]


# -- the columnar Avro codec against the per-record fastavro reference -----------------------------
#
# ``avro_columnar`` decodes/encodes one field of all records per numpy step.  Its contract:
# exactly the bytes and Arrow tables of the per-record fastavro path, which these tests keep
# as a small reference implementation, and that path's errors wherever anything is unusual.

def _ref_encode(rows: list[dict], schema_json: str) -> bytes:
    """The Hudi framing around fastavro's per-record encoding (what the codec must reproduce)."""
    schema = fastavro.parse_schema(json.loads(schema_json))
    parts = [struct.pack(">ii", 3, len(rows))]
    for row in rows:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, row)
        parts += [struct.pack(">i", buf.tell()), buf.getvalue()]
    return b"".join(parts)


def _ref_table(content: bytes, schema_json: str) -> pa.Table:
    """fastavro per record, each using exactly its bytes, then ``pa.Table.from_pylist``."""
    schema = fastavro.parse_schema(json.loads(schema_json))
    version, count = struct.unpack_from(">ii", content)
    pos, rows = 8, []
    for _ in range(count):
        (length,) = struct.unpack_from(">i", content, pos)
        buf = io.BytesIO(content[pos + 4:pos + 4 + length])
        rows.append(fastavro.schemaless_reader(buf, schema, None))
        assert buf.tell() == length
        pos += 4 + length
    assert version == 3 and pos == len(content)
    return pa.Table.from_pylist(rows, schema=avro_schema_to_arrow(schema_json))


def _decodes_like_fastavro(content: bytes, schema_json: str) -> None:
    """decode_to_arrow gives the reference table, or a LogFormatError where the reference fails."""
    try:
        expected = _ref_table(content, schema_json)
    except Exception:  # noqa: BLE001 - any failure of the reference path
        with pytest.raises(LogFormatError):
            decode_to_arrow(content, schema_json)
        return
    assert _same_rows(decode_to_arrow(content, schema_json), expected)


def _uses_columnar(content: bytes, schema_json: str, table: pa.Table) -> bool:
    """Whether both directions really ran columnar (no silent fallback to fastavro)."""
    plan = avro_columnar.columnar_plan(schema_json)
    spans = record_spans(content)
    decoded = avro_columnar.decode_columns(content, spans.starts, spans.ends, plan, avro_schema_to_arrow(schema_json))
    encoded = avro_columnar.encode_columns(table, plan, content[:8])
    return decoded is not None and encoded is not None


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_US = {"min": -62135596800_000000, "max": 253402300799_999999}  # datetime's range, in µs from 1970
_INT_EDGES = [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, (1 << 31) - 1, -(1 << 31)]
_LONG_EDGES = _INT_EDGES + [(1 << 63) - 1, -(1 << 63), 1 << 62, -(1 << 35), 1700000000000000]
_FLOATS = [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), float("nan"), 3.4028234663852886e38, 1e-45]
_DOUBLES = [0.0, -0.0, 0.1, -1e300, 5e-324, float("inf"), float("-inf"), float("nan"), 1.7976931348623157e308]
_TEXT = "aé中😀\u0000Z"


class _Values:
    """Random Python values for an Avro schema, in fastavro's input form, edges included."""

    def __init__(self, schema: dict, seed: int, null_share: float = 0.3):
        self.rng = random.Random(seed)
        self.null_share = null_share
        self.named: dict[str, object] = {}
        self._learn_names(schema, "")

    def _learn_names(self, node, namespace: str) -> None:
        """Named types by short and full name (a union may skip a definition, not its later uses)."""
        if isinstance(node, list):
            for branch in node:
                self._learn_names(branch, namespace)
        elif isinstance(node, dict):
            if node.get("type") in ("record", "enum", "fixed"):
                namespace = node.get("namespace", namespace)
                self.named[node["name"]] = self.named[f"{namespace}.{node['name']}".lstrip(".")] = node
            for child in [node.get("type"), node.get("items"), node.get("values"),
                          *[f["type"] for f in node.get("fields", ())]]:
                self._learn_names(child, namespace)

    def value(self, node, namespace=""):
        rng = self.rng
        if isinstance(node, list):
            others = [b for b in node if b != "null"]
            if "null" in node and (not others or rng.random() < self.null_share):
                return None
            return self.value(rng.choice(others), namespace)
        if isinstance(node, str):
            if node in self.named:
                return self.value(self.named[node], namespace)
            node = {"type": node}
        kind, logical = node["type"], node.get("logicalType")
        if isinstance(kind, (list, dict)):
            return self.value(kind, namespace)
        pick = rng.random() < 0.25  # an edge value instead of a random one
        if logical == "decimal":
            precision, scale = node["precision"], node.get("scale", 0)
            edges = [0, 1, -1, 127, -128, 128, -129, 255, -256, 32767, -32768, 10 ** precision - 1,
                     -(10 ** precision - 1)]
            unscaled = rng.choice(edges) if pick else rng.randint(-(10 ** precision - 1), 10 ** precision - 1)
            return Decimal(f"{unscaled}E-{scale}")  # exact (scaleb would round to 28 digits)
        if (kind, logical) == ("int", "date"):
            days = rng.choice([-719162, 2932896, 0, -1]) if pick else rng.randint(-719162, 2932896)
            return _dt.date(1970, 1, 1) + _dt.timedelta(days=days)
        if (kind, logical) in (("int", "time-millis"), ("long", "time-micros")):
            micros = rng.choice([0, 86_399_999_999]) if pick else rng.randint(0, 86_399_999_999)
            if logical == "time-millis":
                micros -= micros % 1000
            return (_dt.datetime.min + _dt.timedelta(microseconds=micros)).time()
        if kind == "long" and logical in ("timestamp-millis", "timestamp-micros",
                                          "local-timestamp-millis", "local-timestamp-micros"):
            micros = rng.choice([_US["min"], _US["max"], 0, -1]) if pick else rng.randint(_US["min"], _US["max"])
            if logical.endswith("millis"):
                micros -= micros % 1000
            moment = _EPOCH + _dt.timedelta(microseconds=micros)
            return moment.replace(tzinfo=None) if logical.startswith("local") else moment
        if kind == "record":
            ns = node.get("namespace", namespace)
            return {f["name"]: self.value(f["type"], ns) for f in node["fields"]}
        if kind == "enum":
            return rng.choice(node["symbols"])
        if kind == "fixed":
            return rng.randbytes(node["size"])
        if kind == "array":
            return [self.value(node["items"], namespace) for _ in range(rng.randint(0, 3))]
        if kind == "map":
            return {f"k{i}{_TEXT[:rng.randint(0, 3)]}": self.value(node["values"], namespace)
                    for i in range(rng.randint(0, 3))}
        return self._primitive(kind, pick)

    def _primitive(self, kind, pick):
        rng = self.rng
        if kind == "null":
            return None
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "int":
            return rng.choice(_INT_EDGES) if pick else rng.randint(-(1 << 31), (1 << 31) - 1)
        if kind == "long":
            return rng.choice(_LONG_EDGES) if pick else rng.randint(-(1 << 63), (1 << 63) - 1)
        if kind == "float":
            return rng.choice(_FLOATS) if pick else struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0]
        if kind == "double":
            return rng.choice(_DOUBLES) if pick else rng.uniform(-1, 1) * 10 ** rng.randint(-300, 300)
        if kind == "bytes":
            return rng.randbytes(rng.choice([0, 1, 63, 64, 200]) if pick else rng.randint(0, 80))
        if kind == "string":
            size = rng.choice([0, 63, 64, 300]) if pick else rng.randint(0, 40)
            return "".join(rng.choice(_TEXT) for _ in range(size))
        raise AssertionError(kind)


_INNER = {"type": "record", "name": "inner", "fields": [
    {"name": "z", "type": "double"},
    {"name": "tag", "type": ["null", "string"]},
]}
_NESTED = {"type": "record", "name": "nested", "namespace": "deep", "fields": [
    {"name": "x", "type": "int"},
    {"name": "y", "type": ["null", "string"]},
    {"name": "inner", "type": ["null", _INNER]},
    {"name": "always", "type": "deep.inner"},
]}
# Everything the columnar codec covers, each alone and inside ["null", T] / [T, "null"] unions.
COLUMNAR_SCHEMA = json.dumps({"type": "record", "name": "all_types", "namespace": "hoodie.t", "fields": [
    {"name": "b", "type": "boolean"}, {"name": "bn", "type": ["null", "boolean"]},
    {"name": "i", "type": "int"}, {"name": "i_first", "type": ["int", "null"]},
    {"name": "l", "type": "long"}, {"name": "ln", "type": ["null", "long"]},
    {"name": "f", "type": "float"}, {"name": "fn", "type": ["null", "float"]},
    {"name": "d", "type": "double"}, {"name": "dn", "type": ["double", "null"]},
    {"name": "by", "type": "bytes"}, {"name": "byn", "type": ["null", "bytes"]},
    {"name": "s", "type": "string"}, {"name": "sn", "type": ["null", "string"]},
    {"name": "s_first", "type": ["string", "null"]},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
    {"name": "en", "type": ["null", "E"]},
    {"name": "fx", "type": {"type": "fixed", "name": "fx3", "size": 3}}, {"name": "fxn", "type": ["null", "fx3"]},
    {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
    {"name": "dtn", "type": ["null", {"type": "int", "logicalType": "date"}]},
    {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tus", "type": ["null", {"type": "long", "logicalType": "time-micros"}]},
    {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
    {"name": "ltsm", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "ltsu", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
    {"name": "made_up", "type": {"type": "long", "logicalType": "made-up"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
    {"name": "decn", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0}]},
    {"name": "dec256", "type": {"type": "bytes", "logicalType": "decimal", "precision": 60, "scale": 10}},
    {"name": "fdec", "type": {"type": "fixed", "name": "fd", "size": 5, "logicalType": "decimal",
                              "precision": 10, "scale": 2}},
    {"name": "fdecn", "type": ["null", "fd"]},
    {"name": "fdec16", "type": {"type": "fixed", "name": "fd16", "size": 16, "logicalType": "decimal",
                                "precision": 38, "scale": 4}},
    {"name": "nul", "type": "null"},
    {"name": "rec", "type": _NESTED}, {"name": "recn", "type": ["null", "deep.nested"]},
]})
# What it does not cover (arrays, maps, uuid...): fastavro does those, the results must not change.
FALLBACK_SCHEMA = json.dumps({"type": "record", "name": "fb", "fields": [
    {"name": "s", "type": ["null", "string"]},
    {"name": "arr", "type": {"type": "array", "items": ["null", "long"]}},
    {"name": "m", "type": ["null", {"type": "map", "values": {"type": "record", "name": "mv", "fields": [
        {"name": "q", "type": "double"}]}}]},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
]})


def _random_rows(schema_json: str, n: int, seed: int, null_share: float = 0.3) -> list[dict]:
    schema = json.loads(schema_json)
    values = _Values(schema, seed, null_share)
    return [values.value(schema) for _ in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("null_share", [0.0, 0.3, 1.0])
def test_columnar_codec_equals_fastavro_on_every_covered_type(seed, null_share):
    rows = _random_rows(COLUMNAR_SCHEMA, 300, seed, null_share)
    content = _ref_encode(rows, COLUMNAR_SCHEMA)
    expected = _ref_table(content, COLUMNAR_SCHEMA)
    table = decode_to_arrow(content, COLUMNAR_SCHEMA)
    assert _same_rows(table, expected)
    assert encode_avro_records(table, COLUMNAR_SCHEMA) == content
    assert encode_avro_records(table.to_batches(max_chunksize=1000)[0], COLUMNAR_SCHEMA) == content
    assert encode_avro_records(table.to_pylist(), COLUMNAR_SCHEMA) == content  # the row path too
    assert _uses_columnar(content, COLUMNAR_SCHEMA, table)


def test_columnar_codec_at_the_range_edges_of_logical_types():
    """The bounds inside which the codec converts (fastavro's datetime range) are exact."""
    schema = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}}]})
    plain = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": n, "type": t} for n, t in (("tsu", "long"), ("tsm", "long"), ("dt", "int"), ("tms", "int"))]})
    inside = [(_US["min"], _US["min"] // 1000, -719162, 0), (_US["max"], _US["max"] // 1000, 2932896, 86399999)]
    content = _ref_encode([dict(zip(("tsu", "tsm", "dt", "tms"), v)) for v in inside], plain)
    assert _same_rows(decode_to_arrow(content, schema), _ref_table(content, schema))
    assert _uses_columnar(content, schema, decode_to_arrow(content, schema))
    for outside in [(_US["min"] - 1, 0, 0, 0), (_US["max"] + 1, 0, 0, 0), (0, _US["max"] // 1000 + 1, 0, 0),
                    (0, 0, -719163, 0), (0, 0, 2932897, 0), (0, 0, 0, 86400000), (0, 0, 0, -1)]:
        bad = _ref_encode([dict(zip(("tsu", "tsm", "dt", "tms"), outside))], plain)
        _decodes_like_fastavro(bad, schema)  # fastavro refuses these: the same error as before


def test_timestamp_nanos_decode_like_fastavro():
    """fastavro has no nanos reader (raw longs), and the columnar decode gives the same instants."""
    schema = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "n", "type": ["null", {"type": "long", "logicalType": "timestamp-nanos"}]},
        {"name": "ln", "type": {"type": "long", "logicalType": "local-timestamp-nanos"}}]})
    rows = [{"n": v, "ln": -v} for v in (0, 1, -1, 1_700_000_000_123_456_789, (1 << 63) - 1)] + [{"n": None, "ln": 5}]
    content = _ref_encode(rows, schema)
    assert _same_rows(decode_to_arrow(content, schema), _ref_table(content, schema))


@pytest.mark.parametrize("seed", [4, 5])
def test_fallback_schemas_decode_and_encode_as_before(seed):
    rows = _random_rows(FALLBACK_SCHEMA, 200, seed)
    content = _ref_encode(rows, FALLBACK_SCHEMA)
    table = decode_to_arrow(content, FALLBACK_SCHEMA)
    assert avro_columnar.columnar_plan(FALLBACK_SCHEMA) is None
    assert _same_rows(table, _ref_table(content, FALLBACK_SCHEMA))
    assert encode_avro_records(table, FALLBACK_SCHEMA) == content  # maps back to dicts on the way


def test_columnar_encode_of_chunked_sliced_and_reordered_tables(monkeypatch):
    schema = COLUMNAR_SCHEMA
    monkeypatch.setattr(avro_columnar, "_ENCODE_CHUNK", 97)  # many encoding steps from few rows
    rows = _random_rows(schema, 1_000, 7)
    content = _ref_encode(rows, schema)
    table = decode_to_arrow(content, schema)
    assert encode_avro_records(table, schema) == content
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=77))
    assert chunked.column(0).num_chunks > 1 and encode_avro_records(chunked, schema) == content
    part = table.slice(123, 301)  # non-zero array offsets, bit-packed validity mid-byte
    assert encode_avro_records(part, schema) == _ref_encode(rows[123:424], schema)
    shuffled = table.select(list(reversed(table.column_names))).append_column("extra", pa.nulls(table.num_rows))
    assert encode_avro_records(shuffled, schema) == content  # columns found by name, extras ignored


def test_columnar_codec_on_a_large_block():
    """Several default-size encoding steps; a benchmark-like schema built without Python rows."""
    schema = json.dumps({"type": "record", "name": "trips", "fields": [
        {"name": "uuid", "type": ["string", "null"]}, {"name": "ts", "type": ["long", "null"]},
        {"name": "fare", "type": ["null", "double"]},
        {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]}]})
    n = 2 * avro_columnar._ENCODE_CHUNK + 5
    ids = np.arange(n)
    table = pa.table({
        "uuid": pa.array([f"key-{i}" * (i % 5) for i in range(n)], pa.utf8()),
        "ts": pa.array(ids * 1_000_003 - 7, pa.int64()),
        "fare": pa.array(np.where(ids % 7 == 0, np.nan, ids / 3.0), mask=ids % 11 == 0),
        "at": pa.array(1_700_000_000_000_000 + ids * 999, pa.timestamp("us", tz="UTC"), mask=ids % 13 == 0)})
    content = encode_avro_records(table, schema)
    assert content == _ref_encode(table.to_pylist(), schema)
    assert _same_rows(decode_to_arrow(content, schema), _ref_table(content, schema))
    assert _uses_columnar(content, schema, table)


def _encoder_pieces(table: pa.Table, schema: str) -> list:
    encoder = avro_columnar._Encoder(table.num_rows)
    plan = avro_columnar.columnar_plan(schema)
    for name, child in zip(plan.names, plan.children):
        encoder.encode(child, table.column(name).combine_chunks(), encoder.all_rows)
    return encoder.pieces


def test_columnar_encode_of_strings_of_one_length():
    """Strings (and bytes) whose values all have one length are encoded as fixed-width cells that
    join their neighbours; the bytes stay exactly fastavro's, with nulls, slices, empty strings,
    multi-byte characters and values too wide for cells."""
    schema = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "key", "type": ["null", "string"]}, {"name": "n", "type": "long"},
        {"name": "when", "type": "string"}, {"name": "raw", "type": ["bytes", "null"]},
        {"name": "word", "type": ["null", "string"]}, {"name": "wide", "type": "string"},
        {"name": "empty", "type": ["null", "string"]}]})
    n = 1_000
    ids = np.arange(n)
    wide = "w" * (avro_columnar._MAX_CELL_WIDTH + 1)
    table = pa.table({
        "key": pa.array([None if i % 7 == 0 else f"key-{i:05d}" for i in ids], pa.utf8()),
        "n": pa.array(ids * 1_000_003 - 500, pa.int64()),
        "when": pa.array(["20261123120000000"] * n, pa.utf8()),
        "raw": pa.array([bytes([i % 256, 7, 0]) for i in ids], pa.binary()),
        "word": pa.array(["é" if i % 2 else "ab" for i in ids], pa.utf8()),   # 2 bytes each in UTF-8
        "wide": pa.array([wide] * n, pa.utf8()),
        "empty": pa.array([None if i % 3 == 0 else "" for i in ids], pa.utf8())})
    for part in (table, table.slice(37, 501), table.slice(7, 1)):
        assert encode_avro_records(part, schema) == _ref_encode(part.to_pylist(), schema)
    pieces = _encoder_pieces(table, schema)
    # key..word are cells, one piece; wide (129 bytes each) stays a variable-length piece
    assert [type(p).__name__ for p in pieces] == ["_Cells", "_Ragged", "_Cells"]
    fixed = table.drop_columns(["wide"])
    fixed_schema = json.dumps({**json.loads(schema), "fields": [f for f in json.loads(schema)["fields"]
                                                                 if f["name"] != "wide"]})
    assert [type(p).__name__ for p in _encoder_pieces(fixed, fixed_schema)] == ["_Cells"]
    assert encode_avro_records(fixed, fixed_schema) == _ref_encode(fixed.to_pylist(), fixed_schema)
    varying = fixed.set_column(0, "key", pa.array([f"k{i}" for i in ids], pa.utf8()))
    assert [type(p).__name__ for p in _encoder_pieces(varying, fixed_schema)] == ["_Cells", "_Ragged", "_Cells"]
    assert encode_avro_records(varying, fixed_schema) == _ref_encode(varying.to_pylist(), fixed_schema)


def test_columnar_encode_falls_back_where_fastavro_decides():
    schema = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "k", "type": "string"},
        {"name": "n", "type": ["null", "long"], "default": None},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}]})
    good = pa.table({"k": ["a", "b"], "n": pa.array([1, None], pa.int64()), "e": ["A", "B"]})
    assert encode_avro_records(good, schema) == _ref_encode(good.to_pylist(), schema)
    # Missing column: fastavro's default for "n".
    assert encode_avro_records(good.drop_columns(["n"]), schema) == _ref_encode(
        [{"k": "a", "n": None, "e": "A"}, {"k": "b", "n": None, "e": "B"}], schema)
    # Another Arrow type than the schema's (int32 for a long): to_pylist + fastavro, same bytes.
    narrow = good.set_column(1, "n", pa.array([1, None], pa.int32()))
    assert encode_avro_records(narrow, schema) == encode_avro_records(good, schema)
    # Timestamps in another zone are the same instants.
    ts_schema = json.dumps({"type": "record", "name": "t", "fields": [
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}}]})
    berlin = pa.table({"t": pa.array([0, 1_700_000_000_000_001], pa.timestamp("us", tz="Europe/Berlin"))})
    assert encode_avro_records(berlin, ts_schema) == _ref_encode(berlin.to_pylist(), ts_schema)
    # Values fastavro refuses keep their row-numbered errors.
    with pytest.raises(LogFormatError, match="record 1 does not match"):
        encode_avro_records(good.set_column(0, "k", pa.array(["a", None])), schema)
    with pytest.raises(LogFormatError, match="record 1 does not match"):
        encode_avro_records(good.set_column(2, "e", pa.array(["A", "Z"])), schema)


def _zz(value: int) -> bytes:
    """Avro's zig-zag varint."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _framed(*records: bytes) -> bytes:
    return struct.pack(">ii", 3, len(records)) + b"".join(struct.pack(">i", len(r)) + r for r in records)


# A small schema for hand-made records: boolean, ["null", string], enum, int, date.
_HAND_SCHEMA = json.dumps({"type": "record", "name": "h", "fields": [
    {"name": "b", "type": "boolean"}, {"name": "s", "type": ["null", "string"]},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "i", "type": "int"}, {"name": "d", "type": {"type": "int", "logicalType": "date"}}]})
_GOOD = b"\x01" + b"\x02" + _zz(2) + b"hi" + _zz(1) + _zz(-7) + _zz(19000)


@pytest.mark.parametrize("bad", [
    b"\x02" + _GOOD[1:],  # boolean byte 2
    b"\x01" + _zz(2) + _GOOD[2:],  # union branch 2 of 2
    b"\x01" + _zz(-1) + _GOOD[2:],  # negative union branch
    b"\x01\x02" + _zz(2) + b"\xff\xfe" + _GOOD[6:],  # invalid UTF-8
    b"\x01\x02" + _zz(3) + b"\xed\xa0\x80" + _GOOD[6:],  # a UTF-16 surrogate in UTF-8
    b"\x01\x02" + _zz(-2) + b"hi" + _GOOD[6:],  # negative string length
    _GOOD[:6] + _zz(2) + _GOOD[7:],  # enum index 2 of 2
    _GOOD[:7] + _zz(1 << 31) + _zz(19000),  # int past 32 bits
    _GOOD[:7] + b"\xff" * 10 + b"\x01" + _zz(19000),  # 11-byte varint
    _GOOD[:-3] + _zz(3_000_000),  # date past year 9999
    _GOOD + b"\x00",  # one byte the schema does not read
    _GOOD[:-1],  # record shorter than its fields
    b"",  # empty record
])
def test_odd_records_decode_exactly_as_fastavro_does(bad):
    for content in (_framed(bad), _framed(_GOOD, bad, _GOOD)):
        _decodes_like_fastavro(content, _HAND_SCHEMA)
    assert _uses_columnar(_framed(_GOOD), _HAND_SCHEMA, decode_to_arrow(_framed(_GOOD), _HAND_SCHEMA))


def test_odd_records_keep_their_error_messages():
    where = "log.1: AVRO_DATA block at offset 0"
    with pytest.raises(LogFormatError, match=f"^{where}: record 1 decoded from 10 of its 11 bytes$"):
        decode_to_arrow(_framed(_GOOD, _GOOD + b"\x00"), _HAND_SCHEMA, where)
    with pytest.raises(LogFormatError, match=f"^{where}: record 2 does not decode with the block schema"):
        decode_to_arrow(_framed(_GOOD, _GOOD, b"\x01\x02" + _zz(2) + b"\xff\xfe" + _GOOD[6:]), _HAND_SCHEMA, where)
    with pytest.raises(LogFormatError, match=f"^{where}: record 0 does not decode with the block schema"):
        decode_to_arrow(_framed(_GOOD[:-1]), _HAND_SCHEMA, where)
    with pytest.raises(LogFormatError, match=f"^{where}: record 0 does not decode with the block schema"):
        decode_to_arrow(_framed(_GOOD[:7] + _zz(1 << 31) + _zz(19000)), _HAND_SCHEMA, where)  # int past 32 bits
    too_precise = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "v", "type": {"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 0}}]})
    with pytest.raises(LogFormatError, match="records do not convert to the Arrow form"):
        decode_to_arrow(_framed(_zz(1) + b"\x64"), too_precise)  # 100 has 3 digits


@pytest.mark.parametrize("content, message", [
    (b"\x00\x00\x00\x03\x00", "avro data content is 5 bytes, shorter than its 8-byte prefix"),
    (struct.pack(">ii", 2, 0), "avro data content version 2 at content offset 0, expected 3"),
    (struct.pack(">ii", 3, -1), "negative record count -1 at content offset 4"),
    (struct.pack(">ii", 3, 0) + b"\x00", "1 unexpected bytes after the last record at content offset 8"),
    (struct.pack(">ii", 3, 1), "record 0 length at content offset 8 is past the end"),
    (struct.pack(">ii", 3, 2_000_000_000) + struct.pack(">i", 0), "record 1 length at content offset 12 is past"),
    (struct.pack(">iii", 3, 1, -1) + b"x", "record 0 length -1 at content offset 8 runs past the content end 13"),
    (struct.pack(">iii", 3, 1, 5) + b"x", "record 0 length 5 at content offset 8 runs past the content end 13"),
    (_framed(_GOOD) + b"\x00\x00", "2 unexpected bytes after the last record at content offset 22"),
    (struct.pack(">iii", 3, 2, 0) + struct.pack(">i", -4), "record 1 length -4 at content offset 12 runs past"),
])
def test_framing_errors_are_named_as_before(content, message):
    for decode in (decode_to_arrow, decode_avro_records):
        with pytest.raises(LogFormatError, match="^src: " + message.replace("(", r"\(")):
            decode(content, _HAND_SCHEMA, "src")


def test_empty_blocks_both_ways():
    empty = struct.pack(">ii", 3, 0)
    table = decode_to_arrow(empty, COLUMNAR_SCHEMA)
    assert table.num_rows == 0 and table.schema.equals(avro_schema_to_arrow(COLUMNAR_SCHEMA))
    assert encode_avro_records(table, COLUMNAR_SCHEMA) == empty == encode_avro_records([], COLUMNAR_SCHEMA)


def test_decimal_byte_counts_follow_fastavro():
    """fastavro writes ceil((bits of |v| + 1) / 8) bytes: one more than minimal for -2^(8k-1)."""
    schema = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "v", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0}}]})
    edges = sorted({s * ((1 << k) + d) for k in range(0, 126, 1) for d in (-1, 0, 1) for s in (1, -1)})
    edges = [v for v in edges if abs(v) < 10 ** 38]
    rows = [{"v": Decimal(v)} for v in edges]
    content = _ref_encode(rows, schema)
    table = decode_to_arrow(content, schema)
    assert table.column("v").to_pylist() == [Decimal(v) for v in edges]
    assert encode_avro_records(table, schema) == content
    assert _uses_columnar(content, schema, table)
    over = _framed(_zz(17) + b"\x01" * 17)  # 17 bytes cannot be a decimal128
    _decodes_like_fastavro(over, schema)
    too_precise = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "v", "type": {"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 0}}]})
    _decodes_like_fastavro(_framed(_zz(1) + b"\x64"), too_precise)  # 100 has 3 digits


def test_uuid_columns_still_go_through_fastavro():
    schema = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}}]})
    assert avro_columnar.columnar_plan(schema) is None
    content = _framed(_zz(36) + b"12345678-1234-5678-1234-567812345678")
    assert decode_to_arrow(content, schema).column("u").to_pylist() == ["12345678-1234-5678-1234-567812345678"]


def test_avro_data_block_takes_an_arrow_table():
    """What writers and log compaction can pass instead of ``table.to_pylist()``: the same block."""
    rows = [_trip("k1", "r1", 1.5, "1"), _trip("k2", "r2", 2.5, "1")]
    table = records_to_arrow(rows, TRIPS_SCHEMA)
    from_rows = avro_data_block("1", TRIPS_SCHEMA, rows, extra_header=[(HeaderKey.COMPACTED_BLOCK_TIMES, "0")])
    from_table = avro_data_block("1", TRIPS_SCHEMA, table, extra_header=[(HeaderKey.COMPACTED_BLOCK_TIMES, "0")])
    assert encode_block(from_table) == encode_block(from_rows)
    assert _uses_columnar(from_table.content, TRIPS_SCHEMA, table)


def test_uuid_columns_decode_to_strings_and_round_trip():
    """A ``uuid`` string (Hudi tables from Spark's UUID columns) reads as its text; fastavro's
    ``uuid.UUID`` objects used to make ``decode_to_arrow`` fail on such blocks."""
    schema = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "u", "type": ["null", {"type": "string", "logicalType": "uuid"}]}]})
    text = "12345678-1234-5678-1234-567812345678"
    content = _framed(_zz(1) + _zz(36) + text.encode(), _zz(0))
    table = decode_to_arrow(content, schema)
    assert table.column("u").type == pa.utf8() and table.column("u").to_pylist() == [text, None]
    assert encode_avro_records(table.to_pylist(), schema) == content
