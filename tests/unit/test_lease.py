"""Job leases with fencing tokens (timeline/lease.py): atomic take, strictly larger tokens,
renewal, expiry, takeover, fencing of a superseded holder, failures, done jobs."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from tablesvc.storage import LocalStorage
from timeline.clock import ManualClock
from timeline.lease import LeaseLostError, LeaseStore


def store(tmp_path, clock=None) -> LeaseStore:
    return LeaseStore(LocalStorage(), str(tmp_path), clock or ManualClock(1_000_000))


def test_a_free_job_is_taken_once_and_a_held_one_is_refused(tmp_path):
    clock = ManualClock(1_000_000)
    leases = store(tmp_path, clock)
    a = leases.acquire("compaction-1", "A", 10_000)
    assert a is not None and a.token == 1 and a.deadline_ms == 1_010_000
    assert leases.acquire("compaction-1", "B", 10_000) is None
    assert leases.current("compaction-1") == a
    assert (tmp_path / ".hoodie/.aux/tablesvc/jobs/compaction-1/grant-000000000001.json").is_file()


def test_renewal_extends_and_expiry_lets_another_worker_take_over_with_a_larger_token(tmp_path):
    clock = ManualClock(1_000_000)
    leases = store(tmp_path, clock)
    a = leases.acquire("job", "A", 10_000)
    clock.advance(8_000)
    a = leases.renew(a, 10_000)
    clock.advance(8_000)  # 16 s after the grant: alive only thanks to the renewal
    assert leases.acquire("job", "B", 10_000) is None
    clock.advance(3_000)
    b = leases.acquire("job", "B", 10_000)
    assert b is not None and b.token == a.token + 1 and b.owner == "B"
    # A wakes up: it cannot renew, complete (check) or release B's lease
    with pytest.raises(LeaseLostError, match="token 2 of B"):
        leases.renew(a, 10_000)
    with pytest.raises(LeaseLostError):
        leases.check(a)
    leases.release(a)
    assert leases.current("job").deadline_ms == b.deadline_ms
    leases.check(b)


def test_release_frees_the_job_at_once(tmp_path):
    clock = ManualClock(1_000_000)
    leases = store(tmp_path, clock)
    a = leases.acquire("job", "A", 60_000)
    leases.release(a)
    clock.advance(1)
    b = leases.acquire("job", "B", 60_000)
    assert b is not None and b.token == 2


def test_failures_are_counted_and_reset_and_done_jobs_are_never_taken(tmp_path):
    clock = ManualClock(1_000_000)
    leases = store(tmp_path, clock)
    a = leases.acquire("job", "A", 1_000)
    assert leases.record_failure(a, "boom").count == 1
    assert leases.record_failure(a, "boom again").count == 2
    assert leases.failures("job").last_error == "boom again"
    assert leases.reset_failures("job") and leases.failures("job").count == 0
    leases.finish(a)
    clock.advance(5_000)
    assert leases.acquire("job", "B", 1_000) is None
    assert leases.is_done("job")


def test_invalid_job_ids_are_refused(tmp_path):
    with pytest.raises(ValueError):
        store(tmp_path).acquire("../escape", "A", 1_000)


def _race(base: str, owner: str, queue) -> None:
    leases = LeaseStore(LocalStorage(), base, ManualClock(1_000_000))
    lease = leases.acquire("job", owner, 60_000)
    queue.put((owner, lease.token if lease else None))


def test_concurrent_takers_get_distinct_outcomes(tmp_path):
    """Processes racing for a free job: exactly one gets it (the grant file is created exclusively)."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(tmp_path), f"W{i}", queue)) for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    results = [queue.get(timeout=5) for _ in procs]
    winners = [r for r in results if r[1] is not None]
    assert len(winners) == 1 and winners[0][1] == 1, results
    grants = os.listdir(tmp_path / ".hoodie/.aux/tablesvc/jobs/job")
    assert grants == ["grant-000000000001.json"]
