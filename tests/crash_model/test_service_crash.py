"""kill -9 of clean, rollback, log compaction and compaction at their storage operations.

``tests/crash_harness.py`` runs a service in a child process and kills it with SIGKILL right
after its n-th mutating storage call (see its docstring).  Clean, rollback and log compaction
need no Spark, so they are killed at **every** point 1..N; compaction (Spark) at three
driver-side points.  At every point:

* right after the kill, hudi-rs and tablesvc's reader return exactly the model's rows (a dict
  built from what the test wrote, not from the table), and the data files lie between the
  state before and the state after the service;
* the documented recovery (re-running the service, or ``tablesvc rollback PATH``) brings the
  table to the model's rows and to exactly the files a full run leaves, computed
  independently; nothing is pending on the timeline; no marker folder and no heartbeat is
  left; the service's instant is the one the dead process persisted, if it got that far.

Tables are written without Spark through the write pieces (``tablesvc.write``), with a manual
clock; their ``.hoodie/tablesvc.yaml`` sets the heartbeat interval to 60 s (the heartbeat
thread, whose beats the harness does not count, never beats during a run, so no kill cuts one)
and the tolerable misses to 0 (a dead process's heartbeat is expired at once, so a real
``tablesvc`` process on the system clock can recover without waiting; ``ALIVE`` brings the
window back to show that a live heartbeat is respected).  In-process recovery uses a clock one
day ahead: what a user gets by waiting for heartbeats and the table lock (20 s) to expire.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from oracles.hudi_rs import sorted_rows

from helpers import data_files
from table_builders import apply_to_model, compact_by_hand, write_without_spark
from tablesvc.config import load_config
from tablesvc.errors import ConflictError
from tablesvc.fsview.names import LogFileName
from tablesvc.logformat import avro_data_block, block_records, encode_block, read_log_file
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.storage import LocalStorage
from tablesvc.api import Table, TableSpec
from tablesvc.write import create_marker
from timeline.clock import ManualClock, SystemClock
from timeline.heartbeat import heartbeat_path
from timeline.instant import Action, State

REPO = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).resolve().parents[1] / "crash_harness.py"
SCHEMA = pa.schema([("uuid", pa.string()), ("ts", pa.int64()), ("city", pa.string())])
DAY_MS = 86_400_000
TABLE_YAML = """\
hoodie.client.heartbeat.interval_in_ms: 60000
hoodie.client.heartbeat.tolerable.misses: 0
hoodie.cleaner.commits.retained: 2
"""
ALIVE = "hoodie.client.heartbeat.tolerable.misses=1000"   # with it, any heartbeat of the last 16 h is alive
LOCK = ".hoodie/lock"   # the table lock: Java Hudi's FileSystemBasedLockProvider file


# =============================================================================================
# Tables and the model
# =============================================================================================

def rows(keys, ts, city=None) -> pa.Table:
    return pa.table({"uuid": [f"k{k:04d}" for k in keys], "ts": [ts] * len(keys),
                     "city": [city or ("a", "b")[k % 2] for k in keys]}, schema=SCHEMA)


class Builder:
    """Writes a MOR table through the write pieces (no Spark) and keeps the model: key -> (ts, city)."""

    def __init__(self, path: Path, version: int):
        self.path = path
        self.clock = ManualClock()
        self.table = Table.create(str(path), TableSpec("trips", ("uuid",), "ts", ("city",), table_version=version,
                                                       num_buckets=1), clock=self.clock)
        (path / ".hoodie" / "tablesvc.yaml").write_text(TABLE_YAML)
        self.model: dict[str, tuple[int, str]] = {}
        self.stage = 0

    def write(self, batch: pa.Table, operation: str = "upsert", *, complete: bool = True) -> str:
        self.clock.advance(1000)
        self.stage += 1
        t, _stats = write_without_spark(self.table, batch, operation, stage=self.stage, complete=complete)
        if complete:
            apply_to_model(self.model, batch, operation, value=lambda r: (r["ts"], r["city"]), ts_of=lambda v: v[0])
        return t

    def compact(self) -> str:
        """A compaction of every latest slice, done by hand (the service under test is not this one)."""
        return compact_by_hand(self.table, self.clock)

    def step(self, fn, *args, **kwargs) -> tuple[str, set[str]]:
        """Run a write or compaction; returns its instant and the data files it created."""
        before = data_files(self.path)
        instant = fn(*args, **kwargs)
        return instant, data_files(self.path) - before


def append_block(b: Builder, instant: str, log_rel: str, ts: int) -> None:
    """What Java does to a v6 log file: append a data block of ``instant`` (with its APPEND marker)."""
    path = b.path / log_rel
    first = read_log_file(b.table.storage, str(path)).blocks[0]
    records = [dict(r, ts=ts, _hoodie_commit_time=instant) for r in block_records(first)]
    partition, _, name = log_rel.rpartition("/")
    create_marker(b.table.storage, b.table.base_path, instant, partition, name, "APPEND")
    with open(path, "ab") as f:
        f.write(encode_block(avro_data_block(instant, first.schema, records)))


def our_rows(path) -> list[tuple]:
    table = Table.open(str(path))
    ctx = ReadContext.for_table(table)
    parts = [read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx) for s in table.latest_file_slices()]
    got = pa.concat_tables(parts).to_pylist() if parts else []
    return sorted((r["uuid"], r["ts"], r["city"]) for r in got)


def model_rows(model: dict[str, tuple[int, str]]) -> list[tuple]:
    return sorted((k, ts, city) for k, (ts, city) in model.items())


def assert_reads(path, model) -> None:
    want = model_rows(model)
    assert sorted_rows(path, ("uuid", "ts", "city")) == want, "hudi-rs does not read the model's rows"
    assert our_rows(path) == want, "tablesvc's reader does not read the model's rows"


# =============================================================================================
# Harness, recovery and state helpers
# =============================================================================================

def harness_env(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), TABLESVC_SPARK_LOG=str(tmp_path / "spark.log"))


def kill_at_every_point(tmp_path: Path, template: Path, service: str, *args: str) -> dict:
    """Point 0 (a full run) and every point 1..N, each on its own copy of ``template``."""
    proc = subprocess.run([sys.executable, str(HARNESS), "--fork", str(template), str(tmp_path / "points"),
                           service, *args], env=harness_env(tmp_path), capture_output=True, text=True,
                          timeout=600, start_new_session=True)
    assert proc.returncode == 0, f"harness failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    ops = run["ops"]
    assert ops, "the full run made no storage call"
    assert [p["point"] for p in run["points"]] == list(range(1, len(ops) + 1))
    for p in run["points"]:
        # a real SIGKILL, right after the n-th call, which is the full run's n-th call (deterministic)
        assert (p["signal"], p["exit"]) == (signal.SIGKILL, None), p
        assert (p["ops"], shape(p["last_op"])) == (p["point"], shape(ops[p["point"] - 1])), p
    return run


def shape(op: str) -> str:
    """An op with its instant times blanked: every run picks new ones."""
    return re.sub(r"\d{17}", "<time>", op)


@contextlib.contextmanager
def at(point: dict):
    try:
        yield
    except Exception as e:
        raise AssertionError(f"point {point['point']} (killed after `{point['last_op']}`): "
                             f"{type(e).__name__}: {e}") from e


def later() -> ManualClock:
    """A day from now: every heartbeat and table lock the dead process left has expired."""
    return ManualClock(SystemClock().now_ms() + DAY_MS)


def tablesvc(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """The real command line, in its own process, on the system clock."""
    return subprocess.run([sys.executable, "-m", "tablesvc", *argv], env=harness_env(tmp_path),
                          capture_output=True, text=True, timeout=300)


def config_of(path, *conf: str):
    return load_config(LocalStorage(), conf_pairs=conf, table_path=str(path))


def timeline_of(path):
    return Table.open(str(path)).timeline()


def instants_of(path, action: Action):
    return timeline_of(path).filter(actions=[action])


def leftovers(path: Path) -> dict[str, list[str]]:
    """Marker folders and heartbeat files: none may remain once nothing is pending."""
    out = {}
    for rel in (".hoodie/.temp", ".hoodie/.heartbeat"):
        folder = path / rel
        out[rel] = sorted(os.listdir(folder)) if folder.is_dir() else []
    return out


def lock_left(path: Path) -> bool:
    return (path / LOCK).exists()


def tree(path: Path) -> dict[str, bytes]:
    out = {}
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, path)] = Path(p).read_bytes()
    return out


def first_point(points, predicate):
    return next((p for p in points if predicate(p)), None)


def drive(tmp_path: Path, points: list[dict], after_kill, finish, cli: dict[int, tuple[list[str], int]]) -> None:
    """For every point: ``state = after_kill(path)``, then ``finish(path, state, cli_rc)``, which
    recovers (unless a CLI run did) and checks the result.  ``cli`` maps a point to a real
    ``tablesvc`` command line and the exit code it must end with; those run in the background,
    overlapping the other points, and a command that must refuse (non-zero) must change nothing."""
    jobs = []
    for p in points:
        path = Path(p["path"])
        with at(p):
            state = after_kill(path)
            if p["point"] in cli:
                argv, rc = cli[p["point"]]
                proc = subprocess.Popen([sys.executable, "-m", "tablesvc", *argv], env=harness_env(tmp_path),
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                jobs.append((p, state, tree(path) if rc else None, rc, proc))
            else:
                finish(path, state, None)
                shutil.rmtree(path.parent)
    for p, state, snapshot, rc, proc in jobs:
        path = Path(p["path"])
        with at(p):
            _out, err = proc.communicate(timeout=300)
            assert proc.returncode == rc, f"`tablesvc {' '.join(cli[p['point']][0])}` exited {proc.returncode}: {err}"
            if snapshot is not None:
                assert tree(path) == snapshot, "a refused command changed the table"
            finish(path, state, rc)
            shutil.rmtree(path.parent)


# =============================================================================================
# Clean
# =============================================================================================

def clean_template(path: Path, version: int):
    """Two file groups, three slices each; with 2 commits retained the ECTR is C2 and the
    slices based on t1 and C1 (8 files) go."""
    b = Builder(path, version)
    steps = {}
    steps["t1"] = b.step(b.write, rows(range(0, 20), 1))
    steps["t2"] = b.step(b.write, rows(range(0, 10), 2))
    steps["c1"] = b.step(b.compact)
    steps["t3"] = b.step(b.write, rows(range(5, 15), 3))
    steps["c2"] = b.step(b.compact)
    steps["t4"] = b.step(b.write, rows(range(10, 20), 4))
    keep = steps["c2"][1] | steps["t4"][1]     # the newest slice at or before the ECTR, and later files
    doomed = steps["t1"][1] | steps["t2"][1] | steps["c1"][1] | steps["t3"][1]
    assert len(keep) == 4 and len(doomed) == 8 and keep | doomed == data_files(path)
    return b, keep, doomed


@pytest.mark.parametrize("version", [6, 8])
def test_clean_killed_at_every_storage_operation(tmp_path, version):
    from tablesvc.services.clean import run_clean

    b, keep, doomed = clean_template(tmp_path / "template" / "t", version)
    before = data_files(b.path)
    assert_reads(b.path, b.model)
    run = kill_at_every_point(tmp_path, b.path, "clean")
    assert [r["status"] for r in run["results"]] == ["done"]
    assert data_files(Path(run["full_path"])) == keep
    ops = run["ops"]
    requested = [i for i, op in enumerate(ops) if op.endswith(".clean.requested")]
    deletes = [i for i, op in enumerate(ops) if op.startswith("delete ") and op.split(" ", 1)[1] in doomed]
    assert len(requested) == 1 and len(deletes) == len(doomed) and requested[0] < min(deletes)
    # `tablesvc clean run PATH` (system clock) recovers a point with files half deleted, no lock held
    cli = first_point(run["points"], lambda p: not lock_left(Path(p["path"]))
                      and keep < data_files(Path(p["path"])) < before)
    assert cli is not None
    cfg = config_of(b.path)

    def after_kill(path):
        # readers unaffected; only doomed files went, and only under a persisted plan
        assert_reads(path, b.model)
        files = data_files(path)
        assert keep <= files <= before
        cleans = instants_of(path, Action.CLEAN)
        assert len(cleans) <= 1
        assert {i.timestamp for i in timeline_of(path).pending()} <= {c.timestamp for c in cleans}
        if files != before:
            assert cleans, "files were deleted without a persisted clean plan"
        return cleans

    def finish(path, cleans, cli_rc):
        if cli_rc is None:   # the next clean finishes the pending one (or plans its own)
            run_clean(Table.open(str(path), clock=later()), cfg)
        assert_reads(path, b.model)
        assert data_files(path) == keep
        tl = timeline_of(path)
        assert tl.pending() == ()
        [clean] = tl.filter(actions=[Action.CLEAN])
        assert clean.is_completed
        if cleans:
            assert clean.timestamp == cleans[0].timestamp, "the persisted plan was not the one finished"
        md = tl.payload(LocalStorage(), clean)
        assert md.total_files_deleted == len(doomed)
        assert {f for m in md.partition_metadata.values() for f in m.success_delete_files} == \
            {f.rsplit("/", 1)[-1] for f in doomed}
        assert leftovers(path) == {".hoodie/.temp": [], ".hoodie/.heartbeat": []}

    drive(tmp_path, run["points"], after_kill, finish, {cli["point"]: (["clean", "run", cli["path"]], 0)})


# =============================================================================================
# Rollback
# =============================================================================================

def rollback_template(path: Path, version: int):
    """Two committed delta commits and a failed one T (updates, inserts into a new partition;
    v6: T's block also appended to a committed log file, which needs a command block)."""
    b = Builder(path, version)
    b.write(rows(range(0, 20), 1))
    b.write(rows(range(0, 10), 2))
    committed = data_files(path)
    appended = None
    if version == 6:
        # T updates partition b and inserts into c; in a it appends to the committed log (as Java does)
        t, created = b.step(b.write, pa.concat_tables([rows(range(1, 12, 2), 3), rows(range(100, 104), 3, "c")]),
                            complete=False)
        [appended] = [f for f in committed if ".log." in f and f.startswith("city=a/")]
        append_block(b, t, appended, ts=99)
    else:
        t, created = b.step(b.write, pa.concat_tables([rows(range(5, 15), 3), rows(range(100, 104), 3, "c")]),
                            complete=False)
    assert created and any(f.endswith(".parquet") for f in created) and any(".log." in f for f in created)
    return b, t, committed, created, appended


@pytest.mark.parametrize("version,given", [(8, False), (6, True)], ids=["v8-failed-sweep", "v6-instant-command-block"])
def test_rollback_killed_at_every_storage_operation(tmp_path, version, given):
    from tablesvc.services.rollback import rollback, rollback_failed

    b, t, committed, created, appended = rollback_template(tmp_path / "template" / "t", version)
    appended_bytes = (b.path / appended).read_bytes() if appended else None
    assert_reads(b.path, b.model)          # the failed write is invisible already
    run = kill_at_every_point(tmp_path, b.path, "rollback", *([t] if given else []))
    [res] = run["results"]
    assert res["status"] == "done" and res["metrics"]["target"] == t
    command_files = data_files(Path(run["full_path"])) - committed
    if version == 6:
        # one new log version in the appended slice, holding one rollback block for T
        [cmd] = command_files
        ln, old = LogFileName.parse(cmd.rsplit("/", 1)[-1]), LogFileName.parse(appended.rsplit("/", 1)[-1])
        assert (ln.file_id, ln.instant, cmd.split("/")[0]) == (old.file_id, old.instant, appended.split("/")[0])
    else:
        assert command_files == set()
    ops = run["ops"]
    planned = [i for i, op in enumerate(ops) if op.endswith(".rollback.requested")]
    removed = [i for i, op in enumerate(ops) if op.startswith("delete ") and op.split(" ", 1)[1] in created]
    done = [i for i, op in enumerate(ops) if op.startswith("write_new") and op.endswith(".rollback")]
    gone = [i for i, op in enumerate(ops) if op.startswith("delete ") and f"/{t}." in op]
    assert len(planned) == 1 and len(removed) == len(created) and len(done) == 1 and gone
    assert planned[0] < min(removed) and max(removed) < done[0] < min(gone)
    pts = run["points"]
    # real `tablesvc rollback PATH` processes (system clock, no lock left): v8 recovers a point
    # mid-deletes, v6 one after R completed; and a live heartbeat of R is respected (exit 3)
    if version == 8:
        cli = first_point(pts, lambda p: not lock_left(Path(p["path"]))
                          and committed < data_files(Path(p["path"])) < committed | created)
    else:
        cli = first_point(pts, lambda p: p["point"] - 1 >= done[0] and not lock_left(Path(p["path"])))
    refused = first_point(pts, lambda p: p["point"] - 1 > planned[0] and p is not cli
                          and not lock_left(Path(p["path"])) and leftovers(Path(p["path"]))[".hoodie/.heartbeat"])
    assert cli and refused

    def after_kill(path):
        assert_reads(path, b.model)
        files = data_files(path)
        assert committed <= files <= committed | created | command_files
        tl = timeline_of(path)
        rbs = tl.filter(actions=[Action.ROLLBACK])
        assert len(rbs) <= 1
        assert {i.timestamp for i in tl.pending()} <= {t} | {r.timestamp for r in rbs}
        if files & created != created or files & command_files:
            assert rbs, "files were touched before the rollback plan was persisted"
        if tl.get(t) is None:
            assert rbs and rbs[0].is_completed, "T's timeline files went before R completed"
        if appended:
            assert (path / appended).read_bytes() == appended_bytes, "a shared log file was rewritten"
        return rbs

    def finish(path, rbs, cli_rc):
        if cli_rc != 0:        # not recovered by the CLI: what it runs, once locks and heartbeats expired
            if given:          # re-running the same command finishes it
                rollback(Table.open(str(path), clock=later()), t)
            else:
                rollback_failed(Table.open(str(path), clock=later()))
        assert_reads(path, b.model)
        assert data_files(path) == committed | command_files
        tl = timeline_of(path)
        assert tl.pending() == () and tl.get(t) is None
        [r] = tl.filter(actions=[Action.ROLLBACK])
        assert r.is_completed
        if rbs:
            assert r.timestamp == rbs[0].timestamp, "a second rollback instant instead of resuming R"
        md = tl.payload(LocalStorage(), r)
        assert md.commits_rollback == (t,)
        assert {os.path.relpath(f, path) for m in md.partition_metadata.values()
                for f in m.success_delete_files} == created
        for cmd in command_files:
            [block] = read_log_file(LocalStorage(), str(path / cmd)).blocks
            assert block.is_rollback and block.target_instant_time == t and block.instant_time == r.timestamp
        if appended:
            assert (path / appended).read_bytes() == appended_bytes
        assert leftovers(path) == {".hoodie/.temp": [], ".hoodie/.heartbeat": []}

    drive(tmp_path, pts, after_kill, finish, {
        cli["point"]: (["rollback", cli["path"]], 0),
        refused["point"]: (["rollback", refused["path"], "--instant", t, "--conf", ALIVE], 3)})


# =============================================================================================
# Log compaction (tasks in-process)
# =============================================================================================

def busy_template(path: Path, version: int) -> Builder:
    """Two file groups with four delta commits of log blocks each (updates and a delete)."""
    b = Builder(path, version)
    b.write(rows(range(0, 20), 1))
    b.write(rows(range(0, 10), 2))
    b.write(rows(range(5, 15), 3))
    b.write(rows(range(0, 4), 0), "delete")
    b.write(rows(range(12, 20), 5))
    return b


def log_compactions(path) -> list:
    tl = timeline_of(path)
    return [i for i in tl.instants if tl.origin_action(i) is Action.LOG_COMPACTION or (
        i.is_completed and i.action is Action.DELTA_COMMIT
        and tl.commit_metadata(Table.open(str(path)).storage, i).operation_type == "LOG_COMPACT")]


@pytest.mark.parametrize("version", [6, 8])
def test_log_compaction_killed_at_every_storage_operation(tmp_path, version):
    from tablesvc.services.clean import run_clean
    from tablesvc.services.log_compaction import run_log_compaction
    from tablesvc.services.rollback import rollback_failed

    b = busy_template(tmp_path / "template" / "t", version)
    base = data_files(b.path)
    assert_reads(b.path, b.model)
    run = kill_at_every_point(tmp_path, b.path, "logcompaction")
    [res] = run["results"]
    assert res["status"] == "done" and res["metrics"]["file_groups"] == 2
    assert len(data_files(Path(run["full_path"])) - base) == 2      # one compacted log file per file group
    ops = run["ops"]
    assert sum(op.endswith(".logcompaction.requested") for op in ops) == 1
    assert sum(op.endswith(".logcompaction.inflight") for op in ops) == 1
    pts = run["points"]
    # `tablesvc rollback PATH` recovers one point with a dead L that wrote a file (no lock left)
    cli = first_point(pts, lambda p: not lock_left(Path(p["path"])) and data_files(Path(p["path"])) - base
                      and timeline_of(p["path"]).pending_log_compactions())
    assert cli is not None
    cfg = config_of(b.path)
    refusals = []

    def after_kill(path):
        assert_reads(path, b.model)
        tl = timeline_of(path)
        lcs = log_compactions(path)
        assert len(lcs) <= 1
        assert {i.timestamp for i in tl.pending()} <= {i.timestamp for i in lcs}
        new = data_files(path) - base
        assert base <= data_files(path) and len(new) <= 2
        for f in new:   # only L's compacted blocks, in files of its own
            assert lcs and {blk.instant_time for blk in read_log_file(LocalStorage(), str(path / f)).blocks} \
                == {lcs[0].timestamp}
        dead = lcs[0] if lcs and lcs[0].state is State.INFLIGHT else None
        # an inflight L whose heartbeat is alive is not touched (exit 3)
        if dead is not None and Path(heartbeat_path(str(path), dead.timestamp)).exists():
            snapshot = tree(path)
            with pytest.raises(ConflictError) as busy:
                run_log_compaction(Table.open(str(path)), config=config_of(path, ALIVE))
            assert busy.value.exit_code == 3 and tree(path) == snapshot
            refusals.append(path)
        return lcs, dead

    def finish(path, state, cli_rc):
        lcs, dead = state
        if cli_rc == 0:      # `tablesvc rollback PATH` put the dead L back to requested
            assert timeline_of(path).get(dead.timestamp).state is State.REQUESTED
        table = Table.open(str(path), clock=later())
        if not (lcs and lcs[0].is_completed):
            run_log_compaction(table, config=cfg)   # the next run (a dead L: rolled back, replanned, run)
        # else "nothing to run" (docs/log-compaction.md); a run would compact L's own blocks
        # again: test_a_run_after_a_completed_log_compaction_has_nothing_to_do
        if lcs and lcs[0].is_completed and int(path.parent.name) % 2:
            run_clean(table, cfg)                   # the next clean removes what a completed L left
        else:
            rollback_failed(table)                  # ... or the next rollback sweep
        assert_reads(path, b.model)
        tl = timeline_of(path)
        assert tl.pending() == ()
        [lc] = log_compactions(path)
        assert lc.is_completed and lc.action is Action.DELTA_COMMIT
        if lcs and lcs[0].state is State.COMPLETED:
            assert lc.timestamp == lcs[0].timestamp
        if dead is not None and cli_rc is None:
            assert tl.get(dead.timestamp) is None         # dropped, and a fresh L ran
            assert [r.state for r in tl.filter(actions=[Action.ROLLBACK])] == [State.COMPLETED]
        written = {s.path for s in tl.commit_metadata(LocalStorage(), lc).write_stats()}
        assert len(written) == 2 and data_files(path) == base | written
        assert leftovers(path) == {".hoodie/.temp": [], ".hoodie/.heartbeat": []}

    drive(tmp_path, pts, after_kill, finish, {cli["point"]: (["rollback", cli["path"]], 0)})
    assert refusals, "no point left an inflight log compaction with a heartbeat"


# =============================================================================================
# Compaction (Spark): three driver-side points, one chain
# =============================================================================================

@pytest.mark.spark
@pytest.mark.parametrize("version", [8, pytest.param(6, marks=pytest.mark.slow)])
def test_compaction_killed_at_three_driver_points(tmp_path, version):
    """Each kill's recovery is the next step, so two Spark start-ups cover three points:

    1. killed after ``C.compaction.inflight`` (and the lock release after it), before any task;
    2. the next run recovers that (rolls the dead attempt back, re-executes C) and is killed
       mid job, once a task wrote its base file (seen by the harness's watcher thread);
    3. ``tablesvc rollback PATH`` recovers that (C back to requested, its files gone, plan
       kept); the next run is killed right after C's completed file, before the markers go;
       ``tablesvc rollback PATH`` then removes what it left.
    """
    from tablesvc.services.compaction import schedule_compaction

    b = busy_template(tmp_path / "t", version)
    path = b.path
    base = data_files(path)
    c = schedule_compaction(Table.open(str(path)), config_of(path), force=True).instant
    requested = path / ".hoodie" / ("timeline" if version == 8 else "") / f"{c}.compaction.requested"
    plan_bytes = requested.read_bytes()

    def kill(spec: str) -> list[str]:
        proc = subprocess.run([sys.executable, str(HARNESS), str(path), spec, "compaction", c],
                              env=harness_env(tmp_path), capture_output=True, text=True, timeout=600,
                              start_new_session=True)
        assert proc.returncode == -signal.SIGKILL, f"{spec}: not killed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        return Path(str(path) + ".ops").read_text().splitlines()

    def c_files() -> set[str]:
        return {f for f in data_files(path) if f.endswith(f"_{c}.parquet")}

    def rollbacks_of_c() -> list:
        tl = timeline_of(path)
        rbs = tl.filter(actions=[Action.ROLLBACK])
        assert all(r.is_completed and tl.payload(LocalStorage(), r).commits_rollback == (c,) for r in rbs)
        return list(rbs)

    # 1. after requested -> inflight
    ops = kill(r"match:\.compaction\.inflight$ +1")
    assert ops[-2].endswith(f"/{c}.compaction.inflight") and ops[-1] == f"delete {LOCK}", ops
    assert_reads(path, b.model)
    assert timeline_of(path).require(c).state is State.INFLIGHT and not c_files()

    # 2. the next run rolls the dead attempt back, re-executes C, and dies mid job
    kill(f"appears:*_{c}.parquet")
    assert_reads(path, b.model)
    assert timeline_of(path).require(c).state is State.INFLIGHT and c_files()
    assert len(rollbacks_of_c()) == 1
    assert (path / ".hoodie" / ".temp" / c).is_dir()

    # 3. `tablesvc rollback PATH`: C back to requested, its files and markers gone, the plan kept
    rec = tablesvc(tmp_path, "rollback", str(path))
    assert rec.returncode == 0, rec.stderr
    assert timeline_of(path).require(c).state is State.REQUESTED and requested.read_bytes() == plan_bytes
    assert data_files(path) == base and len(rollbacks_of_c()) == 2
    assert_reads(path, b.model)
    assert leftovers(path) == {".hoodie/.temp": [], ".hoodie/.heartbeat": []}
    #    the next run completes C and dies before deleting the markers
    ops = kill(r"match:\.commit$")
    assert timeline_of(path).require(c).state is State.COMPLETED and (path / ".hoodie" / ".temp" / c).is_dir()
    assert_reads(path, b.model)

    # 4. `tablesvc rollback PATH` has nothing to roll back and removes the leftovers
    rec = tablesvc(tmp_path, "rollback", str(path))
    assert (rec.returncode, rec.stdout) == (0, "nothing to roll back\n"), rec.stderr
    assert_reads(path, b.model)
    tl = timeline_of(path)
    assert tl.pending() == () and tl.require(c).state is State.COMPLETED and requested.read_bytes() == plan_bytes
    written = {s.path for s in tl.commit_metadata(LocalStorage(), tl.require(c)).write_stats()}
    assert len(written) == 2 and c_files() == written and data_files(path) == base | written
    assert leftovers(path) == {".hoodie/.temp": [], ".hoodie/.heartbeat": []}
    assert len(rollbacks_of_c()) == 2


@pytest.mark.parametrize("version", [6, 8])
def test_a_run_after_a_completed_log_compaction_has_nothing_to_do(tmp_path, version):
    """What the crash table promises for a kill after L completed: the next run has nothing to
    run.  A completed L's state is the same whether or not its process died before deleting
    the markers, so a full run stands in for the kill here."""
    from tablesvc.services.log_compaction import run_log_compaction

    b = busy_template(tmp_path / "t", version)
    cfg = config_of(b.path)
    [first] = run_log_compaction(Table.open(str(b.path)), config=cfg)
    assert first.status.value == "done"
    files = data_files(b.path)
    [again] = run_log_compaction(Table.open(str(b.path)), config=cfg)
    assert_reads(b.path, b.model)
    assert again.status.value == "nothing_to_do", again.render()
    assert data_files(b.path) == files and len(log_compactions(b.path)) == 1
