"""A clean on a v9 table whose metadata table keeps ``files``, killed (SIGKILL, a real process)
after every storage call it makes (``tests/crash_harness.py --fork``): the metadata table's
delta commit at the clean's instant is written inside the clean's commit, so the points cover
the metadata table's requested, inflight, log file and completed files, then the data instant's
completion.  After each kill the readers still agree with storage (hudi-rs and tablesvc through
the metadata table, tablesvc from a storage listing); the next clean finishes the pending one,
re-writing the metadata table's delta commit of an earlier attempt, and leaves the metadata
table's listing equal to storage's."""

from __future__ import annotations

import os
import re
from pathlib import Path

from fixture_tables import copy_table
from metadata_tables import (
    finish_the_rollback_of,
    kill_a_clean_at_every_point, slices_agree,
    keep_only_files_partition, metadata_listing, storage_listing,
)
from tablesvc.api import Table
from tablesvc.config import load_config
from tablesvc.metadata import MetadataTable
from tablesvc.services.clean import run_clean
from tablesvc.storage import LocalStorage
from timeline.clock import ManualClock, SystemClock
from timeline.instant import Action, Instant, State

DAY_MS = 24 * 3600 * 1000
MDT_TIMELINE = ".hoodie/metadata/.hoodie/timeline/"




def _mdt_files(path: Path, ts: str) -> list:
    table = Table.open(str(path))
    return list(MetadataTable(table.storage, table.base_path, table.timeline()).timeline.files_of(ts))


def test_clean_on_a_files_only_metadata_table_killed_at_every_storage_operation(fixture_root, tmp_path):
    template = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path / "template")
    keep_only_files_partition(template)
    (template / ".hoodie" / "tablesvc.yaml").write_text("hoodie.cleaner.commits.retained: 1\n")
    slices_agree(template)
    run = kill_a_clean_at_every_point(tmp_path, template)
    assert [r["status"] for r in run["results"]] == ["done"]
    ops = run["ops"]
    t = run["results"][0]["instant"]
    # the metadata table's delta commit at T, all of it before the clean's own completed file
    mdt_steps = [i for i, op in enumerate(ops) if f"{MDT_TIMELINE}{t}" in op or f"metadata/files/.files-0000-0_{t}" in op]
    data_done = [i for i, op in enumerate(ops) if re.search(rf"\.hoodie/timeline/{t}_\d{{17}}\.clean$", op)]
    assert len(mdt_steps) == 4 and len(data_done) == 1 and max(mdt_steps) < data_done[0], ops
    between = [p for p in run["points"] if p["point"] == data_done[0]]   # killed after the MDT completed
    # (each point's run picks its own instant times)
    assert re.search(rf"{MDT_TIMELINE}\d{{17}}_\d{{17}}\.deltacommit$", between[0]["last_op"]), between
    cfg = load_config(LocalStorage(), table_path=str(template))
    full = Path(run["full_path"])
    expected = storage_listing(full)
    checked_between = False
    for p in run["points"]:
        path = Path(p["path"])
        try:
            slices_agree(path)
            pending_clean = [i for i in Table.open(str(path)).timeline().pending() if i.action is Action.CLEAN]
            if p is between[0]:
                # the metadata table completed T, the clean did not: no reader takes T's records
                assert {f.state for f in _mdt_files(path, pending_clean[0].timestamp)} >= {State.COMPLETED}
                checked_between = True
            run_clean(Table.open(str(path), clock=ManualClock(SystemClock().now_ms() + DAY_MS)), cfg)
            table = Table.open(str(path))
            assert table.timeline().pending() == ()
            assert metadata_listing(table) == storage_listing(path) == expected
            slices_agree(path)
            [clean] = table.timeline().filter(actions=[Action.CLEAN])
            mdt = _mdt_files(path, clean.timestamp)
            assert sorted(f.state.value for f in mdt) == ["completed", "inflight", "requested"]
            logs = sorted(n for n in os.listdir(path / ".hoodie" / "metadata" / "files") if f"_{clean.timestamp}." in n)
            assert len(logs) == 1, logs
        except Exception as e:
            raise AssertionError(f"point {p['point']} (killed after `{p['last_op']}`): {type(e).__name__}: {e}") from e
    assert checked_between


