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
from metadata_tables import (
    finish_the_rollback_of,
    hudi_rs_slice_rows, kill_a_clean_at_every_point, kill_at_every_point, metadata_listing, slices_agree,
    storage_listing, storage_slices, tablesvc_slices,
)
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


def _without(slices: list[tuple], logs: set[str]) -> list[tuple]:
    """``metadata_tables`` slice rows without the log files ``logs`` (and their sizes)."""
    out = []
    for partition, fid, base, names, base_size, sizes in slices:
        kept = [(n, z) for n, z in zip(names, sizes or (None,) * len(names)) if n not in logs]
        out.append((partition, fid, base, tuple(n for n, _ in kept), base_size,
                    tuple(z for _, z in kept) if sizes else sizes))
    return out


def _rows(path: Path, as_of: str | None = None) -> list[str]:
    from oracles.hudi_rs import read_rows

    return sorted(str(sorted((k, str(v)) for k, v in r.items() if k != "_hoodie_commit_seqno"))
                  for r in read_rows(path, as_of=as_of))


def test_rollback_on_a_v6_metadata_table_killed_at_every_storage_operation(tmp_path):
    """The rollback ``R`` of Java's last completed write ``T`` (a v6 MOR table whose metadata table
    Java Hudi 0.15.0 wrote), killed after every storage call: as Hudi 0.15, the metadata table
    gets a delta commit at ``R`` (the logs that received a rollback command block: none here, the
    rollback deletes ``T``'s own log files), then the
    rollback of its delta commit ``T`` at ``R006``, both before the data ``R`` completes.  After
    each kill the readers agree and read the rows from before or from after ``T``; the recovery
    (the sweep, or the rollback again when ``R`` was not requested yet) finishes: ``T`` gone from
    both timelines, one completed metadata rollback naming ``T``, the metadata delta commit at the
    final data rollback's time, the metadata table's listing equal to storage's."""
    from timeline.instant import Instant, State

    template = v6_metadata_table("v6_mdt_files", tmp_path / "template")
    table = Table.open(str(template))
    writes = [i for i in table.timeline().instants if i.is_completed and i.action is Action.DELTA_COMMIT]
    t, previous = writes[-1].timestamp, writes[-2].timestamp
    with_t, without_t = _rows(template), _rows(template, as_of=previous)
    assert with_t != without_t
    run = kill_at_every_point(tmp_path, template, "rollback", t, "--allow-completed")
    assert [x["status"] for x in run["results"]] == ["done"]
    r = run["results"][0]["instant"]
    ops = run["ops"]
    step = {name: [i for i, op in enumerate(ops) if re.search(pattern, op)] for name, pattern in {
        "data R requested": rf"^\S+ \.hoodie/{r}\.rollback\.requested$",
        "mdt R requested": rf"^\S+ {MDT_TIMELINE}{r}\.deltacommit\.requested$",
        "mdt R completed": rf"^\S+ {MDT_TIMELINE}{r}\.deltacommit$",
        "mdt R006 requested": rf"^\S+ {MDT_TIMELINE}{r}006\.rollback\.requested$",
        "mdt R006 completed": rf"^\S+ {MDT_TIMELINE}{r}006\.rollback$",
        "data R completed": rf"^\S+ \.hoodie/{r}\.rollback$",
    }.items()}
    assert all(step.values()), (step, ops)
    order = [min(v) for v in step.values()]
    assert order == sorted(order), (step, ops)
    cfg = load_config(LocalStorage(), table_path=str(template))
    # T's own log files: v6 names them by their slice's base instant, so a storage listing (and
    # hudi-rs) keeps them in the slice until the rollback deletes them, while the metadata table
    # leaves them out as soon as T is no longer completed; readers skip their blocks either way
    t_logs = {s.path.rpartition("/")[2] for ss in table.timeline().commit_metadata(
        table.storage, writes[-1]).partition_to_write_stats.values() for s in ss if ".log." in s.path}
    assert t_logs
    for p in run["points"]:
        path = Path(p["path"])
        try:
            now = Table.open(str(path))
            assert _without(tablesvc_slices(now), t_logs) == _without(hudi_rs_slice_rows(path), t_logs) \
                == _without(storage_slices(now), t_logs)
            assert _rows(path) in (with_t, without_t)
            table, mdt = finish_the_rollback_of(path, t, cfg)
            [final] = table.timeline().completed(Action.ROLLBACK)
            assert mdt.timeline.is_completed(final.timestamp)       # its delta commit (0.15)
            of_t = [i for i in mdt.timeline.completed(Action.ROLLBACK)
                    if list(mdt.timeline.payload(table.storage, i).commits_rollback) == [t]]
            assert len(of_t) == 1, of_t
            assert _rows(path) == without_t
            slices_agree(path)
            assert metadata_listing(table) == storage_listing(path)
        except Exception as e:
            raise AssertionError(f"point {p['point']} (killed after `{p['last_op']}`): {type(e).__name__}: {e}") from e
    assert Instant(r + "006", Action.ROLLBACK, State.COMPLETED) in MetadataTable(
        Table.open(run["full_path"]).storage, run["full_path"],
        Table.open(run["full_path"]).timeline()).timeline.completed(Action.ROLLBACK)
