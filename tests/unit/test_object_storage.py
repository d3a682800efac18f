"""The storage contract, run the same on local files and on S3 (``ObjectStorage`` against the moto
server of tests/s3_server.py), plus what only the object store has: a retried create recognised by
its writer token, keys stored as written, errors as one line, options and credentials, pickling,
the fork guard, and hudi-rs reading a fixture table copied to the bucket."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys
import threading
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from s3_server import copy_table_to_s3

from fixture_tables import TABLES_DIR
from oracles.hudi_rs import read_table
from tablesvc.errors import InvalidInputError, StorageError
from tablesvc.storage import LocalStorage, storage_for
from tablesvc.storage.object_store import MAX_RETRIES_KEY, RETRY_TIMEOUT_KEY, ObjectStorage, normalize_options


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def where(request, tmp_path):
    """(storage, root): a fresh empty folder on local files, or a fresh key prefix in the bucket."""
    if request.param == "local":
        return LocalStorage(), str(tmp_path / "root")
    server = request.getfixturevalue("s3_endpoint")
    root = server.url("contract", uuid.uuid4().hex)
    storage = storage_for(root, server.options())
    assert isinstance(storage, ObjectStorage)
    return storage, root


def test_create_read_stat_exists(where):
    storage, root = where
    path = f"{root}/p=a b/file 1.parquet"
    storage.makedirs(f"{root}/p=a b")
    storage.write_new(path, b"hello world")
    assert storage.read_bytes(path) == b"hello world"
    info = storage.stat(path)
    assert (info.name, info.path, info.size, info.is_dir) == ("file 1.parquet", path, 11, False)
    assert info.mtime_ms > 1_600_000_000_000
    assert storage.exists(path) and storage.exists(f"{root}/p=a b") and storage.stat(f"{root}/p=a b").is_dir
    assert not storage.exists(f"{root}/p=a b/other") and not storage.exists(f"{root}/p=a")
    with pytest.raises(FileExistsError, match="file 1.parquet"):
        storage.write_new(path, b"other")
    assert storage.read_bytes(path) == b"hello world"
    storage.write_new(f"{root}/.hoodie/001.commit.requested", b"")  # empty files are created exclusively too
    assert storage.read_bytes(f"{root}/.hoodie/001.commit.requested") == b""
    with pytest.raises(FileExistsError):
        storage.write_new(f"{root}/.hoodie/001.commit.requested", b"")


def test_missing_files(where):
    storage, root = where
    for call in (storage.read_bytes, storage.stat, storage.open_read):
        with pytest.raises(FileNotFoundError, match="missing.log"):
            call(f"{root}/x/missing.log")
    assert storage.list_dir(f"{root}/x") == [] and storage.list_names(f"{root}/x") == []
    assert storage.delete(f"{root}/x/missing.log") is False
    storage.delete_tree(f"{root}/x")  # absent is fine


def test_create_race_has_exactly_one_winner(where):
    storage, root = where
    path = f"{root}/.hoodie/20250101000000000.deltacommit.inflight"
    wins, losses, others = [], [], []
    barrier = threading.Barrier(12)

    def create(i: int) -> None:
        barrier.wait()
        try:
            storage.write_new(path, f"writer {i}".encode())
            wins.append(i)
        except FileExistsError:
            losses.append(i)
        except Exception as e:  # noqa: BLE001 (reported below)
            others.append(repr(e))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert others == [] and len(wins) == 1 and len(losses) == 11
    assert storage.read_bytes(path) == f"writer {wins[0]}".encode()


def test_listing_nested_folders_and_names(where):
    storage, root = where
    for rel in ("a.txt", "b=1/c d/x.parquet", "b=1/y.log.1_0-1-0", "b=2/z", ".hoodie/hoodie.properties"):
        storage.write_new(f"{root}/{rel}", rel.encode())
    listed = storage.list_dir(root)
    assert [(f.name, f.is_dir) for f in listed] == [(".hoodie", True), ("a.txt", False), ("b=1", True),
                                                    ("b=2", True)]
    assert [f.path for f in listed] == [f"{root}/{n}" for n in (".hoodie", "a.txt", "b=1", "b=2")]
    assert listed[1].size == len(b"a.txt")
    assert storage.list_names(root) == ["a.txt"]
    assert [(f.name, f.is_dir) for f in storage.list_dir(f"{root}/b=1")] == [("c d", True),
                                                                            ("y.log.1_0-1-0", False)]
    assert storage.list_names(f"{root}/b=1/c d") == ["x.parquet"]
    assert storage.list_dir(f"{root}/b") == []  # a partial segment is no folder
    storage.delete_tree(f"{root}/b=1")
    assert [f.name for f in storage.list_dir(root)] == [".hoodie", "a.txt", "b=2"]
    assert storage.delete(f"{root}/a.txt") is True and storage.delete(f"{root}/a.txt") is False
    assert storage.list_names(root) == []


def test_write_replace_and_write_new_from(where):
    storage, root = where
    path = f"{root}/.hoodie/hoodie.properties"
    storage.write_replace(path, b"v=1\n")
    storage.write_replace(path, b"v=2\n")
    assert storage.read_bytes(path) == b"v=2\n"
    big = os.urandom(3 << 20)
    assert storage.write_new_from(f"{root}/big.bin", lambda f: (f.write(big[:1000]), f.write(big[1000:]))) == len(big)
    assert storage.read_bytes(f"{root}/big.bin") == big
    with pytest.raises(FileExistsError):
        storage.write_new_from(f"{root}/big.bin", lambda f: f.write(b"x"))

    def fails(f):
        f.write(b"partial")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        storage.write_new_from(f"{root}/never.bin", fails)
    assert not storage.exists(f"{root}/never.bin")
    assert storage.discard_partial(root, ["never.bin"]) == []
    assert sorted(storage.list_names(root)) == ["big.bin"]


def test_open_read_is_seekable_and_pyarrow_reads_it(where):
    storage, root = where
    table = pa.table({"k": list(range(5000)), "v": [f"row {i}" for i in range(5000)]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=1000)
    storage.write_new(f"{root}/p/f.parquet", sink.getvalue().to_pybytes())
    with storage.open_read(f"{root}/p/f.parquet") as f:
        f.seek(-4, os.SEEK_END)
        assert f.read(4) == b"PAR1"
        f.seek(0)
        assert f.read(4) == b"PAR1"
        parquet = pq.ParquetFile(f)
        assert parquet.metadata.num_row_groups == 5
        assert parquet.read_row_group(3).column("k").to_pylist() == list(range(3000, 4000))
    with storage.open_read(f"{root}/p/f.parquet") as f:
        assert pq.read_table(f).equals(table)


# -- what only the object store has --------------------------------------------------------------

@pytest.mark.s3
def test_keys_are_stored_as_written(s3_endpoint):
    import boto3

    root = s3_endpoint.url("keys", uuid.uuid4().hex)
    storage_for(root, s3_endpoint.options()).write_new(f"{root}/city=san francisco/f 1.parquet", b"x")
    s3 = boto3.client("s3", endpoint_url=s3_endpoint.endpoint, **_boto_credentials())
    listed = s3.list_objects_v2(Bucket=s3_endpoint.bucket, Prefix=root.split("/", 3)[3])
    assert [o["Key"] for o in listed["Contents"]] == [f"{root.split('/', 3)[3]}/city=san francisco/f 1.parquet"]


@pytest.mark.s3
def test_retried_create_that_succeeded_is_recognised(s3_endpoint, monkeypatch):
    """A conditional PUT that succeeded but whose answer was lost is retried and gets 412: the
    object carries this write's token, so the create counts as done; another writer's token does not."""
    import obstore
    from obstore.store import S3Store

    import tablesvc.storage.object_store as module

    root = s3_endpoint.url("retry", uuid.uuid4().hex)
    key = root.split("/", 3)[3]
    raw = S3Store(s3_endpoint.bucket, config={"endpoint": s3_endpoint.endpoint, "region": "us-east-1",
                                             "access_key_id": "testing-key", "secret_access_key": "testing-secret"},
                  client_options={"allow_http": True})
    token = uuid.UUID(int=7)
    obstore.put(raw, f"{key}/mine", b"", mode="create", attributes={module.WRITER_ATTRIBUTE: token.hex})
    obstore.put(raw, f"{key}/theirs", b"", mode="create", attributes={module.WRITER_ATTRIBUTE: uuid.uuid4().hex})
    monkeypatch.setattr(module.uuid, "uuid4", lambda: token)
    storage = storage_for(root, s3_endpoint.options())
    storage.write_new(f"{root}/mine", b"")  # our own earlier success: no error
    with pytest.raises(FileExistsError, match="theirs"):
        storage.write_new(f"{root}/theirs", b"")


def test_an_already_exists_answer_with_no_object_there_is_asked_again(s3_endpoint, monkeypatch):
    """S3 answers 409 ConditionalRequestConflict to a conditional create while another conditional
    write of the key is in flight, which object_store reports as "already exists".  With no object
    there the create is asked again and succeeds; with another writer's object it is FileExistsError."""
    import obstore
    from obstore import exceptions as ox

    import tablesvc.storage.object_store as module

    monkeypatch.setattr(module, "_CREATE_CONFLICT_BACKOFF_S", 0.01)
    real_put = obstore.put
    conflicts = {"left": 2}

    def put_answering_409_twice(*args, **kwargs):
        if conflicts["left"]:
            conflicts["left"] -= 1
            raise ox.AlreadyExistsError("Object at location x already exists: 409 ConditionalRequestConflict")
        return real_put(*args, **kwargs)

    monkeypatch.setattr(obstore, "put", put_answering_409_twice)
    root = s3_endpoint.url("conflict409", uuid.uuid4().hex)
    storage = storage_for(root, s3_endpoint.options())
    storage.write_new(f"{root}/instant.requested", b"plan")
    assert conflicts["left"] == 0 and storage.read_bytes(f"{root}/instant.requested") == b"plan"
    conflicts["left"] = 1
    with pytest.raises(FileExistsError, match="instant.requested"):   # now an object is there: lost
        storage.write_new(f"{root}/instant.requested", b"other")
    assert storage.read_bytes(f"{root}/instant.requested") == b"plan"
    conflicts["left"] = module._CREATE_ATTEMPTS      # conflicts all the way, never an object: unknown, not lost
    with pytest.raises(StorageError, match="outcome unknown"):
        storage.write_new(f"{root}/other.requested", b"x")
    assert not storage.exists(f"{root}/other.requested")


