"""Job leases with fencing tokens, kept with the table (``.hoodie/.aux/tablesvc/jobs/<job>/``).

A service worker owns a job (a pending compaction, a clean, ...) by holding its lease: a
token and a deadline.  Everything is a file on the table's storage, so workers on many
machines agree without another service:

* ``grant-<token>.json`` — created with ``Storage.write_new`` (exclusive): taking a lease is an
  atomic conditional write.  The next grant's token is the largest existing one plus one; two
  workers racing for the same token cannot both create the file, so every assignment of a job
  gets a strictly larger token than the one before.
* ``renew-<token>.json`` — the holder's latest deadline, replaced on each renewal, and
  ``released`` once the holder gave the job back.  Only the largest token's files count, so a
  renewal by a superseded holder changes nothing.
* ``failures.json`` — how often the job failed, and the last error.
* ``done.json`` — the job finished; it is never taken again.

The current lease is the largest token with ``deadline = max(grant, renew)``.  A job is free
when it has no lease or the current one's deadline has passed.  A worker *fences* before it
completes a job or deletes output (``check``): its token must still be the largest; a worker
that lost its lease (it stalled, the lease expired, another worker took the job) is refused
with ``LeaseLostError`` and changes nothing.  Deadlines are wall-clock times of the injected
clock; workers on different machines need clocks synchronised well within a lease.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable

from timeline.clock import Clock, SystemClock
from timeline.errors import ConflictError
from timeline.storage import Storage, join

JOBS_DIR = ".hoodie/.aux/tablesvc/jobs"
_GRANT = re.compile(r"^grant-(\d{12})\.json$")
_JOB_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


class LeaseLostError(ConflictError):
    """The worker's lease of a job was superseded by a larger token (or the job is gone)."""


@dataclass(frozen=True)
class Lease:
    job: str
    token: int
    owner: str
    granted_ms: int
    deadline_ms: int
    # the holder gave the job back (``release``) rather than letting the deadline pass: who takes
    # it next takes no job over from a dead or stalled worker
    released: bool = False

    def expired(self, now_ms: int) -> bool:
        return now_ms >= self.deadline_ms

    def as_dict(self) -> dict:
        return {"job": self.job, "token": self.token, "owner": self.owner, "granted_ms": self.granted_ms,
                "deadline_ms": self.deadline_ms}


@dataclass(frozen=True)
class Failures:
    count: int = 0
    last_error: str = ""
    last_owner: str = ""


