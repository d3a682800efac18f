"""kill -9 during a write: readers never see partial work, and the next write goes on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import rows_by_key

from tablesvc.api import Table, TableSpec
from helpers import files_named_with, kill_tree, wait_for
from table_builders import six_digit_key_rows

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]


def start_write(table_path: Path, input_path: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO), TABLESVC_SPARK_LOG=str(table_path.parent / "spark.log"))
    return subprocess.Popen([sys.executable, "-m", "tablesvc", "write", str(table_path), "--input", str(input_path)],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("version,kill_point", [(6, "first_data_file"), (8, "inflight"), (8, "first_data_file")])
def test_kill_9_mid_write_leaves_readers_on_the_previous_state(tmp_path, spark, version, kill_point):
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), table_version=version,
                                                        num_buckets=2))
    first = spark.createDataFrame(six_digit_key_rows(range(0, 3000), 1).to_pylist(),
                                  "uuid string, ts long, city string")
    table.upsert(first)
    before = rows_by_key(table.base_path, "uuid", "ts")
    assert len(before) == 3000

    pq.write_table(six_digit_key_rows(range(0, 100_000), 2), tmp_path / "big.parquet")  # updates and inserts
    proc = start_write(Path(table.base_path), tmp_path / "big.parquet")
    try:
        instant = wait_for(lambda: next((i.timestamp for i in Table.open(table.base_path).timeline().pending()),
                                        None))
        if kill_point == "first_data_file":
            # v8 names new files after the write's instant; v6 names logs after their slice
            # (the first batch wrote base files only, so any log file is this write's).
            wait_for(lambda: files_named_with(Path(table.base_path), instant if version == 8 else ".log."))
    finally:
        kill_tree(proc.pid)
        proc.wait()

    reopened = Table.open(table.base_path)
    assert [i.timestamp for i in reopened.timeline().pending()] == [instant]
    assert rows_by_key(table.base_path, "uuid", "ts") == before
    ours = {r["uuid"]: r["ts"] for r in reopened.read(spark=spark).collect()}
    assert ours == before

    # The table stays writable: the next write commits and the failed one stays invisible.
    nxt = spark.createDataFrame(six_digit_key_rows(range(2990, 3010), 3).to_pylist(),
                                "uuid string, ts long, city string")
    reopened.upsert(nxt)
    expected = dict(before) | {f"k{k:06d}": 3 for k in range(2990, 3010)}
    assert rows_by_key(table.base_path, "uuid", "ts") == expected
    assert {r["uuid"]: r["ts"] for r in reopened.read(spark=spark).collect()} == expected


@pytest.mark.s3
@pytest.mark.slow       # ~70 s here: the killed command's Spark start and its first task on moto
def test_kill_9_of_a_spark_write_to_s3_mid_job_leaves_readers_on_the_previous_state(tmp_path, s3_endpoint):
    """`tablesvc write s3://...` (its Spark tasks writing objects, endpoint and keys from the
    environment) killed once a task's first data object of the write exists: hudi-rs, reading the
    bucket itself, and tablesvc's reader see the previous rows; `tablesvc rollback` removes the
    dead write's objects; a later write commits.  No Spark in this process: the table's first rows
    and the later write go through the write pieces (``write_without_spark``).  The write killed at
    its storage calls one by one, without Spark, on S3: test_model_based.py's
    ``test_kill_9_write_at_random_points[s3]``."""
    from oracles.hudi_rs import read_rows
    from table_builders import write_without_spark
    from table_locations import files_under, s3_location
    from tablesvc.merge import ReadContext, SliceSpec, read_file_slice

    where = s3_location(s3_endpoint, "write-crash")
    path = where.path("t")
    table = Table.create(path, TableSpec("t", ("uuid",), "ts", ("city",), table_version=8, num_buckets=2),
                         options=where.options)
    write_without_spark(table, six_digit_key_rows(range(0, 3000), 1), "upsert", stage=1)

    def hudi_rs() -> dict:
        return {r["uuid"]: r["ts"] for r in read_rows(path, storage_options=where.options)}

    def ours() -> dict:
        t = Table.open(path, options=where.options)
        ctx = ReadContext.for_table(t)
        return {r["uuid"]: r["ts"] for s in t.latest_file_slices()
                for r in read_file_slice(t.storage, SliceSpec.from_file_slice(s), ctx).to_pylist()}

    def data_objects() -> set[str]:
        return {k for k in files_under(where.storage(), path) if not k.startswith(".hoodie/")}

    before = hudi_rs()
    assert len(before) == 3000 and ours() == before
    files_before = data_objects()

    pq.write_table(six_digit_key_rows(range(0, 100_000), 2), tmp_path / "big.parquet")
    proc = subprocess.Popen([sys.executable, "-m", "tablesvc", "write", path, "--input", str(tmp_path / "big.parquet")],
                            env=where.child_env(PYTHONPATH=str(REPO), TABLESVC_SPARK_LOG=str(tmp_path / "spark.log")),
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        instant = wait_for(lambda: next((i.timestamp for i in Table.open(path, options=where.options)
                                         .timeline().pending()), None))
        wait_for(lambda: any(instant in k for k in data_objects() - files_before))
    finally:
        kill_tree(proc.pid)
        proc.wait()

    reopened = Table.open(path, options=where.options)
    assert [i.timestamp for i in reopened.timeline().pending()] == [instant]
    assert hudi_rs() == before and ours() == before
    assert any(instant in k for k in data_objects() - files_before)      # partial work is there, unread

    rollback = subprocess.run([sys.executable, "-m", "tablesvc", "rollback", path, "--conf",
                               "hoodie.client.heartbeat.tolerable.misses=0"],
                              env=where.child_env(PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=300)
    assert rollback.returncode == 0, rollback.stderr
    reopened = Table.open(path, options=where.options)
    assert reopened.timeline().pending() == () and reopened.timeline().get(instant) is None
    assert data_objects() == files_before and hudi_rs() == before

    write_without_spark(reopened, six_digit_key_rows(range(2990, 3010), 3), "upsert", stage=2)
    expected = dict(before) | {f"k{k:06d}": 3 for k in range(2990, 3010)}
    assert hudi_rs() == expected and ours() == expected
