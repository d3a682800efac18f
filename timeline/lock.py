"""The table lock: one file created exclusively, with an owner and an expiry.

Transitions that must see a timeline that does not move underneath them (choosing
a new instant or completion time, checking for conflicts before a commit) run
under this lock.  The lock file is created with ``Storage.write_new`` (exclusive),
so two processes cannot both hold it.  A holder that died leaves a lock whose
expiry passes; the next caller removes it and retries.  Holders keep their hold
short (milliseconds to seconds); long jobs never run under the lock.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from typing import Callable

from timeline.clock import Clock, SystemClock
from timeline.errors import LockHeldError
from timeline.storage import Storage, join

LOCK_FILE = ".hoodie/.aux/.tablesvc.lock"
# A lock left by a killed holder expires after this long.  Holds last milliseconds (choosing
# an instant, checking and completing it) up to a second or so (planning a compaction).
DEFAULT_TTL_MS = 20_000


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class TableLock:
    def __init__(self, storage: Storage, base_path: str, clock: Clock | None = None, *,
                 ttl_ms: int = DEFAULT_TTL_MS, wait_ms: int = 30_000, owner: str | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self._storage = storage
        self._path = join(base_path, LOCK_FILE)
        self._clock = clock or SystemClock()
        self._ttl_ms = ttl_ms
        self._wait_ms = wait_ms
        self._owner = owner or default_owner()
        self._sleep = sleep
        self._held = False

    @property
    def path(self) -> str:
        return self._path

    def _holder(self) -> dict | None:
        try:
            return json.loads(self._storage.read_bytes(self._path))
        except FileNotFoundError:
            return None
        except ValueError:
            # A lock file cut short by a crash between create and write cannot
            # happen with write_new; an unreadable one is treated as expired.
            return {"owner": "?", "expires_ms": 0}

    def try_acquire(self) -> bool:
        body = json.dumps({"owner": self._owner,
                           "expires_ms": self._clock.now_ms() + self._ttl_ms}).encode()
        try:
            self._storage.write_new(self._path, body)
            self._held = True
            return True
        except FileExistsError:
            holder = self._holder()
            if holder is not None and holder.get("expires_ms", 0) < self._clock.now_ms():
                self._storage.delete(self._path)  # its holder died; the next attempt can take it
            return False

    def acquire(self) -> "TableLock":
        deadline = self._clock.now_ms() + self._wait_ms
        delay = 0.005
        while not self.try_acquire():
            if self._clock.now_ms() >= deadline:
                holder = self._holder() or {}
                raise LockHeldError(f"table lock {self._path} is held by {holder.get('owner', '?')}; retry later")
            self._sleep(delay)
            delay = min(delay * 2, 0.25)
        return self

    def release(self) -> None:
        if self._held:
            holder = self._holder()
            if holder is not None and holder.get("owner") == self._owner:
                self._storage.delete(self._path)
            self._held = False

    def __enter__(self) -> "TableLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
