"""The table lock on an object store: Apache Hudi's storage-based lock (RFC-91), taken by tablesvc and Java alike.

Java Hudi (1.0.2+) locks a table on S3/GCS/Azure with ``StorageBasedLockProvider``: one object,
``<base>/.hoodie/.locks/table_lock.json``, holding ``{"expired": bool, "validUntil": epoch-ms,
"owner": str}``, changed only by conditional writes (``Storage.write_if``: ``If-None-Match: *`` to
create it, ``If-Match: <ETag>`` to change it).  ``StorageLock`` follows the same protocol, so a Java
writer using that provider and tablesvc exclude each other (docs/storage.md, "The table lock"):

* A lock is **valid** while ``not expired and now <= validUntil + 500 ms`` (Java's clock-drift buffer).
* **Acquire**: read the object with its ETag; absent: create it; present but not valid (expired,
  past its validity, or a body that is no lock): replace it with ``If-Match`` on the ETag read;
  valid: wait.  A lost conditional write means someone else took it: wait.  Waiting backs off
  (up to 1 s, Java's retry period) until ``wait_ms``, then ``LockHeldError`` (exit 3) naming the owner.
* **Renew**: a daemon thread rewrites ``validUntil = now + validity`` with ``If-Match`` every renew
  interval.  If that write loses and the object is no longer ours, the lock is **lost**: ``lost``
  turns true, ``ensure_held()`` raises, and release leaves the object alone.
* **Fence**: ``ensure_held()`` (called by ``TimelineWriter`` before it writes a requested or a
  completed instant file) also raises once ``now >= validUntil - validity/5`` by our clock; each
  lock call is bounded to validity/5 (``ObjectStorage.with_call_bound``), as in Java.
* **Release**: wait for the renewer at most one renew interval, then write ``expired: true``
  (``validUntil`` unchanged) with ``If-Match``; the object is
  never deleted (S3 has no conditional delete), as in Java.

Every time decision asks the injected ``Clock``.  A holder that dies leaves a valid lock, which
blocks others until ``validUntil + 500 ms``: at most the validity (tablesvc's default 20 s; Java's
300 s), since a dead holder stops renewing.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

from timeline.clock import Clock, SystemClock
from timeline.errors import LockHeldError, StorageError, VersionConflictError
from timeline.lock import default_owner
from timeline.storage import Storage, join

LOCK_FOLDER = ".hoodie/.locks"               # StorageLockClient's lock folder under the base path
LOCK_FILE_NAME = "table_lock.json"           # its default table lock file name
CLOCK_DRIFT_BUFFER_MS = 500                  # Java's CLOCK_DRIFT_BUFFER_MS: a lock stays valid this long past validUntil
VALIDITY_KEY = "hoodie.write.lock.storage.validity.timeout.secs"   # Java's default 300
RENEW_KEY = "hoodie.write.lock.storage.renew.interval.secs"        # Java's default 30
JAVA_DEFAULT_VALIDITY_S = 300
JAVA_DEFAULT_RENEW_S = 30
# tablesvc holds the lock for milliseconds to seconds; a killed holder blocks others for this long at most
DEFAULT_VALIDITY_S = 20
DEFAULT_RENEW_S = 2
MAX_BACKOFF_S = 1.0                          # Java retries tryLock every 1000 ms


def lock_object_path(base_path: str) -> str:
    return join(base_path, LOCK_FOLDER, LOCK_FILE_NAME)


@dataclass(frozen=True)
class StorageLockData:
    """The lock object's body, in Java's field names and types (``StorageLockData``)."""

    expired: bool
    valid_until_ms: int
    owner: str

    def to_json(self) -> bytes:
        return json.dumps({"expired": self.expired, "validUntil": self.valid_until_ms,
                           "owner": self.owner}).encode()

    @classmethod
    def parse(cls, body: bytes) -> "StorageLockData | None":
        """The body as lock data; ``None`` for a body that is not one (it is no lock: anyone may replace it)."""
        try:
            data = json.loads(body)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        expired, until, owner = data.get("expired"), data.get("validUntil"), data.get("owner")
        if not isinstance(expired, bool) or isinstance(until, bool) or not isinstance(until, int) \
                or not isinstance(owner, str):
            return None
        return cls(expired, until, owner)

    def valid_at(self, now_ms: int) -> bool:
        return not self.expired and now_ms <= self.valid_until_ms + CLOCK_DRIFT_BUFFER_MS


def check_timings(validity_s: float, renew_s: float) -> None:
    """Java's rules (``StorageBasedLockConfig``): validity >= 10 x renew interval, renew >= 1 s
    (validity >= 10 s follows).  Tests may pass shorter ones to the constructor directly."""
    if renew_s < 1 or validity_s < 10 * renew_s:
        raise ValueError(f"{VALIDITY_KEY}={validity_s} and {RENEW_KEY}={renew_s}: the validity must be at least "
                         "10 times the renew interval, and the renew interval at least 1 s (as in Hudi)")


class StorageLock:
    """Hudi's storage-based table lock on ``storage`` (an object store: ``read_versioned``/``write_if``).

    The same surface as ``TableLock``: ``try_acquire``, ``acquire`` (waits up to ``wait_ms``, then
    ``LockHeldError``), ``release``, and use as a context manager.  ``validity_ms``/``renew_ms`` are
    the validity written into ``validUntil`` and the renewal period (``renew_ms=0``: no renewal thread).
    """

    def __init__(self, storage: Storage, base_path: str, clock: Clock | None = None, *,
                 wait_ms: int = 30_000, validity_ms: int = DEFAULT_VALIDITY_S * 1000,
                 renew_ms: int = DEFAULT_RENEW_S * 1000, owner: str | None = None,
                 sleep: Callable[[float], None] | None = None):
        # each lock call bounded to a fifth of the validity, as in Java, so a call stuck in the store's
        # own timeouts and retries (obstore: 30 s a request, 180 s of retries) cannot outlast the lock:
        # a store that can bound its calls (``ObjectStorage.with_call_bound``) gives a client for that
        bound = getattr(type(storage), "with_call_bound", None)
        self._storage = bound(storage, max(validity_ms // 5, 1)) if bound is not None else storage
        self._path = lock_object_path(base_path)
        self._clock = clock or SystemClock()
        self._wait_ms = wait_ms
        self._validity_ms = validity_ms
        self._renew_ms = renew_ms
        self._owner = owner or default_owner()
        if sleep is None:
            clock_sleep = getattr(self._clock, "sleep_ms", None)
            sleep = (lambda s: clock_sleep(int(s * 1000))) if clock_sleep else time.sleep
        self._sleep = sleep
        self._state = threading.Lock()     # guards held/version/data against the renewal thread
        self._held = False
        self._lost_to: str | None = None
        self._version: str | None = None
        self._data: StorageLockData | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._last_seen: StorageLockData | None = None

    @property
    def path(self) -> str:
        return self._path

    @property
    def owner(self) -> str:
        return self._owner

    @property
    def held(self) -> bool:
        return self._held

    @property
    def lost(self) -> bool:
        """True once a renewal found the lock taken by someone else while we held it."""
        return self._lost_to is not None

    @property
    def fence_margin_ms(self) -> int:
        """How long before ``validUntil`` (by this holder's clock) ``ensure_held`` stops vouching for
        the lock: a fifth of the validity, the time Java allows one storage call of the lock
        (``StorageBasedLockProvider``), so the commit write that follows the check has that long to land."""
        return self._validity_ms // 5

    def ensure_held(self) -> None:
        """Raise ``LockHeldError`` unless the lock is held and still valid by this holder's clock with
        ``fence_margin_ms`` to spare (a fence check right before a commit's write; Java's
        ``actuallyHoldsLock``): lost to a renewal conflict, released, or renewals failing for so long
        that ``validUntil`` is near or past, when another writer may take it over."""
        with self._state:
            held, lost_to, data = self._held, self._lost_to, self._data
        if lost_to is not None:
            raise LockHeldError(f"table lock {self._path} was lost to {lost_to} while {self._owner} held it "
                                "(a renewal failed for longer than its validity); retry")
        if not held or data is None:
            raise LockHeldError(f"table lock {self._path} is not held by {self._owner}")
        now = self._clock.now_ms()
        if now >= data.valid_until_ms - self.fence_margin_ms:
            raise LockHeldError(f"table lock {self._path}: {self._owner}'s hold is valid until {data.valid_until_ms} ms "
                                f"and it is {now} ms: less than its {self.fence_margin_ms} ms fence margin remains (renewals "
                                "failed or were late); another writer may take it over, so nothing is committed; retry")

    def _read(self) -> tuple[StorageLockData | None, str | None, bool]:
        """(data, version, present)."""
        try:
            body, version = self._storage.read_versioned(self._path)
        except FileNotFoundError:
            return None, None, False
        return StorageLockData.parse(body), version, True

    # -- acquire ------------------------------------------------------------------------------------
    def try_acquire(self) -> bool:
        if self._held:
            raise LockHeldError(f"table lock {self._path}: {self._owner} already holds it (not re-entrant)")
        current, version, present = self._read()
        now = self._clock.now_ms()
        if current is not None and current.valid_at(now):
            self._last_seen = current
            return False
        mine = StorageLockData(False, now + self._validity_ms, self._owner)
        try:
            new_version = self._storage.write_if(self._path, mine.to_json(), version if present else None)
        except VersionConflictError:
            self._last_seen = None   # someone else wrote it between our read and write
            return False
        with self._state:
            self._held, self._lost_to = True, None
            self._version, self._data = new_version, mine
        self._start_renewal()
        return True

    def acquire(self) -> "StorageLock":
        deadline = self._clock.now_ms() + self._wait_ms
        delay = 0.02
        while not self.try_acquire():
            if self._clock.now_ms() >= deadline:
                holder = self._last_seen
                if holder is None:
                    holder, _, _ = self._read()
                who = holder.owner if holder is not None else "another writer"
                until = f" (valid until {holder.valid_until_ms} ms)" if holder is not None else ""
                raise LockHeldError(f"table lock {self._path} is held by {who}{until}; retry later")
            self._sleep(delay * (0.5 + random.random()))   # jitter: contenders do not retry in step
            delay = min(delay * 2, MAX_BACKOFF_S)
        return self

    # -- renew --------------------------------------------------------------------------------------
    def _start_renewal(self) -> None:
        if self._renew_ms <= 0:
            return
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew_loop, args=(self._stop,),
                                         name=f"tablesvc-lock-renew {self._path}", daemon=True)
        self._renewer.start()

    def _renew_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self._renew_ms / 1000):
            try:
                if not self.renew():
                    return
            except Exception as e:  # noqa: BLE001 - the thread must not die silently; retried next beat
                print(f"tablesvc: warning: renewing table lock {self._path} failed: {e}", file=sys.stderr)

    def renew(self) -> bool:
        """Extend ``validUntil`` to now + validity with ``If-Match``; False once the lock is not held
        (released, or lost: someone else's object is there).  The storage calls run outside
        ``_state``, so a stuck call never blocks ``release``/``ensure_held``; a release meanwhile
        wins (its If-Match expire, or its re-read after our write moved the ETag)."""
        with self._state:
            if not self._held:
                return False
            version, data = self._version, self._data
        mine = StorageLockData(False, self._clock.now_ms() + self._validity_ms, self._owner)
        try:
            new_version = self._storage.write_if(self._path, mine.to_json(), version)
        except VersionConflictError:
            pass
        except StorageError:
            with self._state:
                if not self._held:
                    return False
                if data is not None and not data.valid_at(self._clock.now_ms()):
                    self._mark_lost("nobody (the lock's validity passed while renewals failed)")
                    return False
            return True   # a transient failure: the next beat retries
        else:
            with self._state:
                if not self._held:
                    return False
                self._version, self._data = new_version, mine
                return True
        # the ETag moved: ours still (a retried renewal), or taken over
        current, version, _ = self._read()
        with self._state:
            if not self._held:
                return False
            if current is not None and current.owner == self._owner and not current.expired:
                self._version, self._data = version, current
                return True
            self._mark_lost(current.owner if current is not None else "nobody (the lock object is gone)")
            return False

    def _mark_lost(self, to: str) -> None:
        self._held = False
        self._lost_to = to
        print(f"tablesvc: warning: table lock {self._path} was lost to {to} while {self._owner} held it",
              file=sys.stderr)

    # -- release ------------------------------------------------------------------------------------
    def release(self) -> None:
        self._stop.set()
        renewer, self._renewer = self._renewer, None
        if renewer is not None and renewer is not threading.current_thread():
            # at most one renew interval: a renewal stuck in a storage call must not hang release (and
            # the CLI's exit); the conditional expire below is safe against it (If-Match on our ETag)
            renewer.join(timeout=max(self._renew_ms / 1000, 0.1))
        with self._state:
            if not self._held or self._data is None:
                return
            self._held = False
            done = StorageLockData(True, self._data.valid_until_ms, self._owner)
            try:
                try:
                    self._version = self._storage.write_if(self._path, done.to_json(), self._version)
                    return
                except VersionConflictError:
                    pass
                current, version, _ = self._read()
                if current is not None and current.owner == self._owner and not current.expired:
                    self._storage.write_if(self._path, done.to_json(), version)
                    return
            except (StorageError, VersionConflictError) as e:
                # the lock stays ours until validUntil (+500 ms) passes, then anyone takes it over
                print(f"tablesvc: warning: releasing table lock {self._path} failed ({e}); it expires at "
                      f"{self._data.valid_until_ms} ms", file=sys.stderr)
                return
            self._lost_to = current.owner if current is not None else "nobody"
            print(f"tablesvc: warning: table lock {self._path} was taken by {self._lost_to} before {self._owner} "
                  "released it; left to that holder", file=sys.stderr)

    def __enter__(self) -> "StorageLock":
        return self.acquire()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.release()
        if exc_type is None and self._lost_to is not None:
            # the work under the lock ran (partly) unprotected: say so, exit 3, rather than exit 0
            raise LockHeldError(f"table lock {self._path} was lost to {self._lost_to} while {self._owner} held it; "
                                "what ran under it may have overlapped another writer; check the timeline and retry")
