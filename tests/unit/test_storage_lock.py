"""Hudi's storage-based table lock (RFC-91) on S3 (``timeline/storage_lock.py``), against the moto server
of tests/s3_server.py: conditional updates, mutual exclusion among threads and spawned processes, expiry
takeover, release, renewal, a lock body as Java writes it, a lost race, and a table service under it."""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
import uuid

import pytest
from s3_server import copy_table_to_s3

from timeline.clock import ManualClock
from timeline.errors import LockHeldError, VersionConflictError
from timeline.storage_lock import CLOCK_DRIFT_BUFFER_MS, StorageLock, lock_object_path

pytestmark = pytest.mark.s3


@pytest.fixture
def s3(s3_endpoint):
    """(storage, base): a fresh table prefix in the bucket."""
    from tablesvc.storage import storage_for

    base = s3_endpoint.url("locks", uuid.uuid4().hex, "t")
    return storage_for(base, s3_endpoint.options()), base


def _body(storage, base) -> dict:
    return json.loads(storage.read_bytes(lock_object_path(base)))


# -- the conditional update the lock stands on ------------------------------------------------------------
def test_write_if_creates_only_when_absent_and_replaces_only_at_the_version_read(s3):
    storage, base = s3
    path = f"{base}/obj"
    v1 = storage.write_if(path, b"one", None)
    with pytest.raises(VersionConflictError, match="obj"):
        storage.write_if(path, b"two", None)
    assert storage.read_versioned(path) == (b"one", v1)
    v2 = storage.write_if(path, b"two", v1)
    assert v2 != v1 and storage.read_versioned(path) == (b"two", v2)
    with pytest.raises(VersionConflictError, match="obj"):
        storage.write_if(path, b"three", v1)           # a stale version loses
    with pytest.raises(VersionConflictError):
        storage.write_if(f"{base}/missing", b"x", v2)  # If-Match on a missing object loses too
    with pytest.raises(FileNotFoundError):
        storage.read_versioned(f"{base}/missing")
    assert storage.read_bytes(path) == b"two"


def test_local_storage_says_it_has_no_conditional_update(tmp_path):
    from tablesvc.storage import LocalStorage

    with pytest.raises(NotImplementedError, match="file-system lock"):
        LocalStorage().write_if(str(tmp_path / "f"), b"x", None)


# -- acquire, release, the body Java reads ---------------------------------------------------------------
def test_acquire_writes_javas_fields_and_release_writes_expired_true(s3):
    storage, base = s3
    clock = ManualClock()
    lock = StorageLock(storage, base, clock, validity_ms=20_000, renew_ms=0, owner="me")
    assert lock.path == f"{base}/.hoodie/.locks/table_lock.json"
    with lock:
        assert _body(storage, base) == {"expired": False, "validUntil": clock.now_ms() + 20_000, "owner": "me"}
        other = StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="other")
        with pytest.raises(LockHeldError, match=r"table_lock.json is held by me") as err:
            other.acquire()
        assert err.value.exit_code == 3
    assert _body(storage, base) == {"expired": True, "validUntil": clock.now_ms() + 20_000, "owner": "me"}
    assert not lock.held
    # the released (expired) object is taken over with If-Match, never deleted
    with StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="other"):
        assert _body(storage, base)["owner"] == "other"


def test_a_lock_a_java_writer_holds_is_respected_and_an_expired_one_taken(s3):
    storage, base = s3
    clock = ManualClock()
    java_owner = str(uuid.uuid4())  # Java's owner is a random UUID per provider
    # Jackson's output for StorageLockData, field order and all
    storage.write_if(lock_object_path(base),
                     ('{"expired":false,"validUntil":%d,"owner":"%s"}' % (clock.now_ms() + 300_000, java_owner)).encode(),
                     None)
    ours = StorageLock(storage, base, clock, wait_ms=5_000, renew_ms=0, owner="tablesvc")
    with pytest.raises(LockHeldError, match=java_owner):
        ours.acquire()                                  # the ManualClock's sleep moves it 5 s, no further
    assert _body(storage, base)["owner"] == java_owner
    # Java's unlock: the same body with expired=true
    body, version = storage.read_versioned(lock_object_path(base))
    storage.write_if(lock_object_path(base), body.replace(b'"expired":false', b'"expired":true'), version)
    assert ours.try_acquire()
    assert _body(storage, base) == {"expired": False, "validUntil": clock.now_ms() + 20_000, "owner": "tablesvc"}
    ours.release()


