"""Scenario 1 of issue #26: Java writes, tablesvc services, Java goes on.

Java Hudi writes a MERGE_ON_READ table through several delta commits (inserts, updates, updates
carrying older event times, deletes); tablesvc runs log compaction, compaction and clean on it and
rolls back a Java write that was killed (SIGKILL, its JVM with it) while it was writing its files;
then Java writes on, rolls back its own latest write, compacts and cleans with its own procedures.
After every step Java Hudi, hudi-rs and tablesvc read the same rows as the model.  Table versions
6 (Hudi 0.15), 8 and 9 (the newest bundle); the metadata table is off (issue #27).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from event_time_model import EventTimeModel
from java_hudi import JavaHudi, JavaHudiSetup, JavaTable
from reader_agreement import ThreeReaders
from scenario_rows import assert_ran, PARTITIONS, rows
from timeline_files import as_of_after, completed, data_files_of, instant_files, pending_times

from tablesvc.api import Table

pytestmark = pytest.mark.interop_java

# tablesvc judges a writer dead once its heartbeat is this old (a killed Java write may leave one)
SHORT_HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": "1000", "hoodie.client.heartbeat.tolerable.misses": "1"}


def kill_a_java_write(setup: JavaHudiSetup, table: JavaTable, work_dir: Path,
                      count: int = 300_000) -> tuple[str, list[Path]]:
    """Start a large Java upsert in a driver of its own and SIGKILL it (driver and JVM) as soon as
    the first data file of its instant is on disk; returns that instant, left pending, and the
    files named with it that were there just before the kill."""
    before = {f.requested for f in instant_files(table.path)}
    driver = JavaHudi(setup, table.bundle, work_dir).start()
    try:
        driver.send(JavaHudi.write_request(table, "upsert", generate={
            "count": count, "key_prefix": "killed", "ts": 90_000, "partitions": list(PARTITIONS)}))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            new = [f for f in instant_files(table.path) if f.requested not in before]
            assert not any(f.state == "completed" for f in new), \
                f"the Java write finished before it could be killed ({new}); give it more rows"
            files = data_files_of(table.path, new[0].requested) if new else []
            if files:
                driver.kill()
                return new[0].requested, files
            time.sleep(0.05)
        raise AssertionError(f"no data file of the Java write appeared within 300 s\n{driver.log_tail()}")
    finally:
        driver.close()


@pytest.mark.parametrize("version", [6, 8, 9])
def test_java_writes_tablesvc_services_java_goes_on(version, java_hudi_setup, start_java_hudi, spark, tmp_path):
    bundle = java_hudi_setup.bundle_for(version)
    table = JavaTable(str(tmp_path / "table"), f"java_writes_v{version}", version, bundle)
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel()

    def java_write(step: str, operation: str, batch: list[tuple]) -> None:
        java.write(table, operation, batch)
        model.apply(operation, batch)
        readers.check(step, model.rows())

    # -- Java writes ------------------------------------------------------------------------------
    java_write("Java insert", "insert", rows(range(24), 1000, "a"))
    first_write, after_first = completed(table.path, "deltacommit")[0], model.rows()
    java_write("Java upsert (updates and inserts)", "upsert", rows(range(0, 12, 2), 2000, "b") + rows(range(24, 27), 2000, "b"))
    java_write("Java upsert of older events (they lose)", "upsert", rows((1, 3, 6), 10, "old"))
    java_write("Java delete", "delete", rows((5, 7, 25), 3000, "d"))
    java_write("Java upsert", "upsert", rows((2, 4, 9, 11, 26), 4000, "c"))
    readers.check("as of Java's first write", after_first, as_of=as_of_after(first_write))

    # -- tablesvc services the Java table ---------------------------------------------------------------
    tablesvc = Table.open(table.path)
    assert_ran(tablesvc.log_compact(spark=spark), "logcompaction")
    readers.check("tablesvc log compaction", model.rows())
    assert_ran(tablesvc.compact(spark=spark), "compaction")
    readers.check("tablesvc compaction", model.rows())
    java_write("Java upsert after tablesvc's compaction", "upsert", rows((0, 1, 27), 5000, "e"))
    cleaned = assert_ran(tablesvc.clean(options={"hoodie.cleaner.commits.retained": "1"}), "clean")
    assert cleaned.metrics.files_deleted > 0, cleaned.render()
    readers.check("tablesvc clean", model.rows())

    # -- a Java write killed mid-write; tablesvc rolls it back -------------------------------------------
    killed, partial_files = kill_a_java_write(java_hudi_setup, table, tmp_path / "java-killed")
    assert killed in pending_times(table.path) and partial_files
    readers.check("a Java write killed mid-write (pending)", model.rows())
    time.sleep(2.5)       # past SHORT_HEARTBEAT's window, in case the killed writer left a heartbeat
    rolled_back = assert_ran(tablesvc.rollback_failed(options=SHORT_HEARTBEAT), "rollback")
    assert rolled_back.metrics.target == killed and killed not in pending_times(table.path), rolled_back.render()
    assert data_files_of(table.path, killed) == [], "files of the killed write are left after its rollback"
    readers.check("tablesvc rollback of the killed Java write", model.rows())

    # -- Java goes on: writes, rolls back its latest write, compacts and cleans ------------------------
    java_write("Java upsert after tablesvc's services", "upsert", rows((3, 8, 10, 28), 6000, "f"))
    before_rollback = model.copy()
    java_write("Java upsert, to be rolled back", "upsert", rows((8, 12, 29), 7000, "g"))
    latest = completed(table.path, "deltacommit")[-1]
    java.rollback(table, latest.requested)
    model = before_rollback
    readers.check("Java rollback of its latest write", model.rows())
    result = java.compaction(table)
    assert any(r.get("state") == "COMPLETED" for r in result), result
    readers.check("Java compaction", model.rows())
    java_write("Java upsert after its compaction", "upsert", rows((14, 15), 8000, "h"))
    java.clean(table)
    readers.check("Java clean", model.rows())
    assert pending_times(table.path) == set()
    print("\n".join(readers.checked))     # the steps that agreed (pytest -rP shows them)