def test_the_task_form_carries_the_options_credentials_included(s3_endpoint):
    """What Spark tasks get (``for_tasks``) reaches the endpoint in a process without ``AWS_*``."""
    root = s3_endpoint.url("tasks", uuid.uuid4().hex)
    storage = storage_for(root, s3_endpoint.options())
    storage.write_new(f"{root}/f", b"payload")
    blob = pickle.dumps(storage.for_tasks())
    assert b"testing-secret" in blob
    assert pickle.loads(blob).for_tasks is not None and b"testing-secret" in pickle.dumps(pickle.loads(blob))
    code = ("import pickle, sys; s = pickle.loads(sys.stdin.buffer.read()); "
            f"sys.stdout.buffer.write(s.read_bytes({root + '/f'!r}))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout == b"payload"


@pytest.mark.s3
def test_errors_are_one_line_naming_call_and_path():
    with socket_closed_port() as port:
        storage = ObjectStorage({"endpoint": f"http://127.0.0.1:{port}", "allow_http": "true", "region": "us-east-1",
                                 "access_key_id": "k", "secret_access_key": "s", RETRY_TIMEOUT_KEY: "200",
                                 MAX_RETRIES_KEY: "0"})
        for call, name in ((lambda p: storage.write_new(p, b"x"), "create"), (storage.read_bytes, "read"),
                           (storage.list_dir, "list")):
            with pytest.raises(StorageError) as caught:
                call("s3://bkt/t/.hoodie/a.commit")
            message = str(caught.value)
            assert "\n" not in message and message.startswith(f"{name} s3://bkt/t/.hoodie/a.commit")


class socket_closed_port:
    """A loopback port nothing listens on."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def __exit__(self, *exc) -> None:
        return None


def test_options_accept_object_store_and_hadoop_s3a_names():
    assert normalize_options({"spark.hadoop.fs.s3a.endpoint": "127.0.0.1:9000",
                              "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.path.style.access": "true",
                              "fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK",
                              "fs.s3a.endpoint.region": "eu-west-1", "hoodie.table.name": "t"}) == {
        "endpoint": "http://127.0.0.1:9000", "allow_http": "true", "virtual_hosted_style_request": "false",
        "access_key_id": "AK", "secret_access_key": "SK", "region": "eu-west-1"}
    assert normalize_options({"AWS_ENDPOINT_URL": "http://h:1", "aws_allow_http": "true", "aws_region": "r",
                              "aws_secret_access_key": "SK"}) == {
        "endpoint": "http://h:1", "allow_http": "true", "region": "r", "secret_access_key": "SK"}


@pytest.mark.s3
def test_path_style_false_with_an_endpoint_writes_into_the_named_bucket(s3_endpoint):
    """S3A's ``path.style.access=false`` is not mapped to object_store's virtual-hosted mode, which would
    take the endpoint as the bucket's own URL and drop the bucket name (the object would land elsewhere)."""
    import boto3

    assert "virtual_hosted_style_request" not in normalize_options({"fs.s3a.path.style.access": "false"})
    s3 = boto3.client("s3", endpoint_url=s3_endpoint.endpoint, **_boto_credentials())
    other = "other-" + uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=other)
    options = {"fs.s3a.endpoint": s3_endpoint.endpoint, "fs.s3a.access.key": "testing-key",
               "fs.s3a.secret.key": "testing-secret", "fs.s3a.endpoint.region": "us-east-1",
               "fs.s3a.path.style.access": "false"}
    key = f"{other}/{uuid.uuid4().hex}.txt"
    ObjectStorage(options).write_new(f"s3://{s3_endpoint.bucket}/{key}", b"hello")
    assert s3.get_object(Bucket=s3_endpoint.bucket, Key=key)["Body"].read() == b"hello"
    assert "Contents" not in s3.list_objects_v2(Bucket=other)


