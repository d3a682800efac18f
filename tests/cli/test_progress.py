"""Progress lines on stderr while a command's Spark jobs run (write, read, compaction run,
logcompaction run, run): every ``TABLESVC_PROGRESS_SECONDS`` (default 5; 0.05 here so that a
short job prints some), file groups done (of how many, when known), rows, tasks.  None with
``--quiet``, none with ``--json``, and none when stderr is not a terminal and the variable is not
set (a test capturing stderr, a log).  The command's own output (stdout) is the same either way.
The rows written are read back with hudi-rs.
"""

from __future__ import annotations

import json
import re
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import read_rows

from tablesvc.cli.main import main
from tablesvc.api import Table

pytestmark = pytest.mark.spark
LINE = re.compile(r"^tablesvc: progress: (?P<label>.+?): (?P<done>\d+)(?P<of>/\d+)? file groups, "
                  r"(?P<rows>[\d,]+) rows, \d+/\d+ tasks, \d+\.\d s$")


def cli(capsys, *argv: str) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err.splitlines()


def progress_lines(err: list[str], what: str) -> list[re.Match]:
    """The progress lines of the job ``what`` (``write``, ``compaction``: with their instant)."""
    found = [LINE.match(line) for line in err if line.startswith("tablesvc: progress: ")]
    assert all(found), err
    return [m for m in found if re.fullmatch(rf"{what}( \d{{17}})?", m.group("label"))]


@pytest.fixture
def table(tmp_path, capsys, spark):
    path = tmp_path / "t"
    assert cli(capsys, "init", str(path), "--name", "t", "--record-key", "id", "--ordering-field", "ts",
               "--partition-field", "part")[0] == 0
    return path


def batch(tmp_path, name: str, keys: range, ts: int):
    pq.write_table(pa.table({"id": [f"k{i}" for i in keys], "ts": [ts] * len(keys),
                             "part": [f"p{i % 4}" for i in keys], "v": [float(i) for i in keys]}),
                   tmp_path / name)
    return str(tmp_path / name)


def test_long_runs_print_progress_lines_and_quiet_or_json_print_none(table, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TABLESVC_PROGRESS_SECONDS", "0.05")
    first = batch(tmp_path, "first.parquet", range(20_000), 1)
    rc, out, err = cli(capsys, "write", str(table), "--input", first)
    assert rc == 0, err
    assert progress_lines(err, "write"), err
    assert "20000 records" in out

    # --quiet and --json: no progress line; the result is printed as without them
    rc, out, err = cli(capsys, "write", str(table), "--input", batch(tmp_path, "u1.parquet", range(0, 20_000, 2), 2),
                       "--quiet")
    assert rc == 0 and err == [] and "10000 records" in out, err
    rc, out, err = cli(capsys, "write", str(table), "--input", batch(tmp_path, "u2.parquet", range(1, 20_000, 2), 3),
                       "--json")
    assert rc == 0 and err == [] and json.loads(out)["records_written"] == 10_000, err

    rc, out, err = cli(capsys, "read", str(table), "--output", str(tmp_path / "out.parquet"))
    assert rc == 0, err
    assert progress_lines(err, "read")
    assert pq.read_table(tmp_path / "out.parquet").num_rows == 20_000
    rc, _out, err = cli(capsys, "read", str(table), "--output", str(tmp_path / "out2.parquet"), "--quiet")
    assert rc == 0 and err == []

    groups = len(Table.open(str(table)).latest_file_slices())      # every one has logs: all are planned
    rc, out, err = cli(capsys, "compaction", "run", str(table))
    assert rc == 0, err
    lines = progress_lines(err, "compaction")
    assert lines and all(m.group("of") == f"/{groups}" for m in lines), err
    assert "compaction: done" in out and len(read_rows(table)) == 20_000


def test_log_compaction_prints_progress_and_json_prints_none(table, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TABLESVC_PROGRESS_SECONDS", raising=False)
    for ts in (1, 2, 3):   # stderr is no terminal here, and the variable is not set: no progress line
        rc, _out, err = cli(capsys, "write", str(table), "--input", batch(tmp_path, f"b{ts}.parquet", range(4000), ts))
        assert rc == 0 and err == [], err
    monkeypatch.setenv("TABLESVC_PROGRESS_SECONDS", "0.05")
    copy = tmp_path / "copy"
    shutil.copytree(table, copy)
    rc, out, err = cli(capsys, "logcompaction", "run", str(table))
    assert rc == 0 and "logcompaction: done" in out, err
    assert progress_lines(err, "log compaction"), err
    rc, out, err = cli(capsys, "logcompaction", "run", str(copy), "--json")
    assert rc == 0 and err == [] and json.loads(out)[0]["status"] == "done", err
    assert len(read_rows(table)) == len(read_rows(copy)) == 4000
