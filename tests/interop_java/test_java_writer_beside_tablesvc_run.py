"""Scenario 3 of issue #26: a Java writer and ``tablesvc run`` on one table at the same time.

Java Hudi writes micro-batches (insert, upsert with older events among them, delete) in a loop,
in optimistic concurrency control with the file-system lock provider, the LAZY failed-writes
policy and all its own table services off.  Meanwhile ``tablesvc run`` (its own process, its own
Spark) schedules and executes compaction, log compaction and clean on the same table, due every
few commits.  They coordinate only through Java's lock file and heartbeats.  Afterwards the writer
and the runner stop, tablesvc drains what is pending, and then, so that a log compaction is certain
on every table version, a fresh Java driver upserts the same keys twice and tablesvc log-compacts,
compacts and cleans.  Java Hudi, hudi-rs and tablesvc read the same rows as the model (every batch
Java committed, and none it failed), after the log compaction and at the end.

Length: ``TABLESVC_INTEROP_CONCURRENT_SECONDS`` (default 150 s of writing); a longer soak is that
variable raised.  Java goes on writing past it, at most ``EXTRA_SECONDS`` more, until a compaction
and a clean completed while it wrote (a loaded machine may give few compactions in 150 s).  The
figures (Java commits, tablesvc's services, lock holds seen, Java writes refused) are printed (``-rP``).
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from event_time_model import EventTimeModel
from file_group_forensics import FileArchive, JavaBatchLog, explain_lost_keys
from java_hudi import JavaStepError, JavaTable
from reader_agreement import ThreeReaders, tablesvc_rows
from timeline_files import instant_files, pending_times

from tablesvc.api import Table
from tablesvc.services.result import Status
from timeline.lock import parse_holder

pytestmark = pytest.mark.interop_java

REPO = Path(__file__).resolve().parents[2]
SECONDS = float(os.environ.get("TABLESVC_INTEROP_CONCURRENT_SECONDS", "150"))
PARTITIONS = ("p0", "p1")
# Services due often, so that many of each run while Java writes.
RUNNER_CONF = {
    "hoodie.compact.inline.max.delta.commits": "6",
    "hoodie.log.compaction.enable": "true",
    "hoodie.log.compaction.blocks.threshold": "2",
    "hoodie.clean.automatic": "true",
    "hoodie.cleaner.commits.retained": "3",
}
# Past SECONDS, Java writes on until a compaction and a clean completed while it wrote, for at most this long.
# On version 6 both are rare: without small-file padding (the v6 recipe) only compactions make old slices,
# v6 compactions wait for a moment with no write in progress, and a clean can delete the slice before a
# compaction C only once two more commits completed (3 kept).  Under load one 150 s run had one compaction
# and no clean (docs/interop.md, run B).  Keeping fewer commits is no cure: the slice before C goes once
# n - 1 commits after C completed, while a Java write that started when C was still pending looks its keys
# up in that slice's base file; the fewer kept, the likelier a clean deletes that file under the write.
EXTRA_SECONDS = 90.0
# After both stopped: the Java writer's process is gone, so any heartbeat it left is dead.
SHORT_HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": "1000", "hoodie.client.heartbeat.tolerable.misses": "1"}
CONFLICT = re.compile(r"HoodieWriteConflictException|Cannot resolve conflicts")
# Hudi 0.x (table version 6) checks, in startCommit and outside any lock, that no pending compaction is
# later than the instant time it took before; a compaction scheduled in between refuses the write before
# it requested its instant or wrote a file (docs/interop.md, "Table version 6").  Hudi 1.x takes its
# instant time under the lock and never refuses so.
REFUSED_AT_START = re.compile(r"Latest pending compaction instant time must be earlier than this instant time")


def occ_writer_options(lock_dir: str | None, expire_minutes: int | None,
                       small_file_limit: str | None = None) -> tuple[tuple[str, str], ...]:
    """The recipe's Java writer (docs/interop.md, "Java writes, tablesvc services")."""
    opts = {
        "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
        "hoodie.cleaner.policy.failed.writes": "LAZY",
        "hoodie.compact.inline": "false", "hoodie.compact.schedule.inline": "false",
        "hoodie.log.compaction.inline": "false",
        "hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
        "hoodie.metadata.enable": "false",
    }
    if lock_dir is not None:
        opts["hoodie.write.lock.filesystem.path"] = lock_dir
    if expire_minutes is not None:
        opts["hoodie.write.lock.filesystem.expire"] = str(expire_minutes)
    if small_file_limit is not None:
        opts["hoodie.parquet.small.file.limit"] = small_file_limit
    return tuple(opts.items())