@pytest.mark.s3
def test_directory_markers_are_not_listed_as_files(s3_endpoint):
    """``dir/`` marker objects (S3A's mkdirs) come back from object_store as ``dir``: neither the listed
    folder's own marker nor a sub-folder's is a file."""
    import boto3

    root = s3_endpoint.url("markers", uuid.uuid4().hex)
    prefix = root.split("/", 3)[3]
    s3 = boto3.client("s3", endpoint_url=s3_endpoint.endpoint, **_boto_credentials())
    for k in (".hoodie/", ".hoodie/archived/", ".hoodie/hoodie.properties", "p=1/", "p=1/f 1.parquet"):
        s3.put_object(Bucket=s3_endpoint.bucket, Key=f"{prefix}/{k}", Body=b"" if k.endswith("/") else b"x")
    storage = storage_for(root, s3_endpoint.options())
    assert [(f.name, f.is_dir) for f in storage.list_dir(f"{root}/.hoodie")] == [
        ("archived", True), ("hoodie.properties", False)]
    assert storage.list_names(f"{root}/.hoodie") == ["hoodie.properties"]
    assert storage.list_dir(f"{root}/.hoodie/archived") == []
    assert storage.list_names(f"{root}/p=1") == ["f 1.parquet"]
    assert [(f.name, f.is_dir) for f in storage.list_dir(root)] == [(".hoodie", True), ("p=1", True)]


