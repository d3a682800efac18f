"""A clean on a version-6 table whose metadata table Java Hudi 0.15.0 wrote (``files`` only,
``tests/data/hudi/v6_metadata/v6_mdt_files``), killed (SIGKILL, a real process) after every storage
call it makes (``tests/crash_harness.py --fork``): the metadata table's delta commit at the
clean's instant (v6 layout: ``T.deltacommit``; its log file named by the slice's base instant) is
written inside the clean's commit, before the clean's completed file.  After each kill the
readers agree with storage (tablesvc through the metadata table, hudi-rs and tablesvc from a
storage listing); the next clean finishes the pending one, writing the metadata table's delta
commit again after taking out an earlier attempt's, and leaves the metadata table's listing
equal to storage's with one log file of ``T``."""

from __future__ import annotations

import re
from pathlib import Path

from fixture_tables import v6_metadata_table
from metadata_tables import kill_a_clean_at_every_point, metadata_listing, slices_agree, storage_listing
from tablesvc.api import Table
from tablesvc.config import load_config
from tablesvc.logformat import read_log_file
from tablesvc.metadata import MetadataTable
from tablesvc.services.clean import run_clean
from tablesvc.storage import LocalStorage
from timeline.clock import ManualClock, SystemClock
from timeline.instant import Action

DAY_MS = 24 * 3600 * 1000
MDT_TIMELINE = ".hoodie/metadata/.hoodie/"


def _logs_of(path: Path, ts: str) -> list[str]:
    """The metadata ``files`` log files holding a block of ``ts`` (v6 names carry the base instant)."""
    table = Table.open(str(path))
    folder = path / ".hoodie" / "metadata" / "files"
    return sorted(p.name for p in folder.glob(".files-*.log.*")
                  if any(b.instant_time == ts for b in read_log_file(table.storage, str(p)).blocks))


def test_clean_on_a_v6_metadata_table_killed_at_every_storage_operation(tmp_path):
    template = v6_metadata_table("v6_mdt_files", tmp_path / "template")
    (template / ".hoodie" / "tablesvc.yaml").write_text("hoodie.cleaner.commits.retained: 1\n")
    # tablesvc's compaction first (Java wrote none on the data table): the slices it replaced are the clean's
    assert [r.status.value for r in Table.open(str(template)).compact()] == ["done"]
    slices_agree(template)
    run = kill_a_clean_at_every_point(tmp_path, template)
    assert [r["status"] for r in run["results"]] == ["done"]
    ops = run["ops"]
    t = run["results"][0]["instant"]
    mdt_steps = [i for i, op in enumerate(ops) if f"{MDT_TIMELINE}{t}.deltacommit" in op
                 or re.search(r"metadata/files/\.files-0000-0_\d{20}\.log\.", op)]
    data_done = [i for i, op in enumerate(ops) if re.search(rf"^\S+ \.hoodie/{t}\.clean$", op)]
    assert len(mdt_steps) == 4 and len(data_done) == 1 and max(mdt_steps) < data_done[0], ops
    cfg = load_config(LocalStorage(), table_path=str(template))
    expected = storage_listing(Path(run["full_path"]))
    for p in run["points"]:
        path = Path(p["path"])
        try:
            slices_agree(path)
            run_clean(Table.open(str(path), clock=ManualClock(SystemClock().now_ms() + DAY_MS)), cfg)
            table = Table.open(str(path))
            assert table.timeline().pending() == ()
            assert metadata_listing(table) == storage_listing(path) == expected
            slices_agree(path)
            [clean] = table.timeline().filter(actions=[Action.CLEAN])
            mdt = MetadataTable(table.storage, table.base_path, table.timeline())
            assert sorted(f.state.value for f in mdt.timeline.files_of(clean.timestamp)) == \
                ["completed", "inflight", "requested"]
            assert len(_logs_of(path, clean.timestamp)) == 1
        except Exception as e:
            raise AssertionError(f"point {p['point']} (killed after `{p['last_op']}`): {type(e).__name__}: {e}") from e
