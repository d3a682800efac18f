"""The demo and its self-built sample table (what it shows when no fixtures are present)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from tablesvc.demo.sample_table import build_sample_table
from tablesvc.table import Table
from timeline.instant import Action

REPO = Path(__file__).resolve().parent.parent
DATA_COLUMNS = ("ts", "uuid", "rider", "fare", "city")


@pytest.mark.parametrize("version", [6, 8, 9])
def test_sample_table_reads_back_through_hudi_rs_as_expected(tmp_path, version):
    sample = build_sample_table(str(tmp_path / "trips"), table_version=version)
    hudi_table = HudiTableBuilder.from_base_uri(sample.table.base_path).build()
    rows = pa.Table.from_batches(hudi_table.read(HudiReadOptions())).to_pylist()
    got = {r["uuid"]: {c: r[c] for c in DATA_COLUMNS} for r in rows}
    assert got == sample.expected
    assert len(got) == 290  # 3 cities x 100 inserted, 10 deleted
    updated = [r for r in got.values() if r["city"] == "san_francisco" and r["fare"] == 0.0]
    assert len(updated) == 10
    # Our view and hudi-rs agree on the slices, and the timeline holds two completed deltacommits.
    table = Table.open(sample.table.base_path)
    ours = sorted((s.file_id, s.base_file.file_name, tuple(lf.file_name for lf in s.log_files))
                  for s in table.latest_file_slices())
    theirs = sorted((s.file_id, s.base_file_name, tuple(s.log_file_names))
                    for s in hudi_table.get_file_slices(HudiReadOptions()))
    assert ours == theirs
    assert [i.action for i in table.timeline().completed_writes()] == [Action.DELTA_COMMIT] * 2
    first = table.timeline().completed_writes()[0].timestamp
    old = pa.Table.from_batches(hudi_table.read(HudiReadOptions().with_as_of_timestamp(first)))
    assert old.num_rows == 300


def test_demo_builds_its_own_table_without_fixtures(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), TABLESVC_FIXTURES=str(tmp_path / "absent"))
    proc = subprocess.run([sys.executable, "-m", "tablesvc.demo"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "building a sample table" in proc.stdout
    assert "=== trips" in proc.stdout and "latest file slices: 3" in proc.stdout


def test_demo_shows_every_fixture_table():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "tablesvc.demo"], capture_output=True, text=True, env=env,
                          timeout=120)
    fixtures = Path(os.environ.get("TABLESVC_FIXTURES", REPO.parent / "shared" / "fixtures" / "hudi-rs"))
    if not (fixtures / "tables").is_dir():
        pytest.skip("no fixtures")
    assert proc.returncode == 0, proc.stderr
    for name in os.listdir(fixtures / "tables"):
        assert f"/{name})" in proc.stdout