def test_storage_for_schemes():
    for url in ("s3://b/t", "s3a://b/t", "gs://b/t", "az://c/t", "abfss://c@acct.dfs.core.windows.net/t"):
        assert isinstance(storage_for(url), ObjectStorage)
    assert isinstance(storage_for("file:///tmp/t"), LocalStorage)
    with pytest.raises(InvalidInputError, match="hdfs://nn/t: unsupported scheme 'hdfs'"):
        storage_for("hdfs://nn/t")


@pytest.mark.s3
def test_s3a_urls_and_hadoop_s3a_keys_reach_the_same_objects(s3_endpoint):
    root = s3_endpoint.url("s3a", uuid.uuid4().hex)
    storage_for(root, s3_endpoint.options()).write_new(f"{root}/f", b"via s3")
    s3a = "s3a://" + root.split("://", 1)[1]
    hadoop_names = {"spark.hadoop.fs.s3a.endpoint": f"127.0.0.1:{s3_endpoint.port}",
                    "spark.hadoop.fs.s3a.connection.ssl.enabled": "false", "fs.s3a.path.style.access": "true",
                    "fs.s3a.access.key": "testing-key", "fs.s3a.secret.key": "testing-secret",
                    "fs.s3a.endpoint.region": "us-east-1"}
    assert storage_for(s3a, hadoop_names).read_bytes(f"{s3a}/f") == b"via s3"