def test_a_dead_holders_lock_is_taken_over_after_validity_plus_the_drift_buffer(s3):
    storage, base = s3
    clock = ManualClock()
    dead = StorageLock(storage, base, clock, validity_ms=10_000, renew_ms=0, owner="dead")
    assert dead.try_acquire()                           # and never released: its process was killed
    until = clock.now_ms() + 10_000
    taker = StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="taker")
    clock.set(until + CLOCK_DRIFT_BUFFER_MS)            # still valid: Java's 500 ms buffer
    assert not taker.try_acquire()
    clock.advance(1)
    assert taker.try_acquire()
    assert _body(storage, base)["owner"] == "taker"
    assert not dead.renew() and dead.lost               # the dead holder, were it alive, learns it lost
    with pytest.raises(LockHeldError, match="lost to taker"):
        dead.ensure_held()
    dead.release()                                      # leaves the taker's object alone
    assert _body(storage, base) == {"expired": False, "validUntil": clock.now_ms() + 20_000, "owner": "taker"}
    taker.release()


def test_a_body_that_is_no_lock_is_replaced(s3):
    storage, base = s3
    storage.write_if(lock_object_path(base), b"not json", None)
    lock = StorageLock(storage, base, ManualClock(), wait_ms=0, renew_ms=0, owner="me")
    assert lock.try_acquire()
    assert _body(storage, base)["owner"] == "me"
    lock.release()


def test_a_race_lost_between_read_and_write_is_a_conflict(s3):
    """Two contenders read the same expired lock; the one whose If-Match write comes second loses."""
    storage, base = s3
    clock = ManualClock()
    storage.write_if(lock_object_path(base), json.dumps(
        {"expired": True, "validUntil": clock.now_ms(), "owner": "old"}).encode(), None)
    winner = StorageLock(storage, base, clock, renew_ms=0, owner="winner")

    class Interleaved:
        """The storage the loser uses: the winner takes the lock right after the loser's read."""

        def __getattr__(self, name):
            return getattr(storage, name)

        def read_versioned(self, path):
            got = storage.read_versioned(path)
            if not winner.held:
                assert winner.try_acquire()
            return got

    loser = StorageLock(Interleaved(), base, clock, wait_ms=0, renew_ms=0, owner="loser")
    with pytest.raises(LockHeldError, match="held by winner"):
        loser.acquire()
    assert _body(storage, base)["owner"] == "winner" and winner.held and not loser.held
    winner.release()


# -- renewal ------------------------------------------------------------------------------------------
def test_renewal_moves_valid_until_and_keeps_others_out(s3):
    storage, base = s3
    clock = ManualClock()
    holder = StorageLock(storage, base, clock, validity_ms=10_000, renew_ms=0, owner="holder")
    holder.acquire()
    for _ in range(3):
        clock.advance(8_000)                           # past the first validity, but renewed each time
        assert holder.renew()
        assert _body(storage, base)["validUntil"] == clock.now_ms() + 10_000
    assert not StorageLock(storage, base, clock, wait_ms=0, renew_ms=0).try_acquire()
    holder.release()
    assert _body(storage, base)["expired"] is True


