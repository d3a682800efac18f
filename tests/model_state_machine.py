"""Model-based state-machine test of tablesvc (issue #7): a seeded random sequence of writes,
service runs, injected crashes and recoveries, with the invariants checked after every step.

    python tests/model_state_machine.py --seed 7 --steps 200 [--version 8] [--keep DIR]

One run (``run_model(seed, steps, version, workdir)``):

* a MOR table (two partitions of two buckets: four file groups) is written without Spark
  through tablesvc's write pieces (``table_builders.write_without_spark``) and serviced in this
  process (compaction with ``in_process=True``, log compaction without Spark, clean, rollback);
  time is a ``ManualClock`` one second further at every step;
* each step is one of: a write (upsert, insert or delete; duplicate keys in the batch and
  stale ordering values), a failed write (files and markers, never completed), schedule or run
  compaction, schedule or run log compaction, clean, or the recovery sweep (``rollback_failed``);
  a writer first runs the eager rollback, as tablesvc's writer does;
* a quarter of the steps crash: the table's storage (``CrashingStorage``) counts the step's
  mutating calls and "dies" at a random one of them, either just after it returned or in the
  middle of a create (its temporary copy written, the link never made).  Once dead, every call
  fails with ``SimulatedCrash`` (a ``BaseException``: no ``except Exception`` of the code under
  test swallows it), so ``finally`` blocks change nothing, as in a killed process;
* after a crash the readers must still show the model (invariants with ``recovered=False``);
  then all in-memory state is dropped, the clock jumps past the heartbeat and lock expiry, and
  recovery runs as a user would (``rollback_failed``: failed writes rolled back, dead
  compactions back to requested, half-done rollbacks finished; then pending cleans finished),
  itself crashing at times, until it completes once;
* after every step ``invariants.check_invariants`` must return nothing.  A service may answer
  "retry later" (``ConflictError``) only where that is documented (a compaction or log
  compaction plan overtaken by a later write, v6); any other error fails the run.

The model is a dict key -> (ts, fare), written here without tablesvc's merge code, with event-time
ordering as docs/merge-semantics.md describes: a batch is pre-combined per key (greatest ``ts``;
the later row on a tie), a record replaces the stored one when its ``ts`` is greater or equal,
and a delete removes the key.  A write that completed counts (found on the timeline after the
step, crash or not); one that did not never does.  One rule of the generator keeps the model
independent of the physical layout: a deleted key is written again only with a ``ts`` at least
as high as any it had (merge-semantics.md §2: a natural delete followed by a lower re-insert
reads differently depending on whether the old row is in a base file or a log).

A failure raises ``ModelFailure`` with a one-line reproducer and the step log up to the failure.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
for p in (str(REPO), str(TESTS)):
    if p not in sys.path:
        sys.path.insert(0, p)

from invariants import InstantHistory, check_invariants  # noqa: E402
from timeline.heartbeat import Heartbeat  # noqa: E402
from tablesvc.storage.local import temporary_name_for  # noqa: E402

KEYS = 40
CITIES = ("amsterdam", "berlin")
SCHEMA = pa.schema([("uuid", pa.string()), ("ts", pa.int64()), ("fare", pa.float64()), ("city", pa.string())])
TABLE_YAML = """\
hoodie.client.heartbeat.interval_in_ms: 60000
hoodie.client.heartbeat.tolerable.misses: 2
hoodie.cleaner.commits.retained: {retained}
"""
STEP_MS = 1_000                 # the clock between two steps
RECOVERY_JUMP_MS = 600_000      # past the heartbeat window (120 s) and the table lock's expiry (20 s)
CRASH_RATE = 0.25
TORN_RATE = 0.3                 # of crashes: in the middle of a create rather than after a call
# step kind -> weight
RETRY_LATER_STEPS = ("run_compaction", "run_log_compaction")
# step kind -> weight; compaction runs often enough that slices stay a few blocks long (every
# check reads the latest slices, and a slice's cost grows with its blocks)
STEP_WEIGHTS = {"write": 36, "failed_write": 4, "schedule_compaction": 5, "run_compaction": 12,
                "schedule_log_compaction": 6, "run_log_compaction": 8, "clean": 8, "rollback_failed": 3}


class SimulatedCrash(BaseException):
    """The process "died": raised at the crash point and by every storage call after it."""


class ModelFailure(AssertionError):
    pass


# =============================================================================================
# Crash injection
# =============================================================================================

MUTATING = ("write_new", "write_new_from", "write_replace", "delete", "delete_tree", "makedirs", "discard_partial")


class CrashingStorage:
    """Delegates to a real storage; counts the main thread's mutating calls and dies at the
    ``crash_at``-th: after it returned, or (``torn``, for a create) after its temporary copy
    was written and before the link.  Threads other than the main one (heartbeats beat on a
    timer) are not counted, so the points are deterministic."""

    def __init__(self, inner, crash_at: int | None = None, torn: bool = False):
        self._inner = inner
        self._crash_at = crash_at
        self._torn = torn
        self.ops: list[str] = []
        self.dead = False

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            self._check_alive()
            return attr(*args, **kwargs)
        return call

    def _check_alive(self) -> None:
        if self.dead:
            if threading.current_thread() is not threading.main_thread():
                raise SystemExit      # a heartbeat thread of the dead "process" ends quietly
            raise SimulatedCrash("the process is dead")

    def _counted(self, kind: str, path: str, do, torn_copy=None):
        self._check_alive()
        if threading.current_thread() is not threading.main_thread():
            return do()
        at_point = self._crash_at is not None and len(self.ops) + 1 == self._crash_at
        if at_point and self._torn and torn_copy is not None:
            self.ops.append(f"{kind} {path} (torn)")
            torn_copy()
            self.dead = True
            raise SimulatedCrash(f"died in the middle of {kind} {path}")
        out = do()
        self.ops.append(f"{kind} {path}")
        if at_point:
            self.dead = True
            raise SimulatedCrash(f"died after {kind} {path}")
        return out

    @staticmethod
    def _leave_temp_copy(path: str, data: bytes) -> None:
        """What a create killed between writing its temporary copy and linking it leaves: on an
        object store nothing (a create is one single-part PUT, which stores all or nothing)."""
        if "://" in path and not path.startswith("file://"):
            return
        local = path[len("file://"):] if path.startswith("file://") else path
        folder, name = os.path.split(local)
        os.makedirs(folder or ".", exist_ok=True)
        with open(os.path.join(folder, temporary_name_for(name)), "wb") as f:
            f.write(data[: max(1, len(data) // 2)])

    def write_new(self, path, data):
        # an empty file is created in place (LocalStorage.write_new): a crash leaves no temp copy
        return self._counted("write_new", path, lambda: self._inner.write_new(path, data),
                             (lambda: self._leave_temp_copy(path, data)) if data else None)

    def write_new_from(self, path, write):
        def torn():
            import io

            sink = io.BytesIO()
            write(sink)
            self._leave_temp_copy(path, sink.getvalue())
        return self._counted("write_new_from", path, lambda: self._inner.write_new_from(path, write), torn)

    def write_replace(self, path, data):
        return self._counted("write_replace", path, lambda: self._inner.write_replace(path, data))

    def delete(self, path):
        return self._counted("delete", path, lambda: self._inner.delete(path))

    def delete_tree(self, path):
        return self._counted("delete_tree", path, lambda: self._inner.delete_tree(path))

    def makedirs(self, path):
        return self._counted("makedirs", path, lambda: self._inner.makedirs(path))

    def discard_partial(self, folder, names):
        names = list(names)
        return self._counted("discard_partial", folder, lambda: self._inner.discard_partial(folder, names))


# =============================================================================================
# The model and the step generator
# =============================================================================================

def key_name(k: int) -> str:
    return f"k{k:04d}"


def city_of(key: str) -> str:
    return CITIES[int(key[1:]) % len(CITIES)]


@dataclass
class Model:
    """key -> (ts, fare) after every completed write; ``high`` is the greatest ts a key ever had."""

    rows: dict[str, tuple[int, float]] = field(default_factory=dict)
    high: dict[str, int] = field(default_factory=dict)

    def apply(self, records: list[dict], operation: str) -> None:
        if operation == "delete":
            for r in records:
                self.rows.pop(r["uuid"], None)
            return
        combined: dict[str, dict] = {}
        for r in records:                         # pre-combine: greatest ts, the later row on a tie
            kept = combined.get(r["uuid"])
            if kept is None or r["ts"] >= kept["ts"]:
                combined[r["uuid"]] = r
        for key, r in combined.items():           # event time: a lower ts than the stored one loses
            stored = self.rows.get(key)
            if stored is None or r["ts"] >= stored[0]:
                self.rows[key] = (r["ts"], r["fare"])
            self.high[key] = max(self.high.get(key, r["ts"]), r["ts"])


def make_batch(rng: random.Random, model: Model, operation: str) -> list[dict]:
    """A batch of 1..12 rows over a few keys, with in-batch duplicates and stale ts values."""
    n = rng.randint(1, 12)
    keys = [key_name(rng.randrange(KEYS)) for _ in range(n)]
    if rng.random() < 0.5 and keys:
        keys += rng.choices(keys, k=rng.randint(1, 3))       # duplicate keys in the batch
    out = []
    for key in keys:
        if operation == "delete":
            out.append({"uuid": key, "ts": 0, "fare": 0.0, "city": city_of(key)})
            continue
        high = model.high.get(key, 0)
        if key in model.rows and rng.random() < 0.3:
            ts = rng.randint(max(0, high - 5), high)           # stale (or equal) ordering value
        else:
            ts = high + rng.randint(0, 3)                     # newer (or equal)
        if key not in model.rows:
            ts = max(ts, high)                                # a deleted key comes back no lower (module doc)
        out.append({"uuid": key, "ts": ts, "fare": round(rng.uniform(1, 100), 2), "city": city_of(key)})
    return out


# =============================================================================================
# The runner
# =============================================================================================

@dataclass
class StepRecord:
    number: int
    kind: str
    detail: str
    crash: str = ""
    outcome: str = ""

    def line(self) -> str:
        parts = [f"step {self.number:>4}: {self.kind}"]
        if self.detail:
            parts.append(self.detail)
        if self.crash:
            parts.append(f"CRASH {self.crash}")
        if self.outcome:
            parts.append(f"-> {self.outcome}")
        return " ".join(parts)


@dataclass
class RunStats:
    steps: int = 0
    crashes: int = 0
    torn_crashes: int = 0
    conflicts: int = 0
    recoveries: int = 0
    crash_points: set[str] = field(default_factory=set)     # "<step kind> <op shape>" where a crash hit
    kinds: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def reproducer(seed: int, steps: int, version: int, metadata: bool = False) -> str:
    mdt = " --metadata" if metadata else ""
    return (f"python tests/model_state_machine.py --seed {seed} --steps {steps} --version {version}{mdt}   (or "
            f"TABLESVC_MODEL_SEED={seed} TABLESVC_MODEL_STEPS={steps} TABLESVC_MODEL_VERSION={version} "
            f"TABLESVC_MODEL_METADATA={int(metadata)} "
            "python -m pytest tests/crash_model/test_model_based.py -k reproduce)")


class ModelRun:
    def __init__(self, seed: int, steps: int, version: int, workdir: str, metadata: bool = False,
                 storage_options: dict[str, str] | None = None):
        from timeline.clock import ManualClock

        self.seed, self.steps, self.version = seed, steps, version
        self.metadata = metadata      # the table is created with a metadata table (files; v6: Hudi 0.15's)
        # ``workdir`` may be an object-store prefix (s3://...), reached with these options
        self.storage_options = storage_options
        self.rng = random.Random(seed)
        self.path = f"{workdir.rstrip('/')}/model_v{version}{'_mdt' if metadata else ''}_seed{seed}"
        self.clock = ManualClock(1_700_000_000_000)
        self.model = Model()
        self.history = InstantHistory()
        self.log: list[StepRecord] = []
        self.stats = RunStats()
        self.ops_estimate: dict[str, int] = {}    # step kind -> most mutating calls seen in a full run
        self.stage = 0
        self.known_writes: set[str] = set()
        self.dead_threads: set[threading.Thread] = set()   # heartbeat threads of crashed steps

    # -- set-up --------------------------------------------------------------------------------
    def storage(self):
        """The table's plain storage (local files, or the object store at ``storage_options``)."""
        from tablesvc.storage import storage_for

        return storage_for(self.path, self.storage_options)

    def create(self) -> None:
        from tablesvc.config import load_config
        from tablesvc.api import Table, TableSpec

        table = Table.create(self.path, TableSpec("model", ("uuid",), "ts", ("city",), table_version=self.version,
                                                  num_buckets=2, metadata_table=self.metadata), clock=self.clock,
                             storage=self.storage())
        self.path = table.base_path     # absolute (local), or the URL as given
        yaml = TABLE_YAML.format(retained=self.rng.randint(1, 3)).encode()
        table.storage.write_replace(f"{self.path}/.hoodie/tablesvc.yaml", yaml)
        self.config = load_config(table.storage, table_path=self.path)

    def open(self, storage):
        from tablesvc.api import Table

        return Table.open(self.path, storage=storage, clock=self.clock)

    # -- one step --------------------------------------------------------------------------------
    def completed_writes(self, known: set[str] = frozenset()) -> set[str]:
        """Completed delta commits of writes (not log compactions); ``known`` ones are not re-read."""
        from timeline.instant import Action

        table = self.open(self.storage())
        timeline = table.timeline()
        out = set()
        for i in timeline.completed(Action.DELTA_COMMIT):
            if i.timestamp in known:
                out.add(i.timestamp)
                continue
            md = timeline.commit_metadata(table.storage, i)
            if md is not None and md.operation_type in ("UPSERT", "INSERT", "DELETE"):
                out.add(i.timestamp)
        return out

    def perform(self, kind: str, table, payload) -> str:
        """Run one step against ``table``; returns a short outcome."""
        from table_builders import write_without_spark
        from tablesvc.services.clean import run_clean
        from tablesvc.services.compaction import run_compaction, schedule_compaction
        from tablesvc.services.log_compaction import run_log_compaction, schedule_log_compaction
        from tablesvc.services.rollback import eager_rollback, rollback_failed

        cfg = self.config
        if kind in ("write", "failed_write"):
            operation, records = payload
            eager_rollback(table, config=cfg)
            batch = pa.Table.from_pylist(records, schema=SCHEMA)
            if operation == "delete":
                batch = batch.select(["uuid", "city"])
            t, _stats = write_without_spark(table, batch, operation, stage=self.stage, complete=kind == "write")
            return t
        if kind == "schedule_compaction":
            return _render([schedule_compaction(table, cfg, force=True)])
        if kind == "run_compaction":
            return _render(run_compaction(table, config=cfg, in_process=True))
        if kind == "schedule_log_compaction":
            return _render([schedule_log_compaction(table, cfg, force=True)])
        if kind == "run_log_compaction":
            return _render(run_log_compaction(table, spark=None, config=cfg))
        if kind == "clean":
            return _render(run_clean(table, cfg))
        if kind in ("rollback_failed", "recover"):
            from tablesvc.services.clean.executor import finish_pending_cleans

            results = rollback_failed(table, config=cfg)
            results += finish_pending_cleans(table)
            return _render(results)
        raise ValueError(kind)

    def attempt(self, record: StepRecord, kind: str, payload, may_crash: bool) -> bool:
        """One try of a step, maybe crashing; returns whether it crashed."""
        from tablesvc.errors import ConflictError

        crash_at, torn = None, False
        if may_crash and self.rng.random() < CRASH_RATE:
            crash_at = self.rng.randint(1, max(1, self.ops_estimate.get(kind, 12)))
            torn = self.rng.random() < TORN_RATE
        storage = CrashingStorage(self.storage(), crash_at, torn)
        before = self.completed_writes(self.known_writes) if kind == "write" else set()
        try:
            table = self.open(storage)
            record.outcome = self.perform(kind, table, payload)
            crashed = False
        except SimulatedCrash:
            crashed = True
        except ConflictError as e:
            # "retry later" (exit 3): a documented outcome of a plan that a later write overtook
            # (v6 log compaction's order check); the next run rolls the attempt back and re-plans
            if kind not in RETRY_LATER_STEPS:
                raise self.failure(record, [f"{kind} raised ConflictError: {e}"]) from e
            record.outcome = f"conflict: {e}"
            self.stats.conflicts += 1
            crashed = False
        except Exception as e:
            raise self.failure(record, [f"{kind} raised {type(e).__name__}: {e}"]) from e
        beating = {t for t in threading.enumerate() if t.name.startswith(f"heartbeat-{self.path}/")} - self.dead_threads
        if crashed:
            self.dead_threads |= beating      # the dead process's: they end at their next beat
        elif beating:     # a step that returned must leave no heartbeat beating
            raise self.failure(record, [f"heartbeat thread still running after the step: {t.name}" for t in beating])
        if crashed:
            last = storage.ops[-1] if storage.ops else "?"
            record.crash = f"at op {len(storage.ops)}/{crash_at}{' (torn)' if torn else ''}: {_short(last, self.path)}"
            self.stats.crashes += 1
            self.stats.torn_crashes += int(torn)
            self.stats.crash_points.add(f"{kind}: {_shape(last, self.path)}")
        else:
            self.ops_estimate[kind] = max(self.ops_estimate.get(kind, 0), len(storage.ops))
        if kind == "write":
            self.known_writes = self.completed_writes(before)
            new = self.known_writes - before
            if new:           # completed (crash or not): the write counts
                operation, records = payload
                self.model.apply(records, operation)
                if crashed:
                    record.outcome = f"{', '.join(sorted(new))} completed before the crash"
        return crashed

    def check(self, record: StepRecord, recovered: bool) -> None:
        violations = check_invariants(self.path, dict(self.model.rows), columns=("ts", "fare"),
                                      history=self.history, recovered=recovered,
                                      storage_options=self.storage_options)
        if violations:
            raise self.failure(record, violations)

    def step(self, number: int, kind: str | None = None, may_crash: bool = True, check: bool = True) -> None:
        """One step: ``kind``, or one drawn by weight; it may crash, and then recovery follows."""
        if kind is None:
            kinds, weights = zip(*STEP_WEIGHTS.items())
            kind = self.rng.choices(kinds, weights)[0]
        payload, detail = None, ""
        if kind in ("write", "failed_write"):
            operation = self.rng.choices(("upsert", "insert", "delete"), (6, 2, 2))[0]
            payload = (operation, make_batch(self.rng, self.model, operation))
            detail = f"{operation} {_describe_batch(payload[1])}"
            self.stage += 1
        record = StepRecord(number, kind, detail)
        self.log.append(record)
        self.stats.kinds[kind] = self.stats.kinds.get(kind, 0) + 1
        self.clock.advance(STEP_MS)
        crashed = self.attempt(record, kind, payload, may_crash=may_crash)
        if not crashed:
            if check:
                self.check(record, recovered=True)
            return
        self.check(record, recovered=False)      # readers never see a crash
        while crashed:                           # a new process, later: recover (maybe crashing again)
            _forget_process_state()
            self.clock.advance(RECOVERY_JUMP_MS)
            recovery = StepRecord(number, "recover", "")
            self.log.append(recovery)
            self.stats.recoveries += 1
            crashed = self.attempt(recovery, "recover", None, may_crash=True)
            self.check(recovery, recovered=not crashed)

    def scripted(self, kinds: list[str]) -> None:
        """These steps in order, without crashes, the invariants checked once at the end
        (templates for the kill -9 runs)."""
        self.create()
        for n, kind in enumerate(kinds, 1):
            self.step(n, kind, may_crash=False, check=False)
        self.check(self.log[-1], recovered=True)

    def run(self) -> RunStats:
        started = time.monotonic()
        try:
            self.create()
            self.check(StepRecord(0, "create", ""), recovered=True)
            for n in range(1, self.steps + 1):
                self.step(n)
                self.stats.steps = n
        finally:
            self.end_dead_heartbeats()
        self.stats.seconds = time.monotonic() - started
        return self.stats

    def end_dead_heartbeats(self) -> None:
        """Stop the heartbeat threads of crashed steps before the run returns.  Left alone, each
        would wake at its next beat (up to a minute later, inside some other test), meet the dead
        storage and end by SystemExit, which pytest reports against that other test.  A thread's
        target is its Heartbeat's bound ``_run``; stopping it without a beat ends it quietly."""
        for thread in self.dead_threads:
            heartbeat = getattr(getattr(thread, "_target", None), "__self__", None)
            if isinstance(heartbeat, Heartbeat) and thread.is_alive():
                heartbeat.stop(delete=False)

    def failure(self, record: StepRecord, violations: list[str]) -> ModelFailure:
        lines = [f"model-based test failed: seed {self.seed}, table version {self.version}, at step {record.number} "
                 f"({record.kind})",
                 f"reproduce: {reproducer(self.seed, self.steps, self.version, self.metadata)}"
                 + ("   (that runs on local files, where a seed draws other steps; this run was in an object store: "
                    "pytest tests/crash_model/test_model_based.py -k on_s3)" if self.storage_options is not None else ""),
                 f"table: {self.path}", "violations:"]
        lines += [f"  {v}" for v in violations]
        lines.append("steps:")
        lines += [f"  {r.line()}" for r in self.log]
        return ModelFailure("\n".join(lines))


