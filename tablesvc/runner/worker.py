"""The async table-service worker behind ``tablesvc run`` (docs/runner.md).

Each poll, for each table: schedule what the configuration says is due (under the table lock,
like any scheduler), list the pending jobs (``jobs.pending_jobs``), and for each job, in order,
try to lease it (``timeline.lease.LeaseStore``).  A leased job runs with a renewal thread that
extends the lease every third of its duration and reports progress; if the lease is lost
(another worker took it over after it expired) the Spark job is cancelled and the executor's
fences refuse to complete or delete anything.  Outcomes:

| outcome | lease | failures |
|---|---|---|
| done (or nothing left to do) | marked done | - |
| ``ConflictError`` (busy: lock held, heartbeat alive) | released | not counted |
| lease lost | untouched (the new holder owns it) | not counted |
| any other error | released | +1; at ``max_failures`` the job is set aside |

SIGTERM (or ``stop()``) lets the current job finish and then ends the loop; exit code 0.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from tablesvc.config import ServiceConfig, load_config
from tablesvc.errors import ConflictError, TablesvcError
from tablesvc.runner.jobs import Job, JobKind, is_pending, pending_jobs
from tablesvc.services.plan_execution import HEARTBEAT_INTERVAL_KEY, HEARTBEAT_MISSES_KEY
from tablesvc.services.result import ServiceResult, Status
from tablesvc.api import Table
from tablesvc.table.writable import SERVICE, is_writable
from timeline.clock import Clock, SystemClock
from timeline.lease import Lease, LeaseFence, LeaseLostError, LeaseStore


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class RunnerSettings:
    lease_ms: int = 60_000
    poll_seconds: float = 10.0
    max_failures: int = 3
    owner: str = field(default_factory=default_owner)


@dataclass
class RunnerStats:
    """What a runner did; printed at exit and returned by ``run``."""

    polls: int = 0
    scheduled: int = 0
    jobs_done: int = 0
    jobs_failed: int = 0
    jobs_busy: int = 0
    leases_lost: int = 0
    takeovers: int = 0
    set_aside: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Runner:
    """Services the tables at ``paths`` until stopped (or for one pass)."""

    def __init__(self, paths: list[str], settings: RunnerSettings, *, conf_pairs=(), config_file=None,
                 spark: Callable[[], Any] | None = None, clock: Clock | None = None, out: TextIO | None = None,
                 storage_options: dict[str, str] | None = None):
        self.paths = paths
        self.storage_options = storage_options      # the tables' object-store settings (``--conf fs.s3a.*``)
        self.settings = settings
        self.conf_pairs = tuple(conf_pairs)
        self.config_file = config_file
        self._spark_factory = spark
        self._spark = None
        self.clock = clock or SystemClock()
        self.out = out
        self.stats = RunnerStats()
        self._stop = threading.Event()

    # -- life cycle -------------------------------------------------------------------------
    def stop(self) -> None:
        """Finish the current job, then end (what SIGTERM does)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self, once: bool = False) -> RunnerStats:
        while not self.stopping:
            self.poll()
            if once:
                break
            self._stop.wait(self.settings.poll_seconds)
        return self.stats

    def poll(self) -> None:
        self.stats.polls += 1
        for path in self.paths:
            if self.stopping:
                return
            try:
                self._poll_table(path)
            except (TablesvcError, OSError) as e:  # one table (or a storage hiccup) must not stop the worker
                self._say(f"{path}: {e}")

    # -- one table ----------------------------------------------------------------------------
    def _config(self, table: Table) -> ServiceConfig:
        # The heartbeat settings are the table's, as for every writer: a worker judges other
        # processes' heartbeats with them, so it must not shorten them for itself.  A job taken
        # over after its lease expired waits (busy, retried) until the dead holder's heartbeat
        # has expired too.
        return load_config(table.storage, conf_pairs=self.conf_pairs, config_file=self.config_file,
                           table_path=table.base_path)

    def _poll_table(self, path: str) -> None:
        table = Table.open(path, clock=self.clock, options=self.storage_options)
        config = self._config(table)
        for result in schedule_due(table, config):
            if result.status is Status.SCHEDULED:
                self.stats.scheduled += 1
                self._say(f"{table.config.name}: {result.render()}")
        leases = LeaseStore(table.storage, table.base_path, self.clock)
        interval, misses = int(config.get(HEARTBEAT_INTERVAL_KEY)), int(config.get(HEARTBEAT_MISSES_KEY))
        for job in pending_jobs(table, table.timeline(), interval, misses):
            if self.stopping:
                return
            failures = leases.failures(job.id)
            if failures.count >= self.settings.max_failures:
                if job.id not in self.stats.set_aside:
                    self.stats.set_aside.append(job.id)
                    self._say(f"{job.id}: set aside after {failures.count} failures (last: {failures.last_error}); "
                              f"retry with `tablesvc retry {table.base_path} {job.id}`")
                continue
            previous = leases.current(job.id)
            lease = leases.acquire(job.id, self.settings.owner, self.settings.lease_ms)
            if lease is None:
                continue
            # A takeover is a job taken from a holder that let its lease expire (dead or stalled);
            # a job its holder gave back (busy, failed) is just taken next.
            if previous is not None and previous.owner != lease.owner and not previous.released:
                self.stats.takeovers += 1
                self._say(f"{job.id}: taken over from {previous.owner} (token {previous.token} expired)")
            self._run_job(table, config, job, leases, lease)

    def _run_job(self, table: Table, config: ServiceConfig, job: Job, leases: LeaseStore, lease: Lease) -> None:
        if not is_pending(table.timeline(), job):
            leases.finish(lease)
            return
        started = time.monotonic()
        # The keeper renews from the moment the job is taken: starting Spark (below, on the first
        # compaction) can outlast a short lease, and an unrenewed lease would be taken over while
        # this worker is alive and about to run the job.
        keeper = _LeaseKeeper(leases, lease, self.settings.lease_ms, job, self._spark_or_none, self._say)
        keeper.start()
        try:
            if job.kind in (JobKind.COMPACTION, JobKind.LOG_COMPACTION):
                keeper.group_spark_jobs(self.spark())  # the job's Spark work runs in a cancellable group
            results = execute_job(table, config, job, LeaseFence(leases, lambda: keeper.lease), self.spark)
        except LeaseLostError as e:
            self._lost(table, job, str(e))
            return
        except ConflictError as e:
            if keeper.lost.is_set():
                self._lost(table, job, "")
                return
            self.stats.jobs_busy += 1
            leases.release(keeper.lease)
            self._say(f"{job.id}: busy, retry later: {e}")
            return
        except Exception as e:  # noqa: BLE001 - any failure is counted against the job, not the worker
            if keeper.lost.is_set():
                self._lost(table, job, "")
                return
            if not is_pending(table.timeline(), job):
                # Another process finished the same plan meanwhile (a writer's inline clean runs the
                # plan it scheduled without a lease): the job is done; this worker lost the race.
                leases.finish(keeper.lease)
                self.stats.jobs_done += 1
                self._say(f"{job.id}: finished by another process meanwhile; this attempt stopped with "
                          f"{type(e).__name__}: {e}")
                return
            failures = leases.record_failure(keeper.lease, f"{type(e).__name__}: {e}")
            leases.release(keeper.lease)
            self.stats.jobs_failed += 1
            self._say(f"{job.id}: failed ({failures.count}/{self.settings.max_failures}): {e}")
            return
        finally:
            keeper.stop()
        leases.finish(keeper.lease)
        self.stats.jobs_done += 1
        seconds = time.monotonic() - started
        for r in results:
            self._say(f"{job.id}: {r.render()}")
        rows = sum(r.metrics.rows_written for r in results)
        self._say(f"{job.id}: finished in {seconds:.1f} s" + (f", {rows} rows ({rows / max(seconds, 1e-3):.0f} rows/s)"
                                                                if rows else ""))

    def _lost(self, table: Table, job: Job, why: str) -> None:
        """Another worker owns the job now; only output of ours that is provably garbage goes."""
        self.stats.leases_lost += 1
        removed = 0
        if job.kind in (JobKind.COMPACTION, JobKind.LOG_COMPACTION):
            from tablesvc.services.plan_execution import discard_stale_output

            self._wait_until_tasks_stopped(job)
            removed = discard_stale_output(table, job.instant)
        self._say(f"{job.id}: lease lost, stopped{f': {why}' if why else ''}"
                  + (f"; {removed} stale file(s) of this attempt deleted" if removed else ""))

    def _wait_until_tasks_stopped(self, job: Job, timeout_s: float = 60.0) -> None:
        """Cancel the job's Spark work and wait until it has stopped: a cancelled task's Python
        worker runs on until Spark kills it (``spark.python.task.killTimeout``), and a marker or
        file it makes after the sweep below would be left behind."""
        session = self._spark
        if session is None:
            return
        sc = session.sparkContext
        sc.cancelJobGroup(job.id)
        tracker = sc.statusTracker()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            infos = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(job.id)]
            if not any(i is not None and i.status in ("RUNNING", "UNKNOWN") for i in infos):
                break
            time.sleep(0.2)
        kill_timeout = _seconds(sc.getConf().get("spark.python.task.killTimeout", "2s"))
        time.sleep(kill_timeout + 1.0)

    # -- helpers -------------------------------------------------------------------------------
    def spark(self):
        if self._spark is None:
            if self._spark_factory is None:
                from tablesvc.spark.session import get_spark

                self._spark = get_spark()
            else:
                self._spark = self._spark_factory()
        return self._spark

    def _spark_or_none(self):
        return self._spark

    def _say(self, message: str) -> None:
        # What cli.output.say does, written here: the runner sits below the CLI (docs/architecture.md).
        (self.out or sys.stdout).write(f"[{self.settings.owner}] {message}\n")
        if self.out is None:
            sys.stdout.flush()


