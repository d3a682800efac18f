"""Why the v6 recipe's Java writer sets ``hoodie.parquet.small.file.limit=0`` (docs/interop.md, "Table
version 6"), shown with Hudi 0.15.0 alone on a table: no tablesvc process touches it.

Hudi 0.x pads small files on a MERGE_ON_READ table whose index cannot index log files (the bloom
index, the default): an insert goes into the smallest latest slice that has a base file and no log
file, and that file group is rewritten with a merge at the write's instant.  In 0.15.0 the
candidates come from ``HoodieFileGroup.getAllFileSlicesBeforeOn``, which does not drop uncommitted
slices (Hudi 1.x does, HUDI-9288), while the merge reads the group's latest *committed* base file and
none of its logs.  So once a failed write left a base file (under the LAZY failed-writes policy that
OCC requires it stays until its rollback), the next write with inserts may pick that uncommitted,
log-free slice and rewrite the committed base under it: the committed slice's log files are left
behind in an older slice and every reader drops them.

The sequence, in one partition: an insert makes file group F (base B0); a Java upsert of new keys is
killed (SIGKILL) once its merge of F is on disk (F's uncommitted slice R); an update of three F keys
goes, as a log, into F's committed slice B0; an insert of new keys then pads F.  With Hudi's default
limit the three updates are lost (all three readers agree).

With the recipe's limit 0 no insert pads anything: on a second table, in the same Java driver, an insert
beside F (a small base file, no logs: a candidate under the default) starts a new file group and leaves F
alone.  Padding is the only write outside compaction that rewrites a base file, so the loss above cannot
happen; this costs two small writes instead of a second killed write.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from event_time_model import EventTimeModel
from java_hudi import JavaHudi, JavaHudiSetup, JavaTable
from reader_agreement import ThreeReaders
from timeline_files import data_files_of, instant_files, pending_times

pytestmark = pytest.mark.interop_java

PART = "p0"
# what scenario 3's Java writer carries that matters here: LAZY (a failed write's files stay until rolled back)
LAZY_OCC = {
    "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
    "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
    "hoodie.cleaner.policy.failed.writes": "LAZY",
    "hoodie.compact.inline": "false", "hoodie.compact.schedule.inline": "false",
    "hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
}


def rows(keys, ts: int, val: str) -> list[tuple]:
    return [(f"k{k:05d}", ts, PART, f"{val}{k}") for k in keys]


def base_files(path: str) -> list[str]:
    return sorted(f.name for f in (Path(path) / PART).iterdir() if f.name.endswith(".parquet"))


def kill_write_once_on_disk(setup: JavaHudiSetup, table: JavaTable, work_dir: Path) -> tuple[str, list[Path]]:
    """A Java upsert of 100,000 new keys in its own driver, SIGKILLed (driver and JVM) once the first data
    file of its instant is on disk.  100,000 keys fit the small file's estimated room (1 KB a record, Hudi's
    estimate before any commit is big enough to measure), so with padding on they all go into F."""
    before = {f.requested for f in instant_files(table.path)}
    driver = JavaHudi(setup, table.bundle, work_dir).start()
    try:
        driver.send(JavaHudi.write_request(table, "upsert", generate={
            "count": 100_000, "key_prefix": "killed", "ts": 90_000, "partitions": [PART]}))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            new = [f for f in instant_files(table.path) if f.requested not in before]
            assert not any(f.state == "completed" for f in new), f"the write finished before it was killed ({new})"
            files = data_files_of(table.path, new[0].requested) if new else []
            if files:
                driver.kill()
                return new[0].requested, files
            time.sleep(0.002)
        raise AssertionError(f"no data file of the Java write appeared within 300 s\n{driver.log_tail()}")
    finally:
        driver.close()


def file_groups(path: str) -> dict[str, list[str]]:
    """Base files by file group id."""
    groups: dict[str, list[str]] = {}
    for name in base_files(path):
        groups.setdefault(name.split("_")[0], []).append(name)
    return groups


def test_a_failed_writes_slice_padded_over_committed_logs(java_hudi_setup, start_java_hudi, spark, tmp_path):
    bundle = java_hudi_setup.bundle_for(6)
    assert bundle.version == "0.15.0", f"this pins Hudi 0.15.0's small-file handling; the bundle is {bundle.label}"
    java = start_java_hudi(bundle, tmp_path / "java")

    # -- Hudi's default limit: the logged updates are lost ----------------------------------------------------
    table = JavaTable(str(tmp_path / "table"), "small_file_padding", 6, bundle, writer=tuple(LAZY_OCC.items()))
    model = EventTimeModel()

    def write(operation: str, batch: list[tuple]) -> None:
        java.write(table, operation, batch)
        model.apply(operation, batch)

    write("insert", rows(range(20), 1000, "i-"))                               # F, base B0
    (f_base,) = base_files(table.path)
    fid, b0 = f_base.split("_")[0], f_base[:-len(".parquet")].split("_")[-1]

    killed, files = kill_write_once_on_disk(java_hudi_setup, table, tmp_path / "java-killed")
    assert killed in pending_times(table.path), killed
    # the precondition of the loss: the failed write's file is a merge of F (F's uncommitted slice R)
    names = [f.name for f in files]
    assert any(n.startswith(fid + "_") and n.endswith(f"_{killed}.parquet") for n in names), names

    write("upsert", rows((1, 2, 3), 2000, "u-"))                               # logs, into F's slice B0
    logs = sorted(f.name for f in (Path(table.path) / PART).iterdir() if f.name.startswith(f".{fid}_{b0}.log."))
    assert logs, f"the update made no log file in F's committed slice {b0}: {sorted(os.listdir(table.path))}"

    write("insert", rows(range(20, 25), 3000, "n-"))                           # pads F from R
    # all three readers agree with each other and lack exactly the three logged updates
    expected = {r[0]: r for r in model.rows()} | {r[0]: r for r in rows((1, 2, 3), 1000, "i-")}
    ThreeReaders(java, table, spark).check("Hudi 0.15.0 padded the failed write's slice: the logged updates are lost",
                                           sorted(expected.values()))
    # how: the last insert rewrote F at its own instant from B0's base file alone (its rows keep B0's commit
    # time), while the log with the updates stays in the older slice B0
    last = max(f.requested for f in instant_files(table.path) if f.action == "deltacommit" and f.state == "completed")
    merged = Path(table.path) / PART / next(n for n in base_files(table.path) if n.startswith(fid + "_")
                                             and n.endswith(f"_{last}.parquet"))
    t = pq.read_table(merged, columns=["_hoodie_record_key", "_hoodie_commit_time", "val"]).to_pylist()
    assert {r["_hoodie_commit_time"] for r in t if r["_hoodie_record_key"] in ("k00001", "k00002", "k00003")} == {b0}
    assert logs == sorted(f.name for f in (Path(table.path) / PART).iterdir() if f.name.startswith(f".{fid}_{b0}.log."))

    # -- the recipe's limit 0: nothing is padded ---------------------------------------------------------------
    recipe = JavaTable(str(tmp_path / "recipe"), "small_file_limit_0", 6, bundle,
                       writer=tuple(dict(LAZY_OCC, **{"hoodie.parquet.small.file.limit": "0"}).items()))
    recipe_model = EventTimeModel()

    def write_recipe(operation: str, batch: list[tuple]) -> None:
        java.write(recipe, operation, batch)
        recipe_model.apply(operation, batch)

    write_recipe("insert", rows(range(20), 1000, "i-"))                       # F: small, no logs
    ((f_id, f_files),) = file_groups(recipe.path).items()
    write_recipe("insert", rows(range(20, 25), 3000, "n-"))                   # a candidate under the default
    groups = file_groups(recipe.path)
    assert groups[f_id] == f_files, f"limit 0: F ({f_files}) was rewritten: {groups}"
    new = [g for g in groups if g != f_id]
    assert len(new) == 1 and len(groups[new[0]]) == 1, f"limit 0: the insert did not start one new file group: {groups}"
    ThreeReaders(java, recipe, spark).check("limit 0: the insert beside a small log-free file group started a new one",
                                            recipe_model.rows())
