"""Executing a clean and a rollback: the deletes these two services exist for, against the
file system's own floor (issue #6 measures every service; the targets are the proposals of
the proposals of the reference notes on performance anchors, part B.4).

* **Clean execution.**  A table on this machine's disk, built by the planning benchmark's
  builder (``build_timeline``: ``n`` delta commits, ``n`` = 2,000 at scale 1, about 20k empty
  data files with real names; the compaction after the first half of the delta commits leaves
  about 5k of them in slices a clean removes).  ``schedule_clean`` persists the plan (not
  timed), then ``finish_pending_cleans`` on a freshly opened table executes it, timed: the
  timeline load, the inflight transition, every delete, and the completed instant with its
  metadata.  Baseline: ``os.unlink`` of the same files one after another, on a second table
  built the same way, then ``os.sync`` (the clean's fsyncs make its deletes durable too): the
  file system's floor for one process.  Target: at least 50k deletes/s.  Each run gets freshly
  built tables (a clean consumes its input), flushed to disk (``os.sync``) before the clock
  starts; three runs per side, not the suite's five, because each run builds two tables of
  ~20k files.  The report names the file system the tables were on.
* **Rollback of a killed write.**  A v8 table of 1,000 file groups (100 partitions x 10 buckets)
  that an insert and an upsert wrote, then an upsert that wrote a log file into every file group
  and died before its commit: its ``complete`` raises, and the write's own undo and the removal
  of its heartbeat are switched off, which leaves what ``kill -9`` at that step leaves (an
  inflight delta commit, its markers, its heartbeat, 1,000 log files; tests/spark/test_rollback.py
  kills real processes).  The heartbeat is then dated an hour back, as a dead writer's is once
  it expires.  ``rollback`` of that instant is timed: planning from the markers, the persisted
  plan, the deletes, the completed rollback and the removal of markers and heartbeat.
  Baseline: unlinking the same 1,000 files.  Target: at most 1 s.  Each run starts from a copy
  of the crashed table (three runs per side); afterwards the 1,000 files, the markers and the
  heartbeat must be gone, and hudi-rs must read the rows the table held before the killed
  write.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from tablesvc.config import build_config
from tablesvc.services.clean.executor import finish_pending_cleans, schedule_clean
from tablesvc.services.result import Status
from tablesvc.services.rollback import PlanSummary, plan_rollback, rollback
from tablesvc.api import Table, TableSpec
from tablesvc.write.markers import marker_dir
from synthetic_timeline import build_timeline   # the planning benchmark's table builder
from timeline.heartbeat import Heartbeat, heartbeat_path
from timeline.instant import Action, State

pytestmark = [pytest.mark.benchmark]

CLEAN_TARGET_PER_S = 50_000
ROLLBACK_TARGET_S = 1.0
PARTITIONS, BUCKETS = 100, 10


def _harness():
    import bench_harness

    return bench_harness


def _file_system(path: str) -> str:
    """The type of the file system ``path`` is on (the longest mount point above it)."""
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and (path == fields[1] or path.startswith(fields[1].rstrip("/") + "/")) \
                        and len(fields[1]) >= len(best):
                    best, kind = fields[1], fields[2]
    except OSError:
        pass
    return kind


def _files_in_plan(table: Table) -> list[str]:
    """Absolute paths the pending clean's persisted plan lists."""
    from timeline.payloads import decode_cleaner_plan

    timeline = table.timeline()
    (pending,) = timeline.pending(Action.CLEAN)
    plan = decode_cleaner_plan(timeline.read_bytes(table.storage, pending), timeline.path_of(pending))
    return [p for paths in plan.files_to_delete().values() for p in paths]