def rows(keys, ts_base: int, val: str) -> list[tuple]:
    return [(f"k{k:05d}", ts_base + k % 500, PARTITIONS[k % 2], f"{val}{k}") for k in keys]


@dataclass
class MicroBatches:
    """The Java writer's batches, made from the model: inserts of new keys only, upserts of stored
    keys (newer events, and some older ones that must lose) plus new keys, deletes of stored keys
    with newer events.  A deleted key is never written again; ``ts`` grows by 1000 a batch."""

    rng: random.Random = field(default_factory=lambda: random.Random(26))
    next_key: int = 0

    def _new(self, n: int) -> list[int]:
        keys = list(range(self.next_key, self.next_key + n))
        self.next_key += n
        return keys

    def next(self, n: int, model: EventTimeModel) -> tuple[str, list[tuple]]:
        stored = sorted(int(r[0][1:]) for r in model.rows())
        ts = 1000 * (n + 1)
        kind = "insert" if n == 0 or len(stored) < 30 else ("upsert", "upsert", "insert", "delete")[n % 4]
        if kind == "insert":
            return "insert", rows(self._new(20), ts, f"i{n}-")
        if kind == "delete":
            return "delete", rows(self.rng.sample(stored, 6), ts, f"d{n}-")
        touched = self.rng.sample(stored, 18)
        batch = rows(touched[:15], ts, f"u{n}-") + rows(self._new(5), ts, f"n{n}-")
        # older events (an event time below every stored one): they must lose to what is stored
        batch += [(f"k{k:05d}", n + 1, PARTITIONS[k % 2], f"old{n}-{k}") for k in touched[15:]]
        return "upsert", batch


def finishing_batches(n: int, model: EventTimeModel) -> list[tuple[str, list[tuple]]]:
    """Two upserts of the same 13 stored keys, after the concurrent phase: newer events for all of them,
    then newer ones again for 10 and older events (that must lose to the first upsert's) for 3."""
    keys = random.Random(n).sample(sorted(int(r[0][1:]) for r in model.rows()), 13)
    older = [(f"k{k:05d}", 1, PARTITIONS[k % 2], f"old-f{n}-{k}") for k in keys[10:]]
    return [("upsert", rows(keys, 1000 * (n + 1), f"fa{n}-")),
            ("upsert", rows(keys[:10], 1000 * (n + 2), f"fb{n}-") + older)]


class LockWatch(threading.Thread):
    """Samples the lock file every few ms and counts the holds it saw by side (a file appearing, or
    a tablesvc body replaced by another): both sides show up only if both take the one file."""

    def __init__(self, path: str):
        super().__init__(daemon=True)
        self.path, self.holds, self._halt = path, Counter(), threading.Event()

    def run(self) -> None:
        previous = None
        while not self._halt.is_set():
            try:
                body = Path(self.path).read_bytes()
            except FileNotFoundError:
                body = None
            if body is not None and body != previous:
                mine = parse_holder(body, None).is_tablesvc
                # a Java lock is created empty, then written: one hold, not two
                if previous is None or mine or parse_holder(previous, None).is_tablesvc:
                    self.holds["tablesvc" if mine else "Java"] += 1
            previous = body
            time.sleep(0.002)

    def stop(self) -> Counter:
        self._halt.set()
        self.join()
        return self.holds


def start_runner(table: str, work: Path) -> subprocess.Popen:
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'tests'}",
               TABLESVC_SPARK_LOG=str(work / "runner-spark.log"))
    conf = [a for k, v in RUNNER_CONF.items() for a in ("--conf", f"{k}={v}")]
    return subprocess.Popen([sys.executable, "-m", "tablesvc", "run", table, "--poll-seconds", "2",
                             "--lease-seconds", "60", *conf], cwd=REPO, env=env,
                            stdout=open(work / "runner.out", "w"), stderr=subprocess.STDOUT, start_new_session=True)