def test_the_renewal_thread_renews_while_held_and_stops_on_release(s3):
    storage, base = s3
    with StorageLock(storage, base, validity_ms=3_000, renew_ms=100, owner="holder"):
        first = _body(storage, base)["validUntil"]
        time.sleep(0.6)
        assert _body(storage, base)["validUntil"] > first
    released = _body(storage, base)
    time.sleep(0.3)
    assert released["expired"] is True and _body(storage, base) == released


# -- mutual exclusion -----------------------------------------------------------------------------------
def test_many_threads_hold_it_one_at_a_time(s3):
    storage, base = s3
    inside, log, errors = [0], [], []
    guard = threading.Lock()

    def worker(n: int) -> None:
        try:
            for _ in range(3):
                with StorageLock(storage, base, wait_ms=60_000, owner=f"thread-{n}"):
                    with guard:
                        inside[0] += 1
                        log.append(inside[0])
                    time.sleep(0.01)
                    with guard:
                        inside[0] -= 1
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert log == [1] * 24                             # nobody was ever inside with another


def _hold_and_log(options: dict, base: str, log_path: str, n: int, rounds: int) -> None:
    """In a spawned process: take the lock ``rounds`` times and log enter/leave around each hold."""
    import os

    from tablesvc.storage import storage_for

    storage = storage_for(base, options)
    for _ in range(rounds):
        with StorageLock(storage, base, wait_ms=120_000, owner=f"proc-{n}-{os.getpid()}"):
            with open(log_path, "a") as f:
                f.write(f"enter {n}\n")
                f.flush()
            time.sleep(0.02)
            with open(log_path, "a") as f:
                f.write(f"leave {n}\n")
                f.flush()


def test_several_spawned_processes_hold_it_one_at_a_time(s3, s3_endpoint, tmp_path):
    _, base = s3
    log_path = str(tmp_path / "log")
    ctx = multiprocessing.get_context("spawn")          # obstore's client does not survive fork
    procs = [ctx.Process(target=_hold_and_log, args=(s3_endpoint.options(), base, log_path, n, 3))
             for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0] * 4
    lines = open(log_path).read().split()
    events = list(zip(lines[0::2], lines[1::2]))
    assert len(events) == 24
    for enter, leave in zip(events[0::2], events[1::2]):  # enter n is always followed by leave n
        assert enter[0] == "enter" and leave == ("leave", enter[1])


# -- Table.lock() on S3 --------------------------------------------------------------------------------
def _copy_fixture(s3_endpoint, name: str):
    return copy_table_to_s3(s3_endpoint, name)


def test_table_lock_on_s3_is_the_storage_lock_and_other_schemes_are_refused(s3_endpoint):
    from tablesvc.api import Table
    from tablesvc.errors import InvalidInputError

    storage, root = _copy_fixture(s3_endpoint, "v6_complexkeygen_hivestyle")
    table = Table.open(root, storage=storage)
    lock = table.lock(wait_ms=0)
    assert isinstance(lock, StorageLock) and lock.path == f"{root}/.hoodie/.locks/table_lock.json"
    with lock:
        with pytest.raises(LockHeldError):
            Table.open(root, storage=storage).lock(wait_ms=0).acquire()
    assert json.loads(storage.read_bytes(lock.path))["expired"] is True
    gcs = Table(root.replace("s3://", "gs://"), storage, table.config)
    with pytest.raises(InvalidInputError, match="not take on GCS"):
        gcs.lock()


