"""What reading one file slice on S3 costs in requests and bytes (the moto server's counters), with
the rows checked against hudi-rs's rows for that file group.

A small object is read whole by one GET and no HEAD (``WHOLE_READ_MAX``), the base file once for
both of the merge's parquet readers, each log file by one GET: a slice of a base file and n log
files costs 1 + n requests and downloads its files' sizes.  A larger object costs one GET for its
tail, one for the rest of a footer longer than that, and one ranged GET per column chunk read
outside the tail (pyarrow reads a chunk of at most 1 MiB in one read), and downloads each byte at
most once."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from s3_server import copy_table_to_s3

from fixture_tables import TABLES_DIR
from oracles.hudi_rs import read_rows
from tablesvc.api import Table
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.storage import object_store

pytestmark = pytest.mark.s3

TABLE = "v8_trips_8i3u1d"   # MOR: one file group has a base file and a log file
BYTES_SLACK = 1.1           # downloaded bytes over the slice's file sizes


def _slice_with_logs(storage, root):
    table = Table.open(root, storage=storage)
    slices = [s for s in table.latest_file_slices() if s.base_file and s.log_files]
    assert slices, f"{TABLE}: no file slice with a base file and log files"
    return SliceSpec.from_file_slice(slices[0]), ReadContext.for_table(table)


def _hudi_rs_rows(file_id: str, columns: list[str]) -> list[tuple]:
    """hudi-rs's rows of the file group (``_hoodie_file_name`` starts with the file id, base-file
    and log-file names alike) from the local copy of the table."""
    rows = [r for r in read_rows(TABLES_DIR / TABLE) if r["_hoodie_file_name"].startswith(file_id)]
    return sorted(tuple(r[c] for c in columns) for r in rows)


def _read_and_count(server, storage, spec, ctx):
    server.reset_counters()
    got = read_file_slice(storage, spec, ctx)
    return got, server.counters()


@pytest.mark.parametrize("whole_read_max", [object_store.WHOLE_READ_MAX, 64 << 10], ids=["whole", "ranged"])
def test_a_file_slice_on_s3_is_downloaded_once_in_few_requests(s3_endpoint, monkeypatch, whole_read_max):
    monkeypatch.setattr(object_store, "WHOLE_READ_MAX", whole_read_max)
    storage, root = copy_table_to_s3(s3_endpoint, TABLE)
    spec, ctx = _slice_with_logs(storage, root)
    sizes = {p: storage.stat(p).size for p in (spec.base_file, *spec.log_files)}
    base_size = sizes[spec.base_file]
    assert all(size <= object_store.WHOLE_READ_MAX for p, size in sizes.items() if p != spec.base_file)

    got, counters = _read_and_count(s3_endpoint, storage, spec, ctx)

    columns = [c for c in got.column_names if not c.startswith("_hoodie_") or c == "_hoodie_record_key"]
    expected = _hudi_rs_rows(spec.file_id, columns)
    assert expected and sorted(tuple(r[c] for c in columns) for r in got.to_pylist()) == expected
    assert counters.of("HEAD").requests == 0
    assert counters.response_bytes <= BYTES_SLACK * sum(sizes.values()), (counters.as_dict(), sizes)
    if base_size <= whole_read_max:
        bound = 1 + len(spec.log_files)
        assert base_size > 64 << 10        # so that the "ranged" case reads it by ranges
    else:
        # the tail GET, one more for a footer longer than the tail (Hudi's bloom filter is in it), at
        # most one GET per column chunk outside the tail (each <= 1 MiB here), one per log file
        metadata = pq.ParquetFile(TABLES_DIR / TABLE / spec.base_file[len(root) + 1:]).metadata
        chunks = [metadata.row_group(g).column(c) for g in range(metadata.num_row_groups)
                  for c in range(metadata.num_columns)]
        assert all(c.total_compressed_size <= 1 << 20 for c in chunks)
        footer_beyond_tail = metadata.serialized_size + 8 > whole_read_max
        bound = 1 + footer_beyond_tail + len(chunks) + len(spec.log_files)
    assert counters.requests <= bound, counters.as_dict()


@pytest.mark.parametrize("size", [0, 1, 1000, 3000])
def test_open_read_reads_whole_or_by_ranges_the_same_bytes(s3_endpoint, monkeypatch, size):
    """Under ``WHOLE_READ_MAX`` (1 KiB here) one GET; above it the tail's GET and one GET per read
    outside the tail; an empty object, which has no suffix to give, by a HEAD after the GET."""
    import os

    from tablesvc.storage import storage_for

    monkeypatch.setattr(object_store, "WHOLE_READ_MAX", 1024)
    url = s3_endpoint.url("open-read", os.urandom(8).hex(), "object")
    storage = storage_for(url, s3_endpoint.options())
    data = os.urandom(size)
    storage.write_new(url, data)
    s3_endpoint.reset_counters()
    with storage.open_read(url) as f:
        assert f.read() == data
        f.seek(-min(5, size), os.SEEK_END)
        assert f.read(3) == data[-min(5, size):][:3]
        f.seek(10)      # past the end of the small objects, as a file may be
        assert f.read(2000) == data[10:2010] and f.tell() == max(10, min(size, 2010))
        f.seek(0)
        assert f.read(size) == data and f.read(1) == b""
    counters = s3_endpoint.counters()
    if size == 0:
        assert (counters.of("HEAD").requests, counters.of("GET").requests) == (1, 1)
    elif size <= 1024:
        assert (counters.requests, counters.response_bytes) == (1, size)
    else:   # the tail; then read(), read(2000) and read(size) each reach below the tail once
        assert counters.of("HEAD").requests == 0 and counters.of("GET").requests == 4


def test_the_file_system_view_on_s3_sizes_files_from_the_listing_not_a_head_per_file(s3_endpoint, tmp_path):
    """Without a metadata table the view lists each partition and sizes the visible files: on S3
    the LIST answers the sizes, so the view costs no HEAD per file, and its sizes are the local copy's."""
    from fixture_tables import copy_table

    name = "v6_trips_8i1u"      # no metadata table: the view lists storage
    _, root = copy_table_to_s3(s3_endpoint, name, "sizes")
    local = Table.open(str(copy_table(TABLES_DIR / name, tmp_path)))
    table = Table.open(root, options=s3_endpoint.options())
    table.timeline()
    s3_endpoint.reset_counters()
    slices = table.latest_file_slices()
    heads = s3_endpoint.counters().of("HEAD").requests

    def sizes(file_slices):
        return sorted((s.file_id, s.base_file.size if s.base_file else None, tuple(f.size for f in s.log_files))
                      for s in file_slices)

    files = sum(1 + len(s.log_files) for s in slices)
    assert files > 2 and heads < files, (heads, files)
    assert sizes(slices) == sizes(local.latest_file_slices())
