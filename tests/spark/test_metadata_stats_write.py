"""tablesvc's compaction, log compaction and clean on every Java-written table with a metadata table,
column_stats and partition_stats kept (record index and secondary indexes left as they are: those
actions leave them true, table/writable.py).  After each step: hudi-rs through the metadata table,
tablesvc's Spark read and the model read the same rows; the file slices hudi-rs lists through the
metadata table equal tablesvc's from a storage listing (names and sizes); the metadata table's
listing equals storage; and its column_stats / partition_stats records equal a recomputation from the
files on storage (tests/metadata_stats_check.py).  An upsert where an opt-out allows one."""

from __future__ import annotations

import pyarrow as pa
import pytest
from oracles.hudi_rs import read_rows

from fixture_tables import copy_table
from metadata_stats_check import check_column_stats, check_partition_stats, stored_partition_stats
from metadata_tables import hudi_rs_slice_rows, metadata_listing, storage_listing, storage_slices, tablesvc_slices
from tablesvc.api import Table
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.metadata import MetadataTable
from tablesvc.services.result import Status
from timeline.instant import Action

# v9_nonpartitioned_rollback: none of these services has anything to do on it (one log per group,
# nothing to clean); test_record_index_partitioned_write.py upserts first and then services it.
MDT_FIXTURES = ["v8_trips_8i3u1d", "zips:mor_avro_v9_txns_simple_meta",
                "zips:mor_avro_v9_txns_complex_meta", "zips:mor_avro_v9_txns_nonpart_meta"]


def _rows_by_key(rows) -> list:
    """Every row (meta fields included: these services keep them), sorted; a key may be in two file
    groups of a Java-written table, so rows are not keyed."""
    return sorted(({k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in rows), key=repr)


def _tablesvc_rows(path) -> list[dict]:
    """tablesvc's reader over its latest slices (listed through the metadata table)."""
    table = Table.open(str(path))
    ctx = ReadContext.for_table(table)
    parts = [read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx) for s in table.latest_file_slices()]
    return pa.concat_tables(parts).to_pylist() if parts else []


def _check(path, model: dict, step: str, partition_stats: bool = True) -> tuple[int, int]:
    table = Table.open(str(path))
    try:
        assert table.uses_metadata_table
        listing = metadata_listing(table)
        assert listing == storage_listing(path)
        assert tablesvc_slices(table) == hudi_rs_slice_rows(path) == storage_slices(table)
        assert _rows_by_key(read_rows(path)) == model
        assert _rows_by_key(_tablesvc_rows(path)) == model
        return check_column_stats(path, listing), check_partition_stats(path) if partition_stats else 0
    except AssertionError as e:
        raise AssertionError(f"after {step}: {e}") from e


def _mdt_deltacommits(path) -> set[str]:
    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    return {i.timestamp for i in mdt.timeline.completed(Action.DELTA_COMMIT)}


def _stats_logs(path, ts: str) -> set[str]:
    folder = path / ".hoodie" / "metadata"
    return {p.parent.name for p in folder.glob(f"*/.*_{ts}.log.*") if not p.name.endswith(".crc")}


@pytest.mark.spark
@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_services_keep_column_and_partition_stats_true(tmp_path, spark, fixture_root, name):
    path = copy_table(fixture_root.path(name), tmp_path)
    model = _rows_by_key(read_rows(path))
    assert model
    before = _check(path, model, "nothing (the Java-written table)")
    listed = Table.open(str(path)).config.props["hoodie.table.metadata.partitions"].split(",")
    stats_partitions = {"column_stats", "partition_stats"} & set(listed)
    assert "column_stats" in stats_partitions

    steps = []
    [lc] = Table.open(str(path)).log_compact()
    if lc.status is Status.DONE:
        steps.append(("log compaction", lc.instant))
        _check(path, model, "log compaction")
    [c] = Table.open(str(path)).compact()
    assert c.status in (Status.DONE, Status.NOTHING_TO_DO), c.render()
    if c.status is Status.DONE:          # the v9 txns tables end compacted: no log to compact
        steps.append(("compaction", c.instant))
        _check(path, model, "compaction")
    partition_stats_before = stored_partition_stats(path)
    [cl] = Table.open(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})
    assert cl.status in (Status.DONE, Status.NOTHING_TO_DO), cl.render()
    if cl.status is Status.DONE:
        steps.append(("clean", cl.instant))
        # a clean writes no partition stats: its records stay those checked before it (a recomputation
        # as of their commit would now miss the slices the clean removed)
        _check(path, model, "clean", partition_stats=False)
        assert stored_partition_stats(path) == partition_stats_before
    assert steps, "no service had anything to do"
    assert {ts for _, ts in steps} <= _mdt_deltacommits(path)
    for step, ts in steps:
        written = _stats_logs(path, ts)
        expected = {"files", "column_stats"} | ({"partition_stats"} & stats_partitions if step != "clean" else set())
        assert written == expected, (step, written)
    assert before[0] > 0
