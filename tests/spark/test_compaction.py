"""Compaction: triggers, planning, execution (Spark) and recovery, with hudi-rs as the oracle.

Every table written here goes through the real write path; snapshots are compared on
every column but ``_hoodie_file_name`` (the one meta column compaction rewrites).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import read_rows, read_table, sorted_rows

import tablesvc.cli.main
from tablesvc.cli import cmd_compaction
from tablesvc.cli.cmd_timeline import describe_instant
from tablesvc.config import build_config
from tablesvc.errors import ConflictError, UnsupportedTableError
from tablesvc.fsview.names import LogFileName
from tablesvc.services import Status
from tablesvc.services.compaction import (
    compact_file_group, compaction_due, run_compaction, schedule_compaction,
)
from tablesvc.services.compaction.executor import CompactionTask
from tablesvc.api import Table, TableSpec
from tablesvc.write.markers import list_markers
from timeline.clock import ManualClock
from timeline.heartbeat import Heartbeat
from timeline.instant import Action, Instant, State
from timeline.payloads import CommitMetadata, CompactionOperation, CompactionPlan, encode_commit_metadata, \
    encode_compaction_plan

from fixture_tables import TABLES_DIR, copy_table
from helpers import FAST_HEARTBEAT, kill_tree

REPO = Path(__file__).resolve().parents[2]
CITIES = ("chennai", "san_francisco", "sao_paulo")
META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path")
COLUMNS = META + ("uuid", "ts", "rider", "fare", "city")
SCHEMA = "uuid string, ts long, rider string, fare double, city string"


# -- helpers -----------------------------------------------------------------------------------------
def rows_of(batches_or_table, columns) -> list[tuple]:
    tbl = batches_or_table if isinstance(batches_or_table, pa.Table) else (
        pa.Table.from_batches(batches_or_table) if batches_or_table else None)
    if tbl is None:
        return []
    cols = [c for c in columns if c in tbl.column_names]
    return sorted(tuple(r.get(c) for c in columns) for r in tbl.select(cols).to_pylist())


def our_rows(table: Table, spark, columns=COLUMNS, as_of: str | None = None) -> list[tuple]:
    df = table.read(as_of=as_of, spark=spark)
    present = [c for c in columns if c in df.columns]
    return sorted(tuple(r[c] if c in present else None for c in columns) for r in df.select(*present).collect())


def make_rows(keys, ts, tag=""):
    return [(f"k{k:03d}", ts + k % 7, f"rider-{tag}{k % 11}", round(1.5 * k + ts % 100, 2), CITIES[k % 3])
            for k in keys]


def new_table(tmp_path, version, name="trips", clock=None) -> Table:
    Table.create(str(tmp_path / name), TableSpec(name, ("uuid",), "ts", ("city",), table_version=version,
                                                 num_buckets=2))
    return Table.open(str(tmp_path / name), clock=clock)


def write_batches(table: Table, spark) -> list[str]:
    """Inserts, updates (higher ts), an ignored lower-ts update, deletes, more updates."""
    instants = [table.insert(spark.createDataFrame(make_rows(range(90), 1_000), SCHEMA)).instant]
    instants.append(table.upsert(spark.createDataFrame(make_rows(range(0, 40), 2_000, "u"), SCHEMA)).instant)
    instants.append(table.upsert(spark.createDataFrame(make_rows(range(40, 50), 0, "low"), SCHEMA)).instant)
    instants.append(table.delete(spark.createDataFrame(make_rows(range(60, 70), 3_000), SCHEMA)).instant)
    instants.append(table.upsert(spark.createDataFrame(make_rows(range(20, 30), 4_000, "v"), SCHEMA)).instant)
    return instants


def cli(*argv: str) -> int:
    """Run ``tablesvc compaction ...`` through the command's own parser (main.py may not list it yet)."""
    import argparse

    parser = argparse.ArgumentParser(prog="tablesvc")
    sub = parser.add_subparsers(dest="command")
    cmd_compaction.add_parser(sub, tablesvc.cli.main.common_options())
    args = parser.parse_args(["compaction", *argv])
    return args.run(args)


def latest_log_files(table: Table) -> list[str]:
    return [lf.file_name for s in table.latest_file_slices() for lf in s.log_files]


def completed_compaction(table: Table, instant: str) -> dict:
    timeline = table.timeline()
    return describe_instant(table, timeline, timeline.require(instant))


# -- triggers (no Spark) ------------------------------------------------------------------------------
T0 = 1_750_000_000_000  # ms


def fake_delta_commit(table: Table) -> str:
    w = table.timeline_writer
    inst = w.request(Action.DELTA_COMMIT)
    inflight = w.start(inst)
    w.complete(inflight, encode_commit_metadata(CommitMetadata(operation_type="UPSERT"), table.config.layout))
    return inst.timestamp