# -- clean execution ---------------------------------------------------------------------------------
def test_clean_execution_vs_unlink(bench, tmp_path):
    n = bench.rows(2_000, minimum=200)
    config = build_config()
    built: dict[str, object] = {}

    def build(side: str) -> None:
        root = tmp_path / side
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        synthetic = build_timeline(root / "t", n)
        scheduled = schedule_clean(synthetic.table, config)
        assert scheduled.status is Status.SCHEDULED, scheduled
        built[side] = (synthetic, _files_in_plan(synthetic.table))
        os.sync()                       # the build's writes reach the disk before the clock starts

    def ours():
        synthetic, _ = built["ours"]
        return finish_pending_cleans(Table.open(synthetic.table.base_path))

    def theirs():
        _, paths = built["theirs"]
        for p in paths:
            os.unlink(p)
        os.sync()
        return len(paths)

    ours_m, theirs_m = _harness().paired(ours, theirs, runs=3, warmup=0,
                                         before_ours=lambda: build("ours"), before_theirs=lambda: build("theirs"))
    synthetic, paths = built["ours"]
    table = Table.open(synthetic.table.base_path)
    (result,) = ours_m.result
    deleted = result.metrics["files_deleted"]
    # what the clean did: every planned file gone, the instant completed, nothing else deleted
    assert result.status is Status.DONE and deleted == len(paths) == theirs_m.result > 0
    assert not any(os.path.exists(p) for p in paths)
    assert table.timeline().get(result.instant).is_completed
    left = sum(1 for part, _, files in os.walk(table.base_path) if "/.hoodie" not in part
               for f in files if not f.startswith(".hoodie_partition"))
    assert deleted + left == synthetic.data_files, "the clean deleted files its plan did not list"
    where = _file_system(str(tmp_path))
    rate, floor = deleted / ours_m.seconds, deleted / theirs_m.seconds
    bench.record("clean: execution (deletes of a persisted plan)", rows=deleted, bytes=0, ours=ours_m,
                 baseline="os.unlink of the same files, one process", theirs=theirs_m,
                 target=f">= {CLEAN_TARGET_PER_S:,} deletes/s", met=rate >= CLEAN_TARGET_PER_S,
                 notes=(f"rows = files deleted; a table of {n:,} delta commits ({deleted + left:,} data files, "
                        f"{left:,} left after the clean) on {where}; {rate:,.0f} deletes/s against the file "
                        f"system's {floor:,.0f}/s; medians of {len(ours_m.runs)} runs, each on freshly built "
                        f"tables"),
                 deletes_per_s=round(rate), floor_deletes_per_s=round(floor), delta_commits=n, files_left=left,
                 file_system=where)
    for side in built:
        shutil.rmtree(tmp_path / side, ignore_errors=True)


# -- rollback of a killed write ------------------------------------------------------------------------
class _KilledHere(Exception):
    """Stands for the process dying at the commit (see the module doc)."""


def _rows(spark, ts: int):
    from pyspark.sql import functions as F

    return spark.range(PARTITIONS * BUCKETS * 20).select(
        F.format_string("key%08d", "id").alias("uuid"), F.lit(ts).cast("long").alias("ts"),
        F.format_string("p%03d", (F.col("id") % PARTITIONS).cast("int")).alias("part"),
        (F.col("id") * 0.5).alias("fare"))


def _snapshot(path: str) -> list[tuple]:
    """Every (key, ts, partition, fare) through hudi-rs, sorted."""
    import pyarrow as pa
    from hudi import HudiReadOptions, HudiTableBuilder

    t = pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions()))
    return sorted(zip(*(t.column(c).to_pylist() for c in ("uuid", "ts", "part", "fare"))))