def java_waits_for_tablesvcs_lock(writer, table: JavaTable, model: EventTimeModel, batches: MicroBatches) -> None:
    """While tablesvc holds the table lock, a Java write cannot commit (nor even start: Java takes
    the lock to create its instant); once released, it goes on."""
    commits = len([f for f in instant_files(table.path) if f.state == "completed"])
    held = Table.open(table.path).lock(ttl_ms=120_000).acquire()
    operation, batch = batches.next(1, model)
    request = writer.write_request(table, operation, rows=batch)
    writer.send(request)
    try:
        time.sleep(12)
        now = len([f for f in instant_files(table.path) if f.state == "completed"])
        assert now == commits, "a Java write committed while tablesvc held the table lock"
    finally:
        held.release()
    writer.answer(request)
    model.apply(operation, batch)


def services_done(path: str) -> Counter:
    """Completed tablesvc services, by the files the timeline keeps of each instant (Java's are off)."""
    by_time: dict[str, set[str]] = {}
    states: dict[str, set[str]] = {}
    for f in instant_files(path):
        by_time.setdefault(f.requested, set()).add(f.action)
        states.setdefault(f.requested, set()).add(f.state)
    out = Counter()
    for t, actions in by_time.items():
        if "completed" not in states[t]:
            continue
        if "logcompaction" in actions:
            out["log compactions"] += 1
        elif "compaction" in actions:
            out["compactions"] += 1
        elif "clean" in actions:
            out["cleans"] += 1
        elif "rollback" in actions:
            out["rollbacks"] += 1
        elif actions == {"deltacommit"}:
            out["delta commits (Java)"] += 1
    return out


# Version 6 runs by default again: `make interop` once failed on an instant-time collision (Hudi 0.x takes
# its instant time outside the lock without looking at storage, and took the very millisecond of a log
# compaction tablesvc had just scheduled); tablesvc now gives up its instant when another writer's has its
# time (docs/interop.md, "Instant-time collisions").  The runner reports each one as busy; they are printed.
_V6 = [(6, None, None)]
# The recipe's Java writer turns small-file padding off, for every version (docs/interop.md, "Small-file
# padding"): 0.15.0 may pad an uncommitted slice and merge the committed base under it without its logs;
# 1.2.0 files a committed log under a failed write's uncommitted base file (HoodieFileGroup.
# getBaseInstantTime walks every slice, committed or not), so the committed slice looks log-free and a
# padding merge rewrites it without the log (seen in CI on v8: a Java delete lost).
# TABLESVC_INTEROP_SMALL_FILE_LIMIT=default leaves Hudi's own default (100 MB), to reproduce that.
_SMALL_FILE_LIMIT = os.environ.get("TABLESVC_INTEROP_SMALL_FILE_LIMIT", "0")


def check_or_explain(readers: ThreeReaders, step: str, model: EventTimeModel, table_path: str, spark,
                     archive: FileArchive, batches: JavaBatchLog) -> None:
    """The readers' check; when it fails, the lost keys' file groups and timeline are printed (and the
    table copied under /tmp/v6race/) before the failure goes on."""
    try:
        readers.check(step, model.rows())
    except AssertionError:
        got = {r[0]: r for r in tablesvc_rows(table_path, spark)}
        want = {r[0]: r for r in model.rows()}
        lost = [(k, (want.get(k) or got.get(k))[2], want.get(k), got.get(k))
                for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)]
        print(f"{len(lost)} keys differ (tablesvc's read against the model)")
        print(explain_lost_keys(Path(table_path), archive.archive, lost, batches))
        raise


