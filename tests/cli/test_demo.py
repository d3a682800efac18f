"""The demo and its self-built sample table (what it shows when no fixtures are present)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_tables import extracted_table_names
from oracles.hudi_rs import file_slices, read_rows, read_table

from tablesvc.cli.cmd_timeline import describe_instant
from tablesvc.demo.sample_table import build_sample_table
from tablesvc.api import Table
from timeline.instant import Action

REPO = Path(__file__).resolve().parents[2]
DATA_COLUMNS = ("ts", "uuid", "rider", "fare", "city")


@pytest.mark.parametrize("version", [6, 8, 9])
def test_sample_table_reads_back_through_hudi_rs_as_expected(tmp_path, version):
    sample = build_sample_table(str(tmp_path / "trips"), table_version=version)
    rows = read_rows(sample.table.base_path)
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
                    for s in file_slices(sample.table.base_path))
    assert ours == theirs
    assert [i.action for i in table.timeline().completed_writes()] == [Action.DELTA_COMMIT] * 2
    first = table.timeline().completed_writes()[0].timestamp
    old = read_table(sample.table.base_path, as_of=first)
    assert old.num_rows == 300


def test_demo_builds_its_own_table_without_fixtures(tmp_path):
    # --no-story: the Spark story (steps 1-6) is test_spark_story_tells_the_whole_story's
    env = dict(os.environ, PYTHONPATH=str(REPO), TABLESVC_FIXTURES=str(tmp_path / "absent"))
    proc = subprocess.run([sys.executable, "-m", "tablesvc.demo", "--no-story"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "building a sample table" in proc.stdout
    assert "=== trips" in proc.stdout and "latest file slices: 3" in proc.stdout


def test_demo_shows_every_fixture_table():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "tablesvc.demo", "--no-story"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    names = extracted_table_names()
    assert len(names) >= 10
    for name in names:
        assert f"/{name})" in proc.stdout


def test_demo_refuses_a_story_too_small():
    proc = subprocess.run([sys.executable, "-m", "tablesvc.demo", "--rows", "50"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert proc.returncode == 2 and "at least 200" in proc.stderr


# ---------------------------------------------------------------------------------------------
# The Spark story (tablesvc.demo.spark_story), on 2,000 rows instead of 300,000
# ---------------------------------------------------------------------------------------------

CITIES = ("chennai", "london", "new_york", "san_francisco", "sao_paulo")


def story_model(rows: int) -> dict[str, tuple[int, str]]:
    """What the story's committed writes leave, worked out here from its batches: record key
    -> (ts, city).  The killed write commits nothing."""
    ts: dict[int, int] = {}

    def upsert(ids, base):                       # event-time ordering: the larger ts wins
        for i in ids:
            if base + i % 1000 >= ts.get(i, -1):
                ts[i] = base + i % 1000

    def delete(ids):
        for i in ids:
            ts.pop(i, None)

    upsert(range(rows), 1_000_000)                                       # 1. insert
    upsert(range(rows // 10), 2_000_000)                                 # 1. upsert: newer ts
    upsert(range(rows // 10, rows // 10 + rows // 20), 0)                #    older ts: no change
    upsert(range(rows, rows + rows // 50), 2_000_000)                    #    new keys
    delete(range(rows // 2, rows // 2 + rows // 100))                    # 1. delete
    upsert(range(rows // 5, rows // 5 + rows // 20), 3_000_000)          # 2. upsert
    upsert(range(rows + rows // 50, rows + rows // 50 + rows // 100), 3_000_000)
    upsert(range(rows // 50), 4_000_000)                                 # 3. upsert, services off
    delete(range(rows // 4, rows // 4 + rows // 200))                    # 3. delete, services off
    return {f"trip-{i:07d}": (t, CITIES[i % 5]) for i, t in ts.items()}


@pytest.mark.spark
def test_spark_story_tells_the_whole_story(tmp_path, spark):
    from tablesvc.demo.spark_story import run_story

    rows = 2_000
    story = run_story(str(tmp_path / "trips"), rows=rows)
    table = Table.open(story.path)
    tl = table.timeline()
    assert tl.pending() == ()
    ops = {i.timestamp: describe_instant(table, tl, i)["operation"] for i in tl.instants}

    compactions = [i for i in tl.completed(Action.COMMIT) if tl.origin_action(i) is Action.COMPACTION]
    assert len(compactions) == 2 and {ops[c.timestamp] for c in compactions} == {"COMPACT"}   # inline, explicit
    log_compactions = [i for i in tl.completed(Action.DELTA_COMMIT) if ops[i.timestamp] == "LOG_COMPACT"]
    assert len(log_compactions) == 2                                                     # inline, explicit
    assert all(tl.origin_action(i) is Action.LOG_COMPACTION for i in log_compactions)
    writes = [ops[i.timestamp] for i in tl.completed(Action.DELTA_COMMIT) if ops[i.timestamp] != "LOG_COMPACT"]
    assert writes == ["INSERT", "UPSERT", "DELETE", "UPSERT", "UPSERT", "DELETE"]         # the killed one is gone
    assert tl.completed(Action.CLEAN)
    # The last clean kept only the slices of the last compaction: every base file is its.
    base_files = [n for _, _, names in os.walk(story.path) for n in names if n.endswith(".parquet")]
    assert len(base_files) == 10 and all(n.endswith(f"_{compactions[-1].timestamp}.parquet") for n in base_files)
    # One rollback, of an instant no longer on the timeline, completed last.
    [rb] = tl.completed(Action.ROLLBACK)
    assert tl.instants[-1] == rb
    target = tl.plan_of(table.storage, rb).instant_to_rollback.commit_time
    assert tl.get(target) is None and target > compactions[-1].timestamp

    model = story_model(rows)
    assert len(model) == rows + rows // 50 + rows // 100 - rows // 100 - rows // 200
    got = {r["uuid"]: (r["ts"], r["city"]) for r in read_rows(story.path)}
    assert got == model
    ours = {r["uuid"]: (r["ts"], r["city"]) for r in table.read(spark=spark).collect()}
    assert ours == model
