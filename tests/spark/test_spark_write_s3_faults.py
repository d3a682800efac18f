"""Spark writes (``tablesvc write``, the MOR write path) and a log compaction on a table in S3 (moto,
fixture ``s3_endpoint``) under faults the endpoint injects (tests/s3_server.py): 503 SlowDown storms
on the data files' PUTs, which the Spark tasks make, and the endpoint process gone mid-write.

Every case runs the CLI in this process (``main``, the endpoint and keys from ``--conf`` only) and
reads the table back with hudi-rs at the endpoint, compared with the input rows merged by key here.
What each shows: exit 0 and the expected rows when obstore's retries ride the storm out; otherwise
exit 1 with exactly one stderr line naming the table's URL and no traceback, hudi-rs still reading
the rows from before (nothing half-visible), the timeline holding the failed instant at most
inflight, and after ``tablesvc rollback --wait`` (once the heartbeat expired) a re-run of the same
command giving the expected rows, with no data file left that carries a failed instant.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import read_table
from s3_server import S3Server

from tablesvc.api import Table, TableSpec
from tablesvc.cli.main import main

pytestmark = [pytest.mark.spark, pytest.mark.s3]

# few, short retries: a storm longer than them fails the task in about a second
SHORT_RETRIES = {"tablesvc.storage.max.retries": "1", "tablesvc.storage.retry.timeout.ms": "1000"}
STORM = 10 ** 6         # a fault count no command gets through
LOCK_OBJECT = ".hoodie/.locks/"     # storms spare it: a failed release would hold the re-run up
# judged dead 2 s after its last beat: the rollback after a failed write waits seconds, not minutes
HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": "1000", "hoodie.client.heartbeat.tolerable.misses": "2"}
SERVICES_OFF = {"hoodie.clean.automatic": "false"}
PARTITIONS = ("a", "b")


@pytest.fixture(autouse=True)
def no_faults_left(s3_endpoint, monkeypatch):
    import os

    for name in list(os.environ):      # only the --conf keys reach the storage, driver and tasks alike
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    s3_endpoint.clear_faults()
    yield
    s3_endpoint.clear_faults()


def heal_but_for_the_failed_instant(server: S3Server, spark, err: str) -> str:
    """End the storm for everything but the failed instant's data files, which stay refused; the
    failed instant's time (the error line names a file of it).  The driver gives the job up at the
    first failed task, but another task's Python worker may still be retrying its PUT, even after
    Spark counts the stage ended: healed entirely, the endpoint would take that PUT and a file of
    the failed instant would land after the command, and the re-run's rollback, had left.  The
    CLI's own Spark ends with its process; this session lives on."""
    import re
    import time

    [failed] = set(re.findall(r"(?<!\d)(\d{17})(?!\d)", err))
    tracker, deadline = spark.sparkContext.statusTracker(), time.monotonic() + 30
    while tracker.getActiveStageIds():
        assert time.monotonic() < deadline, "the failed job's tasks never ended"
        time.sleep(0.1)
    server.clear_faults()
    server.inject("slowdown", STORM, method="PUT", key=f"{failed}.", except_key="/.hoodie/")
    return failed


def conf(server: S3Server, **override: str) -> list[str]:
    return server.s3a_conf(**(HEARTBEAT | SERVICES_OFF | override))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def failed_with_one_line(rc: int, err: str, root: str, undo_failed: bool = False) -> str:
    """Exit 1, one stderr line: the error, naming a URL under the table, no traceback.  When the
    store still fails as the run undoes itself (``undo_failed``), one warning line before it says
    the instant is left pending for ``tablesvc rollback``; the error is still the run's own."""
    if undo_failed:
        [warning] = [line for line in err.splitlines() if line.startswith("tablesvc: warning: ")]
        assert "left pending" in warning and "tablesvc rollback" in warning, warning
        err = "\n".join(line for line in err.splitlines() if line != warning)
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1, (rc, err)
    assert lines[0].startswith("tablesvc: error: ") and root in lines[0], lines[0]
    assert "Traceback" not in err
    return lines[0]


def input_file(tmp_path: Path, keys, ts: int) -> str:
    path = tmp_path / f"in-{uuid.uuid4().hex[:8]}.parquet"
    pq.write_table(pa.table({"uuid": [f"k{k:03d}" for k in keys], "ts": pa.array([ts] * len(keys), pa.int64()),
                             "city": [PARTITIONS[k % 2] for k in keys]}), path)
    return str(path)


def merged(model: dict[str, int], keys, ts: int) -> dict[str, int]:
    return model | {f"k{k:03d}": ts for k in keys}


