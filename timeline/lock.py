"""The table lock: Apache Hudi's file-system lock file, taken by tablesvc and Java writers alike.

Transitions that must see a timeline that does not move underneath them (choosing
a new instant or completion time, checking for conflicts before a commit, building a
plan) run under this lock.  The lock is the file Java Hudi's ``FileSystemBasedLockProvider``
uses, ``<dir>/lock`` with ``<dir>`` = ``hoodie.write.lock.filesystem.path`` or
``<base>/.hoodie``, so a Java writer in optimistic concurrency control and tablesvc exclude
each other (docs/interop.md, "Java writes, tablesvc services").

The file is created with ``Storage.write_new`` (exclusive), so two tablesvc processes cannot
both hold it.  Who holds it decides how it expires:

* tablesvc's own lock file holds JSON ``{owner, expires_ms}``: holders keep their hold short
  (milliseconds to seconds), and a holder that died leaves a lock whose expiry passes; the
  next tablesvc caller removes it and retries.
* Any other content (Java's ``LockInfo`` text, or an empty file a Java writer has created
  and not yet written) is judged as Java judges every lock file: expired once its
  modification time is more than ``hoodie.write.lock.filesystem.expire`` minutes old, never
  when that is 0 (Java's default).  A Java writer's lock that never expires is waited for,
  then ``LockHeldError`` (exit 3).

Removing an expired lock also removes Hadoop's checksum sibling ``.lock.crc``: Java reads
the lock file through Hadoop's checksummed local file system, which would refuse a new
lock file beside a stale checksum.  Release removes only a lock whose body is still ours
(a Java unlock deletes whatever is there; ours must not).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from timeline.clock import Clock, SystemClock
from timeline.errors import LockHeldError
from timeline.storage import Storage, join

LOCK_FILE_NAME = "lock"          # Java's FileSystemBasedLockProvider names its file so
DEFAULT_LOCK_DIR = ".hoodie"     # under the base path, when hoodie.write.lock.filesystem.path is unset
LOCK_FILE = f"{DEFAULT_LOCK_DIR}/{LOCK_FILE_NAME}"
# A lock left by a killed tablesvc holder expires after this long.  Holds last milliseconds
# (choosing an instant, checking and completing it) up to a second or so (planning a compaction).
DEFAULT_TTL_MS = 20_000
DEFAULT_WAIT_MS = 30_000


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lock_file_path(base_path: str, lock_dir: str | None = None) -> str:
    """``<lock_dir>/lock``, ``lock_dir`` defaulting to ``<base_path>/.hoodie`` as Java's provider does."""
    return join(lock_dir or join(base_path, DEFAULT_LOCK_DIR), LOCK_FILE_NAME)


def checksum_sibling(path: str) -> str:
    """Hadoop's checksum file beside ``path``: ``<dir>/.<name>.crc``."""
    folder, _, name = path.rpartition("/")
    return f"{folder}/.{name}.crc" if folder else f".{name}.crc"


@dataclass(frozen=True)
class LockSettings:
    """Where the table lock is and how a foreign (Java) lock expires: the same for every process on a table."""

    lock_dir: str | None = None      # hoodie.write.lock.filesystem.path; None: <base>/.hoodie
    expire_minutes: int = 0          # hoodie.write.lock.filesystem.expire; 0: a Java lock never expires
    wait_ms: int = DEFAULT_WAIT_MS   # hoodie.write.lock.wait_time_ms
    # the storage-based lock on object stores (timeline/storage_lock.py; tablesvc's defaults, Java's are 300/30)
    storage_validity_s: int = 20     # hoodie.write.lock.storage.validity.timeout.secs
    storage_renew_s: int = 2         # hoodie.write.lock.storage.renew.interval.secs


@dataclass(frozen=True)
class LockHolder:
    """What the lock file says: tablesvc's owner and expiry, or a foreign (Java) lock with its mtime."""

    owner: str
    expires_ms: int | None = None    # tablesvc's lock; None for a foreign one
    mtime_ms: int | None = None      # a foreign lock's modification time

    @property
    def is_tablesvc(self) -> bool:
        return self.expires_ms is not None