@pytest.mark.s3
def test_pickle_carries_no_credentials_and_a_new_process_uses_its_environment(s3_endpoint):
    root = s3_endpoint.url("pickle", uuid.uuid4().hex)
    storage = storage_for(root, s3_endpoint.options())
    storage.write_new(f"{root}/f", b"payload")
    blob = pickle.dumps(storage)
    assert b"testing-secret" not in blob and b"testing-key" not in blob
    code = ("import pickle, sys; s = pickle.loads(sys.stdin.buffer.read()); "
            f"sys.stdout.buffer.write(s.read_bytes({root + '/f'!r}))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | s3_endpoint.env()
    done = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout == b"payload"


def _read_after_fork(storage, path, queue):
    import signal

    signal.alarm(20)  # a hang (what obstore does after fork) ends the child instead of the test
    try:
        storage.read_bytes(path)
        queue.put("read")
    except StorageError as e:
        queue.put(f"StorageError: {e}")


@pytest.mark.s3
def test_forked_child_gets_an_error_not_a_hang(s3_endpoint):
    root = s3_endpoint.url("fork", uuid.uuid4().hex)
    storage = storage_for(root, s3_endpoint.options())
    storage.write_new(f"{root}/f", b"x")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_read_after_fork, args=(storage, f"{root}/f", queue))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert "forked after its parent used the object store" in queue.get(timeout=5)


def _boto_credentials() -> dict[str, str]:
    return {"region_name": "us-east-1", "aws_access_key_id": "testing-key", "aws_secret_access_key": "testing-secret"}


@pytest.mark.s3
@pytest.mark.parametrize("name", ["v8_trips_8i3u1d", "v6_complexkeygen_hivestyle"])
def test_hudi_rs_reads_a_table_copied_to_s3_as_it_reads_it_locally(s3_endpoint, name):
    local = TABLES_DIR / name
    _, root = copy_table_to_s3(s3_endpoint, name)
    expected = read_table(local)
    assert expected is not None and expected.num_rows > 0
    got = read_table(root, storage_options=s3_endpoint.options())
    assert got is not None

    def rows(table):
        return sorted(table.to_pylist(), key=lambda r: (r["_hoodie_record_key"], r["_hoodie_partition_path"]))

    assert rows(got) == rows(expected)


@pytest.mark.s3
def test_a_table_on_s3_is_read_and_locked_with_the_storage_lock(s3_endpoint):
    from tablesvc.api import Table
    from timeline.storage_lock import StorageLock

    local = TABLES_DIR / "v6_complexkeygen_hivestyle"
    storage, root = copy_table_to_s3(s3_endpoint, local.name)
    before = sorted(storage.list_names(f"{root}/.hoodie"))
    table = Table.open(root, storage=storage)
    local_table = Table.open(str(local))
    assert table.timeline().instants == local_table.timeline().instants and table.timeline().instants
    with table.lock() as lock:   # Hudi's storage-based lock (tests/unit/test_storage_lock.py), not the file lock
        assert isinstance(lock, StorageLock)
    assert sorted(storage.list_names(f"{root}/.hoodie")) == before


def test_a_long_object_store_error_keeps_its_reason_on_one_line():
    """obstore repeats the endpoint URL and may add an XML body: the line drops the URL and keeps
    the tail, where the reason is."""
    from tablesvc.storage.object_store import _mapped

    key = "tables/" + "k" * 300 + "/.hoodie/timeline/20261127000000000.clean.requested"
    message = (f"Generic S3 error: Error performing PUT http://127.0.0.1:9/bucket/{key} in 1.5s, after 1 retries, "
               "max_retries: 1, retry_timeout: 1s\n - Server returned non-2xx status code: 503 Service Unavailable")
    error = _mapped(RuntimeError(message), "create", f"s3://bucket/{key}")
    text = str(error)
    assert "\n" not in text and "http://127.0.0.1" not in text
    assert text.startswith(f"create s3://bucket/{key}: RuntimeError: Generic S3 error")
    assert text.endswith("503 Service Unavailable")


def test_an_unreachable_endpoint_is_one_short_line_with_the_os_reason():
    """obstore's own error for a refused connection ends in dozens of lines of Rust debug structure;
    the line keeps obstore's summary and the innermost OS message, nothing of the dump."""
    import socket

    with socket.socket() as s:              # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    storage = storage_for("s3://bucket/t", {"endpoint": f"http://127.0.0.1:{port}", "access_key_id": "a",
                                            "secret_access_key": "b", "region": "us-east-1", "allow_http": "true",
                                            "tablesvc.storage.max.retries": "0"})
    with pytest.raises(StorageError) as err:
        storage.read_bytes("s3://bucket/t/.hoodie/hoodie.properties")
    text = str(err.value)
    assert text.startswith("read s3://bucket/t/.hoodie/hoodie.properties: ") and "\n" not in text, text
    assert "Debug source" not in text and "{" not in text and len(text) < 300, text
    assert text.endswith("(Connection refused)"), text
