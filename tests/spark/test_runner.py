"""The async runner in one process: jobs, scheduling what is due, leases and fencing, failures
set aside and retried, status.  (Real processes, kills and takeovers: tests/crash_model/test_runner_processes.py.)"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from tablesvc.cli.main import main as cli
from tablesvc.config import build_config
from tablesvc.runner import JobKind, Runner, RunnerSettings, execute_job, pending_jobs, table_status
from tablesvc.api import Table
from timeline.clock import ManualClock
from timeline.instant import Action, State
from timeline.lease import LeaseLostError, LeaseStore

from oracles.hudi_rs import sorted_rows
from table_builders import busy_table, tablesvc_rows, update_five_of_first_group

pytestmark = pytest.mark.spark


def conf(**values) -> list[str]:
    return [f"{k}={v}" for k, v in values.items()]


def pending(table: Table) -> list[str]:
    return [f"{i.timestamp}.{i.action.value}.{i.state.value}" for i in table.timeline().pending()]


def runner(paths, spark, out=None, clock=None, **settings) -> Runner:
    settings = RunnerSettings(**({"lease_ms": 10_000, "poll_seconds": 0} | settings))
    return Runner([str(p) for p in paths], settings, conf_pairs=conf(**{
        "hoodie.compact.inline.max.delta.commits": 3, "hoodie.log.compaction.enable": "true",
        "hoodie.log.compaction.blocks.threshold": 3, "hoodie.cleaner.commits.retained": 1}),
        spark=lambda: spark, clock=clock, out=out or io.StringIO())


@pytest.mark.parametrize("version", [6, 8])
def test_one_pass_schedules_what_is_due_and_runs_every_job(tmp_path, spark, version):
    table, _instants, _deleted = busy_table(tmp_path, version)
    before = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    out = io.StringIO()
    r = runner([table.base_path], spark, out)
    stats = r.run(once=True)
    table = Table.open(table.base_path)
    timeline = table.timeline()
    assert pending(table) == [], out.getvalue()
    done = {timeline.origin_action(i) for i in timeline.completed()}
    assert Action.COMPACTION in done, out.getvalue()
    assert stats.jobs_done >= 1 and stats.jobs_failed == 0 and stats.scheduled >= 1
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before == tablesvc_rows(table)
    assert all(not s.log_files for s in table.latest_file_slices() if s.base_file)  # compacted
    leases = LeaseStore(table.storage, table.base_path)
    assert leases.jobs() and all(leases.is_done(j) for j in leases.jobs())
    # the compaction left old slices behind: the next pass cleans them; then nothing is due
    out2 = io.StringIO()
    again = runner([table.base_path], spark, out2).run(once=True)
    assert again.jobs_done == 1 and "clean-" in out2.getvalue() and "compaction-" not in out2.getvalue()
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before
    idle = runner([table.base_path], spark).run(once=True)
    assert idle.jobs_done == 0 and idle.scheduled == 0


def test_a_worker_that_lost_its_lease_cannot_complete_and_the_new_holder_can(tmp_path, spark):
    from tablesvc.services.compaction import schedule_compaction

    table, _instants, _deleted = busy_table(tmp_path, 8)
    before = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    compaction = schedule_compaction(table, force=True).instant
    clock = ManualClock(table.clock.now_ms())
    leases = LeaseStore(table.storage, table.base_path, clock)
    job = [j for j in pending_jobs(table, table.timeline(), 60_000, 2) if j.kind is JobKind.COMPACTION][0]
    stale = leases.acquire(job.id, "stale", 5_000)
    clock.advance(6_000)                                   # the stale worker stalled past its lease
    fresh = leases.acquire(job.id, "fresh", 5_000)
    assert fresh.token == stale.token + 1
    config = build_config()
    with pytest.raises(LeaseLostError, match="superseded by token 2 of fresh"):
        execute_job(table, config, job, lambda: leases.check(stale), lambda: spark)
    assert table.timeline().get(compaction).state is State.REQUESTED  # refused before it started
    results = execute_job(table, config, job, lambda: leases.check(fresh), lambda: spark)
    assert [r.status.value for r in results] == ["done"]
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before


def test_stale_worker_refused_at_completion_leaves_no_trace(tmp_path, spark, monkeypatch):
    """The lease is lost while the Spark job runs: the fence refuses to complete; the instant
    stays inflight (a later holder rolls it back and re-runs it) and readers see the old rows."""
    from tablesvc.services.compaction import run_compaction, schedule_compaction
    from tablesvc.spark import file_group_tasks

    table, _instants, _deleted = busy_table(tmp_path, 8)
    before = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    compaction = schedule_compaction(table, force=True).instant
    clock = ManualClock(table.clock.now_ms())
    leases = LeaseStore(table.storage, table.base_path, clock)
    job_id = f"compaction-{compaction}"
    stale = leases.acquire(job_id, "stale", 5_000)
    real_run = file_group_tasks.run_file_group_tasks

    def run_then_lose_the_lease(*args, **kwargs):
        stats = real_run(*args, **kwargs)
        clock.advance(6_000)
        assert leases.acquire(job_id, "fresh", 5_000) is not None
        return stats

    monkeypatch.setattr("tablesvc.services.compaction.executor.run_file_group_tasks", run_then_lose_the_lease)
    with pytest.raises(LeaseLostError):
        run_compaction(table, compaction, spark=spark, fence=lambda: leases.check(stale))
    assert table.timeline().get(compaction).state is State.INFLIGHT
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before
    monkeypatch.undo()
    fresh = leases.current(job_id)
    cfg = build_config(conf={"hoodie.client.heartbeat.interval_in_ms": "1"})  # the stale heartbeat has expired
    results = run_compaction(table, compaction, spark=spark, config=cfg, fence=lambda: leases.check(fresh))
    assert results[0].status.value == "done" and "rolled back first" in results[0].reason
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before and pending(Table.open(table.base_path)) == []


def test_failing_job_is_set_aside_after_max_failures_and_retry_clears_it(tmp_path, spark, capsys):
    from tablesvc.services.compaction import schedule_compaction

    table, _instants, _deleted = busy_table(tmp_path, 8)
    compaction = schedule_compaction(table, force=True).instant
    plan_log = next(p for p in (tmp_path / "t").rglob(".*.log.*"))
    hidden = plan_log.with_name("hidden-" + plan_log.name)
    os.rename(plan_log, hidden)                        # the plan's input is missing: the job fails
    out = io.StringIO()
    r = runner([table.base_path], spark, out, max_failures=2)
    r.run(once=True)
    r.poll()
    r.poll()
    text = out.getvalue()
    assert r.stats.jobs_failed == 2, text
    assert f"compaction-{compaction}: set aside after 2 failures" in text
    status = table_status(Table.open(table.base_path), build_config(), max_failures=2)
    assert [s["job"] for s in status["set_aside"]] == [f"compaction-{compaction}"]
    assert hidden.name[len("hidden-"):] in status["set_aside"][0]["last_error"]
    assert Table.open(table.base_path).timeline().get(compaction).state is not State.COMPLETED
    # the operator fixes the cause and retries
    os.rename(hidden, plan_log)
    assert cli(["retry", table.base_path, f"compaction-{compaction}"]) == 0
    assert "failure count 2 cleared" in capsys.readouterr().out
    r2 = runner([table.base_path], spark, max_failures=2)
    r2.run(once=True)
    assert r2.stats.jobs_done >= 1 and pending(Table.open(table.base_path)) == []
    assert cli(["retry", table.base_path, "compaction-19990101000000000"]) == 2


def test_status_json_reports_jobs_leases_and_lag(tmp_path, spark, capsys):
    from tablesvc.services.compaction import schedule_compaction

    table, instants, _deleted = busy_table(tmp_path, 8)
    compaction = schedule_compaction(table, force=True).instant
    LeaseStore(table.storage, table.base_path).acquire(f"compaction-{compaction}", "someone", 60_000)
    assert cli(["status", table.base_path, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [j["job"] for j in status["pending_jobs"]] == [f"compaction-{compaction}"]
    assert status["pending_jobs"][0]["bytes"] > 0
    assert status["leases"][0]["owner"] == "someone" and status["leases"][0]["token"] == 1
    assert status["oldest_pending_compaction_age_s"] is not None and status["oldest_pending_compaction_age_s"] >= 0
    assert status["delta_commits_since_last_compaction"] == len(instants) + 2  # + the sample table's two
    groups = status["log_blocks_per_file_group"]
    assert groups and groups[0]["log_blocks"] >= len(instants)
    assert cli(["status", table.base_path]) == 0
    assert f"compaction-{compaction}" in capsys.readouterr().out


def test_run_refuses_bad_arguments_with_exit_2(tmp_path, capsys):
    assert cli(["run", str(tmp_path / "nope"), "--once"]) == 2
    assert "nope" in capsys.readouterr().err
    assert cli(["run", str(tmp_path), "--lease-seconds", "0", "--once"]) == 2


def test_run_refuses_a_metadata_table_turned_off_in_tablesvc_yaml(tmp_path, fixture_root, capsys):
    import shutil

    from helpers import data_files

    path = tmp_path / "mdt"
    shutil.copytree(fixture_root.path("v8_trips_8i3u1d"), path)
    (path / ".hoodie" / "tablesvc.yaml").write_text("hoodie.metadata.enable: false\n")
    before = {f: (path / f).read_bytes() for f in data_files(path)}
    assert cli(["run", str(path), "--once"]) == 2
    assert "metadata table" in capsys.readouterr().err
    assert {f: (path / f).read_bytes() for f in data_files(path)} == before
    assert not (path / ".hoodie/.aux/tablesvc").exists()


def write_late_output(table, instant: str, partition: str, *, marked, unmarked=(), half: str) -> str:
    """What a stale attempt's tasks leave of ``instant`` in ``partition``: finished files with a
    marker (``marked``) or without one (``unmarked``: the marker went first), and a marked file
    still being copied (``half``); returns the path of that half-written temporary copy."""
    from tablesvc.write.markers import IOType, create_marker

    folder = os.path.join(table.base_path, partition)
    for name in (*marked, half):
        create_marker(table.storage, table.base_path, instant, partition, name, IOType.CREATE)
    for name in (*marked, *unmarked):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(b"PAR1 stale attempt")
    temp = os.path.join(folder, f".{half}.{'0' * 32}.tmp")
    with open(temp, "wb") as f:
        f.write(b"PAR1 half")
    return temp


def test_a_stale_attempt_s_late_output_is_swept_once_the_new_holder_completed(tmp_path, spark):
    """What a lost worker's still-running task makes after the new holder completed the
    instant (a marker, a finished file, a half-written temporary copy) goes; the committed
    files stay, and so do the rows."""
    from tablesvc.fsview.names import BaseFileName
    from tablesvc.services.compaction import run_compaction, schedule_compaction
    from tablesvc.services.plan_execution import discard_stale_output
    from tablesvc.write.markers import marker_dir

    table, _instants, _deleted = busy_table(tmp_path, 8)
    before = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    compaction = schedule_compaction(table, force=True).instant
    assert discard_stale_output(table, compaction) == 0          # still pending: nothing is touched
    run_compaction(table, compaction, spark=spark)
    committed = set(Path(table.base_path).rglob(f"*_{compaction}.parquet"))
    slice_ = next(s for s in table.latest_file_slices() if s.base_file)
    partition = slice_.partition
    folder = os.path.join(table.base_path, partition)
    finished = BaseFileName(slice_.file_id, "9-9-9", compaction).name
    temp = write_late_output(table, compaction, partition, marked=[finished],
                             half=BaseFileName(slice_.file_id, "9-9-10", compaction).name)
    assert discard_stale_output(Table.open(table.base_path), compaction) == 2
    assert not os.path.exists(os.path.join(folder, finished)) and not os.path.exists(temp)
    assert not os.path.exists(marker_dir(table.base_path, compaction))
    assert all(p.exists() for p in committed) and committed
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before


def test_a_stale_attempt_s_late_output_is_swept_once_the_new_holder_rolled_it_back(tmp_path):
    """A worker stopped past its lease resumes after the new holder rolled its instant back and
    a task of it writes on before the Spark job is cancelled (seen in the soak, seed 11): its
    files named with the rolled-back instant go, whether their marker is there (made after the
    rollback) or not (removed by the rollback before the file was finished), and so do its
    half-written copies and its markers; every other file and every row stay."""
    from helpers import data_files
    from tablesvc.fsview.names import BaseFileName, LogFileName
    from tablesvc.services.log_compaction import schedule_log_compaction
    from tablesvc.services.plan_execution import discard_stale_output
    from tablesvc.services.result import Status
    from tablesvc.services.rollback import rollback
    from tablesvc.write.markers import marker_dir

    table, _instants, _deleted = busy_table(tmp_path, 8)
    before_rows = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    scheduled = schedule_log_compaction(table, build_config())
    assert scheduled.status is Status.SCHEDULED
    compaction = scheduled.instant                    # the stale worker's attempt, started ...
    table.timeline_writer.start(table.timeline().require(compaction))
    # ... and recovered by the new holder as the log compaction executor does: rolled back, its
    # plan (requested again) dropped
    assert rollback(table, compaction).status is Status.DONE
    with table.timeline_writer.lock():
        table.timeline_writer.remove_pending(table.timeline().require(compaction))
    table = Table.open(table.base_path)
    assert table.timeline().get(compaction) is None
    before_files = set(data_files(Path(table.base_path)))

    slice_ = next(s for s in table.latest_file_slices() if s.base_file)
    temp = write_late_output(
        table, compaction, slice_.partition,
        marked=[BaseFileName(slice_.file_id, "0-9-1", compaction).name,
                LogFileName(slice_.file_id, compaction, 1, "2-9-1").name],
        unmarked=[BaseFileName(slice_.file_id, "1-9-1", compaction).name],
        half=BaseFileName(slice_.file_id, "3-9-1", compaction).name)

    assert discard_stale_output(Table.open(table.base_path), compaction) == 4
    assert set(data_files(Path(table.base_path))) == before_files
    assert not os.path.exists(temp) and not os.path.exists(marker_dir(table.base_path, compaction))
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before_rows
    assert discard_stale_output(Table.open(table.base_path), compaction) == 0   # nothing left the second time


@pytest.mark.parametrize("version", [6, 8])
def test_the_leftover_sweep_removes_what_a_late_task_wrote_after_its_write_was_rolled_back(tmp_path, version):
    """A killed writer's task that outlived it writes on after the write was rolled back: the
    next sweep of leftovers (run by every clean, inline after a write too, and by rollbacks)
    deletes those files although the rollback had removed their markers (v6 logs are named after
    their slice: the listing finds them by their blocks' instant), then the markers; a completed instant's
    leftover markers go without touching its files; hudi-rs reads the rows of before."""
    import shutil

    from helpers import data_files
    from tablesvc.services.result import Status
    from tablesvc.services.rollback import remove_leftovers, rollback
    from tablesvc.write.markers import IOType, create_marker, marker_dir
    table, instants, _deleted = busy_table(tmp_path, version)
    before_rows = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    before_files = set(data_files(Path(table.base_path)))
    dead = update_five_of_first_group(table, 10, 9.5)       # the write whose task will outlive it
    late = sorted(set(data_files(Path(table.base_path))) - before_files)
    assert late
    kept = tmp_path / "late"
    for rel in late:                          # what the late task will write again
        (kept / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(table.base_path) / rel, kept / rel)
    assert rollback(table, dead, allow_completed=True).status is Status.DONE
    table = Table.open(table.base_path)
    assert table.timeline().get(dead) is None and set(data_files(Path(table.base_path))) == before_files
    for rel in late:    # written again after the rollback, whose markers it had removed
        shutil.copy(kept / rel, Path(table.base_path) / rel)
    slice_ = next(s for s in table.latest_file_slices() if s.log_files)
    # the late task's marker of a file it never got to write
    create_marker(table.storage, table.base_path, dead, slice_.partition, "never-written.parquet", IOType.CREATE)
    # and a completed write whose process died before deleting its markers
    done = instants[-1]
    create_marker(table.storage, table.base_path, done, slice_.partition, slice_.log_files[-1].file_name,
                  IOType.APPEND)

    removed = remove_leftovers(table)
    assert set(data_files(Path(table.base_path))) == before_files
    assert {os.path.relpath(p, table.base_path) for p in removed} >= set(late)
    assert not os.path.exists(marker_dir(table.base_path, dead)) and not os.path.exists(marker_dir(table.base_path, done))
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before_rows


def test_spark_time_settings_parse_as_seconds():
    from tablesvc.runner.worker import _seconds

    assert _seconds("2s") == 2.0 and _seconds("500ms") == 0.5 and _seconds("1min") == 60.0
    assert _seconds("3") == 3.0 and _seconds("nonsense") == 2.0