def hudi_rows(server: S3Server, root: str) -> dict[str, tuple[int, str]]:
    """hudi-rs's snapshot at the endpoint: uuid -> (ts, city); the record key and (hive-style)
    partition path agree with the data columns."""
    table = read_table(root, storage_options=server.options())
    rows = table.to_pylist() if table is not None else []
    got = {r["uuid"]: (r["ts"], r["city"]) for r in rows}
    assert len(got) == len(rows), "a key read twice"
    assert all(r["_hoodie_record_key"] == r["uuid"] and r["_hoodie_partition_path"] == f"city={r['city']}"
               for r in rows)
    return got


def expected(model: dict[str, int]) -> dict[str, tuple[int, str]]:
    return {k: (ts, PARTITIONS[int(k[1:]) % 2]) for k, ts in model.items()}


def new_table(server: S3Server, spark, tmp_path: Path, capsys) -> tuple[str, dict[str, int]]:
    """A v8 table (two partitions, two buckets each) at the endpoint with one insert of 40 keys."""
    root = server.url("write-faults", uuid.uuid4().hex[:8], "t")
    Table.create(root, TableSpec("t", ("uuid",), "ts", ("city",), table_version=8, num_buckets=2),
                 options=server.options())
    rc, out, err = run(capsys, "write", root, "--input", input_file(tmp_path, range(40), 1), "--quiet",
                       *conf(server))
    assert rc == 0, err
    model = merged({}, range(40), 1)
    assert hudi_rows(server, root) == expected(model)
    return root, model


def object_keys(server: S3Server, root: str) -> list[str]:
    import boto3
    from s3_server import ACCESS_KEY, REGION, SECRET_KEY

    s3 = boto3.client("s3", endpoint_url=server.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                      aws_secret_access_key=SECRET_KEY)
    prefix = root.split("/", 3)[3] + "/"
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=server.bucket, Prefix=prefix)
    return sorted(o["Key"][len(prefix):] for page in pages for o in page.get("Contents", []))


def data_files(server: S3Server, root: str) -> list[str]:
    return [k for k in object_keys(server, root) if k.split("/")[0] in {f"city={p}" for p in PARTITIONS}
            and not k.endswith(".hoodie_partition_metadata")]


def data_file_key(root: str) -> str:
    """A fault key matching the data files under the table (``<root>/<partition>/...``) but no
    object under ``.hoodie/`` (markers, heartbeats, timeline, lock): with ``except_key``."""
    return "/" + root.split("/", 3)[3] + "/"


def instants(server: S3Server, root: str) -> tuple[set[str], set[str]]:
    """(completed, pending) instant times of the table's timeline."""
    timeline = Table.open(root, options=server.options()).timeline()
    return ({i.timestamp for i in timeline.instants if i.is_completed},
            {i.timestamp for i in timeline.instants if not i.is_completed})


def assert_no_stray_files(server: S3Server, root: str) -> None:
    """Every data file carries a completed instant (v8 names: base ``<id>_<token>_<T>.parquet``,
    log ``.<id>_<T>.log.<n>_<token>``) and nothing is pending."""
    completed, pending = instants(server, root)
    assert not pending, pending
    for key in data_files(server, root):
        name = key.rsplit("/", 1)[1]
        ts = name.rsplit("_", 1)[1].split(".")[0] if name.endswith(".parquet") else name.split("_")[1].split(".")[0]
        assert ts in completed, (key, completed)


def test_an_upsert_whose_data_file_puts_meet_a_storm_the_retries_ride_out_commits_every_row(
        s3_endpoint, spark, tmp_path, capsys):
    root, model = new_table(s3_endpoint, spark, tmp_path, capsys)
    keys = range(30, 60)        # 10 updates, 20 inserts, in all four file groups
    s3_endpoint.reset_counters()
    s3_endpoint.inject("slowdown", 3, method="PUT", key=data_file_key(root), except_key="/.hoodie/")
    rc, out, err = run(capsys, "write", root, "--input", input_file(tmp_path, keys, 2), *conf(s3_endpoint))
    assert rc == 0 and not err.strip(), err
    assert s3_endpoint.counters().faults_applied == {"slowdown": 3}
    assert hudi_rows(s3_endpoint, root) == expected(merged(model, keys, 2))
    assert_no_stray_files(s3_endpoint, root)