def _kill_a_rollback_at_every_point(tmp_path: Path, template: Path, target: str) -> dict:
    """``tests/crash_harness.py --fork``: the rollback of completed ``target`` killed (SIGKILL)
    after each of its storage calls in turn."""
    import json
    import signal
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(repo), TABLESVC_SPARK_LOG=str(tmp_path / "spark.log"))
    proc = subprocess.run([sys.executable, str(repo / "tests" / "crash_harness.py"), "--fork", str(template),
                           str(tmp_path / "points"), "rollback", target, "--allow-completed"],
                          env=env, capture_output=True, text=True, timeout=900, start_new_session=True)
    assert proc.returncode == 0, f"harness failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    for p in run["points"]:
        assert (p["signal"], p["exit"]) == (signal.SIGKILL, None), p
    return run


def _rows(path: Path, as_of: str | None = None) -> list[str]:
    from oracles.hudi_rs import read_rows

    return sorted(str(sorted((k, str(v)) for k, v in r.items() if k != "_hoodie_commit_seqno"))
                  for r in read_rows(path, as_of=as_of))


def test_rollback_of_a_completed_write_killed_at_every_storage_operation(fixture_root, tmp_path):
    """The rollback ``R`` of a completed write ``T`` on a v9 table whose MDT keeps ``files``,
    ``column_stats`` and ``record_index``, killed after every storage call: the MDT's rollback at
    ``R`` (requested, inflight, ``T``'s completed file, its log files, its pending files, ``R``
    completed) all before the data ``R`` completes.  After each kill the readers agree and read the
    rows from before or from after ``T`` (never half of ``T``); the next recovery (the sweep, or
    the rollback again when ``R`` was not requested yet) finishes: one MDT rollback of ``T``, ``T``
    gone from both timelines, the MDT's listing equal to storage's."""

    template = copy_table(fixture_root.path("v9_nonpartitioned_rollback"), tmp_path / "template")
    table = Table.open(str(template))
    completed = [i for i in table.timeline().instants if i.is_completed]
    target = [i for i in completed if i.action is Action.DELTA_COMMIT][-1]
    previous = [i for i in completed if i.timestamp < target.timestamp][-1]
    with_t, without_t = _rows(template), _rows(template, as_of=previous.completion_time)
    assert with_t != without_t
    t = target.timestamp
    run = _kill_a_rollback_at_every_point(tmp_path, template, t)
    assert [r["status"] for r in run["results"]] == ["done"]
    r = run["results"][0]["instant"]
    ops = run["ops"]
    step = {name: [i for i, op in enumerate(ops) if re.search(pattern, op)] for name, pattern in {
        "mdt R requested": rf"{MDT_TIMELINE}{r}\.rollback\.requested$",
        "mdt R inflight": rf"{MDT_TIMELINE}{r}\.rollback\.inflight$",
        "mdt T completed gone": rf"^delete {MDT_TIMELINE}{t}_\d{{17}}\.deltacommit$",
        "mdt T logs gone": rf"^delete \.hoodie/metadata/[a-z_]+/\.[^/]*_{t}\.log\.",
        "mdt T inflight gone": rf"^delete {MDT_TIMELINE}{t}\.deltacommit\.inflight$",
        "mdt T requested gone": rf"^delete {MDT_TIMELINE}{t}\.deltacommit\.requested$",
        "mdt R completed": rf"{MDT_TIMELINE}{r}_\d{{17}}\.rollback$",
        "data R completed": rf"^\S+ \.hoodie/timeline/{r}_\d{{17}}\.rollback$",
    }.items()}
    assert all(step.values()), (step, ops)
    order = [min(v) for v in step.values()]
    assert order == sorted(order) and max(step["mdt T logs gone"]) < min(step["mdt T inflight gone"]), (step, ops)
    cfg = load_config(LocalStorage(), table_path=str(template))
    for p in run["points"]:
        path = Path(p["path"])
        try:
            slices_agree(path)
            assert _rows(path) in (with_t, without_t)
            table, mdt = finish_the_rollback_of(path, t, cfg)
            assert not list((path / ".hoodie" / "metadata").rglob(f".*_{t}.log.*"))
            from timeline.payloads import decode_rollback_plan
            of_t = [i for i in mdt.timeline.filter(actions=[Action.ROLLBACK])
                    if decode_rollback_plan(table.storage.read_bytes(mdt.timeline.path_of(
                        Instant(i.timestamp, Action.ROLLBACK, State.REQUESTED))), "plan")
                    .instant_to_rollback.commit_time == t]
            assert len(of_t) == 1 and of_t[0].is_completed, of_t
            assert _rows(path) == without_t
            slices_agree(path)
            assert metadata_listing(table) == storage_listing(path)
        except Exception as e:
            raise AssertionError(f"point {p['point']} (killed after `{p['last_op']}`): {type(e).__name__}: {e}") from e
