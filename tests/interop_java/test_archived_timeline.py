"""Scenario 4 of issue #26: tables whose old instants Java Hudi archived.

Java Hudi writes a MERGE_ON_READ table with its own inline compaction, automatic clean and
archival on, and small ``hoodie.keep.min.commits`` / ``hoodie.keep.max.commits``, until the active
timeline no longer starts at the first write: the oldest instants are in the archive (table
version 6: ``.hoodie/archived/``, Hudi 0.15; 8 and 9: the LSM history ``.hoodie/timeline/history/``,
Hudi 1.2).  Then:

1. every reader reads it (Java Hudi, hudi-rs, tablesvc = the model); a time-travel read as of an
   archived instant is refused by tablesvc, naming the instant (what Java and hudi-rs do is printed);
2. tablesvc runs log compaction, compaction and clean on it;
3. tablesvc schedules a compaction and leaves it pending; Java writes on with archival on and must
   not archive past it (more completed commits stay active than ``keep.max.commits``); tablesvc then
   runs it;
4. Java writes on with its services, and archives again: tablesvc's instants (log compaction,
   compaction, clean) and the once-pending compaction go to Java's archive.

After every step the readers agree with the model.  The metadata table is off (issue #27).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from event_time_model import EventTimeModel
from java_hudi import JavaHudi, JavaTable, JavaStepError
from oracles.hudi_rs import sorted_rows as hudi_rs_sorted_rows
from reader_agreement import ThreeReaders, first_difference, tablesvc_rows
from scenario_rows import assert_ran, rows
from timeline_files import completed, instant_files, pending_times

from tablesvc.api import Table
from tablesvc.services.compaction.planner import schedule_compaction
from tablesvc.services.result import Status
from tablesvc.storage import storage_for
from timeline.errors import TimeTravelError
from timeline.history import ArchivedCompletionTimes, forget_history

pytestmark = pytest.mark.interop_java

KEEP_MIN, KEEP_MAX, RETAINED = 3, 4, 2

# Java's own services, as a Java writer runs them: archival needs keep.min > commits retained
ARCHIVAL = {
    "hoodie.archive.automatic": "true",
    "hoodie.keep.min.commits": str(KEEP_MIN),
    "hoodie.keep.max.commits": str(KEEP_MAX),
    "hoodie.clean.automatic": "true",
    "hoodie.cleaner.commits.retained": str(RETAINED),
}
INLINE_COMPACTION = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"}


def archived_files(path: str, version: int) -> list[str]:
    """The archive Java wrote: v6 ``.hoodie/archived/.commits_.archive.*``; v8/v9 the LSM history's
    parquet files and its manifest under ``.hoodie/timeline/history/``."""
    if version == 6:
        folder = Path(path) / ".hoodie" / "archived"
        names = [n.name for n in folder.iterdir()] if folder.is_dir() else []
        return sorted(n for n in names if n.startswith(".commits_.archive.") and not n.endswith(".crc"))
    folder = Path(path) / ".hoodie" / "timeline" / "history"
    names = [n.name for n in folder.iterdir()] if folder.is_dir() else []
    parquet = sorted(n for n in names if n.endswith(".parquet"))
    manifests = [n for n in names if n.startswith("manifest_")]
    return parquet if parquet and manifests else []


def active_times(path: str) -> set[str]:
    return {f.requested for f in instant_files(path)}


@pytest.mark.parametrize("version", [6, 8, 9])
def test_java_archives_tablesvc_services(version, java_hudi_setup, start_java_hudi, spark, tmp_path):
    bundle = java_hudi_setup.bundle_for(version)
    table = JavaTable(str(tmp_path / "table"), f"archived_v{version}", version, bundle)
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel()
    findings: list[str] = []
    ts = iter(range(1000, 1_000_000, 1000))     # a new event-time base per write: later events win

    # v8/v9: instant -> completion time, from the active timeline's file names before Java archives
    # the instant (an instant completes in one step and is archived at the earliest in a later one)
    seen: dict[str, str] = {}

    def record() -> None:
        if not (Path(table.path) / ".hoodie").is_dir():    # before the first write
            return
        for f in completed(table.path):
            if f.completed:
                assert seen.setdefault(f.requested, f.completed) == f.completed, f

    def java_write(operation: str, batch: list[tuple], services: dict) -> None:
        request = JavaHudi.write_request(table, operation, rows=batch)
        request["options"].update(services)
        record()
        java.step(request)
        record()
        model.apply(operation, batch)

    def upserts(count: int, services: dict, tag: str) -> None:
        for i in range(count):
            base = next(ts)
            keys = [(i * 5 + j) % 30 for j in range(6)]
            java_write("upsert", rows(sorted(set(keys)), base, f"{tag}{i}_"), services)

    # -- 1. Java writes with its services and archival on, until it archived ------------------------
    java_write("insert", rows(range(24), next(ts), "a"), {**ARCHIVAL, **INLINE_COMPACTION})
    first_write = completed(table.path, "deltacommit")[0].requested
    upserts(6, {**ARCHIVAL, **INLINE_COMPACTION}, "b")
    java_write("delete", rows((5, 7, 21), next(ts), "d"), {**ARCHIVAL, **INLINE_COMPACTION})
    upserts(5, {**ARCHIVAL, **INLINE_COMPACTION}, "c")
    archive = archived_files(table.path, version)
    assert archive, f"Java archived nothing: {sorted(active_times(table.path))}"
    assert first_write not in active_times(table.path), \
        f"the first write {first_write} is still on the active timeline after Java's archival"
    start = min(active_times(table.path))
    findings.append(f"Java archived: {archive}; the active timeline starts at {start}; first write {first_write}")
    readers.check("Java wrote and archived", model.rows())

    # time travel to an archived instant: tablesvc refuses it, naming the instant
    with pytest.raises(TimeTravelError, match=first_write):
        tablesvc_rows(table.path, spark, as_of=first_write)
    for reader, read in (("Java Hudi", lambda: java.read(table, first_write)),
                         ("hudi-rs", lambda: hudi_rs_sorted_rows(table.path, ("id", "ts", "part", "val"), first_write))):
        try:
            got = read()
            findings.append(f"as of archived {first_write}: {reader} read {len(got)} rows")
        except (JavaStepError, Exception) as exc:   # noqa: BLE001 - recorded: what the oracle does is the finding
            findings.append(f"as of archived {first_write}: {reader} refused: {str(exc).splitlines()[0][:200]}")

    # -- 2. tablesvc services the archived table ----------------------------------------------------
    upserts(3, {}, "e")                      # logs for tablesvc's services (Java's services off)
    tablesvc = Table.open(table.path)
    log_compacted = assert_ran(tablesvc.log_compact(spark=spark), "logcompaction").instant
    readers.check("tablesvc log compaction", model.rows())
    compacted = assert_ran(tablesvc.compact(spark=spark), "compaction").instant
    readers.check("tablesvc compaction", model.rows())
    upserts(2, {}, "f")
    cleaned = assert_ran(tablesvc.clean(options={"hoodie.cleaner.commits.retained": str(RETAINED)}), "clean")
    assert cleaned.metrics.files_deleted > 0, cleaned.render()
    readers.check("tablesvc clean", model.rows())

    # -- 3. a pending compaction of tablesvc's holds Java's archival back ----------------------------
    upserts(1, {}, "g")
    scheduled = schedule_compaction(tablesvc, None, force=True)
    assert scheduled.status is Status.SCHEDULED, scheduled.render()
    pending = scheduled.instant
    before_pending = [f.requested for f in completed(table.path, "deltacommit", "commit") if f.requested < pending]
    upserts(6, ARCHIVAL, "h")                # archival and clean on; compaction off: Java would run the plan
    assert pending in pending_times(table.path), f"tablesvc's compaction {pending} is no longer pending"
    active_commits = completed(table.path, "deltacommit", "commit")
    assert len(active_commits) > KEEP_MAX, \
        f"{len(active_commits)} completed commits active: archival did not run at all?"
    assert before_pending and before_pending[-1] in active_times(table.path), \
        f"Java archived {before_pending[-1:]}, the last commit before the pending compaction {pending}"
    assert all(f.requested >= before_pending[-1] for f in active_commits), \
        "a commit older than the one before the pending compaction stayed active: archival never ran"
    findings.append(f"pending compaction {pending}: {len(active_commits)} completed commits stay active "
                    f"(keep.max {KEEP_MAX}), the oldest {active_commits[0].requested}")
    if version == 6:
        # hudi-rs hides v6 logs named with a pending compaction (tests/oracles/hudi_rs.py): Java and
        # tablesvc are compared here, all three once the compaction completed
        for reader, got in (("Java Hudi", java.read(table)), ("tablesvc", tablesvc_rows(table.path, spark))):
            diff = first_difference(got, model.rows())
            assert diff is None, f"v6, compaction {pending} pending: {reader} differs from the model: {diff}"
        findings.append(f"v6, compaction {pending} pending: Java Hudi and tablesvc agree with the model")
    else:
        readers.check(f"Java writes past tablesvc's pending compaction {pending}", model.rows())
    assert_ran(tablesvc.compact(pending, spark=spark), "compaction")
    readers.check(f"tablesvc ran its compaction {pending}", model.rows())

    # -- 4. Java goes on with its services and archives tablesvc's instants --------------------------
    upserts(8, {**ARCHIVAL, **INLINE_COMPACTION}, "i")
    gone = active_times(table.path)
    for name, instant in (("log compaction", log_compacted), ("compaction", compacted), ("clean", cleaned.instant),
                          ("the once-pending compaction", pending)):
        assert instant not in gone, f"tablesvc's {name} {instant} was not archived by Java: {sorted(gone)}"
    assert len(archived_files(table.path, version)) >= 1
    readers.check("Java archived tablesvc's instants", model.rows())
    assert pending_times(table.path) == set()
    findings.append(f"after Java's second archival the active timeline starts at {min(gone)}")
    if version >= 8:
        # tablesvc's completion times of the archived instants (the LSM history) are Java's own
        archived = sorted(t for t in seen if t not in gone)
        assert log_compacted in archived and compacted in archived and pending in archived
        forget_history(table.path)
        got = ArchivedCompletionTimes(storage_for(table.path), table.path).completion_times(archived)
        assert got == {t: seen[t] for t in archived}, \
            f"history completion times differ: {sorted(set(got.items()) ^ {(t, seen[t]) for t in archived})}"
        findings.append(f"the LSM history gives the recorded completion time of all {len(archived)} archived instants")
    print("\n".join(findings + readers.checked))
