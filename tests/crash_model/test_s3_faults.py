"""Faults of the object store under the CLI services that run without Spark (``clean run``,
``rollback``, ``init``, ``status``), on a fixture table copied to S3 (moto, fixture ``s3_endpoint``),
injected by the endpoint itself (tests/s3_server.py): 503 SlowDown storms, a PUT answered after the
client's timeout, connections dropped from the k-th request on, the endpoint process gone.

What every case shows: the command exits 1 with exactly one stderr line naming the URL (no
traceback), or 0 when obstore's retries ride the fault out; nothing is half-visible (hudi-rs reads
the rows it read before, and the timeline holds the instant at most requested/inflight); and a re-run
once the fault is cleared leaves the same files and rows as the same command without a fault.
The commands run in this process (``main``), with the endpoint and keys from ``--conf`` only.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import pytest
from s3_server import S3Server, copy_table_to_s3

from tablesvc.cli.main import main

pytestmark = pytest.mark.s3

FIXTURE = "v8_trips_8i3u1d"
CLEAN = ["--conf", "hoodie.cleaner.commits.retained=1"]     # the fixture then has 7 files to clean
# few, short retries: a storm longer than them surfaces in about a second
SHORT_RETRIES = {"tablesvc.storage.max.retries": "1", "tablesvc.storage.retry.timeout.ms": "1000"}
STORM = 10 ** 6         # a fault count no command gets through
# Storms spare the lock object unless a case is about it: a lock whose release failed blocks the re-run
# until its validity passes (20 s by default), which the one case about it shortens to 10 s
LOCK_OBJECT = ".hoodie/.locks/"
SHORT_LOCK = b"hoodie.write.lock.storage.validity.timeout.secs: 10\nhoodie.write.lock.storage.renew.interval.secs: 1\n"


@pytest.fixture(autouse=True)
def no_faults_left(s3_endpoint):
    s3_endpoint.clear_faults()
    yield
    s3_endpoint.clear_faults()


@dataclass(frozen=True)
class TableState:
    """What a reader sees of the table: its data files, its timeline, the rows hudi-rs reads."""

    data_files: tuple[str, ...]
    timeline: tuple[str, ...]
    rows: tuple[tuple, ...]


def state(server: S3Server, root: str) -> TableState:
    import boto3
    from oracles.hudi_rs import read_table
    from s3_server import ACCESS_KEY, REGION, SECRET_KEY

    s3 = boto3.client("s3", endpoint_url=server.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                      aws_secret_access_key=SECRET_KEY)
    prefix = root.split("/", 3)[3] + "/"
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=server.bucket, Prefix=prefix)
    keys = sorted(o["Key"][len(prefix):] for page in pages for o in page.get("Contents", []))
    table = read_table(root, storage_options=server.options())
    rows = sorted((r["_hoodie_record_key"], r["_hoodie_partition_path"], r["_hoodie_commit_time"])
                  for r in table.to_pylist())
    return TableState(tuple(k for k in keys if not k.startswith(".hoodie/")),
                      tuple(k.rsplit("/", 1)[1] for k in keys if k.startswith(".hoodie/timeline/")
                            and k.count("/") == 2),
                      tuple(rows))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def failed_with_one_line(rc: int, err: str, *names: str) -> str:
    """Exit 1 with one error line naming ``names``.  When the endpoint is still failing as the command
    leaves, releasing the table lock fails too: that is one more line, a warning naming the lock
    object and when it expires (docs/storage.md, "What a crash leaves"), and nothing else."""
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("tablesvc: error: ")]
    warnings = [line for line in lines if line.startswith("tablesvc: warning: releasing table lock ")
                and "/.hoodie/.locks/table_lock.json failed" in line and "it expires at" in line]
    assert rc == 1 and len(errors) == 1 and len(errors) + len(warnings) == len(lines) <= 2, (rc, err)
    assert "Traceback" not in err
    for name in names:
        assert name in errors[0], errors[0]
    return errors[0]


def pending_cleans(timeline: tuple[str, ...]) -> set[str]:
    return {n.split(".")[0] for n in timeline if ".clean." in n}


def completed_cleans(timeline: tuple[str, ...]) -> set[str]:
    return {n.split("_")[0] for n in timeline if n.endswith(".clean") and "_" in n}


@pytest.fixture(scope="module")
def clean_reference(s3_endpoint) -> tuple[TableState, TableState, int]:
    """The fixture table before and after the same clean without a fault, and how many requests
    that clean made (where a fault 'from the k-th request' lands)."""
    from tablesvc.cli.main import main as cli

    _, root = copy_table_to_s3(s3_endpoint, FIXTURE, "faults")
    before = state(s3_endpoint, root)
    s3_endpoint.reset_counters()
    assert cli(["clean", "run", root, *CLEAN, *s3_endpoint.s3a_conf()]) == 0
    requests = s3_endpoint.counters().requests
    after = state(s3_endpoint, root)
    assert len(before.data_files) - len(after.data_files) == 7 and after.rows == before.rows
    return before, after, requests


def assert_like_reference(got: TableState, reference: TableState) -> None:
    assert got.data_files == reference.data_files
    assert got.rows == reference.rows
    assert len(completed_cleans(got.timeline)) == len(completed_cleans(reference.timeline))
    assert pending_cleans(got.timeline) == completed_cleans(got.timeline)    # every clean completed


def test_a_503_storm_that_obstores_retries_ride_out_changes_nothing_in_the_outcome(s3_endpoint, capsys,
                                                                                  clean_reference):
    _, reference, _ = clean_reference
    _, root = copy_table_to_s3(s3_endpoint, FIXTURE, "faults")
    s3_endpoint.reset_counters()
    s3_endpoint.inject("slowdown", 3)                 # the next 3 requests, whatever they are
    rc, out, err = run(capsys, "clean", "run", root, *CLEAN, *s3_endpoint.s3a_conf())
    assert rc == 0 and not err.strip(), err
    assert s3_endpoint.counters().faults_applied == {"slowdown": 3}
    assert_like_reference(state(s3_endpoint, root), reference)


@pytest.mark.parametrize("method, skip, on_lock", [("POST", 1, False), ("PUT", 3, False), ("PUT", 1, True)])
def test_a_503_storm_past_the_retries_fails_with_one_line_and_a_rerun_completes_the_clean(
        s3_endpoint, capsys, clean_reference, method, skip, on_lock):
    """POST: the batched deletes of the clean's files from the second on (some done); PUT: the
    clean's writes from the fourth on, and once from the second on (the clean's plan) with the lock
    object's writes too: the release then fails (a warning), and the re-run waits until the lock's
    validity (10 s here) has passed, then takes it over."""
    before, reference, _ = clean_reference
    storage, root = copy_table_to_s3(s3_endpoint, FIXTURE, "faults")
    if on_lock:
        storage.write_new(f"{root}/.hoodie/tablesvc.yaml", SHORT_LOCK)
    s3_endpoint.inject("slowdown", STORM, method=method, skip=skip, except_key=None if on_lock else LOCK_OBJECT)
    rc, out, err = run(capsys, "clean", "run", root, *CLEAN, *s3_endpoint.s3a_conf(**SHORT_RETRIES))
    failed_with_one_line(rc, err, root)
    assert ("releasing table lock" in err) is on_lock
    s3_endpoint.clear_faults()
    failed = state(s3_endpoint, root)
    assert failed.rows == before.rows                         # nothing half-visible to a reader
    assert not completed_cleans(failed.timeline) - completed_cleans(before.timeline)
    assert len(pending_cleans(failed.timeline) - pending_cleans(before.timeline)) <= 1   # left requested/inflight
    rc, out, err = run(capsys, "clean", "run", root, *CLEAN, *s3_endpoint.s3a_conf())
    assert rc == 0, err
    assert_like_reference(state(s3_endpoint, root), reference)


@pytest.mark.parametrize("skip, which", [(0, ".clean.requested"), (2, ".clean")])
def test_a_put_answered_after_the_client_timed_out_fails_the_clean_and_the_rerun_completes_it(
        s3_endpoint, capsys, clean_reference, skip, which):
    """The clean's plan PUT (``T.clean.requested``), or its completion (``T_C.clean``), is served
    3 s late, after the 1.5 s client timeout; obstore does not retry a conditional create that timed
    out, so the command fails naming the file, which lands afterwards (as on S3, where a request the
    client gave up on may still take effect).  A landed plan is executed by the re-run; a landed
    completion is a clean done, and the re-run has nothing left to do."""
    before, reference, _ = clean_reference
    storage, root = copy_table_to_s3(s3_endpoint, FIXTURE, "faults")
    s3_endpoint.inject("delay", 1, method="PUT", key=which, skip=skip, delay_s=3.0)
    rc, out, err = run(capsys, "clean", "run", root, *CLEAN,
                       *s3_endpoint.s3a_conf(aws_timeout="1500ms", **SHORT_RETRIES))
    line = failed_with_one_line(rc, err, root)
    assert line.split(": ")[2].endswith(which), line        # "create <url>: ..." names the file
    deadline = time.monotonic() + 10
    while not any(n.endswith(which) for n in set(storage.list_names(f"{root}/.hoodie/timeline")) - set(before.timeline)):
        assert time.monotonic() < deadline, f"the delayed {which} never landed"
        time.sleep(0.2)
    landed = state(s3_endpoint, root)
    assert landed.rows == before.rows
    if which == ".clean.requested":      # nothing executed: the files are all there
        assert landed.data_files == before.data_files
        assert not completed_cleans(landed.timeline) - completed_cleans(before.timeline)
    else:                                # it had all been done but the completion's answer
        assert_like_reference(landed, reference)
    rc, out, err = run(capsys, "clean", "run", root, *CLEAN, *s3_endpoint.s3a_conf())
    assert rc == 0, err
    assert_like_reference(state(s3_endpoint, root), reference)


def test_an_answer_lost_after_the_create_took_effect_is_recognised_by_the_write_token(
        s3_endpoint, capsys, clean_reference):
    """Each conditional PUT of the clean's instant files, and of the lock object, is served and its
    answer lost (connection closed): obstore retries, S3 answers the retry 412, and the write token
    in the object tells it was ours, so the clean goes through as without a fault."""
    from timeline.storage_lock import StorageLock

    _, reference, _ = clean_reference
    storage, root = copy_table_to_s3(s3_endpoint, FIXTURE, "faults")
    s3_endpoint.reset_counters()
    s3_endpoint.inject("lose", 3, method="PUT", key=".clean")
    s3_endpoint.inject("lose", 1, method="PUT", key="table_lock.json")
    rc, out, err = run(capsys, "clean", "run", root, *CLEAN, *s3_endpoint.s3a_conf())
    assert rc == 0 and not err.strip(), err
    assert s3_endpoint.counters().faults_applied == {"lose": 4}
    assert_like_reference(state(s3_endpoint, root), reference)
    # the lock's If-Match renewal and release alike
    lock = StorageLock(storage, root, wait_ms=0, renew_ms=0, owner="token-check")
    assert lock.try_acquire()
    s3_endpoint.inject("lose", 2, method="PUT", key="table_lock.json")
    assert lock.renew() and not lock.lost
    lock.release()
    assert s3_endpoint.counters().faults_applied == {"lose": 6}
    assert b'"expired": true' in storage.read_bytes(lock.path)


@pytest.mark.parametrize("fraction", [0.3, 0.7])
def test_connections_dropped_from_the_kth_request_on_fail_with_one_line_and_a_rerun_completes(
        s3_endpoint, capsys, clean_reference, fraction):
    """The endpoint unreachable from the k-th request of the clean on (connections closed unanswered,
    the objects kept), then back: k at 30 % and 70 % of the unfaulted clean's requests."""
    before, reference, requests = clean_reference
    _, root = copy_table_to_s3(s3_endpoint, FIXTURE, "faults")
    s3_endpoint.inject("drop", STORM, skip=int(requests * fraction), except_key=LOCK_OBJECT)
    rc, out, err = run(capsys, "clean", "run", root, *CLEAN, *s3_endpoint.s3a_conf(**SHORT_RETRIES))
    failed_with_one_line(rc, err, root)
    s3_endpoint.clear_faults()
    failed = state(s3_endpoint, root)
    assert failed.rows == before.rows
    assert len(pending_cleans(failed.timeline) - pending_cleans(before.timeline)) <= 1
    rc, out, err = run(capsys, "clean", "run", root, *CLEAN, *s3_endpoint.s3a_conf())
    assert rc == 0, err
    assert_like_reference(state(s3_endpoint, root), reference)


