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