@pytest.mark.parametrize("deletes_too", [False, True], ids=["data-puts", "data-puts-and-deletes"])
def test_an_upsert_under_a_storm_past_the_retries_fails_with_one_line_and_recovers(
        s3_endpoint, spark, tmp_path, capsys, deletes_too):
    """The data files' PUTs from the second on answer 503 past the retries (one file lands).  The
    write aborts itself (its files, then the instant); with the DELETEs in the storm too the abort
    cannot, and the instant stays inflight with its files until ``rollback --wait`` undoes it."""
    root, model = new_table(s3_endpoint, spark, tmp_path, capsys)
    before_files = data_files(s3_endpoint, root)
    keys = range(30, 60)
    source = input_file(tmp_path, keys, 2)
    s3_endpoint.inject("slowdown", STORM, method="PUT", key=data_file_key(root), except_key="/.hoodie/", skip=1)
    if deletes_too:     # single DELETEs and batched ones (POST ?delete)
        for method in ("DELETE", "POST"):
            s3_endpoint.inject("slowdown", STORM, method=method, except_key=LOCK_OBJECT)
    rc, out, err = run(capsys, "write", root, "--input", source, *conf(s3_endpoint, **SHORT_RETRIES))
    # with the deletes failing too the undo fails: the error is still the write's own (a data
    # file's PUT), not the undo's delete
    error = failed_with_one_line(rc, err, root, undo_failed=deletes_too)
    assert "/.hoodie/" not in error.split(": ", 3)[2], error       # names a data file, not a timeline or marker file
    heal_but_for_the_failed_instant(s3_endpoint, spark, err)
    assert hudi_rows(s3_endpoint, root) == expected(model)       # nothing half-visible
    completed, pending = instants(s3_endpoint, root)
    assert len(completed) == 1 and len(pending) <= (1 if deletes_too else 0), (completed, pending)
    if deletes_too:   # its file that landed stays until the rollback
        assert len(data_files(s3_endpoint, root)) > len(before_files)

    rc, out, err = run(capsys, "rollback", root, "--wait", "--timeout", "30", *conf(s3_endpoint))
    assert rc == 0, (out, err)
    assert ("rolled back" in out) is deletes_too, out
    assert data_files(s3_endpoint, root) == before_files
    assert hudi_rows(s3_endpoint, root) == expected(model)
    rc, out, err = run(capsys, "write", root, "--input", source, *conf(s3_endpoint))
    assert rc == 0, err
    assert hudi_rows(s3_endpoint, root) == expected(merged(model, keys, 2))
    assert_no_stray_files(s3_endpoint, root)


def test_an_upsert_whose_tidying_after_the_commit_meets_a_storm_succeeds_with_warnings(
        s3_endpoint, spark, tmp_path, capsys):
    """Once the upsert completed, deleting its heartbeat and markers (batched deletes: POST) meets a
    storm past the retries: the write is on the table, so exit 0 with one warning per leftover,
    each naming its URL (exit 1 would send the user to write it again)."""
    root, model = new_table(s3_endpoint, spark, tmp_path, capsys)
    completed_before, _ = instants(s3_endpoint, root)
    keys = range(30, 60)
    s3_endpoint.reset_counters()
    s3_endpoint.inject("slowdown", STORM, method="POST")   # a write makes no POST before its commit
    rc, out, err = run(capsys, "write", root, "--input", input_file(tmp_path, keys, 2), "--quiet",
                       *conf(s3_endpoint, **SHORT_RETRIES))
    s3_endpoint.clear_faults()
    assert rc == 0, err
    assert s3_endpoint.counters().faults_applied.get("slowdown", 0) >= 2
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in err, err
    heartbeat, markers = sorted(lines)
    [ts] = instants(s3_endpoint, root)[0] - completed_before
    assert heartbeat.startswith(f"tablesvc: warning: delete {root}/.hoodie/.heartbeat/{ts}: "), heartbeat
    assert markers.startswith(f"tablesvc: warning: delete tree {root}/.hoodie/.temp/{ts}: "), markers
    assert hudi_rows(s3_endpoint, root) == expected(merged(model, keys, 2))
    assert_no_stray_files(s3_endpoint, root)


def replay(recording: Path, server: S3Server) -> int:
    """Send the requests a recording endpoint's moto served (moto's own recorder:
    ``MOTO_ENABLE_RECORDING``, one JSON line per request, bodies base64) to ``server``, in order:
    the objects as they stood when the recording endpoint went away, as S3's own survive an outage.
    moto checks no signature, so the recorded requests go as they were, to another port."""
    import base64
    import json
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    sent = 0
    for line in recording.read_text().splitlines():
        entry = json.loads(line)
        body = base64.b64decode(entry["body"]) if entry.get("body_encoded") else (entry.get("body") or "").encode()
        url = urlsplit(entry["url"])
        headers = {k: v for k, v in entry["headers"].items() if k.lower() not in ("host", "content-length")}
        # urllib's default for a body is a form type, which the server would parse the body away as
        headers.setdefault("Content-Type", "application/octet-stream")
        request = urllib.request.Request(server.endpoint + url.path + (f"?{url.query}" if url.query else ""),
                                         data=body or None, headers=headers, method=entry["method"])
        try:
            urllib.request.urlopen(request, timeout=10).read()
        except urllib.error.HTTPError:      # answered as the first time (a 412, a 404): state unchanged
            pass
        sent += 1
    return sent


