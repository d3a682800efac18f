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
    kill_a_clean_at_every_point, slices_agree,
    keep_only_files_partition, metadata_listing, storage_listing,
)
from tablesvc.api import Table
from tablesvc.config import load_config
from tablesvc.metadata import MetadataTable
from tablesvc.services.clean import run_clean
from tablesvc.storage import LocalStorage
from timeline.clock import ManualClock, SystemClock
from timeline.instant import Action, State

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
