"""``ObjectStorage`` on Azure (``az://``, ``abfs[s]://``) against Azurite (tests/azure_server.py, fixture
``azure_endpoint``): create-if-absent, compare-and-swap on the ETag, listings, stat, deletes, ranged
reads of an object larger than one whole read, errors, hudi-rs reading a table copied there, and
Hudi's storage-based table lock (``timeline/storage_lock.py``), which ``Table.lock()`` returns on Azure."""

from __future__ import annotations

import io
import json
import os
import threading
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from azure_server import ACCOUNT, ACCOUNT_KEY, copy_table_to_azure

from fixture_tables import TABLES_DIR
from oracles.hudi_rs import read_table
from tablesvc.errors import StorageError
from tablesvc.storage import storage_for
from tablesvc.storage.object_store import WHOLE_READ_MAX, ObjectStorage
from timeline.clock import ManualClock
from timeline.errors import LockHeldError, VersionConflictError
from timeline.storage_lock import CLOCK_DRIFT_BUFFER_MS, StorageLock, lock_object_path

pytestmark = pytest.mark.azure


@pytest.fixture
def az(azure_endpoint):
    """(storage, root): a fresh prefix of the Azurite container."""
    root = azure_endpoint.url("unit", uuid.uuid4().hex)
    storage = storage_for(root, azure_endpoint.options())
    assert isinstance(storage, ObjectStorage)
    return storage, root


def test_write_new_creates_only_when_absent_and_one_of_eight_racing_creates_wins(az):
    storage, root = az
    path = f"{root}/.hoodie/timeline/20250101000000000.deltacommit.requested"
    storage.write_new(path, b"first")
    with pytest.raises(FileExistsError, match="deltacommit.requested"):
        storage.write_new(path, b"second")
    assert storage.read_bytes(path) == b"first"
    assert storage.write_new_from(f"{root}/spooled", lambda f: f.write(b"x" * 1000)) == 1000
    with pytest.raises(FileExistsError):
        storage.write_new_from(f"{root}/spooled", lambda f: f.write(b"y"))

    raced = f"{root}/.hoodie/timeline/20250101000000001.commit.requested"
    wins, losses, others = [], [], []
    barrier = threading.Barrier(8)

    def create(n: int) -> None:
        barrier.wait()
        try:
            storage.write_new(raced, f"writer {n}".encode())
            wins.append(n)
        except FileExistsError:
            losses.append(n)
        except Exception as e:  # noqa: BLE001
            others.append(e)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert others == [] and len(wins) == 1 and len(losses) == 7
    assert storage.read_bytes(raced) == f"writer {wins[0]}".encode()


def test_write_if_swaps_only_at_the_etag_read_and_read_versioned_returns_it(az):
    storage, root = az
    path = f"{root}/obj"
    v1 = storage.write_if(path, b"one", None)
    assert v1 and storage.read_versioned(path) == (b"one", v1)
    with pytest.raises(VersionConflictError, match="obj"):
        storage.write_if(path, b"two", None)              # present: a create loses
    v2 = storage.write_if(path, b"two", v1)
    assert v2 != v1 and storage.read_versioned(path) == (b"two", v2)
    with pytest.raises(VersionConflictError, match="obj"):
        storage.write_if(path, b"three", v1)              # a stale ETag loses
    with pytest.raises(VersionConflictError):
        storage.write_if(f"{root}/missing", b"x", v2)     # If-Match on a missing blob loses (412 on Azure)
    with pytest.raises(FileNotFoundError, match="missing"):
        storage.read_versioned(f"{root}/missing")
    assert storage.read_bytes(path) == b"two"