def test_a_clean_on_s3_runs_under_the_storage_lock_waits_for_a_java_holder_and_matches_local(s3_endpoint, tmp_path):
    """End to end through the Python API: a clean of a fixture table copied to S3 waits while a
    (hand-written) Java holder's lock is valid, then takes the lock, cleans what the same clean
    deletes on a local copy, and leaves the lock object expired."""
    import shutil

    from fixture_tables import TABLES_DIR
    from oracles.hudi_rs import read_table
    from tablesvc.api import Table

    name = "v8_trips_8i3u1d"
    storage, root = _copy_fixture(s3_endpoint, name)
    local = tmp_path / name
    shutil.copytree(TABLES_DIR / name, local)
    options = {"hoodie.cleaner.commits.retained": "1"}
    java_owner = str(uuid.uuid4())
    held_until = int(time.time() * 1000) + 1_500
    storage.write_if(lock_object_path(root),
                     ('{"expired":false,"validUntil":%d,"owner":"%s"}' % (held_until, java_owner)).encode(), None)

    started = time.time()
    [result] = Table.open(root, storage=storage).clean(options=options)
    assert time.time() * 1000 > held_until + CLOCK_DRIFT_BUFFER_MS   # it waited for the Java holder
    assert time.time() - started < 20
    [expected] = Table.open(str(local)).clean(options=options)
    assert result.status.value == "done" and result.metrics.files_deleted == expected.metrics.files_deleted > 0
    lock = json.loads(storage.read_bytes(lock_object_path(root)))
    assert lock["expired"] is True and lock["owner"] != java_owner

    def data_files(listing):
        return sorted(p for p in listing if "/.hoodie/" not in "/" + p and not p.startswith(".hoodie/"))

    s3_files = data_files(p.split(f"{name}/", 1)[1] for p in _keys(s3_endpoint, root))
    local_files = data_files(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    assert s3_files == local_files

    def rows(table):
        return sorted(table.to_pylist(), key=lambda r: (r["_hoodie_record_key"], r["_hoodie_partition_path"]))

    assert rows(read_table(root, storage_options=s3_endpoint.options())) == rows(read_table(local))


def _keys(s3_endpoint, root: str) -> list[str]:
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_endpoint.endpoint, region_name="us-east-1",
                      aws_access_key_id="testing-key", aws_secret_access_key="testing-secret")
    prefix = root.split("/", 3)[3] + "/"
    keys, token = [], None
    while True:
        page = s3.list_objects_v2(Bucket=s3_endpoint.bucket, Prefix=prefix,
                                  **({"ContinuationToken": token} if token else {}))
        keys += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return keys
        token = page["NextContinuationToken"]


# -- the fence: a holder that lost the lock commits nothing ------------------------------------------------
def test_a_holder_past_its_validity_fails_the_fence_once_another_took_the_lock(s3):
    """No renewal, clock past validUntil + 500 ms: another writer takes the lock; the old holder's
    ensure_held must then fail by its own clock, before any renewal has told it."""
    storage, base = s3
    clock = ManualClock()
    a = StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="a")
    a.acquire()
    clock.advance(21_000)
    b = StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="b")
    b.acquire()
    assert a.held and not a.lost                       # it has not noticed: no renewal ran
    with pytest.raises(LockHeldError, match="valid until"):
        a.ensure_held()
    b.ensure_held()
    b.release()


def test_the_fence_fails_within_its_margin_before_valid_until(s3):
    storage, base = s3
    clock = ManualClock()
    a = StorageLock(storage, base, clock, wait_ms=0, validity_ms=20_000, renew_ms=0, owner="a")
    a.acquire()
    until = _body(storage, base)["validUntil"]
    assert a.fence_margin_ms == 4_000
    clock.set(until - a.fence_margin_ms - 1)
    a.ensure_held()
    clock.advance(1)
    with pytest.raises(LockHeldError, match="fence margin"):
        a.ensure_held()
    a.release()


def test_leaving_a_with_block_after_the_lock_was_lost_raises(s3):
    storage, base = s3
    clock = ManualClock()
    b = StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="b")
    with pytest.raises(LockHeldError, match="lost to b"):
        with StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="a"):
            clock.advance(21_000)
            b.acquire()
    assert _body(storage, base)["owner"] == "b" and _body(storage, base)["expired"] is False
    b.release()
    d = StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="d")
    with pytest.raises(ZeroDivisionError):              # an exception in flight is not masked
        with StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="c"):
            clock.advance(21_000)
            d.acquire()                                 # c lost it too
            1 / 0
    d.release()