def test_the_endpoint_gone_mid_write_fails_with_one_line_and_the_write_recovers_once_it_is_back(
        spark, tmp_path, capsys, monkeypatch):
    """An endpoint of its own (the session's must survive), with moto's recorder on: it ends at the
    upsert's second data-file PUT, one file of the write landed.  Its requests replayed into a new
    endpoint bring the objects back as they stood (the restart); then ``rollback --wait`` and the
    same upsert give the expected rows."""
    recording = tmp_path / "recording.jsonl"
    monkeypatch.setenv("MOTO_ENABLE_RECORDING", "true")
    monkeypatch.setenv("MOTO_RECORDER_FILEPATH", str(recording))
    gone = S3Server.start()
    monkeypatch.delenv("MOTO_ENABLE_RECORDING")
    back = None
    try:
        root, model = new_table(gone, spark, tmp_path, capsys)
        before_files = data_files(gone, root)
        keys = range(30, 60)
        source = input_file(tmp_path, keys, 2)
        gone.inject("exit", 1, method="PUT", key=data_file_key(root), except_key="/.hoodie/", skip=1)
        rc, out, err = run(capsys, "write", root, "--input", source, *conf(gone, **SHORT_RETRIES))
        failed_with_one_line(rc, err, root, undo_failed=True)    # the undo meets the endpoint gone too
        assert gone.process.wait(timeout=5) == 0             # it was the endpoint that went away

        back = S3Server.start()
        assert replay(recording, back) > 50
        assert hudi_rows(back, root) == expected(model)      # nothing half-visible
        completed, pending = instants(back, root)
        assert len(completed) == 1 and len(pending) == 1, (completed, pending)
        assert len(data_files(back, root)) == len(before_files) + 1     # the file that landed
        rc, out, err = run(capsys, "rollback", root, "--wait", "--timeout", "30", *conf(back))
        assert rc == 0 and f"rolled back {pending.pop()}" in out, (out, err)
        assert data_files(back, root) == before_files
        rc, out, err = run(capsys, "write", root, "--input", source, *conf(back))
        assert rc == 0, err
        assert hudi_rows(back, root) == expected(merged(model, keys, 2))
        assert_no_stray_files(back, root)
    finally:
        gone.stop()
        if back is not None:
            back.stop()


def test_a_log_compaction_under_a_storm_past_the_retries_fails_with_one_line_and_a_rerun_completes_it(
        s3_endpoint, spark, tmp_path, capsys):
    """Two upserts leave two log blocks in each file group; the log compaction's own log files
    (written by Spark tasks) meet the storm: one line, exit 1, the rows unchanged and no log
    compaction completed; the re-run compacts them, the rows still unchanged."""
    from timeline.instant import Action

    root, model = new_table(s3_endpoint, spark, tmp_path, capsys)
    for ts in (2, 3):
        rc, out, err = run(capsys, "write", root, "--input", input_file(tmp_path, range(40), ts), "--quiet",
                           *conf(s3_endpoint))
        assert rc == 0, err
        model = merged(model, range(40), ts)
    before = hudi_rows(s3_endpoint, root)
    assert before == expected(model)
    completed_before, _ = instants(s3_endpoint, root)

    def log_compactions():
        timeline = Table.open(root, options=s3_endpoint.options()).timeline()
        return [i for i in timeline.completed(Action.DELTA_COMMIT)
                if timeline.origin_action(i) is Action.LOG_COMPACTION]

    s3_endpoint.inject("slowdown", STORM, method="PUT", key=data_file_key(root), except_key="/.hoodie/")
    rc, out, err = run(capsys, "logcompaction", "run", root, *conf(s3_endpoint, **SHORT_RETRIES))
    failed_with_one_line(rc, err, root)
    heal_but_for_the_failed_instant(s3_endpoint, spark, err)
    assert hudi_rows(s3_endpoint, root) == before
    assert not log_compactions()
    assert instants(s3_endpoint, root)[0] == completed_before

    rc, out, err = run(capsys, "logcompaction", "run", root, "--json", *conf(s3_endpoint))
    assert rc == 0, err
    assert len(log_compactions()) == 1
    assert hudi_rows(s3_endpoint, root) == before
    assert_no_stray_files(s3_endpoint, root)