def fake_compaction(table: Table, complete: bool = True) -> str:
    w = table.timeline_writer
    plan = CompactionPlan(operations=(CompactionOperation("1", "fg-0", "", None, (".fg-0_1.log.1_0-0-0",),
                                                          {"TOTAL_LOG_FILES_SIZE": 1.0}),))
    inst = w.request(Action.COMPACTION, encode_compaction_plan(plan))
    if complete:
        inflight = w.start(inst)
        w.complete(inflight, encode_commit_metadata(CommitMetadata(compacted=True, operation_type="COMPACT"),
                                                    table.config.layout))
    return inst.timestamp


@pytest.fixture
def clocked(tmp_path):
    clock = ManualClock(T0)
    return new_table(tmp_path, 8, clock=clock), clock


def due(table, clock, **conf):
    config = build_config(conf={f"hoodie.compact.inline.{k.replace('_', '.')}": str(v) for k, v in conf.items()})
    return compaction_due(table.timeline(), config, clock)


def test_num_commits_counts_delta_commits_since_the_last_compaction(clocked):
    table, clock = clocked
    assert due(table, clock) == (False, "0 delta commits since the table was created (no compaction yet) < 5 "
                                        "(NUM_COMMITS)")
    for _ in range(3):
        fake_delta_commit(table)
    assert due(table, clock) == (False, "3 delta commits since the table was created (no compaction yet) < 5 "
                                        "(NUM_COMMITS)")
    assert due(table, clock, max_delta_commits=3)[0] is True
    fake_delta_commit(table), fake_delta_commit(table)
    ok, why = due(table, clock)
    assert ok and why == "5 delta commits since the table was created (no compaction yet) >= 5 (NUM_COMMITS)"
    fake_compaction(table)
    fake_delta_commit(table)
    assert due(table, clock) == (False, "1 delta commit since the last compaction < 5 (NUM_COMMITS)")


def test_num_commits_after_last_request_counts_from_a_pending_plan(clocked):
    table, clock = clocked
    fake_delta_commit(table), fake_delta_commit(table)
    fake_compaction(table, complete=False)
    fake_delta_commit(table)
    assert due(table, clock, trigger_strategy="NUM_COMMITS", max_delta_commits=3)[0] is True
    ok, why = due(table, clock, trigger_strategy="NUM_COMMITS_AFTER_LAST_REQUEST", max_delta_commits=3)
    assert not ok and why.startswith("1 delta commit since the last compaction request < 3")


def test_time_elapsed_counts_from_the_first_delta_commit_then_from_the_last_compaction(clocked):
    table, clock = clocked
    ok, why = due(table, clock, trigger_strategy="TIME_ELAPSED", max_delta_seconds=600)
    assert not ok and why == "no delta commit yet, so no time has elapsed (TIME_ELAPSED)"
    first = fake_delta_commit(table)
    clock.advance(599_000)
    ok, why = due(table, clock, trigger_strategy="TIME_ELAPSED", max_delta_seconds=600)
    assert not ok and why == f"599s since the first delta commit ({first}) < 600s (TIME_ELAPSED)"
    clock.advance(1_000)
    assert due(table, clock, trigger_strategy="TIME_ELAPSED", max_delta_seconds=600)[0] is True
    compaction = fake_compaction(table)
    fake_delta_commit(table)
    clock.advance(10_000)
    ok, why = due(table, clock, trigger_strategy="TIME_ELAPSED", max_delta_seconds=600)
    assert not ok and why.startswith(f"10s since the last compaction ({compaction}) < 600s")


@pytest.mark.parametrize("strategy,commits,seconds,expected", [
    ("NUM_AND_TIME", 2, 60, True), ("NUM_AND_TIME", 2, 3600, False), ("NUM_AND_TIME", 9, 60, False),
    ("NUM_OR_TIME", 9, 3600, False), ("NUM_OR_TIME", 2, 3600, True), ("NUM_OR_TIME", 9, 60, True),
])
def test_combined_strategies(clocked, strategy, commits, seconds, expected):
    table, clock = clocked
    fake_delta_commit(table), fake_delta_commit(table)
    clock.advance(120_000)
    ok, why = due(table, clock, trigger_strategy=strategy, max_delta_commits=commits, max_delta_seconds=seconds)
    assert ok is expected
    joiner = " and " if strategy == "NUM_AND_TIME" else " or "
    assert joiner in why and why.endswith(f"({strategy})") and "2 delta commits" in why and "120s since" in why