def parse_holder(body: bytes, mtime_ms: int | None) -> LockHolder:
    """A lock file's body as a holder: tablesvc's JSON (``owner`` and integer ``expires_ms``), else foreign."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("owner"), str) and isinstance(data.get("expires_ms"), int):
        return LockHolder(data["owner"], expires_ms=data["expires_ms"])
    return LockHolder("a Java writer (Hudi's FileSystemBasedLockProvider)", mtime_ms=mtime_ms)


class TableLock:
    def __init__(self, storage: Storage, base_path: str, clock: Clock | None = None, *,
                 ttl_ms: int = DEFAULT_TTL_MS, wait_ms: int = DEFAULT_WAIT_MS, owner: str | None = None,
                 sleep: Callable[[float], None] = time.sleep, lock_dir: str | None = None,
                 expire_minutes: int = 0):
        self._storage = storage
        self._path = lock_file_path(base_path, lock_dir)
        self._clock = clock or SystemClock()
        self._ttl_ms = ttl_ms
        self._wait_ms = wait_ms
        self._expire_ms = expire_minutes * 60_000
        self._owner = owner or default_owner()
        self._sleep = sleep
        self._held = False
        self._body = b""

    @classmethod
    def of(cls, storage: Storage, base_path: str, settings: LockSettings, clock: Clock | None = None,
           **kwargs) -> "TableLock":
        kwargs.setdefault("wait_ms", settings.wait_ms)
        return cls(storage, base_path, clock, lock_dir=settings.lock_dir, expire_minutes=settings.expire_minutes,
                   **kwargs)

    @property
    def path(self) -> str:
        return self._path

    def _holder(self) -> LockHolder | None:
        try:
            body = self._storage.read_bytes(self._path)
            mtime = self._storage.stat(self._path).mtime_ms
        except FileNotFoundError:
            return None
        return parse_holder(body, mtime)

    def _expired(self, holder: LockHolder) -> bool:
        now = self._clock.now_ms()
        if holder.is_tablesvc:
            return holder.expires_ms < now
        # Java's rule, to the letter: 0 minutes never expires; else strictly older than the limit.
        return self._expire_ms > 0 and holder.mtime_ms is not None and now - holder.mtime_ms > self._expire_ms

    def _remove_expired(self) -> None:
        self._storage.delete(self._path)
        self._storage.delete(checksum_sibling(self._path))

    def try_acquire(self) -> bool:
        body = json.dumps({"owner": self._owner,
                           "expires_ms": self._clock.now_ms() + self._ttl_ms}).encode()
        try:
            self._storage.write_new(self._path, body)
            self._held, self._body = True, body
            return True
        except FileExistsError:
            holder = self._holder()
            if holder is not None and self._expired(holder):
                self._remove_expired()  # its holder died; the next attempt can take it
            return False

    def acquire(self) -> "TableLock":
        deadline = self._clock.now_ms() + self._wait_ms
        delay = 0.005
        while not self.try_acquire():
            if self._clock.now_ms() >= deadline:
                holder = self._holder()
                if holder is not None and not holder.is_tablesvc:
                    never = (" (hoodie.write.lock.filesystem.expire=0: it never expires; if no Java writer "
                             "is running, a killed one left it: delete the file)") if self._expire_ms == 0 else ""
                    raise LockHeldError(f"table lock {self._path} is held by {holder.owner}{never}; retry later")
                raise LockHeldError(f"table lock {self._path} is held by "
                                    f"{holder.owner if holder else '?'}; retry later")
            self._sleep(delay)
            delay = min(delay * 2, 0.25)
        return self

    def release(self) -> None:
        if self._held:
            self._held = False
            try:
                body = self._storage.read_bytes(self._path)
            except FileNotFoundError:
                body = None
            if body == self._body:
                self._storage.delete(self._path)
            elif body is not None and not parse_holder(body, None).is_tablesvc:
                # Hadoop's local file system checks and creates the file in two steps, so a Java
                # writer can overwrite a lock created between them: say so, and leave it to Java.
                print(f"tablesvc: warning: table lock {self._path} was overwritten by a Java writer "
                      "while tablesvc held it; left to that writer", file=sys.stderr)

    def __enter__(self) -> "TableLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
