"""``tablesvc write`` and ``tablesvc read`` as a user runs them (real processes, real Spark)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import sorted_rows

from helpers import one_error_line, tablesvc

pytestmark = pytest.mark.spark


def test_cli_write_read_and_bad_input(tmp_path):
    table = tmp_path / "people"
    assert tablesvc("init", str(table), "--name", "people", "--record-key", "id", "--ordering-field", "ts",
                    "--partition-field", "region", "--table-version", "6").returncode == 0
    batch = pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "name": ["Ann", "Bob", "Cy"],
                      "region": ["eu", "us", "eu"]})
    pq.write_table(batch, tmp_path / "b1.parquet")
    proc = tablesvc("write", str(table), "--input", str(tmp_path / "b1.parquet"), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["operation"] == "UPSERT" and result["inserts"] == 3
    (tmp_path / "b2.json").write_text('{"id": "b", "ts": 2, "name": "Bobby", "region": "us"}\n')
    assert tablesvc("write", str(table), "--input", str(tmp_path / "b2.json")).returncode == 0
    (tmp_path / "del.csv").write_text("id,region\nc,eu\n")
    assert tablesvc("write", str(table), "--input", str(tmp_path / "del.csv"), "--operation", "delete").returncode == 0
    expected = [("a", 1, "Ann"), ("b", 2, "Bobby")]
    assert sorted_rows(table, ("id", "ts", "name")) == expected

    out = tmp_path / "out.parquet"
    proc = tablesvc("read", str(table), "--columns", "id,ts,name", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(tuple(r.values()) for r in pq.read_table(out).to_pylist()) == expected
    proc = tablesvc("read", str(table))
    assert proc.returncode == 0 and "Bobby" in proc.stdout

    # Bad input: one line, exit 2, nothing of the table changed.
    before = sorted(os.listdir(table / ".hoodie"))
    pq.write_table(pa.table({"id": ["a"], "ts": ["not-a-number"], "name": ["x"], "region": ["eu"]}),
                   tmp_path / "bad_type.parquet")
    pq.write_table(pa.table({"ts": [3], "name": ["x"], "region": ["eu"]}), tmp_path / "no_key.parquet")
    pq.write_table(pa.table({"id": pa.array([None], pa.string()), "ts": [3], "name": ["x"], "region": ["eu"]}),
                   tmp_path / "null_key.parquet")
    for bad, needle in (("bad_type.parquet", "ts"), ("no_key.parquet", "id"), ("null_key.parquet", "null record key"),
                        ("missing.parquet", "missing.parquet")):
        proc = tablesvc("write", str(table), "--input", str(tmp_path / bad))
        assert proc.returncode == 2, (bad, proc.stdout, proc.stderr)
        assert needle in one_error_line(proc), bad
    assert sorted(os.listdir(table / ".hoodie")) == before
    assert sorted_rows(table, ("id", "ts", "name")) == expected