def test_listing_stat_exists_and_deletes(az):
    storage, root = az
    for rel in ("a.txt", "city=san francisco/x.parquet", "city=san francisco/.f1_20250101.log.1_0-1-0",
                "city=paris/deep/y", ".hoodie/hoodie.properties"):
        storage.write_new(f"{root}/{rel}", rel.encode())
    assert [(f.name, f.is_dir) for f in storage.list_dir(root)] == [
        (".hoodie", True), ("a.txt", False), ("city=paris", True), ("city=san francisco", True)]
    assert storage.list_names(root) == ["a.txt"]
    assert storage.list_names(f"{root}/city=san francisco") == [".f1_20250101.log.1_0-1-0", "x.parquet"]
    assert storage.list_dir(f"{root}/city") == []                      # a partial name is no folder
    info = storage.stat(f"{root}/city=san francisco/x.parquet")
    assert (info.name, info.size, info.is_dir) == ("x.parquet", len("city=san francisco/x.parquet"), False)
    assert info.mtime_ms > 1_600_000_000_000
    assert storage.stat(f"{root}/city=paris").is_dir and storage.exists(f"{root}/city=paris/deep")
    assert not storage.exists(f"{root}/nothing") and not storage.exists(f"{root}/city=pa")
    with pytest.raises(FileNotFoundError, match="nothing"):
        storage.stat(f"{root}/nothing")
    assert storage.delete(f"{root}/a.txt") is True
    assert storage.delete(f"{root}/a.txt") is False                    # Azure answers 404: no error
    storage.delete_tree(f"{root}/city=paris")
    storage.delete_tree(f"{root}/city=paris")                          # absent is fine
    assert [f.name for f in storage.list_dir(root)] == [".hoodie", "city=san francisco"]
    storage.write_replace(f"{root}/.hoodie/hoodie.properties", b"v=2\n")
    assert storage.read_bytes(f"{root}/.hoodie/hoodie.properties") == b"v=2\n"


def test_an_object_larger_than_one_whole_read_is_read_by_ranges_and_pyarrow_reads_it(az):
    storage, root = az
    rows = 1200
    table = pa.table({"k": list(range(rows)), "blob": [os.urandom(8 << 10) for _ in range(rows)]})  # ~9.4 MiB
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=300, compression="none")
    data = sink.getvalue().to_pybytes()
    assert len(data) > WHOLE_READ_MAX
    path = f"{root}/p/big.parquet"
    storage.write_new(path, data)
    with storage.open_read(path) as f:
        assert not isinstance(f, io.BytesIO)                           # ranged, not one whole GET
        f.seek(-4, os.SEEK_END)
        assert f.read(4) == b"PAR1"
        f.seek(0)
        assert f.read(4) == b"PAR1"
        middle = len(data) - WHOLE_READ_MAX - 100                      # spans the ranged part and the tail
        f.seek(middle)
        assert f.read(300) == data[middle:middle + 300]
        parquet = pq.ParquetFile(f)
        assert parquet.metadata.num_row_groups == 4
        assert parquet.read_row_group(0).column("k").to_pylist() == list(range(300))
    with storage.open_read(path) as f:
        assert pq.read_table(f).equals(table)
    storage.write_new(f"{root}/p/empty", b"")
    with storage.open_read(f"{root}/p/empty") as f:
        assert f.read() == b""


def test_abfs_and_abfss_urls_reach_the_same_blobs(az, azure_endpoint):
    storage, root = az
    key = root.split("://", 1)[1].split("/", 1)[1]
    storage.write_new(f"{root}/f", b"same")
    for scheme in ("abfs", "abfss"):
        url = azure_endpoint.url(key, "f", scheme=scheme)
        assert url.startswith(f"{scheme}://{azure_endpoint.container}@{ACCOUNT}.dfs.core.windows.net/")
        assert storage.read_bytes(url) == b"same"
    assert storage.read_bytes(f"abfs://{azure_endpoint.container}/{key}/f") == b"same"
    # the account given under object_store's long name too: the URL's host does not add a second one
    opts = azure_endpoint.options()
    long_names = {"azure_storage_endpoint": opts["endpoint"], "azure_storage_account_name": opts["account_name"],
                  "azure_storage_account_key": opts["account_key"], "allow_http": "true"}
    assert storage_for(azure_endpoint.url(key, "f", scheme="abfss"), long_names).read_bytes(
        azure_endpoint.url(key, "f", scheme="abfss")) == b"same"


def test_errors_are_one_line_naming_the_url_and_never_the_key(azure_endpoint):
    root = azure_endpoint.url("unit", uuid.uuid4().hex)
    wrong = dict(azure_endpoint.options(), account_key="d3Jvbmcga2V5IGZvciB0aGUgdGVzdA==",
                 **{"tablesvc.storage.max.retries": "0"})
    storage = storage_for(root, wrong)
    with pytest.raises(StorageError) as err:
        storage.write_new(f"{root}/f", b"x")                           # Azurite answers 403: bad signature
    message = str(err.value)
    assert len(message.splitlines()) == 1 and f"{root}/f" in message and "PermissionDenied" in message, message
    assert wrong["account_key"] not in message and ACCOUNT_KEY not in message
    with pytest.raises(FileNotFoundError, match="missing"):
        storage_for(root, azure_endpoint.options()).read_bytes(f"{root}/missing")


