"""Scenario 2 of issue #26: tablesvc writes, Java takes over.

tablesvc creates a MERGE_ON_READ table and writes it (inserts, updates, updates carrying older
event times, deletes); Java Hudi reads it, writes on it with the settings the table records
(its key, ordering and partition fields, Hive-style partition folders, tablesvc's bucket index),
compacts and cleans it with its own procedures; tablesvc and hudi-rs read it back, and tablesvc
writes once more on the table Java serviced.  After every step Java Hudi, hudi-rs and tablesvc
read the same rows as the model.  Java's log compaction runs too (inline after one of its writes:
Hudi has no procedure for it) over log blocks tablesvc and Java wrote.  Table versions 6 (Hudi 0.15), 8 and 9 (the newest bundle); the
metadata table is off (issue #27).
"""

from __future__ import annotations

import pytest
from event_time_model import EventTimeModel
from java_hudi import COLUMNS, SCHEMA_DDL, JavaTable
from reader_agreement import ThreeReaders
from scenario_rows import rows
from timeline_files import as_of_after, completed, instant_files, pending_times

from tablesvc.api import Table, TableSpec

pytestmark = pytest.mark.interop_java

# tablesvc's writes here run no service of their own: each service in the scenario is Java's
NO_INLINE_SERVICES = {"hoodie.clean.automatic": "false", "hoodie.compact.inline": "false",
                      "hoodie.log.compaction.inline": "false"}


# Hudi has no procedure for log compaction: a write runs it inline once a slice holds this many blocks
JAVA_INLINE_LOG_COMPACTION = {"hoodie.log.compaction.inline": "true", "hoodie.log.compaction.blocks.threshold": "2"}


@pytest.mark.parametrize("version", [6, 8, 9])
def test_tablesvc_writes_java_takes_over(version, java_hudi_setup, start_java_hudi, spark, tmp_path):
    path = str(tmp_path / "table")
    tablesvc = Table.create(path, TableSpec(f"tablesvc_writes_v{version}", ("id",), "ts", ("part",),
                                            table_version=version))
    bundle = java_hudi_setup.bundle_for(version)
    table = JavaTable.existing(path, bundle)
    assert (table.record_key, table.ordering_field, table.partition_field) == ("id", "ts", "part")
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel()

    def tablesvc_write(step: str, operation: str, batch: list[tuple]) -> None:
        df = spark.createDataFrame(batch, SCHEMA_DDL).select(*COLUMNS)
        tablesvc.write(df, operation, options=NO_INLINE_SERVICES)
        model.apply(operation, batch)
        readers.check(step, model.rows())

    def java_write(step: str, operation: str, batch: list[tuple]) -> None:
        java.write(table, operation, batch)
        model.apply(operation, batch)
        readers.check(step, model.rows())

    def log_compactions_done() -> set[str]:
        """A log compaction completes as a deltacommit: its requested file says what it was."""
        files = instant_files(path)
        planned = {f.requested for f in files if f.action == "logcompaction"}
        return planned & {f.requested for f in files if f.state == "completed"}

    def java_log_compaction(step: str, batch: list[tuple]) -> None:
        before = log_compactions_done()
        request = java.write_request(table, "upsert", rows=batch)
        request["options"].update(JAVA_INLINE_LOG_COMPACTION)
        java.step(request)
        model.apply("upsert", batch)
        assert log_compactions_done() - before, f"{step}: Java completed no log compaction (table version {version})"
        readers.check(step, model.rows())

    # -- tablesvc writes; Java reads each state ------------------------------------------------------
    tablesvc_write("tablesvc insert", "insert", rows(range(24), 1000, "a"))
    first_write, after_first = completed(path, "deltacommit")[0], model.rows()
    tablesvc_write("tablesvc upsert (updates and inserts)", "upsert",
                   rows(range(0, 12, 2), 2000, "b") + rows(range(24, 27), 2000, "b"))
    tablesvc_write("tablesvc upsert of older events (they lose)", "upsert", rows((1, 3, 6), 10, "old"))
    tablesvc_write("tablesvc delete", "delete", rows((5, 7, 25), 3000, "d"))
    readers.check("as of tablesvc's first write", after_first, as_of=as_of_after(first_write))

    # -- Java takes over: writes, compacts, cleans -------------------------------------------------------
    java_write("Java upsert on tablesvc's table", "upsert", rows((2, 4, 9, 11, 27, 28), 4000, "c"))
    java_write("Java upsert of older events (they lose)", "upsert", rows((0, 13), 20, "old"))
    java_write("Java delete", "delete", rows((13, 27), 5000, "d"))
    # Java's log compaction (no procedure: a write with it inline) folds tablesvc's and Java's blocks
    java_log_compaction("Java upsert with its log compaction inline", rows((1, 8), 4500, "lc"))
    result = java.compaction(table)
    assert any(r.get("state") == "COMPLETED" for r in result), result
    readers.check("Java compaction", model.rows())
    java_write("Java upsert after its compaction", "upsert", rows((15, 16), 6000, "e"))
    java.clean(table)
    readers.check("Java clean", model.rows())

    # -- tablesvc goes on where Java left the table ------------------------------------------------------
    tablesvc_write("tablesvc upsert after Java's services", "upsert", rows((0, 15, 29), 7000, "f"))
    assert pending_times(path) == set()
    print("\n".join(readers.checked))     # the steps that agreed (pytest -rP shows them)
