"""Cleaning: policies, protections, incremental planning, crash recovery; hudi-rs reads the same rows."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from oracles.hudi_rs import sorted_rows

from tablesvc.config import build_config
from tablesvc.demo.sample_table import build_sample_table
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.services.clean import list_cleans, plan_clean, run_clean
from tablesvc.services.result import Status
from tablesvc.api import Table
from timeline.clock import ManualClock
from timeline.instant import Action
from timeline.payloads import (CompactionOperation, CompactionPlan, SavepointMetadata, encode_compaction_plan,
                               encode_savepoint_metadata)

from table_builders import compact_by_hand, update_five_records


def data_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and ".hoodie" not in p.parts
            and not p.name.startswith(".hoodie_partition")}


def update_one_group(table: Table, fare: float) -> str:
    """A delta commit updating five records of one file group (a new log file)."""
    return update_five_records(table, sorted(table.latest_file_slices(), key=lambda s: s.partition)[0], fare)


def history(tmp_path, version):
    """t1 insert, t2 update+delete (sample), C1 compaction, D3 update, C2 compaction, D4 update."""
    table = build_sample_table(str(tmp_path / "t"), table_version=version).table
    c1 = compact_by_hand(table)
    update_one_group(table, 1.5)
    c2 = compact_by_hand(table)
    update_one_group(table, 2.5)
    return Table.open(table.base_path), c1, c2


def config(**values):
    return build_config(conf={k: str(v) for k, v in values.items()})


@pytest.mark.parametrize("version", [6, 8])
def test_keep_latest_commits_deletes_old_slices_and_readers_see_the_same_rows(tmp_path, version):
    table, c1, c2 = history(tmp_path, version)
    t1 = table.timeline().completed_writes()[0].timestamp
    before_rows, before_files = sorted_rows(table.base_path, ("uuid", "ts", "fare")), data_files(Path(table.base_path))
    d3 = table.timeline().completed_writes()[3].timestamp
    results = run_clean(table, config(**{"hoodie.cleaner.commits.retained": 3}))
    assert [r.status for r in results] == [Status.DONE]
    gone = before_files - data_files(Path(table.base_path))
    # ECTR = D3: a reader at D3 uses the C1 slices (the newest based at or before it) and the
    # later ones; only the t1 slices go.
    assert results[0].metrics["earliest_commit_to_retain"] == d3
    assert gone and all(t1 in f or (version == 8 and ".log." in f) for f in gone)
    assert not any(c1 in f or c2 in f for f in gone)
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before_rows
    ours = sorted((r["uuid"], r["ts"], r["fare"]) for r in pa.concat_tables(
        [read_file_slice(table.storage, SliceSpec.from_file_slice(s), ReadContext.for_table(table))
         for s in table.latest_file_slices()]).to_pylist())
    assert ours == before_rows
    # Planning again finds nothing and says why; the clean is listed with its ECTR.
    again = run_clean(table, config(**{"hoodie.cleaner.commits.retained": 3}))
    assert again[-1].status is Status.NOTHING_TO_DO
    assert f"earliest commit to retain is still {d3}" in again[-1].reason
    assert again[-1].metrics["partitions_scanned"] == 0      # decided from the timeline alone
    assert [c["earliest_commit_to_retain"] for c in list_cleans(table)] == [d3]


def test_retaining_one_commit_keeps_only_what_the_latest_reader_needs(tmp_path):
    table, c1, c2 = history(tmp_path, 8)
    before_rows = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    run_clean(table, config(**{"hoodie.cleaner.commits.retained": 1}))
    remaining = data_files(Path(table.base_path))
    assert not any(c1 in f for f in remaining)           # ECTR = D4: C2 serves every retained reader
    assert any(c2 in f for f in remaining)
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before_rows


def test_file_versions_policy_and_pending_compaction_reservation(tmp_path):
    table, c1, c2 = history(tmp_path, 6)
    # A pending compaction over the current slices reserves them.
    slices = table.latest_file_slices()
    plan = CompactionPlan(operations=tuple(CompactionOperation(s.base_instant, s.file_id, s.partition,
                                                               s.base_file.file_name, (), {}) for s in slices))
    table.timeline_writer.request(Action.COMPACTION, encode_compaction_plan(plan))
    before_rows = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    cfg = config(**{"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": 1})
    results = run_clean(table, cfg)
    remaining = data_files(Path(table.base_path))
    assert any(c2 in f for f in remaining)                # reserved by the pending plan, and the latest
    assert not any(c1 in f for f in remaining)
    assert results[-1].status is Status.DONE
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before_rows


def test_savepointed_files_are_kept(tmp_path):
    table, c1, c2 = history(tmp_path, 8)
    keep = [f for f in data_files(Path(table.base_path)) if c1 in f and f.endswith(".parquet")][0]
    partition, name = keep.rsplit("/", 1)
    w = table.timeline_writer
    sp = w.request(Action.SAVEPOINT)
    w.complete(sp, encode_savepoint_metadata(SavepointMetadata("test", 0, "", {partition: (name,)})))
    run_clean(table, config(**{"hoodie.cleaner.commits.retained": 1}))
    assert keep in data_files(Path(table.base_path))


def test_keep_latest_by_hours_uses_the_injected_clock(tmp_path):
    table, c1, c2 = history(tmp_path, 8)
    from timeline.instant_time import parse_instant

    clock = ManualClock(parse_instant(c2) + 30 * 60_000)   # 30 minutes after C2
    table = Table.open(table.base_path, clock=clock)
    cfg = config(**{"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS", "hoodie.cleaner.hours.retained": 24})
    assert run_clean(table, cfg)[-1].status is Status.NOTHING_TO_DO   # everything is within 24 hours
    clock.advance(48 * 3_600_000)                                      # now all is older than the window
    planned = plan_clean(table, cfg)
    assert planned.plan is not None and planned.files > 0


def test_dry_run_changes_nothing_and_a_half_done_clean_is_finished(tmp_path):
    table, c1, c2 = history(tmp_path, 8)
    tree = sorted(str(p) for p in Path(table.base_path).rglob("*"))
    cfg = config(**{"hoodie.cleaner.commits.retained": 1})
    dry = run_clean(table, cfg, dry_run=True)
    assert dry[0].status is Status.DRY_RUN and dry[0].metrics["files_to_delete"] > 0
    assert sorted(str(p) for p in Path(table.base_path).rglob("*")) == tree
    # A crash after the plan was written and some files deleted: the re-run finishes it.
    planned = plan_clean(table, cfg)
    from timeline.payloads import encode_cleaner_plan

    w = table.timeline_writer
    pending = w.start(w.request(Action.CLEAN, encode_cleaner_plan(planned.plan)))
    first = next(iter(planned.plan.files_to_delete().values()))[0]
    os.unlink(first)
    results = run_clean(table, cfg)
    assert results[0].instant == pending.timestamp and results[0].status is Status.DONE
    assert table.timeline().pending() == ()
    assert all(not os.path.exists(f) for v in planned.plan.files_to_delete().values() for f in v)


@pytest.mark.parametrize("started_by_the_other", [False, True])
def test_two_processes_on_one_clean_plan_complete_it_once(tmp_path, started_by_the_other):
    """A runner's clean job and a writer's inline clean can take the same plan: the deletes are
    idempotent, and the one that comes second is told the clean was finished elsewhere instead
    of failing on an illegal transition."""
    from tablesvc.services.clean import executor
    from tablesvc.services.clean import schedule_clean

    table, _c1, _c2 = history(tmp_path, 8)
    cfg = config(**{"hoodie.cleaner.commits.retained": 1})
    before = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    scheduled = schedule_clean(table, cfg)
    assert scheduled.status is Status.SCHEDULED
    requested = table.timeline().get(scheduled.instant)
    plan = executor.decode_cleaner_plan(table.timeline().read_bytes(table.storage, requested),
                                        table.timeline().path_of(requested))
    if started_by_the_other:
        table.timeline_writer.start(requested)       # the other process is between start and complete
    [first] = executor.finish_pending_cleans(Table.open(table.base_path))
    assert first.status is Status.DONE
    second = executor._execute(Table.open(table.base_path), requested, plan)
    assert second.status is Status.NOTHING_TO_DO and "completed by another process" in second.reason
    timeline = Table.open(table.base_path).timeline()
    assert timeline.pending() == () and [i.timestamp for i in timeline.completed(Action.CLEAN)] == [scheduled.instant]
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before
