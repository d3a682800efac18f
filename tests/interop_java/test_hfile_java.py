"""HFiles between tablesvc and Apache Hudi 1.2's own hudi-io classes (``org.apache.hudi.io.hfile``),
driven through the Java tier's driver (``hfile_read`` / ``hfile_write`` in ``java_hudi.py``):

* Java's ``HFileReaderImpl`` reads an HFile tablesvc wrote with many data blocks (GZ and NONE),
  and the HFile inside a tablesvc HFILE_DATA block: every key and value, lookups by key, the
  file info.
* Java's ``HFileWriterImpl``, given the same cells, block size, codec and creation time, writes
  the very bytes tablesvc wrote: the block cutting, index and trailer of a many-block file,
  which the carried fixtures (one data block each) cannot show.
"""

from __future__ import annotations

import base64
import io
import random
from dataclasses import replace

import fastavro
import pytest

from tablesvc.hfile import Compression, HFileReader, HFileSettings, write_hfile
from tablesvc.hfile.blocks import HEADER_SIZE
from tablesvc.logformat import KeyedRecord, hfile_data_block, parse_avro_schema

pytestmark = pytest.mark.interop_java

_CODEC_NAMES = {Compression.GZ: "gz", Compression.NONE: "none"}


def _cells(count: int) -> list[tuple[str, bytes]]:
    rng = random.Random(27)
    keys = sorted({f"{rng.choice(['a', 'b', 'é', '日'])}{rng.randrange(10**9):09d}" for _ in range(count)},
                  key=lambda k: k.encode())
    return [(k, rng.randbytes(rng.randrange(10, 300))) for k in keys]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _java_read(java_hudi, path, lookups=(), info=()) -> dict:
    return java_hudi.step({"op": "hfile_read", "path": str(path), "lookups": list(lookups), "info": list(info)})


@pytest.mark.parametrize("compression", [Compression.GZ, Compression.NONE])
def test_java_reads_and_writes_the_same_many_block_hfile(java_hudi, tmp_path, compression):
    cells = _cells(2500)
    settings = HFileSettings(block_size=16 * 1024, compression=compression, creation_time_ms=1_764_000_000_123)
    ours = write_hfile(cells, file_info=[("schema", b'"bytes"')], settings=settings)
    assert len(HFileReader(ours).data_index) >= 20
    path = tmp_path / "tablesvc.hfile"
    path.write_bytes(ours)

    absent = "a0"                  # sorts before every key
    present = [cells[0][0], cells[len(cells) // 2][0], cells[-1][0]]
    got = _java_read(java_hudi, path, lookups=present + [absent], info=["schema", "hfile.CREATE_TIME_TS"])
    assert got["entries"] == len(cells)
    assert [(k, base64.b64decode(v)) for k, v in got["cells"]] == cells
    assert got["lookups"] == {**{k: _b64(dict(cells)[k]) for k in present}, absent: None}
    assert base64.b64decode(got["info"]["schema"]) == b'"bytes"'
    assert int.from_bytes(base64.b64decode(got["info"]["hfile.CREATE_TIME_TS"]), "big") == settings.creation_time_ms

    java_path = tmp_path / "java.hfile"   # (written with the same settings, then compared)
    java_hudi.step({"op": "hfile_write", "path": str(java_path), "block_size": settings.block_size,
                    "codec": _CODEC_NAMES[compression], "creation_time_ms": settings.creation_time_ms,
                    "file_info": [["schema", _b64(b'"bytes"')]], "cells": [[k, _b64(v)] for k, v in cells]})
    theirs = java_path.read_bytes()
    if compression is Compression.GZ:
        # the gzip header's OS byte (byte 9 of the first block's data) is the JDK's: 0 up to Java
        # 15, 255 from 16 on; the JVM here decides which one the comparison expects
        os_byte = theirs[HEADER_SIZE + 9]
        assert os_byte in (0, 255)
        ours = write_hfile(cells, file_info=[("schema", b'"bytes"')], settings=replace(settings, gzip_os=os_byte))
    assert theirs == ours, f"first differing byte {next(i for i in range(min(len(theirs), len(ours))) if theirs[i] != ours[i])}"


def test_java_reads_the_hfile_of_a_tablesvc_hfile_data_block(java_hudi, tmp_path):
    schema = ('{"type":"record","name":"R","fields":[{"name":"key","type":"string"},'
              '{"name":"size","type":"long"},{"name":"deleted","type":"boolean"}]}')
    records = [KeyedRecord(f"part={i % 7}/file-{i:05d}", {"key": f"part={i % 7}/file-{i:05d}", "size": i * 1000,
                                                          "deleted": i % 3 == 0}) for i in range(3000)]
    block = hfile_data_block("20260101000000000", schema, records, creation_time_ms=1)
    path = tmp_path / "block.hfile"
    path.write_bytes(block.content)
    got = _java_read(java_hudi, path, lookups=["part=3/file-00010", "part=9/none"], info=["schema"])
    parsed = parse_avro_schema(schema)
    decoded = [(k, fastavro.schemaless_reader(io.BytesIO(base64.b64decode(v)), parsed, None)) for k, v in got["cells"]]
    expected = sorted(((r.key, {**r.record, "key": ""}) for r in records), key=lambda kv: kv[0].encode())
    assert decoded == expected
    assert got["lookups"]["part=9/none"] is None
    assert fastavro.schemaless_reader(io.BytesIO(base64.b64decode(got["lookups"]["part=3/file-00010"])), parsed, None) == \
        {"key": "", "size": 10_000, "deleted": False}
    assert base64.b64decode(got["info"]["schema"]).decode() == schema