def test_schedule_without_force_reports_the_trigger(clocked):
    table, clock = clocked
    fake_delta_commit(table)
    result = schedule_compaction(table, build_config())
    assert result.status is Status.NOTHING_TO_DO and result.instant is None
    assert result.reason == "not due: 1 delta commit since the table was created (no compaction yet) < 5 (NUM_COMMITS)"
    assert not table.timeline().pending_compactions()


def test_v6_refuses_to_schedule_while_a_write_is_pending(tmp_path, capsys):
    table = new_table(tmp_path, 6)
    fake_delta_commit(table)
    pending = table.timeline_writer.request(Action.DELTA_COMMIT)
    result = schedule_compaction(table, None, force=True)
    assert result.status is Status.NOTHING_TO_DO
    assert f"write {pending.timestamp} (deltacommit, requested) is pending" in result.reason
    assert cli("schedule", table.base_path) == 0
    out = capsys.readouterr().out
    assert "nothing to do" in out and "is pending" in out and "trigger: " in out
    assert not table.timeline().pending_compactions()


def test_nothing_to_compact_says_why(tmp_path, capsys):
    table = new_table(tmp_path, 8)
    result = schedule_compaction(table, None, force=True)
    assert (result.status, result.reason) == (Status.NOTHING_TO_DO,
                                              "no file group has log files of completed delta commits")
    assert cli("run", table.base_path, "--json") == 0
    assert json.loads(capsys.readouterr().out)[0]["status"] == "nothing_to_do"