@pytest.mark.parametrize("version,lock_dir,expire", [
    *_V6,                                # Hudi 0.15.0; the default lock file <base>/.hoodie/lock, never expiring
    (8, None, None),
    (9, "locks/java_writer_v9", 1),      # the lock folder elsewhere, and a 1-minute expiry, on both sides
])
def test_java_writer_beside_tablesvc_run(version, lock_dir, expire, java_hudi_setup, start_java_hudi, spark,
                                         tmp_path):
    bundle = java_hudi_setup.bundle_for(version)
    lock_folder = str(tmp_path / lock_dir) if lock_dir else None
    small_files = _SMALL_FILE_LIMIT if _SMALL_FILE_LIMIT != "default" else None
    table = JavaTable(str(tmp_path / "table"), f"java_beside_run_v{version}", version, bundle,
                      writer=occ_writer_options(lock_folder, expire, small_files))
    writer = start_java_hudi(bundle, tmp_path / "java-writer")
    model, batches = EventTimeModel(), MicroBatches()
    sent = Counter()
    refused: list[str] = []
    batch_log = JavaBatchLog(table.path)
    archive = FileArchive(tmp_path / "table", tmp_path / "every-file")

    def java_batch(n: int) -> None:
        operation, batch = batches.next(n, model)
        batch_log.start()
        try:
            writer.write(table, operation, batch)
        except JavaStepError as exc:
            # OCC lets Java refuse its own commit when another commit touched its files meanwhile;
            # the batch is then not in the table (its instant stays pending until rolled back).
            # On v6 Hudi 0.x may also refuse the write at its start (nothing written, no instant).
            at_start = version < 8 and REFUSED_AT_START.search(str(exc))
            assert at_start or CONFLICT.search(str(exc)), f"Java batch {n} ({operation}) failed: {exc}"
            first = next((ln for ln in str(exc).splitlines() if REFUSED_AT_START.search(ln) or CONFLICT.search(ln)),
                         str(exc).splitlines()[0])
            refused.append(f"batch {n} ({operation}): {first.strip()[:240]}")
            sent["refused at start" if at_start else "refused"] += 1
            batch_log.done(n, operation, "refused at start" if at_start else "refused (OCC)")
            archive.catch_up()
            return
        model.apply(operation, batch)
        sent["committed"] += 1
        batch_log.done(n, operation, "committed")
        archive.catch_up()

    java_batch(0)   # creates the table
    # tablesvc's side of the lock settings: the table's own file, the same for every tablesvc process
    yaml_lines = ([f"hoodie.write.lock.filesystem.path: {lock_folder}\n"] if lock_folder else []) + \
                 ([f"hoodie.write.lock.filesystem.expire: {expire}\n"] if expire is not None else [])
    (tmp_path / "table" / ".hoodie" / "tablesvc.yaml").write_text("".join(yaml_lines))
    lock_path = Table.open(table.path).lock().path
    assert lock_path == f"{lock_folder or table.path + '/.hoodie'}/lock"
    java_waits_for_tablesvcs_lock(writer, table, model, batches)     # batch 1
    sent["committed"] += 1
    watch = LockWatch(lock_path)
    watch.start()
    runner = start_runner(table.path, tmp_path / "runner")
    t0, n = time.monotonic(), 2

    def writing() -> bool:
        elapsed = time.monotonic() - t0
        if elapsed < SECONDS:
            return True
        done = services_done(table.path)
        return elapsed < SECONDS + EXTRA_SECONDS and not (done["compactions"] and done["cleans"])

    try:
        while writing():
            assert runner.poll() is None, f"tablesvc run ended early:\n{(tmp_path / 'runner' / 'runner.out').read_text()}"
            java_batch(n)
            n += 1
    finally:
        writing_s = time.monotonic() - t0
        if runner.poll() is None:
            runner.send_signal(signal.SIGTERM)     # finishes its current job, then exits 0
        code = runner.wait(timeout=600)
        holds = watch.stop()
        writer.close()                            # the Java writer's process ends: its heartbeats stop
        archive.catch_up()
    out = (tmp_path / "runner" / "runner.out").read_text()
    assert code == 0, f"tablesvc run exited {code}:\n{out[-3000:]}"
    summary = re.search(r"runner stopped: (.*)", out)
    during = services_done(table.path)
    busy = [ln for ln in out.splitlines() if ": busy, retry later" in ln]
    collisions = [ln for ln in out.splitlines() if "another writer's instant has the same time" in ln]

    # -- drain: roll back refused Java writes (their writer is gone), finish and run what is due ----------
    time.sleep(2.5)   # past SHORT_HEARTBEAT's window
    tablesvc = Table.open(table.path)
    drained = list(tablesvc.rollback_failed(options=SHORT_HEARTBEAT))
    drained += tablesvc.log_compact(spark=spark) + tablesvc.compact(spark=spark) + tablesvc.clean()
    settled = services_done(table.path)

    # -- then a log compaction for certain: a fresh Java driver, alone on the table, upserts the same stored
    # keys twice (two log blocks in each of their slices, the drain's compaction having left base files
    # only), and tablesvc log-compacts them.  Every reader must equal the model on the log-compacted slices,
    # then again once tablesvc has compacted and cleaned.
    reader = start_java_hudi(bundle, tmp_path / "java-reader")
    for operation, batch in finishing_batches(n, model):
        reader.write(table, operation, batch)
        model.apply(operation, batch)
        sent["committed"] += 1
    log_compacted = tablesvc.log_compact(spark=spark)
    drained += log_compacted
    readers = ThreeReaders(reader, table, spark)
    check_or_explain(readers, f"after {n} Java batches beside tablesvc run, the drain, 2 Java upserts and a log "
                     "compaction", model, table.path, spark, archive, batch_log)
    drained += tablesvc.compact(spark=spark) + tablesvc.clean()
    failed = [r.render() for r in drained if r.status not in (Status.DONE, Status.NOTHING_TO_DO)]
    assert not failed, failed
    assert pending_times(table.path) == set(), f"left pending after the drain: {sorted(pending_times(table.path))}"
    assert not os.path.exists(lock_path), f"the lock file {lock_path} is left behind"

    # -- every reader equals the model ----------------------------------------------------------------------
    check_or_explain(readers, "then tablesvc's compaction and clean", model, table.path, spark, archive, batch_log)

    done = services_done(table.path)
    figures = (f"v{version} ({bundle.label}): {writing_s:.0f} s of writing; Java batches: {n} sent during the run "
               f"(and 2 after it), {sent['committed']} committed, {sent['refused']} refused by OCC, "
               f"{sent['refused at start']} refused at start (v6: a later pending compaction); tablesvc during the run: "
               f"{during['compactions']} compactions, {during['log compactions']} log compactions, "
               f"{during['cleans']} cleans, {during['rollbacks']} rollbacks; log compactions by the first drain's "
               f"end: {settled['log compactions']}; after the drain: {dict(done)}; "
               f"lock holds seen: {dict(holds)}; runner busy (lock held / heartbeat alive): {len(busy)}; "
               f"instant-time collisions (tablesvc gave its instant up): {len(collisions)}; "
               f"runner: {summary.group(1) if summary else '?'}")
    print(figures)
    print("\n".join(refused + busy[:20]))
    print("instant-time collisions:", "\n".join(collisions) or "none")
    print(f"Java writer: hoodie.parquet.small.file.limit={small_files or 'Hudi default'}; batches:")
    print(batch_log.render())
    # Java's commits are exactly the delta commits that are not tablesvc's log compactions
    assert done["delta commits (Java)"] == sent["committed"], figures
    # the run really ran side by side: services completed while Java wrote, both sides took the lock
    assert during["compactions"] >= 1 and during["cleans"] >= 1, figures
    # log compaction: tablesvc plans none while a write is pending (docs/log-compaction.md, "Ordering"),
    # and a Java writer in a tight loop nearly always has one.  On v8/v9 one must complete by the end of
    # the first drain, on the table as the run left it.  On v6 one also completes only while no write is
    # in progress (docs/interop.md, "Table version 6"), and Hudi 0.x barely pauses: none may have.
    if version >= 8:
        assert settled["log compactions"] >= 1, figures
    # on every version the log compaction after the two Java upserts completed (the readers agreed on it)
    assert [r.status for r in log_compacted] == [Status.DONE], [r.render() for r in log_compacted]
    assert done["log compactions"] == settled["log compactions"] + 1, figures
    assert holds["Java"] >= 1 and holds["tablesvc"] >= 1, figures