@pytest.fixture(scope="module")
def crashed_table(spark, tmp_path_factory):
    """(the crashed table's folder, the killed instant, hudi-rs rows before the killed write)."""
    import timeline.transitions as transitions
    from tablesvc.services.lifecycle import InstantLifecycle

    root = tmp_path_factory.mktemp("bench_rollback")
    path = str(root / "crashed")
    table = Table.create(path, TableSpec("bench_rb", ("uuid",), "ts", ("part",), table_version=8,
                                         num_buckets=BUCKETS))
    table.insert(_rows(spark, 1))
    Table.open(path).upsert(_rows(spark, 2))
    before = _snapshot(path)
    complete = transitions.TimelineWriter.complete

    def die_at_the_commit(self, instant, *args, **kwargs):
        if instant.action is Action.DELTA_COMMIT:
            raise _KilledHere(instant.timestamp)
        return complete(self, instant, *args, **kwargs)

    stop = Heartbeat.stop
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(transitions.TimelineWriter, "complete", die_at_the_commit)
        mp.setattr(InstantLifecycle, "abort", lambda self: None)    # the write is killed: nothing undone
        mp.setattr(Heartbeat, "stop", lambda self, delete=True: stop(self, delete=False))
        with pytest.raises(_KilledHere):
            Table.open(path).upsert(_rows(spark, 3))
    (pending,) = [i for i in Table.open(path).timeline().instants if not i.is_completed]
    assert pending.action is Action.DELTA_COMMIT and pending.state is State.INFLIGHT
    beat = heartbeat_path(Table.open(path).base_path, pending.timestamp)
    with open(beat, "w") as f:      # an hour old: the writer is long dead
        f.write(str(int(time.time() * 1000) - 3_600_000))
    yield path, pending.timestamp, before
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.spark
def test_rollback_of_a_killed_write_vs_unlink(bench, crashed_table, tmp_path):
    source, killed, before = crashed_table
    base = Table.open(source).base_path   # a local absolute path (Table.open normalises it)
    plan = PlanSummary.of(plan_rollback(Table.open(source), killed))
    # the plan names files by path in the crashed table; the runs work on copies of it
    written = sorted(os.path.relpath(p, base) for p in plan.files_to_delete)
    assert len(written) == PARTITIONS * BUCKETS and not plan.command_block_files
    runs = {"ours": str(tmp_path / "ours"), "theirs": str(tmp_path / "theirs")}

    def fresh(side: str) -> None:
        shutil.rmtree(runs[side], ignore_errors=True)
        shutil.copytree(source, runs[side])
        os.sync()

    def ours():
        return rollback(Table.open(runs["ours"]), killed)

    def theirs():
        for rel in written:
            os.unlink(os.path.join(runs["theirs"], rel))
        return len(written)

    ours_m, theirs_m = _harness().paired(ours, theirs, runs=3, warmup=0,
                                         before_ours=lambda: fresh("ours"), before_theirs=lambda: fresh("theirs"))
    result = ours_m.result
    assert result.status is Status.DONE and result.metrics["files_deleted"] == len(written)
    rolled_back = Table.open(runs["ours"])
    assert not [i for i in rolled_back.timeline().instants if not i.is_completed]
    assert not any(os.path.exists(os.path.join(runs["ours"], rel)) for rel in written)
    assert not os.path.exists(marker_dir(rolled_back.base_path, killed))
    assert not os.path.exists(heartbeat_path(rolled_back.base_path, killed))
    assert _snapshot(runs["ours"]) == before, "after the rollback hudi-rs should read the rows before the killed write"
    bench.record("rollback: a killed write of 1,000 log files", rows=len(written), bytes=0, ours=ours_m,
                 baseline="os.unlink of the same files", theirs=theirs_m,
                 target=f"<= {ROLLBACK_TARGET_S:.0f} s", met=ours_m.seconds <= ROLLBACK_TARGET_S,
                 notes=(f"rows = files deleted; a v8 table of {PARTITIONS * BUCKETS:,} file groups; rollback = plan "
                        f"from the markers, persisted plan, deletes, completed instant, markers and heartbeat "
                        f"removed; medians of {len(ours_m.runs)} runs, each on a fresh copy of the crashed table; "
                        f"afterwards hudi-rs reads the {len(before):,} rows the table held before the killed "
                        f"write"))
    for side in runs.values():
        shutil.rmtree(side, ignore_errors=True)