# -- end to end on tables tablesvc wrote (Spark) ---------------------------------------------------------
@pytest.mark.spark
@pytest.mark.parametrize("version", [6, 8])
def test_schedule_and_run_keep_the_snapshot_for_tablesvc_and_hudi_rs(tmp_path, spark, capsys, version):
    table = new_table(tmp_path, version)
    instants = write_batches(table, spark)
    before = our_rows(table, spark)
    assert sorted_rows(table.base_path, COLUMNS) == before and len(before) == 80
    assert latest_log_files(table)

    assert cli("schedule", table.base_path, "--json") == 0
    scheduled = json.loads(capsys.readouterr().out)
    assert scheduled["status"] == "scheduled" and scheduled["metrics"]["file_groups"] >= 3
    compaction = scheduled["instant"]
    plan = table.timeline().plan_of(table.storage, table.timeline().require(compaction))
    assert plan.version == 2 and all(op.data_file_path and "/" not in op.data_file_path for op in plan.operations)
    sizes = [op.metrics["TOTAL_LOG_FILES_SIZE"] for op in plan.operations]
    assert sizes == sorted(sizes, reverse=True)
    for op in plan.operations:
        assert set(op.metrics) >= {"TOTAL_LOG_FILES", "TOTAL_LOG_FILES_SIZE", "TOTAL_IO_READ_MB",
                                   "TOTAL_IO_WRITE_MB", "TOTAL_IO_MB"}
        assert all(LogFileName.parse(n) for n in op.delta_file_paths)
    # a second request finds every group already planned
    again = schedule_compaction(table, None, force=True)
    assert again.status is Status.NOTHING_TO_DO and "already in a pending compaction" in again.reason

    assert cli("run", table.base_path, "--sort-columns", "rider") == 0
    out = capsys.readouterr().out
    assert f"compaction: done ({compaction})" in out

    assert latest_log_files(table) == []
    assert our_rows(table, spark) == before
    assert sorted_rows(table.base_path, COLUMNS) == before
    described = completed_compaction(table, compaction)
    assert (described["action"], described["state"], described["operation"]) == ("commit", "completed", "COMPACT")
    md = table.timeline().commit_metadata(table.storage, table.timeline().require(compaction))
    assert md.compacted is True and md.schema == table.schema()
    stats = list(md.write_stats())
    assert sum(s.num_writes for s in stats) == 80 and all(s.total_log_files_compacted for s in stats)
    assert list_markers(table.storage, table.base_path, compaction) == []
    for s in table.latest_file_slices():  # new base files: named with C, rows sorted by rider, file name set
        assert s.base_instant == compaction
        base = pq.read_table(s.base_file.path)
        assert base.column("rider").to_pylist() == sorted(base.column("rider").to_pylist())
        assert set(base.column("_hoodie_file_name").to_pylist()) <= {s.base_file.file_name}
    # time travel to before the compaction still reads the old slices
    assert our_rows(table, spark, as_of=instants[-1]) == before
    assert sorted_rows(table.base_path, COLUMNS, as_of=instants[-1]) == before
    assert cli("list", table.base_path, "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["instant"], r["state"]) for r in listed] == [(compaction, "completed")]
    # nothing left: run schedules nothing and says so
    assert [r.status for r in run_compaction(table, spark=spark)] == [Status.NOTHING_TO_DO]


@pytest.mark.spark
@pytest.mark.parametrize("version", [6, 8])
def test_writes_after_scheduling_land_in_the_new_slice(tmp_path, spark, version):
    table = new_table(tmp_path, version)
    table.insert(spark.createDataFrame(make_rows(range(30), 1_000), SCHEMA))
    table.upsert(spark.createDataFrame(make_rows(range(0, 10), 2_000, "u"), SCHEMA))
    scheduled = schedule_compaction(table, None, force=True)
    assert scheduled.status is Status.SCHEDULED
    compaction = scheduled.instant

    table.upsert(spark.createDataFrame(make_rows(range(5, 15), 9_000, "late"), SCHEMA))
    expected = sorted(r for r in [(f"k{k:03d}", 1_000 + k % 7) for k in range(30)]
                      if r[0] not in {f"k{k:03d}" for k in range(15)})
    expected += [(f"k{k:03d}", 2_000 + k % 7) for k in range(0, 5)]
    expected += [(f"k{k:03d}", 9_000 + k % 7) for k in range(5, 15)]
    expected.sort()
    assert our_rows(table, spark, ("uuid", "ts")) == expected  # visible before the compaction completes
    if version == 6:  # the late log is named after slice C
        late_logs = [p.name for p in Path(table.base_path).rglob(f".*_{compaction}.log.*")]
        assert late_logs, "v6 writes into a group with a pending compaction must name their log with C"
    # groups of the pending plan are not planned again, even with new logs
    assert schedule_compaction(table, None, force=True).status is Status.NOTHING_TO_DO

    [result] = run_compaction(table, spark=spark)
    assert result.status is Status.DONE and result.instant == compaction
    assert our_rows(table, spark, ("uuid", "ts")) == expected
    assert sorted_rows(table.base_path, ("uuid", "ts")) == expected
    # the late write's log now follows the new base file
    slices = table.latest_file_slices()
    assert all(s.base_instant == compaction for s in slices)
    assert any(s.log_files for s in slices)
    # and the next compaction picks it up
    [again] = run_compaction(table, spark=spark)
    assert again.status is Status.DONE and latest_log_files(table) == []
    assert our_rows(table, spark, ("uuid", "ts")) == expected == sorted_rows(table.base_path, ("uuid", "ts"))


# -- tables Apache Hudi wrote -------------------------------------------------------------------------
def hudi_all(path) -> list:
    """Every row hudi-rs reads, all columns but ``_hoodie_file_name``, in a canonical order."""
    return sorted(({k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in read_rows(path)), key=repr)


def tree_state(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in path.rglob("*") if p.is_file()}


@pytest.mark.spark
@pytest.mark.parametrize("name", ["v6_trips_8i1u", "v6_nonpartitioned_rollback", "v9_txns_simple_nometa"])
def test_compaction_of_tables_apache_hudi_wrote_reads_the_same_in_hudi_rs(tmp_path, spark, name):
    path = copy_table(TABLES_DIR / name, tmp_path)
    table = Table.open(str(path))
    if not latest_log_files(table):
        # v9_txns_simple_nometa: its last clustering/compaction left no logs in the latest slices;
        # update a few records through tablesvc (lookup index: logs into Java's file groups).
        from pyspark.sql import functions as F

        data = [c for c in table.read(spark=spark).columns if not c.startswith("_hoodie_")]
        some = table.read(spark=spark).select(*data).orderBy(data[0]).limit(7)
        ordering = table.config.ordering_field
        table.upsert(some.withColumn(ordering, F.col(ordering) + 1000).withColumn("merchant_name", F.lit("late")))
    before = hudi_all(path)
    assert before
    assert latest_log_files(table), f"{name} should have log files to compact"
    results = run_compaction(table, spark=spark)
    assert [r.status for r in results] == [Status.DONE], [r.render() for r in results]
    assert hudi_all(path) == before
    ours = table.read(spark=spark).drop("_hoodie_file_name").toArrow()
    assert sorted(ours.to_pylist(), key=repr) == before
    described = completed_compaction(table, results[0].instant)
    assert described["operation"] == "COMPACT" and described["action"] == "commit"
    planned = {(op.partition_path, op.file_id) for op in table.timeline().plan_of(
        table.storage, table.timeline().require(results[0].instant)).operations}
    for s in table.latest_file_slices():
        if (s.partition, s.file_id) in planned:
            assert s.base_instant == results[0].instant and not s.log_files


def test_metadata_table_turned_off_in_tablesvc_yaml_is_refused_and_left_unchanged(tmp_path):
    # hoodie.metadata.enable=false in .hoodie/tablesvc.yaml makes tablesvc's reads list storage; a
    # change would then leave the metadata table behind, so it is refused (only the command's own
    # --conf drops the metadata table).  Tables whose metadata table tablesvc keeps are compacted:
    # tests/spark/test_metadata_stats_write.py.
    path = copy_table(TABLES_DIR / "v8_trips_8i3u1d", tmp_path)
    (path / ".hoodie" / "tablesvc.yaml").write_text("hoodie.metadata.enable: false\n")
    state = tree_state(path)
    for action in ("schedule", "run"):
        with pytest.raises(UnsupportedTableError) as info:
            cli(action, str(path))
        assert info.value.exit_code == 2 and "metadata table" in str(info.value)
    assert tree_state(path) == state


# -- recovery --------------------------------------------------------------------------------------------
def _plan_bytes(table: Table, instant: str) -> bytes:
    return table.storage.read_bytes(table.timeline().path_of(Instant(instant, Action.COMPACTION, State.REQUESTED)))


def _write_one_output(table: Table, instant: str) -> str:
    """What a process that died after its first task leaves: one marked base file named with C."""
    timeline = table.timeline()
    plan = timeline.plan_of(table.storage, timeline.require(instant))
    op = plan.operations[0]
    from tablesvc.merge import ReadContext

    ctx = ReadContext.for_table(table, timeline, as_of=instant)
    task = CompactionTask(instant, op.partition_path or "", op.file_id, op.base_instant_time, op.data_file_path,
                          tuple(op.delta_file_paths), 0, ctx.table_schema_json, table.config.version)
    return compact_file_group(table.storage, ctx, task, "0-0-0").path


def _files_named_with(path, instant) -> list[str]:
    return sorted(p.name for p in Path(path).rglob(f"*_{instant}.parquet") if ".hoodie" not in p.parts)


@pytest.mark.spark
def test_inflight_compaction_is_refused_while_alive_then_rolled_back_and_rerun(tmp_path, spark):
    table = new_table(tmp_path, 6)
    write_batches(table, spark)
    before = our_rows(table, spark)
    compaction = schedule_compaction(table, None, force=True).instant
    plan_bytes = _plan_bytes(table, compaction)
    table.timeline_writer.start(Instant(compaction, Action.COMPACTION, State.REQUESTED))
    half = _write_one_output(table, compaction)
    assert our_rows(table, spark) == before  # tablesvc hides the uncommitted base file

    config = build_config(conf=FAST_HEARTBEAT)
    with Heartbeat(table.storage, table.base_path, compaction, table.clock, interval_ms=50):
        with pytest.raises(ConflictError) as info:
            run_compaction(table, compaction, spark=spark, config=config)
        assert info.value.exit_code == 3 and "heartbeat is alive" in str(info.value)
    # the heartbeat was stopped (file deleted): the process is gone
    [result] = run_compaction(table, spark=spark, config=config)
    assert (result.status, result.instant) == (Status.DONE, compaction)
    assert "rolled back first" in result.reason
    assert _plan_bytes(table, compaction) == plan_bytes
    assert not (Path(table.base_path) / half).exists() or half in {
        s.base_file.path.split(table.base_path + "/", 1)[1] for s in table.latest_file_slices()}
    assert len(_files_named_with(table.base_path, compaction)) == len(table.latest_file_slices())
    assert our_rows(table, spark) == before == sorted_rows(table.base_path, COLUMNS)
    assert table.timeline().completed(Action.ROLLBACK)


RUNNER = ("import sys; from tablesvc.cli import main as m, cmd_compaction; "
          "m.COMMANDS = m.COMMANDS if cmd_compaction in m.COMMANDS else m.COMMANDS + (cmd_compaction,); "
          "sys.exit(m.main(sys.argv[1:]))")


@pytest.mark.spark
def test_kill_9_during_run_then_the_same_plan_is_rolled_back_and_rerun(tmp_path, spark):
    table = new_table(tmp_path, 8)
    write_batches(table, spark)
    before = our_rows(table, spark)
    compaction = schedule_compaction(table, None, force=True).instant
    plan_bytes = _plan_bytes(table, compaction)
    env = dict(os.environ, PYTHONPATH=str(REPO), TABLESVC_SPARK_LOG=str(tmp_path / "spark.log"))
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, "compaction", "run", table.base_path], env=env,
                            cwd=str(REPO), start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    inflight = Path(table.base_path) / ".hoodie" / "timeline" / f"{compaction}.compaction.inflight"
    try:
        deadline = time.monotonic() + 120
        while not inflight.exists():
            assert proc.poll() is None, "the compaction process ended before it was killed"
            assert time.monotonic() < deadline, "timed out waiting for the compaction to start"
            time.sleep(0.01)
    finally:
        kill_tree(proc.pid)
        proc.wait()
    timeline = table.timeline()
    assert timeline.require(compaction).state is State.INFLIGHT
    _write_one_output(table, compaction)  # as if its first task had finished before the kill
    assert our_rows(table, spark) == before == sorted_rows(table.base_path, COLUMNS)  # v8 readers hide C's files
    time.sleep(0.3)  # with a 100 ms heartbeat window, the dead process's heartbeat has expired
    [result] = run_compaction(table, spark=spark, config=build_config(conf=FAST_HEARTBEAT))
    assert (result.status, result.instant) == (Status.DONE, compaction)
    assert _plan_bytes(table, compaction) == plan_bytes
    assert len(_files_named_with(table.base_path, compaction)) == len(table.latest_file_slices())
    assert latest_log_files(table) == []
    assert our_rows(table, spark) == before == sorted_rows(table.base_path, COLUMNS)


# -- write stats: counted by the merge, checked against an independent count -------------------------------
def _write_commit(table: Table, rows: list[tuple], operation: str, stage: int) -> None:
    """One delta commit into the table's one file group, with the write path's pieces (no Spark)."""
    from table_builders import write_without_spark

    batch = pa.table({"uuid": [r[0] for r in rows], "ts": [r[1] for r in rows], "fare": [r[2] for r in rows]},
                     schema=pa.schema([("uuid", pa.string()), ("ts", pa.int64()), ("fare", pa.float64())]))
    write_without_spark(table, batch, operation, stage=stage)


def _varied_slice(tmp_path, mode) -> Table:
    """A base file and four log commits: updates (some with lower ordering values), inserts, natural
    deletes of base keys, of updated keys and of log-only keys, then re-inserts of deleted keys."""
    from tablesvc.table import MergeMode

    Table.create(str(tmp_path / "stats"), TableSpec("stats", ("uuid",), "ts", (), table_version=8, num_buckets=1,
                                                    merge_mode=MergeMode(mode)))
    table = Table.open(str(tmp_path / "stats"))
    key = "k{:04d}".format
    _write_commit(table, [(key(i), 100, i * 1.0) for i in range(400)], "insert", 1)
    _write_commit(table, [(key(i), 200, 1.5) for i in range(80)] + [(key(i), 50, 2.5) for i in range(80, 100)]
                  + [(key(i), 200, 3.5) for i in range(400, 450)], "upsert", 2)
    _write_commit(table, [(key(i), 0, 0.0) for i in [*range(60, 70), *range(100, 120), *range(440, 450)]],
                  "delete", 3)
    _write_commit(table, [(key(i), 300, 4.5) for i in [*range(100, 105), *range(440, 445), *range(0, 10)]],
                  "upsert", 4)
    return table


def _seqno_by_key(path: str) -> dict[str, str]:
    rows = pq.read_table(path, columns=["_hoodie_record_key", "_hoodie_commit_seqno"]).to_pylist()
    out = {r["_hoodie_record_key"]: r["_hoodie_commit_seqno"] for r in rows}
    assert len(out) == len(rows), "keys must be unique in a base file"
    return out


@pytest.mark.parametrize("mode", ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"])
def test_write_stats_counted_by_the_merge_equal_an_independent_count(tmp_path, monkeypatch, mode):
    """The merge's counts (no re-reading of the base file) against the output compared key by key
    with the old base file: inserts = new keys, updates = base keys whose record changed,
    deletes = base keys gone; merged in small batches and written in several row groups."""
    from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
    from tablesvc.merge import slice_reader
    from tablesvc.write import base_file_writer

    monkeypatch.setattr(slice_reader, "MERGE_BATCH_ROWS", 37)
    monkeypatch.setattr(slice_reader, "KEY_CHUNK_ROWS", 50)
    monkeypatch.setattr(slice_reader, "LOOKUP_CHUNK_FACTOR", 1)
    monkeypatch.setattr(base_file_writer, "ROW_GROUP_ROWS", 64)
    table = _varied_slice(tmp_path, mode)
    (s,) = table.latest_file_slices()
    assert len(s.log_files) == 3
    instant = table.instant_times.next(after=table.timeline().max_time())
    ctx = ReadContext.for_table(table, as_of=instant)
    task = CompactionTask(instant, s.partition, s.file_id, s.base_instant, s.base_file.file_name,
                          tuple(lf.file_name for lf in s.log_files), sum(lf.size for lf in s.log_files),
                          ctx.table_schema_json, table.config.version)
    expected_rows = read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx)
    stat = compact_file_group(table.storage, ctx, task, "0-0-0")

    written = os.path.join(table.base_path, stat.path)
    assert pq.ParquetFile(written).num_row_groups > 1
    got = pq.read_table(written)
    assert got.drop_columns(["_hoodie_file_name"]).to_pylist() == \
        expected_rows.drop_columns(["_hoodie_file_name"]).to_pylist()        # the reader's rows, in its order
    assert set(got.column("_hoodie_file_name").to_pylist()) == {os.path.basename(stat.path)}
    before, after = _seqno_by_key(s.base_file.path), _seqno_by_key(written)
    inserts = len(after.keys() - before.keys())
    updates = sum(1 for k in after.keys() & before.keys() if after[k] != before[k])
    deletes = len(before.keys() - after.keys())
    assert (stat.num_inserts, stat.num_update_writes, stat.num_deletes) == (inserts, updates, deletes)
    assert stat.num_writes == got.num_rows == len(before) + inserts - deletes
    assert stat.total_updated_records_compacted == updates
    assert stat.file_size_in_bytes == stat.total_write_bytes == os.path.getsize(written)
    # the slice exercises every case: new keys, replaced and kept base rows, deleted ones
    assert inserts and updates and deletes
    if mode == "EVENT_TIME_ORDERING":   # the lower-ts updates of keys 80..99 lose to their base rows
        assert updates == 80 - 10 + 5 and deletes == 10 + 20 - 5
    else:
        assert updates == 100 - 10 + 5 and deletes == 10 + 20 - 5
    assert inserts == 50 - 10 + 5


def test_streamed_create_is_atomic_and_exclusive(tmp_path):
    from tablesvc.storage import LocalStorage

    storage = LocalStorage()
    path = str(tmp_path / "part" / "file.parquet")
    assert storage.write_new_from(path, lambda f: (f.write(b"abc"), f.write(b"def"))) == 6
    assert Path(path).read_bytes() == b"abcdef"
    with pytest.raises(FileExistsError):
        storage.write_new_from(path, lambda f: f.write(b"other"))
    assert Path(path).read_bytes() == b"abcdef"

    def fails(f):
        f.write(b"half")
        raise RuntimeError("merge failed")

    with pytest.raises(RuntimeError, match="merge failed"):
        storage.write_new_from(str(tmp_path / "part" / "second.parquet"), fails)
    assert sorted(p.name for p in (tmp_path / "part").iterdir()) == ["file.parquet"]    # no temp file left
    with storage.open_read(path) as f:
        f.seek(3)
        assert f.read() == b"def"


def test_an_empty_file_is_created_exclusively_without_a_temporary_copy(tmp_path, monkeypatch):
    """Markers and most requested / inflight instants are empty: created under their final name
    at once (nothing partial can show), exclusive like every create, the folder fsynced."""
    from tablesvc.storage import LocalStorage, local

    storage = LocalStorage()
    synced, links = [], []
    monkeypatch.setattr(LocalStorage, "_fsync_dir", staticmethod(lambda d: synced.append(d)))
    monkeypatch.setattr(local.os, "link", lambda *a: links.append(a))
    path = tmp_path / "deep" / "folder" / "x.marker.APPEND"
    storage.write_new(str(path), b"")
    assert path.is_file() and path.read_bytes() == b"" and synced == [str(path.parent)] and links == []
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.marker.APPEND"]
    with pytest.raises(FileExistsError):
        storage.write_new(str(path), b"")
    path.write_bytes(b"kept")
    with pytest.raises(FileExistsError):
        storage.write_new(str(path), b"")
    assert path.read_bytes() == b"kept"


@pytest.mark.spark
def test_dictionary_read_columns_are_written_from_their_dictionaries_and_read_back_plain(tmp_path, spark):
    """Low-cardinality string columns go from the old base file's dictionary to the new one's
    without being decoded; the new file stores no Arrow schema, so hudi-rs, pyarrow and Spark all
    read plain strings, and the rows are the same as before."""
    from tablesvc.merge.slice_reader import dictionary_read_columns

    table = new_table(tmp_path, 8)
    write_batches(table, spark)
    before = our_rows(table, spark)
    old_base = pq.ParquetFile(next(s.base_file.path for s in table.latest_file_slices() if s.base_file))
    assert {"_hoodie_file_name", "city", "_hoodie_partition_path"} <= \
        set(dictionary_read_columns(old_base, old_base.schema_arrow.names))

    assert [r.status for r in run_compaction(table, spark=spark)] == [Status.DONE]
    assert latest_log_files(table) == []
    assert our_rows(table, spark) == before == sorted_rows(table.base_path, COLUMNS)
    read_back = read_table(table.base_path)
    for name in ("_hoodie_file_name", "city", "rider"):
        assert not pa.types.is_dictionary(read_back.schema.field(name).type)
    for s in table.latest_file_slices():
        new_base = pq.ParquetFile(s.base_file.path)
        assert b"ARROW:schema" not in (new_base.metadata.metadata or {})
        assert new_base.schema_arrow.field("city").type == pa.string()
        names = [new_base.metadata.row_group(0).column(i).path_in_schema for i in range(new_base.metadata.num_columns)]
        assert new_base.metadata.row_group(0).column(names.index("_hoodie_file_name")).has_dictionary_page
        assert set(new_base.read(columns=["_hoodie_file_name"]).column(0).to_pylist()) == {s.base_file.file_name}


def test_row_groups_share_one_dictionary_per_column_so_the_writer_keeps_it():
    """Base batches of two input row groups and the log records each come with their own
    dictionary; a Parquet writer handed a new dictionary mid-chunk writes the rest plain."""
    import io

    from tablesvc.write.base_file_writer import row_groups

    def encoded(values):
        return pa.table({"city": pa.array(values).dictionary_encode()})

    n = 50_000
    parts = [encoded([f"c{i % 40:02d}" for i in range(n)]), encoded([f"c{(i + 9) % 40:02d}" for i in range(n)]),
             encoded([f"new-{i % 7}" for i in range(n // 10)])]
    groups = list(row_groups(parts))
    assert len(groups) == 1
    chunks = groups[0].column("city").chunks
    assert all(c.dictionary.equals(chunks[0].dictionary) for c in chunks)

    def city_bytes(table) -> int:
        sink = io.BytesIO()
        pq.write_table(table, sink, store_schema=False)
        return pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata.row_group(0).column(0).total_uncompressed_size

    plain = pa.table({"city": pa.chunked_array([p.column(0).combine_chunks().cast(pa.string()) for p in parts])})
    assert city_bytes(groups[0]) < 2 * city_bytes(plain)           # dictionary kept throughout
    assert city_bytes(pa.concat_tables(parts)) > 3 * city_bytes(plain)   # what unshared dictionaries cost


@pytest.mark.spark
def test_sorted_compaction_of_a_file_group_whose_rows_are_all_deleted(tmp_path, spark):
    table = new_table(tmp_path, 8)
    rows = make_rows(range(6), 1_000)
    table.insert(spark.createDataFrame(rows, SCHEMA))
    table.delete(spark.createDataFrame(rows, SCHEMA))
    assert our_rows(table, spark) == [] == sorted_rows(table.base_path, COLUMNS)

    results = run_compaction(table, spark=spark, sort_columns=("rider",))
    assert [r.status for r in results] == [Status.DONE]
    assert latest_log_files(table) == []
    assert our_rows(table, spark) == [] == sorted_rows(table.base_path, COLUMNS)
    assert all(pq.read_metadata(s.base_file.path).num_rows == 0 for s in table.latest_file_slices())


def test_a_file_group_in_two_pending_plans_is_refused_before_anything_moves(tmp_path):
    """tablesvc's planner never pins a file group twice, but a plan another tool wrote may
    (apache/hudi#1780): executing either plan is refused (exit 2, naming the other instant and the
    file group) with the table untouched; once one plan is removed the other runs."""
    from table_builders import tree, update_five_records
    from tablesvc.demo.sample_table import build_sample_table
    from tablesvc.errors import InvalidInputError

    table = build_sample_table(str(tmp_path / "t")).table
    update_five_records(table, table.latest_file_slices()[0], 1.5)
    expected = sorted_rows(table.base_path, COLUMNS)
    first = schedule_compaction(table, None, force=True).instant
    folder = Path(table.base_path) / table.config.layout.timeline_dir
    second = str(int(first) + 1)
    (folder / f"{second}.compaction.requested").write_bytes((folder / f"{first}.compaction.requested").read_bytes())
    before = tree(Path(table.base_path))
    for mine, other in ((first, second), (second, first)):
        with pytest.raises(InvalidInputError) as info:
            run_compaction(Table.open(table.base_path), mine, in_process=True)
        message = str(info.value)
        assert info.value.exit_code == 2 and mine in message and other in message and "file group" in message, message
    assert tree(Path(table.base_path)) == before

    (folder / f"{second}.compaction.requested").unlink()   # unscheduled: a requested plan wrote nothing
    [result] = run_compaction(Table.open(table.base_path), first, in_process=True)
    assert (result.status, result.instant) == (Status.DONE, first)
    assert not Table.open(table.base_path).timeline().pending_compactions()
    assert sorted_rows(table.base_path, COLUMNS) == expected