class _LeaseKeeper:
    """Renews a lease every third of its duration while a job runs, and reports progress."""

    def __init__(self, leases: LeaseStore, lease: Lease, lease_ms: int, job: Job, spark, say):
        self.leases = leases
        self.lease = lease
        self.lease_ms = lease_ms
        self.job = job
        self._spark = spark
        self._say = say
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{job.id}", daemon=True)
        self._last_progress = ""

    def start(self) -> None:
        session = self._spark()
        if session is not None:
            self.group_spark_jobs(session)
        self._thread.start()

    def group_spark_jobs(self, session) -> None:
        """Put the Spark jobs the calling thread starts from now on into the job's group, which a
        lost lease cancels."""
        session.sparkContext.setJobGroup(self.job.id, f"tablesvc {self.job.id}", interruptOnCancel=True)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.lease_ms / 3000):
            try:
                self.lease = self.leases.renew(self.lease, self.lease_ms)
            except LeaseLostError:
                self.lost.set()
                session = self._spark()
                if session is not None:
                    session.sparkContext.cancelJobGroup(self.job.id)
                return
            except OSError:
                continue  # a missed renewal is what the lease's length tolerates
            self._progress()

    def _progress(self) -> None:
        session = self._spark()
        if session is None:
            return
        tracker = session.sparkContext.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(self.job.id):
            info = tracker.getJobInfo(job_id)
            for stage_id in (info.stageIds if info else ()):
                stage = tracker.getStageInfo(stage_id)
                if stage:
                    done, total = done + stage.numCompletedTasks, total + stage.numTasks
        line = f"{self.job.id}: {done}/{total} file groups"
        if total and line != self._last_progress:
            self._last_progress = line
            self._say(line)