class LeaseStore:
    """The leases of one table's jobs."""

    def __init__(self, storage: Storage, base_path: str, clock: Clock | None = None):
        self.storage = storage
        self.base_path = base_path
        self.clock = clock or SystemClock()
        self.root = join(base_path, JOBS_DIR)

    # -- reading ---------------------------------------------------------------------------
    def _dir(self, job: str) -> str:
        if not _JOB_ID.match(job):
            raise ValueError(f"invalid job id {job!r}")
        return join(self.root, job)

    def _read_json(self, path: str) -> dict | None:
        try:
            return json.loads(self.storage.read_bytes(path))
        except FileNotFoundError:
            return None
        except ValueError:
            return None  # cannot happen with atomic writes; treated as absent

    def jobs(self) -> list[str]:
        return sorted(i.name for i in self.storage.list_dir(self.root) if i.is_dir)

    def current(self, job: str) -> Lease | None:
        """The lease with the largest token, its deadline extended by the latest renewal."""
        tokens = [int(m.group(1)) for i in self.storage.list_dir(self._dir(job)) if (m := _GRANT.match(i.name))]
        if not tokens:
            return None
        token = max(tokens)
        grant = self._read_json(join(self._dir(job), f"grant-{token:012d}.json")) or {}
        renew = self._read_json(join(self._dir(job), f"renew-{token:012d}.json")) or {}
        deadline = renew.get("deadline_ms", grant.get("deadline_ms", 0))
        return Lease(job, token, str(grant.get("owner", "?")), int(grant.get("granted_ms", 0)), int(deadline),
                     bool(renew.get("released", False)))

    def failures(self, job: str) -> Failures:
        data = self._read_json(join(self._dir(job), "failures.json")) or {}
        return Failures(int(data.get("count", 0)), str(data.get("last_error", "")), str(data.get("last_owner", "")))

    # -- changing --------------------------------------------------------------------------
    def acquire(self, job: str, owner: str, duration_ms: int) -> Lease | None:
        """Take ``job`` when it is free; None when another worker holds it or won the race."""
        now = self.clock.now_ms()
        held = self.current(job)
        if (held is not None and not held.expired(now)) or self.is_done(job):
            return None
        token = (held.token if held else 0) + 1
        lease = Lease(job, token, owner, now, now + duration_ms)
        body = {k: v for k, v in lease.as_dict().items() if k != "job"}
        try:
            self.storage.write_new(join(self._dir(job), f"grant-{token:012d}.json"), json.dumps(body).encode())
        except FileExistsError:
            return None  # another worker took this token first
        return lease

    def check(self, lease: Lease) -> None:
        """Fence: ``LeaseLostError`` unless ``lease`` still has the largest token of its job."""
        now = self.current(lease.job)
        if now is None or now.token > lease.token:
            by = f"token {now.token} of {now.owner}" if now is not None else "nobody (the job is gone)"
            raise LeaseLostError(f"job {lease.job}: the lease with token {lease.token} of {lease.owner} was "
                                 f"superseded by {by}; this worker must not complete it")

    def renew(self, lease: Lease, duration_ms: int) -> Lease:
        """Extend a held lease; ``LeaseLostError`` when it was superseded."""
        self.check(lease)
        deadline = self.clock.now_ms() + duration_ms
        self.storage.write_replace(join(self._dir(lease.job), f"renew-{lease.token:012d}.json"),
                                   json.dumps({"deadline_ms": deadline}).encode())
        self.check(lease)  # a takeover between the check and the write wins: its token is larger
        return Lease(lease.job, lease.token, lease.owner, lease.granted_ms, deadline)

    def release(self, lease: Lease) -> None:
        """Give the job back now (deadline = now) so the next worker need not wait for expiry;
        marked ``released``, so that taking it next counts as no takeover."""
        try:
            self.check(lease)
        except LeaseLostError:
            return
        self.storage.write_replace(join(self._dir(lease.job), f"renew-{lease.token:012d}.json"),
                                   json.dumps({"deadline_ms": self.clock.now_ms(), "released": True}).encode())

    def record_failure(self, lease: Lease, error: str) -> Failures:
        before = self.failures(lease.job)
        after = Failures(before.count + 1, error[:500], lease.owner)
        self.storage.write_replace(join(self._dir(lease.job), "failures.json"), json.dumps(
            {"count": after.count, "last_error": after.last_error, "last_owner": after.last_owner}).encode())
        return after

    def reset_failures(self, job: str) -> bool:
        """An operator's explicit retry of a job that was set aside."""
        return self.storage.delete(join(self._dir(job), "failures.json"))

    def finish(self, lease: Lease) -> None:
        """Mark the job done: nobody acquires it again.  Its grants stay, so a token is never
        handed out twice for the same job id."""
        self.storage.write_replace(join(self._dir(lease.job), "done.json"),
                                   json.dumps({"token": lease.token, "owner": lease.owner,
                                               "done_ms": self.clock.now_ms()}).encode())

    def is_done(self, job: str) -> bool:
        return self.storage.exists(join(self._dir(job), "done.json"))


@dataclass(frozen=True)
class LeaseFence:
    """A worker's fence as a value: calling it checks that the lease it holds is still the
    job's newest (``LeaseStore.check``), and it says which job and token it guards, so that a
    commit requirement built from it can name them (``tablesvc.services.lifecycle.LeaseHeld``).

    ``held`` returns the holder's lease as it is now: renewals replace the ``Lease`` value
    (a later deadline), never its job, token or owner."""

    store: LeaseStore
    held: Callable[[], Lease]

    def __call__(self) -> None:
        self.store.check(self.held())

    @property
    def job(self) -> str:
        return self.held().job

    @property
    def token(self) -> int:
        return self.held().token

    @property
    def owner(self) -> str:
        return self.held().owner


__all__ = ["Failures", "JOBS_DIR", "Lease", "LeaseFence", "LeaseLostError", "LeaseStore"]
