"""Issue #24 item 3, with real processes: a `tablesvc write` killed with SIGKILL, then at once
`tablesvc rollback` (exit 3, the killed write named as left pending, nothing touched), then
`tablesvc rollback --wait` (exit 0 once the dead writer's heartbeat expired; nothing pending,
and hudi-rs reads the rows from before the killed write)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import data_files, file_digests, files_named_with, kill_tree, wait_for
from oracles.hudi_rs import rows_by_key
from table_builders import six_digit_key_rows

from tablesvc.api import Table, TableSpec

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]
# Judged dead 10 s after its last beat: long enough for the first rollback to start while the
# killed writer still counts as alive, short enough for --wait to take seconds.
HEARTBEAT = ["--conf", "hoodie.client.heartbeat.interval_in_ms=1000",
             "--conf", "hoodie.client.heartbeat.tolerable.misses=10"]


def tablesvc(tmp_path: Path, *args: str, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(REPO), TABLESVC_SPARK_LOG=str(tmp_path / "spark.log"))
    return subprocess.run([sys.executable, "-m", "tablesvc", *args], env=env, capture_output=True, text=True,
                          timeout=300, **kwargs)


def test_killed_write_is_left_pending_then_rolled_back_with_wait(tmp_path, spark):
    path = tmp_path / "t"
    table = Table.create(str(path), TableSpec("t", ("uuid",), "ts", ("city",), table_version=8, num_buckets=2))
    table.upsert(spark.createDataFrame(six_digit_key_rows(range(0, 3000), 1).to_pylist(),
                                       "uuid string, ts long, city string"))
    before_rows = rows_by_key(path, "uuid", "ts")
    assert len(before_rows) == 3000
    before_files = data_files(path)

    pq.write_table(six_digit_key_rows(range(0, 100_000), 2), tmp_path / "big.parquet")
    env = dict(os.environ, PYTHONPATH=str(REPO), TABLESVC_SPARK_LOG=str(tmp_path / "spark.log"))
    proc = subprocess.Popen([sys.executable, "-m", "tablesvc", "write", str(path), "--input",
                             str(tmp_path / "big.parquet"), *HEARTBEAT],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        instant = wait_for(lambda: next((i.timestamp for i in Table.open(str(path)).timeline().pending()), None))
        wait_for(lambda: files_named_with(path, instant))      # its first data file is on storage
    finally:
        kill_tree(proc.pid)    # SIGKILL to the write and everything below it (Spark's JVM, workers)
        proc.wait()
    killed_at = time.monotonic()
    assert [i.timestamp for i in Table.open(str(path)).timeline().pending()] == [instant]
    assert data_files(path) - before_files

    # At once: the killed writer's heartbeat is still alive, so rollback leaves it and says so.
    files = file_digests(path)
    first = tablesvc(tmp_path, "rollback", str(path), *HEARTBEAT)
    assert time.monotonic() - killed_at < 10, "the first rollback came too late to see a live heartbeat"
    assert first.returncode == 3, first.stderr
    [line] = first.stdout.splitlines()
    assert re.fullmatch(rf"left pending: {instant} deltacommit \((requested|inflight)\): heartbeat alive: "
                        r"last beat \d+\.\d s ago, judged dead in \d+\.\d s", line), line
    [err] = first.stderr.splitlines()
    assert err.startswith("tablesvc: error: ") and instant in err and "--wait" in err
    assert file_digests(path) == files                                  # nothing deleted, nothing written

    # --wait: progress on stderr until the heartbeat expires, then the rollback.
    second = tablesvc(tmp_path, "rollback", str(path), "--wait", "--timeout", "120", *HEARTBEAT)
    assert second.returncode == 0, second.stderr
    [done] = second.stdout.splitlines()
    assert done.startswith("rollback: done") and f"rolled back {instant} (deltacommit)" in done, done
    assert any(line.startswith("waiting") and instant in line for line in second.stderr.splitlines()), \
        second.stderr
    reopened = Table.open(str(path))
    assert reopened.timeline().pending() == () and reopened.timeline().get(instant) is None
    assert data_files(path) == before_files
    assert not files_named_with(path, instant)
    assert rows_by_key(path, "uuid", "ts") == before_rows