def schedule_due(table: Table, config: ServiceConfig) -> list[ServiceResult]:
    """Schedule what the configuration says is due: compaction (trigger strategy), log
    compaction (``hoodie.log.compaction.enable`` and the block threshold), clean
    (``hoodie.clean.automatic``).  Plans only; jobs execute them."""
    if not table.config.is_mor or not is_writable(table, SERVICE):
        return []
    from tablesvc.services.clean import schedule_clean
    from tablesvc.services.compaction import schedule_compaction
    from tablesvc.services.log_compaction import schedule_log_compaction

    results = [schedule_compaction(table, config)]
    if config.get("hoodie.log.compaction.enable"):
        results.append(schedule_log_compaction(table, config))
    if config.get("hoodie.clean.automatic"):
        results.append(schedule_clean(table, config))
    return results


def execute_job(table: Table, config: ServiceConfig, job: Job, fence: Callable[[], None],
                spark: Callable[[], Any]) -> list[ServiceResult]:
    """Run one job's executor with the worker's fence (checked before anything is completed or
    deleted)."""
    if job.kind is JobKind.COMPACTION:
        from tablesvc.services.compaction import run_compaction

        return run_compaction(table, job.instant, spark=spark, config=config, fence=fence)
    if job.kind is JobKind.LOG_COMPACTION:
        from tablesvc.services.log_compaction import run_log_compaction

        return run_log_compaction(table, job.instant, spark=spark, config=config, fence=fence)
    if job.kind is JobKind.CLEAN:
        from tablesvc.services.clean import finish_pending_cleans
        from tablesvc.services.rollback import remove_leftovers

        results = finish_pending_cleans(table, fence=fence, config=config)
        remove_leftovers(table)  # markers/heartbeats of instants whose process died after completing
        return results
    from tablesvc.services.rollback import rollback

    return [rollback(table, job.instant, config=config, fence=fence)]


__all__ = ["Runner", "RunnerSettings", "RunnerStats", "execute_job", "schedule_due"]


def _seconds(value: str) -> float:
    """A Spark time setting ("2s", "500ms", "1min" or plain seconds) in seconds."""
    text = value.strip().lower()
    for suffix, scale in (("ms", 0.001), ("min", 60.0), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            text, factor = text[: -len(suffix)], scale
            break
    else:
        factor = 1.0
    try:
        return float(text) * factor
    except ValueError:
        return 2.0