class _Stalling:
    """Storage whose renewal writes stall once ``stall`` is set (a renewal PUT stuck in retries)."""

    def __init__(self, inner):
        self.inner, self.stall = inner, 0.0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def write_if(self, *args):
        if self.stall and threading.current_thread().name.startswith("tablesvc-lock-renew"):
            time.sleep(self.stall)
        return self.inner.write_if(*args)


def test_a_stuck_renewal_neither_passes_the_fence_nor_hangs_release(s3):
    storage, base = s3
    stalling = _Stalling(storage)
    a = StorageLock(stalling, base, validity_ms=1_000, renew_ms=200, wait_ms=0, owner="a")
    a.acquire()
    stalling.stall = 2.5
    b = StorageLock(storage, base, validity_ms=20_000, renew_ms=0, wait_ms=5_000, owner="b")
    b.acquire()                                         # after a's validUntil + 500 ms
    with pytest.raises(LockHeldError):
        a.ensure_held()
    started = time.monotonic()
    a.release()
    assert time.monotonic() - started < 1.0             # not the stalled renewal's 2.5 s
    assert _body(storage, base)["owner"] == "b" and _body(storage, base)["expired"] is False
    time.sleep(2.6)                                     # the stalled renewal lands, loses its If-Match
    assert _body(storage, base)["owner"] == "b" and not a.held
    b.release()


def _writer_under(storage, root, lock_factory):
    from tablesvc.api import Table
    from timeline.transitions import TimelineWriter

    table = Table.open(root, storage=storage)
    return TimelineWriter(storage, root, table.config.layout, table.instant_times, lock_factory)


def test_a_timeline_commit_under_a_lost_storage_lock_raises_and_writes_no_instant_file(s3_endpoint):
    from timeline.instant import Action, State
    from timeline.active import Timeline

    storage, root = _copy_fixture(s3_endpoint, "v6_complexkeygen_hivestyle")
    clock = ManualClock()
    writer = _writer_under(storage, root, lambda: StorageLock(storage, root, clock, wait_ms=0, renew_ms=0,
                                                              owner="writer"))
    thief = StorageLock(storage, root, clock, wait_ms=0, renew_ms=0, owner="thief")

    def lose(*_):
        clock.advance(21_000)                          # the writer stalled past its validity
        thief.acquire()

    layout = writer.layout
    before = {f.file_name() for f in Timeline.load(storage, root, layout).files}
    with pytest.raises(LockHeldError):
        writer.request(Action.COMMIT, b"{}", before_create=lose)
    assert {f.file_name() for f in Timeline.load(storage, root, layout).files} == before
    thief.release()

    requested = writer.request(Action.COMMIT, b"{}")
    inflight = writer.start(requested, b"{}")
    before = {f.file_name() for f in Timeline.load(storage, root, layout).files}
    with pytest.raises(LockHeldError):
        writer.complete(inflight, b"{}", precheck=lose)
    after = Timeline.load(storage, root, layout).files
    assert {f.file_name() for f in after} == before
    assert not [f for f in after if f.timestamp == inflight.timestamp and f.state is State.COMPLETED]
    thief.release()


def test_the_locks_storage_calls_are_bounded_to_a_fifth_of_the_validity(s3):
    from tablesvc.storage.object_store import RETRY_TIMEOUT_KEY

    storage, base = s3
    lock = StorageLock(storage, base, ManualClock(), wait_ms=0, validity_ms=20_000, renew_ms=0, owner="me")
    options = dict(lock._storage._options)
    assert options[RETRY_TIMEOUT_KEY] == "4000" and options["timeout"] == "4000ms"
    assert lock.try_acquire() and _body(storage, base)["owner"] == "me"   # the bounded client works
    lock.release()
    assert dict(storage._options).get("timeout") is None                 # the table's own client unchanged
