"""The runner's "takeovers" count (issue #24, item 7): jobs taken from a holder whose lease expired
(a dead or stalled worker), not jobs another worker gave back (a busy or failed job's lease is
released on purpose, and taking it next is no takeover).  No Spark: the job is a pending clean.

Each case runs on local files and on S3 (moto): there a lease's grant is an exclusive create and
its renewal a replace of objects under ``.hoodie/``, the table lock is the storage-based lock
(conditional writes), and the runner reaches the table with the endpoint and credentials from its
environment (``AWS_*``), as a deployed runner does."""

from __future__ import annotations

import io
import time

import pytest
from table_builders import compact_by_hand
from tablesvc.config import build_config
from tablesvc.demo.sample_table import build_sample_table
from tablesvc.runner import JobKind, Runner, RunnerSettings, pending_jobs
from tablesvc.services.clean import schedule_clean
from tablesvc.services.result import Status
from tablesvc.api import Table
from timeline.clock import ManualClock
from timeline.lease import LeaseStore
from table_locations import LOCATIONS, location


@pytest.fixture(params=LOCATIONS)
def table_path(request, tmp_path, monkeypatch) -> str:
    """Where the case's table goes: ``tmp_path/t``, or a fresh prefix of the S3 endpoint, whose
    settings go into this process's environment (the runner opens tables by path alone)."""
    where = location(request.param, tmp_path, request)
    for name, value in where.env.items():
        monkeypatch.setenv(name, value)
    return where.path("t")


def table_with_a_pending_clean(path: str) -> tuple[Table, str]:
    table = build_sample_table(path, rows=60, table_version=8).table
    compact_by_hand(table)
    assert schedule_clean(table, build_config(conf={"hoodie.cleaner.commits.retained": "1"})).status \
        is Status.SCHEDULED
    (job,) = [j for j in pending_jobs(table, table.timeline(), 60_000, 2) if j.kind is JobKind.CLEAN]
    return table, job.id


def one_pass(path, clock: ManualClock) -> tuple[Runner, str]:
    out = io.StringIO()
    runner = Runner([str(path)], RunnerSettings(lease_ms=10_000, poll_seconds=0, owner="this-worker"),
                    conf_pairs=["hoodie.clean.automatic=false"], clock=clock, out=out)
    runner.run(once=True)
    return runner, out.getvalue()


def test_a_job_another_worker_released_is_no_takeover(table_path):
    table, job = table_with_a_pending_clean(table_path)
    clock = ManualClock(int(time.time() * 1000))
    leases = LeaseStore(table.storage, table.base_path, clock)
    leases.release(leases.acquire(job, "busy-worker", 10_000))     # e.g. it found the job busy
    clock.advance(1)
    runner, out = one_pass(table.base_path, clock)
    assert runner.stats.jobs_done == 1, out
    assert runner.stats.takeovers == 0 and "taken over" not in out, out
    assert leases.current(job).owner == "this-worker" and leases.is_done(job)


def test_a_job_whose_holder_let_its_lease_expire_is_a_takeover(table_path):
    table, job = table_with_a_pending_clean(table_path)
    clock = ManualClock(int(time.time() * 1000))
    leases = LeaseStore(table.storage, table.base_path, clock)
    leases.acquire(job, "dead-worker", 5_000)
    clock.advance(6_000)                                              # it died: no renewal, no release
    runner, out = one_pass(table.base_path, clock)
    assert runner.stats.jobs_done == 1, out
    assert runner.stats.takeovers == 1 and f"{job}: taken over from dead-worker" in out, out


def test_a_job_released_after_its_lease_had_expired_is_no_takeover(table_path):
    """A slow worker that still held the largest token gives the job back itself: released."""
    table, job = table_with_a_pending_clean(table_path)
    clock = ManualClock(int(time.time() * 1000))
    leases = LeaseStore(table.storage, table.base_path, clock)
    lease = leases.acquire(job, "slow-worker", 5_000)
    clock.advance(6_000)
    leases.release(lease)
    runner, out = one_pass(table.base_path, clock)
    assert runner.stats.jobs_done == 1 and runner.stats.takeovers == 0 and "taken over" not in out, out