# -- helpers ------------------------------------------------------------------------------------
def _forget_process_state() -> None:
    """What a new process does not have: the timeline snapshots this process kept per table
    (every step already opens its table afresh, so nothing else survives a crash)."""
    from timeline import active

    with active._SNAPSHOTS_LOCK:
        active._SNAPSHOTS.clear()


def _render(results) -> str:
    return "; ".join(f"{r.status.value}{' ' + r.instant if r.instant else ''}" for r in results) or "-"


def _describe_batch(records: list[dict]) -> str:
    return ",".join(f"{r['uuid'][1:].lstrip('0') or '0'}@{r['ts']}" for r in records)


def _short(op: str, base: str) -> str:
    return op.replace(base.rstrip("/") + "/", "")


def _shape(op: str, base: str) -> str:
    """An op with instant times, tokens and file ids blanked: which kind of point a crash hit."""
    import re

    op = _short(op, base)
    op = re.sub(r"\d{17}", "T", op)
    op = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-\d+", "FID", op)
    op = re.sub(r"\d+-\d+-\d+", "TOKEN", op)
    op = re.sub(r"city=\w+", "P", op)
    return op


def scratch_dir() -> str:
    """A fresh folder, in memory when the machine has /dev/shm: the model test fsyncs thousands
    of files, and in-process crashes need no durability."""
    shm = "/dev/shm"
    return tempfile.mkdtemp(prefix="tablesvc-model-", dir=shm if os.access(shm, os.W_OK) else None)