@pytest.mark.parametrize("name", ["v8_trips_8i3u1d", "v6_complexkeygen_hivestyle"])
def test_hudi_rs_reads_a_table_copied_to_azure_as_it_reads_it_locally(azure_endpoint, name):
    _, root = copy_table_to_azure(azure_endpoint, name)

    def rows(table):
        assert table is not None and table.num_rows > 0
        return sorted(table.to_pylist(), key=lambda r: (r["_hoodie_record_key"], r["_hoodie_partition_path"]))

    expected = rows(read_table(TABLES_DIR / name))
    assert rows(read_table(root, storage_options=azure_endpoint.options())) == expected
    abfss = root.replace(f"az://{azure_endpoint.container}",
                         f"abfss://{azure_endpoint.container}@{ACCOUNT}.dfs.core.windows.net", 1)
    assert rows(read_table(abfss, storage_options=azure_endpoint.options())) == expected


# -- Hudi's storage-based table lock on Azure -------------------------------------------------------------
def _body(storage, base) -> dict:
    return json.loads(storage.read_bytes(lock_object_path(base)))


def test_storage_lock_acquire_refuses_a_second_owner_renews_and_releases(az):
    storage, base = az
    clock = ManualClock()
    lock = StorageLock(storage, base, clock, validity_ms=10_000, renew_ms=0, owner="me")
    with lock:
        assert _body(storage, base) == {"expired": False, "validUntil": clock.now_ms() + 10_000, "owner": "me"}
        other = StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="other")
        with pytest.raises(LockHeldError, match="table_lock.json is held by me") as err:
            other.acquire()
        assert err.value.exit_code == 3
        clock.advance(8_000)                           # near the end of the validity: renewed, still ours
        assert lock.renew()
        assert _body(storage, base)["validUntil"] == clock.now_ms() + 10_000
        clock.advance(7_000)                           # past the first validity, inside the renewed one's fence
        assert not other.try_acquire()
        lock.ensure_held()
    assert _body(storage, base)["expired"] is True and not lock.held
    with StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="other"):   # taken over with If-Match
        assert _body(storage, base)["owner"] == "other"


def test_a_dead_holders_lock_is_taken_over_after_validity_plus_the_drift_buffer(az):
    storage, base = az
    clock = ManualClock()
    dead = StorageLock(storage, base, clock, validity_ms=10_000, renew_ms=0, owner="dead")
    assert dead.try_acquire()                          # never released
    taker = StorageLock(storage, base, clock, wait_ms=0, renew_ms=0, owner="taker")
    clock.set(clock.now_ms() + 10_000 + CLOCK_DRIFT_BUFFER_MS)
    assert not taker.try_acquire()
    clock.advance(1)
    assert taker.try_acquire()
    assert not dead.renew() and dead.lost              # its If-Match on the old ETag lost
    dead.release()                                     # leaves the taker's blob alone
    assert _body(storage, base)["owner"] == "taker" and _body(storage, base)["expired"] is False
    taker.release()


def test_threads_hold_the_lock_one_at_a_time_with_the_renewal_thread_running(az):
    storage, base = az
    inside, log, errors = [0], [], []
    guard = threading.Lock()

    def worker(n: int) -> None:
        try:
            for _ in range(2):
                with StorageLock(storage, base, wait_ms=60_000, validity_ms=10_000, renew_ms=100, owner=f"t{n}"):
                    with guard:
                        inside[0] += 1
                        log.append(inside[0])
                    threading.Event().wait(0.02)
                    with guard:
                        inside[0] -= 1
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and log == [1] * 10
    assert _body(storage, base)["expired"] is True


def test_table_lock_on_azure_is_the_storage_lock(azure_endpoint):
    from tablesvc.api import Table

    storage, root = copy_table_to_azure(azure_endpoint, "v6_complexkeygen_hivestyle")
    before = sorted(storage.list_names(f"{root}/.hoodie"))
    for url in (root, root.replace("az://", "abfs://", 1)):
        lock = Table.open(url, storage=storage).lock(wait_ms=0)
        assert isinstance(lock, StorageLock) and lock.path == f"{url}/.hoodie/.locks/table_lock.json"
        with lock:
            with pytest.raises(LockHeldError):
                Table.open(url, storage=storage).lock(wait_ms=0).acquire()
        assert json.loads(storage.read_bytes(lock.path))["expired"] is True
    assert sorted(storage.list_names(f"{root}/.hoodie")) == before
