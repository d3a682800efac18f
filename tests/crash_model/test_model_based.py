"""The model-based state-machine test (issue #7) and real kill -9 runs checked by the same invariants.

* ``test_model_based``: a few seeds of random writes, service runs, injected crashes and
  recoveries (``tests/model_state_machine.py``), the invariants (``tests/invariants.py``)
  checked after every step.  A failure names its reproducer::

      TABLESVC_MODEL_SEED=N TABLESVC_MODEL_STEPS=M python -m pytest tests/crash_model/test_model_based.py -k reproduce
      python tests/model_state_machine.py --seed N --steps M --version V

* ``test_model_based_soak`` (``-m slow``): ``TABLESVC_MODEL_SEEDS`` seeds (default 20) of
  ``TABLESVC_MODEL_STEPS`` steps (default 400), both table versions; odd seeds' tables are
  created with a metadata table.
* ``test_kill_9_*``: a table built by the model, a service killed with a real SIGKILL at seeded
  random storage operations (``tests/crash_harness.py --fork``), then recovered.
* ``test_invariants_report_*``: the checker itself finds what it should.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from invariants import InstantHistory, check_invariants
from tablesvc.storage.local import temporary_copy_of, temporary_name_for
from model_state_machine import ModelRun, run_model
from table_locations import LOCATIONS, TableLocation, azure_location, copy_tree, location, s3_location

# A dead "process"'s heartbeat thread that beats before its run ends meets SystemExit, on purpose
# (model_state_machine.CrashingStorage), and pytest reports every such thread exit; the run stops
# the others quietly before it returns (ModelRun.end_dead_heartbeats).
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")

REPO = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).resolve().parents[1] / "crash_harness.py"
# (seed, table version, with a metadata table): seeds 2 and 4's tables are created with one (files;
# v6: Hudi 0.15's), so every step also checks it against storage and hudi-rs (invariants.py, 6)
CI_RUNS = [(1, 8, False), (2, 8, True), (3, 6, False), (4, 6, True)]
CI_STEPS = int(os.environ.get("TABLESVC_MODEL_STEPS", "150"))
# the same state machine on a table in S3 (moto): two short runs (an S3 request costs ~5 ms there).
# A seed's steps differ from its local run (a crash point is drawn from the op counts seen, which
# differ on S3); these two crash and recover within 12 steps on S3, one with a metadata table
S3_RUNS = [(4, 8, True), (9, 8, False)]
S3_STEPS = 12
# and one on Azure (Azurite), with a metadata table, which crashes and recovers within those steps there
AZURE_RUNS = [(4, 8, True)]
DAY_MS = 86_400_000


@pytest.mark.parametrize("seed,version,metadata", CI_RUNS,
                         ids=[f"seed{s}-v{v}{'-mdt' if m else ''}" for s, v, m in CI_RUNS])
def test_model_based(tmp_path, seed, version, metadata):
    stats = run_model(seed, CI_STEPS, version, str(tmp_path), metadata=metadata)
    assert stats.steps == CI_STEPS
    assert stats.crashes and stats.recoveries >= stats.crashes     # crashes were injected, each recovered
    assert stats.kinds.get("write", 0) > CI_STEPS // 4


@pytest.mark.s3
@pytest.mark.parametrize("seed,version,metadata", S3_RUNS,
                         ids=[f"seed{s}-v{v}{'-mdt' if m else ''}" for s, v, m in S3_RUNS])
def test_model_based_on_s3(s3_endpoint, tmp_path, seed, version, metadata):
    """The table in S3: every step's invariants read it there (tablesvc, and hudi-rs through its
    own object_store client at the endpoint); a torn create leaves nothing (one single-part PUT)."""
    where = s3_location(s3_endpoint, f"model-{tmp_path.name}")
    stats = run_model(seed, S3_STEPS, version, where.root, metadata=metadata, storage_options=where.options)
    assert stats.steps == S3_STEPS
    assert stats.crashes and stats.recoveries >= stats.crashes
    assert stats.kinds.get("write", 0) >= 4


@pytest.mark.parametrize("seed,version,metadata", AZURE_RUNS,
                         ids=[f"seed{s}-v{v}{'-mdt' if m else ''}" for s, v, m in AZURE_RUNS])
def test_model_based_on_azure(azure_endpoint, tmp_path, seed, version, metadata):
    """The same state machine on a table in Azurite's container (``az://``): the storage-based lock,
    conditional creates and every invariant read there, by hudi-rs too."""
    where = azure_location(azure_endpoint, f"model-{tmp_path.name}")
    stats = run_model(seed, S3_STEPS, version, where.root, metadata=metadata, storage_options=where.options)
    assert stats.steps == S3_STEPS
    assert stats.crashes and stats.recoveries >= stats.crashes
    assert stats.kinds.get("write", 0) >= 4


@pytest.mark.skipif("TABLESVC_MODEL_SEED" not in os.environ, reason="set TABLESVC_MODEL_SEED to reproduce a run")
def test_model_based_reproduce(tmp_path):
    seed = int(os.environ["TABLESVC_MODEL_SEED"])
    version = int(os.environ.get("TABLESVC_MODEL_VERSION", "8"))
    metadata = os.environ.get("TABLESVC_MODEL_METADATA", "0") == "1"
    run_model(seed, CI_STEPS, version, str(tmp_path), metadata=metadata)


@pytest.mark.slow
def test_model_based_soak(tmp_path):
    seeds = int(os.environ.get("TABLESVC_MODEL_SEEDS", "20"))
    steps = int(os.environ.get("TABLESVC_MODEL_STEPS", "400"))
    for seed in range(100, 100 + seeds):
        for version in (8, 6):
            # every other table with a metadata table (odd seeds)
            metadata = seed % 2 == 1
            run_model(seed, steps, version, str(tmp_path / f"{seed}-{version}"), metadata=metadata)
            shutil.rmtree(tmp_path / f"{seed}-{version}", ignore_errors=True)


# =============================================================================================
# Real kill -9 runs
# =============================================================================================

def template(where: TableLocation, tmp_path: Path, seed: int, version: int, steps: list[str]) -> ModelRun:
    """A table the model built with ``steps``; for an object store it is built in ``tmp_path`` (the
    scripted steps are not under test here, and are ten times faster on local files) and then copied
    there object by object, with ``run.path`` pointing at the copy."""
    run = ModelRun(seed, len(steps), version, str(tmp_path / "template"))
    run.scripted(steps)
    if where.on_object_store:
        from tablesvc.storage import LocalStorage

        remote = where.path("template", Path(run.path).name)
        copy_tree(LocalStorage(), run.path, remote, where.storage())
        run.path, run.storage_options = remote, where.options
    return run


def killed_points(where: TableLocation, run: ModelRun, service: str, points: int, seed: int, *args: str) -> dict:
    """``points`` seeded points of ``service`` (``--fork``; on an object store ``--spawn``: obstore's
    client does not survive fork, so every point runs in a process of its own)."""
    mode = "--spawn" if where.on_object_store else "--fork"
    proc = subprocess.run([sys.executable, str(HARNESS), mode, "--fork-sample", f"{points}:{seed}", run.path,
                           where.path("points", service), service, *args],
                          env=where.child_env(PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=600,
                          start_new_session=True)
    assert proc.returncode == 0, f"harness failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["points"]) == min(points, len(out["ops"]))
    for p in out["points"]:
        assert (p["signal"], p["exit"]) == (signal.SIGKILL, None), p      # a real SIGKILL, at that point
    return out


def table_lock_free(where: TableLocation, path: str) -> bool:
    """No live table lock: local files' lock file is gone; an object store's lock object is absent,
    released, or past its validity (a killed holder's lock blocks others until then)."""
    from timeline.clock import SystemClock
    from timeline.storage_lock import CLOCK_DRIFT_BUFFER_MS, StorageLockData, lock_object_path

    storage = where.storage()
    if not where.on_object_store:
        return not storage.exists(f"{path}/.hoodie/lock")
    if not storage.exists(lock_object_path(path)):
        return True
    lock = StorageLockData.parse(storage.read_bytes(lock_object_path(path)))
    return lock is None or lock.expired or lock.valid_until_ms + CLOCK_DRIFT_BUFFER_MS < SystemClock().now_ms()


def cli_rollback(where: TableLocation, path: str) -> None:
    """The documented recovery as a user runs it: ``tablesvc rollback PATH``, a process of its own on
    the system clock (heartbeats judged with no tolerated miss: the killed process's is expired)."""
    proc = subprocess.run([sys.executable, "-m", "tablesvc", "rollback", path, "--conf",
                           "hoodie.client.heartbeat.tolerable.misses=0"], env=where.child_env(PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"`tablesvc rollback {path}` exited {proc.returncode}: {proc.stderr}"


def recover_and_check(where: TableLocation, run: ModelRun, out: dict, service: str, *, written=None) -> None:
    """At each killed point: readers still show the model; then recovery (a day later, a new
    process's view) and the service run again leave a table that holds every invariant.  The
    first point whose table lock is free is recovered by a real ``tablesvc rollback PATH`` first.
    ``written`` (the ``write`` service): the batch's records, which count once its delta commit
    completed, and which the re-run writes otherwise."""
    from tablesvc.config import load_config
    from tablesvc.services.clean import run_clean
    from tablesvc.services.clean.executor import finish_pending_cleans
    from tablesvc.services.compaction import run_compaction
    from tablesvc.services.log_compaction import run_log_compaction
    from tablesvc.services.rollback import rollback_failed
    from model_state_machine import Model
    from timeline.clock import ManualClock, SystemClock
    from timeline.instant import Action

    def model_with(records) -> dict:
        model = Model(dict(run.model.rows), dict(run.model.high))
        if records is not None:
            model.apply(records, "upsert")
        return dict(model.rows)

    def delta_commits(path: str) -> set[str]:
        return {i.timestamp for i in where.open(path).timeline().completed(Action.DELTA_COMMIT)}

    template_commits = delta_commits(run.path)
    cli_done = False
    for p in [{"point": 0, "path": out["full_path"], "last_op": "(full run)"}] + out["points"]:
        where_ = f"{service} killed at point {p['point']} (after `{p['last_op']}`)"
        # the written batch counts once a delta commit the template did not have completed
        expected = model_with(written if written is not None and delta_commits(p["path"]) - template_commits
                              else None)
        if p["point"] == 0 and where.on_object_store:
            continue        # the full run's table: checked on local files, where it costs a tenth
        violations = check_invariants(p["path"], expected, recovered=p["point"] == 0, storage_options=where.options)
        assert not violations, f"{where_}, before recovery:\n" + "\n".join(violations)
        if p["point"] and not cli_done and table_lock_free(where, p["path"]):
            cli_rollback(where, p["path"])
            cli_done = True
        table = where.open(p["path"], clock=ManualClock(SystemClock().now_ms() + DAY_MS))
        config = load_config(table.storage, table_path=table.base_path)
        rollback_failed(table, config=config)
        finish_pending_cleans(table)
        if service == "clean":
            run_clean(table, config)
        elif service == "logcompaction":
            run_log_compaction(table, spark=None, config=config)
        elif service == "compaction-in-process":
            run_compaction(table, config=config, in_process=True)
        elif service == "write" and expected != model_with(written):    # the write never completed: again
            from model_state_machine import SCHEMA
            from table_builders import write_without_spark
            import pyarrow as pa

            write_without_spark(table, pa.Table.from_pylist(written, schema=SCHEMA), "upsert", stage=2000)
            expected = model_with(written)
        violations = check_invariants(p["path"], expected, history=InstantHistory(), storage_options=where.options)
        assert not violations, f"{where_}, after recovery:\n" + "\n".join(violations)
        assert not table.timeline().pending() or service != "rollback", f"{where_}: still pending after recovery"
        if p["point"] and not where.on_object_store:
            shutil.rmtree(Path(p["path"]).parent)
    assert cli_done or not out["points"], "no killed point had its table lock free for `tablesvc rollback`"


WRITES = ["write"] * 6
# (table version, location): both versions on local files; v8 in S3 (moto), with fewer points
KILL_RUNS = [(8, "local"), (6, "local"), pytest.param(8, "s3", marks=pytest.mark.s3)]
S3_POINTS = 2       # sampled points per service in S3: each one a fresh process and a copy of the table


def points_for(where: TableLocation, local: int) -> int:
    return S3_POINTS if where.on_object_store else local


def writes(where: TableLocation) -> list[str]:
    """A block of the templates' writes: half as many in S3, where each point copies the table and
    every check lists and reads it over HTTP."""
    return WRITES[:3] if where.on_object_store else WRITES


@pytest.mark.parametrize("version,kind", KILL_RUNS)
def test_kill_9_clean_and_log_compaction_at_random_points(tmp_path, request, version, kind):
    where = location(kind, tmp_path, request)
    w = writes(where)
    run = template(where, tmp_path, 21, version, w + ["run_compaction"] + w + ["run_compaction"] + w)
    # in S3 the log compaction's kills are left to the model-based run there (its crashes are in-process)
    for service, seed in (("clean", 5), ("logcompaction", 6))[:1 if where.on_object_store else 2]:
        out = killed_points(where, run, service, points_for(where, 4), seed)
        assert out["results"] and out["results"][0]["status"] == "done", out["results"]
        recover_and_check(where, run, out, service)


@pytest.mark.parametrize("kind", LOCATIONS)
def test_kill_9_rollback_of_a_failed_write_at_random_points(tmp_path, request, kind):
    where = location(kind, tmp_path, request)
    run = template(where, tmp_path, 22, 8, writes(where) + ["run_compaction"] + writes(where) + ["failed_write"])
    out = killed_points(where, run, "rollback", points_for(where, 5), 7)
    assert [r["status"] for r in out["results"]] == ["done"]
    recover_and_check(where, run, out, "rollback")


@pytest.mark.parametrize("kind", LOCATIONS)
def test_kill_9_compaction_at_random_points(tmp_path, request, kind):
    """Compaction with its file groups compacted in the killed process (``in_process``), so the
    points include the new base files' creates as well as the plan's and the commit's."""
    where = location(kind, tmp_path, request)
    run = template(where, tmp_path, 23, 8, writes(where) + ["run_compaction"] + writes(where))
    out = killed_points(where, run, "compaction-in-process", points_for(where, 3), 8)
    assert [r["status"] for r in out["results"]] == ["done"]
    recover_and_check(where, run, out, "compaction-in-process")


@pytest.mark.parametrize("kind", LOCATIONS)
def test_kill_9_write_at_random_points(tmp_path, request, kind):
    """A writer (eager rollback of the failed write the template ends with, then a delta commit)
    killed at seeded points: its rows count only once its commit completed; recovery and the
    write run again give the model with the batch."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    from model_state_machine import SCHEMA, make_batch

    where = location(kind, tmp_path, request)
    run = template(where, tmp_path, 24, 8, writes(where) + ["run_compaction"] + writes(where) + ["failed_write"])
    batch = make_batch(random.Random(24), run.model, "upsert")
    input_file = tmp_path / "batch.parquet"
    pq.write_table(pa.Table.from_pylist(batch, schema=SCHEMA), input_file)
    out = killed_points(where, run, "write", points_for(where, 3), 9, str(input_file))
    assert out["results"][-1]["status"] == "done"
    recover_and_check(where, run, out, "write", written=batch)


# =============================================================================================
# The checker finds what it should
# =============================================================================================

def built(tmp_path: Path, version: int = 8, metadata: bool = False) -> ModelRun:
    run = ModelRun(31, 0, version, str(tmp_path), metadata)
    run.scripted(["write"] * 4 + ["run_compaction"] + ["write"] * 3)
    assert check_invariants(run.path, dict(run.model.rows)) == []
    return run


def test_invariants_report_a_snapshot_that_differs_from_the_model(tmp_path):
    run = built(tmp_path)
    wrong = dict(run.model.rows)
    key = sorted(wrong)[0]
    wrong[key] = (wrong[key][0] + 1, wrong[key][1])
    wrong["k9999"] = (1, 1.0)
    violations = check_invariants(run.path, wrong)
    assert any(v.startswith("hudi-rs: key k9999 is missing") for v in violations)
    assert any(v.startswith(f"tablesvc reader: key {key} reads") for v in violations)


@pytest.mark.parametrize("version", [8, 6])
def test_invariants_report_a_metadata_table_that_differs_from_storage(tmp_path, version):
    run = built(tmp_path, version, metadata=True)
    mdt = Path(run.path) / ".hoodie" / "metadata"
    # a data file rewritten to another size: the metadata table still lists the old one
    base = next(p for p in Path(run.path).glob("city=*/*.parquet"))
    base.write_bytes(base.read_bytes() + b"x")
    violations = check_invariants(run.path, None)
    assert any(v.startswith(f"metadata table: lists {base.parent.name}/{base.name} at ") for v in violations), violations
    base.write_bytes(base.read_bytes()[:-1])
    assert check_invariants(run.path, None) == []
    # the metadata table's last delta commit made pending again: its files leave its listing
    pattern = ".hoodie/2*.deltacommit" if version == 6 else ".hoodie/timeline/2*_*.deltacommit"
    (last,) = sorted(mdt.glob(pattern))[-1:]
    last.unlink()
    violations = check_invariants(run.path, None)
    assert any("listed from storage, not through the metadata table" in v for v in violations), violations
    if version >= 8:        # hudi-rs lists v6 tables from storage
        assert any(v.startswith("metadata table: hudi-rs does not list slice") for v in violations), violations


def test_invariants_report_orphans_and_missing_files(tmp_path):
    from tablesvc.api import Table

    run = built(tmp_path)
    table = Table.open(run.path)
    partition = Path(run.path) / "city=amsterdam"
    slice_ = next(s for s in table.latest_file_slices() if s.partition == "city=amsterdam" and s.log_files)
    log = Path(slice_.log_files[-1].path)
    (partition / temporary_name_for(log.name)).write_bytes(b"half")       # a create killed before its link
    stray = partition / log.name.replace(log.name.split("_")[1].split(".")[0], "20240101000000000")
    shutil.copy(log, stray)                                                 # a file of an instant never requested
    log.unlink()                                                            # a file the latest slice needs
    violations = check_invariants(run.path, None)
    assert any("a temporary copy" in v for v in violations), violations
    assert any(f"orphan city=amsterdam/{stray.name}: instant 20240101000000000 is not on the timeline" in v
               for v in violations), violations
    assert any(v.startswith(f"city=amsterdam/{log.name}") and "needs it" in v for v in violations), violations
    before_recovery = check_invariants(run.path, None, recovered=False)    # a crash may leave a temporary copy
    assert not any("a temporary copy" in v for v in before_recovery)
    assert any(stray.name in v for v in before_recovery) and any("needs it" in v for v in before_recovery)


def test_invariants_report_two_plans_on_one_file_group_and_a_reused_instant_time(tmp_path):
    from tablesvc.api import Table
    from timeline.instant import Action

    run = built(tmp_path)
    history = InstantHistory()
    assert check_invariants(run.path, None, history=history) == []
    done = Table.open(run.path).timeline().completed(Action.COMMIT)[-1]
    folder = Path(run.path) / ".hoodie" / "timeline"
    plan = (folder / f"{done.timestamp}.compaction.requested").read_bytes()
    for ts in ("20231114000000001", "20231114000000002"):    # two plans, older than every time seen
        (folder / f"{ts}.compaction.requested").write_bytes(plan)
    violations = check_invariants(run.path, None, history=history)
    assert any("is in 2 pending plans" in v for v in violations), violations
    assert any("new requested time 20231114000000001 is not later than" in v for v in violations), violations


# =============================================================================================
# Regressions the model found (each a scripted form of the failing seed)
# =============================================================================================

def _writer(run: ModelRun):
    import pyarrow as pa

    from model_state_machine import SCHEMA
    from table_builders import write_without_spark
    from tablesvc.api import Table

    def write(rows: list[tuple[str, int, float]], operation: str = "upsert") -> str:
        from model_state_machine import city_of

        records = [{"uuid": k, "ts": ts, "fare": fare, "city": city_of(k)} for k, ts, fare in rows]
        batch = pa.Table.from_pylist(records, schema=SCHEMA)
        run.clock.advance(1000)
        run.stage += 1
        t, _ = write_without_spark(Table.open(run.path, clock=run.clock),
                                   batch.select(["uuid", "city"]) if operation == "delete" else batch, operation,
                                   stage=run.stage)
        run.model.apply(records, operation)
        return t
    return write


def test_a_log_compaction_that_completes_after_later_writes_does_not_undo_them(tmp_path):
    """Seed 2, step 97 (v8): a log compaction planned before some writes and run after them
    merged its older records after theirs (v8 orders log files by completion time), so a later
    write with an equal ordering value lost and deleted keys came back; a second log compaction
    then wrote the wrong rows down for hudi-rs too."""
    from tablesvc.services.log_compaction import run_log_compaction, schedule_log_compaction
    from tablesvc.api import Table

    run = ModelRun(0, 0, 8, str(tmp_path))
    run.create()
    write = _writer(run)
    keys = ["k0000", "k0001", "k0002", "k0003"]
    for fare in (1.0, 2.0, 3.0):
        write([(k, 5, fare) for k in keys])
    table = Table.open(run.path, clock=run.clock)
    planned = schedule_log_compaction(table, run.config, force=True)
    assert planned.status.value == "scheduled"
    write([(k, 5, 4.0) for k in keys[:2]])          # requested after the plan: an equal ts, so the later row wins
    write([(k, 0, 0.0) for k in keys[2:]], "delete")
    run.clock.advance(1000)
    assert [r.status.value for r in run_log_compaction(table, planned.instant, config=run.config)] == ["done"]
    assert run.model.rows == {"k0000": (5, 4.0), "k0001": (5, 4.0)}
    assert check_invariants(run.path, dict(run.model.rows)) == []
    run.clock.advance(1000)                           # a log compaction of the log compaction and the later writes
    assert [r.status.value for r in run_log_compaction(table, config=run.config)] == ["done"]
    assert check_invariants(run.path, dict(run.model.rows)) == []


def test_a_write_killed_while_creating_a_partition_s_metadata_leaves_nothing_after_rollback(tmp_path):
    """Seed 3, step 8 (v6): the partition metadata file was created before the first marker, so
    a write killed in that create left a temporary copy no rollback could find."""
    from model_state_machine import CrashingStorage, SimulatedCrash
    from tablesvc.services.rollback import rollback_failed
    from tablesvc.storage import LocalStorage
    from tablesvc.api import Table

    rows = [{"uuid": "k0001", "ts": 1, "fare": 1.0, "city": "berlin"}]
    probe = ModelRun(0, 0, 8, str(tmp_path / "probe"))
    probe.create()
    counting = CrashingStorage(LocalStorage())
    _table_write(Table.open(probe.path, storage=counting, clock=probe.clock), rows)
    point = next(i for i, op in enumerate(counting.ops, 1) if op.endswith("/.hoodie_partition_metadata"))

    run = ModelRun(0, 0, 8, str(tmp_path / "run"))
    run.create()
    dying = CrashingStorage(LocalStorage(), crash_at=point, torn=True)
    with pytest.raises(SimulatedCrash):
        _table_write(Table.open(run.path, storage=dying, clock=run.clock), rows)
    assert any(temporary_copy_of(n) == ".hoodie_partition_metadata" for n in os.listdir(Path(run.path) / "city=berlin"))
    run.clock.advance(DAY_MS)
    rollback_failed(Table.open(run.path, clock=run.clock), config=run.config)
    assert check_invariants(run.path, {}, history=InstantHistory()) == []


def _table_write(table, rows):
    import pyarrow as pa

    from model_state_machine import SCHEMA
    from table_builders import write_without_spark

    return write_without_spark(table, pa.Table.from_pylist(rows, schema=SCHEMA), "upsert", stage=1)


def test_a_plan_whose_start_fails_leaves_no_heartbeat_beating(tmp_path):
    """Found through the crash runs (a heartbeat thread of a step that had ended beat on): when
    moving a plan to inflight failed with anything but a conflict, its heartbeat kept beating,
    and in a long-lived process (the runner) the plan could never be recovered."""
    import threading

    from tablesvc.services.compaction import run_compaction, schedule_compaction
    from tablesvc.storage import LocalStorage
    from tablesvc.api import Table

    run = built(tmp_path)
    write = _writer(run)
    write([("k0001", 9, 9.0)])
    table = Table.open(run.path, clock=run.clock)
    planned = schedule_compaction(table, run.config, force=True).instant

    class FailingInflight(LocalStorage):
        def write_new(self, path, data):
            if path.endswith(f"{planned}.compaction.inflight"):
                raise OSError(5, "Input/output error", path)
            return super().write_new(path, data)

    with pytest.raises(OSError):
        run_compaction(Table.open(run.path, storage=FailingInflight(), clock=run.clock), planned,
                       config=run.config, in_process=True)
    assert not [t for t in threading.enumerate() if t.name.endswith(f"/{planned}") and t.is_alive()]
    run.clock.advance(DAY_MS)        # the kept last beat expires; the plan then runs
    assert [r.status.value for r in run_compaction(Table.open(run.path, clock=run.clock), planned,
                                                   config=run.config, in_process=True)] == ["done"]
    assert check_invariants(run.path, dict(run.model.rows)) == []