def test_the_endpoint_stopped_mid_clean_is_one_line_naming_the_url_exit_1(capsys, clean_reference):
    """The endpoint's process ends at the k-th request (half the unfaulted clean's): every request
    from there on is refused.  Its objects go with it, so only the command's answer is checked."""
    _, _, requests = clean_reference
    server = S3Server.start()
    try:
        _, root = copy_table_to_s3(server, FIXTURE, "faults")
        server.inject("exit", 1, skip=requests // 2)
        rc, out, err = run(capsys, "clean", "run", root, *CLEAN, *server.s3a_conf(**SHORT_RETRIES))
        failed_with_one_line(rc, err, root)
        assert server.process.wait(timeout=5) == 0             # it was the endpoint that went away
    finally:
        server.stop()


def test_rollback_of_a_failed_write_under_a_503_storm_fails_with_one_line_and_a_rerun_completes_it(
        s3_endpoint, capsys):
    """A write that died after its inflight file (no heartbeat: failed); ``rollback`` under a storm on
    every PUT but the lock object's from the second on, then again without: the same timeline as one unfaulted rollback."""
    def failed_write():
        storage, root = copy_table_to_s3(s3_endpoint, FIXTURE, "faults")
        for state_name in ("requested", "inflight"):
            storage.write_new(f"{root}/.hoodie/timeline/20300101000000000.deltacommit.{state_name}", b"")
        return root

    reference_root = failed_write()
    before = state(s3_endpoint, reference_root)
    rc, out, err = run(capsys, "rollback", reference_root, *s3_endpoint.s3a_conf())
    assert rc == 0 and "rolled back 20300101000000000" in out, (out, err)
    reference = state(s3_endpoint, reference_root)

    root = failed_write()
    s3_endpoint.inject("slowdown", STORM, method="PUT", skip=1, except_key=LOCK_OBJECT)
    rc, out, err = run(capsys, "rollback", root, *s3_endpoint.s3a_conf(**SHORT_RETRIES))
    failed_with_one_line(rc, err, root)
    s3_endpoint.clear_faults()
    failed = state(s3_endpoint, root)
    assert failed.rows == before.rows and failed.data_files == before.data_files
    assert not any(n.endswith(".rollback") for n in failed.timeline)       # no rollback completed
    rc, out, err = run(capsys, "rollback", root, *s3_endpoint.s3a_conf())
    assert rc == 0, err
    done = state(s3_endpoint, root)
    assert done.rows == reference.rows and done.data_files == reference.data_files

    def shape(timeline):      # the rollback's own times differ between the runs
        return sorted(n for n in timeline if "rollback" not in n), sum(n.endswith(".rollback") for n in timeline)
    assert shape(done.timeline) == shape(reference.timeline)
    assert not any(n.startswith("20300101000000000") for n in done.timeline)


def test_init_and_status_under_503_storms(s3_endpoint, capsys):
    """A storm obstore rides out: ``init`` succeeds; one it does not: ``init`` (from its third PUT
    on) and ``status`` fail with one line naming the URL, and ``init`` re-run creates the table."""
    conf, short = s3_endpoint.s3a_conf(), s3_endpoint.s3a_conf(**SHORT_RETRIES)
    ridden = s3_endpoint.url("faults", uuid.uuid4().hex, "t")
    s3_endpoint.inject("slowdown", 2, method="PUT")
    rc, out, err = run(capsys, "init", ridden, "--name", "t", "--record-key", "id", *conf)
    assert rc == 0 and not err.strip(), err
    s3_endpoint.clear_faults()

    root = s3_endpoint.url("faults", uuid.uuid4().hex, "t")
    s3_endpoint.inject("slowdown", STORM, method="PUT", skip=2)
    rc, out, err = run(capsys, "init", root, "--name", "t", "--record-key", "id", *short)
    failed_with_one_line(rc, err, root)
    s3_endpoint.clear_faults()
    rc, out, err = run(capsys, "status", root, *conf)
    assert rc != 0 and root in err          # no hoodie.properties: not a table yet
    rc, out, err = run(capsys, "init", root, "--name", "t", "--record-key", "id", *conf)
    assert rc == 0, err

    s3_endpoint.inject("slowdown", STORM, method="GET")
    rc, out, err = run(capsys, "status", root, *short)
    failed_with_one_line(rc, err, root)
    s3_endpoint.clear_faults()
    for table in (ridden, root):
        rc, out, err = run(capsys, "status", table, *conf)
        assert rc == 0 and "table version 8" in out, err