def run_model(seed: int, steps: int, version: int = 8, workdir: str | None = None, keep: bool = False,
              metadata: bool = False, storage_options: dict[str, str] | None = None) -> RunStats:
    """One seeded run; raises ``ModelFailure`` (the table is then kept for inspection).
    ``metadata``: the table gets a metadata table at creation, which every commit keeps.
    ``workdir`` may be an object-store prefix, reached with ``storage_options``."""
    own = workdir is None
    workdir = workdir or scratch_dir()
    run = ModelRun(seed, steps, version, workdir, metadata, storage_options)
    stats = run.run()
    if own and not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return stats


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--version", type=int, default=8, choices=(6, 8, 9))
    parser.add_argument("--keep", help="run in this folder and keep the table")
    parser.add_argument("--metadata", action="store_true", help="create the table with a metadata table")
    args = parser.parse_args(argv)
    workdir = args.keep or scratch_dir()
    try:
        stats = run_model(args.seed, args.steps, args.version, workdir, metadata=args.metadata)
    except ModelFailure as e:
        print(e, file=sys.stderr)
        return 1
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"seed {args.seed}: {stats.steps} steps, {stats.crashes} crashes ({stats.torn_crashes} torn), "
          f"{stats.recoveries} recoveries, {len(stats.crash_points)} distinct crash points, {stats.conflicts} conflicts, "
          f"{stats.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
