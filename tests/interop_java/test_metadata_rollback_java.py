"""tablesvc rolls back a completed write on a table Java Hudi 1.2 wrote with its metadata table
(MDT) defaults, and Java goes on over it (docs/metadata-table.md, "Rolling back the metadata delta
commit T").

Java writes (MDT on: ``files``, ``column_stats``, ``partition_stats``); tablesvc rolls back Java's
latest upsert ``T`` at ``R``: the MDT gets a rollback instant at ``R`` whose plan names the MDT
delta commit ``T`` (Java's ``HoodieBackedTableMetadataWriter.update(HoodieRollbackMetadata, R)``),
and ``T`` leaves the MDT's timeline.  Then Java upserts, compacts and cleans.  After every step
Java's ``spark.read`` (MDT on), hudi-rs and tablesvc read exactly the model, and Java's own
comparison of the MDT with storage (``validate_metadata_table``) finds no difference.  Table
versions 8 and 9."""

from __future__ import annotations

import pytest
from event_time_model import EventTimeModel
from java_hudi import JavaTable
from metadata_validation import COLUMN_STATS, FILE_SLICES, validate_metadata_table
from reader_agreement import ThreeReaders
from scenario_rows import rows

from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from timeline.instant import Action
from timeline.payloads import decode_rollback_plan

pytestmark = pytest.mark.interop_java


@pytest.mark.parametrize("version", [8, 9])
def test_java_goes_on_after_tablesvc_rolls_back_a_completed_write(version, java_hudi_setup, start_java_hudi, spark,
                                                                  tmp_path):
    bundle = java_hudi_setup.bundle_for(version)
    table = JavaTable(str(tmp_path / "table"), f"mdt_rollback_v{version}", version, bundle, default_metadata=True)
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel()

    def agree(step: str) -> None:
        readers.check(step, model.rows())
        found = validate_metadata_table(java, table.path)
        assert not found.differences, f"after {step} (v{version}): Java's MDT validation\n{found.render()}"
        assert all(found.count(c) > 0 for c in (FILE_SLICES, COLUMN_STATS)), found.render()

    def java_write(step: str, operation: str, batch: list[tuple]) -> None:
        java.write(table, operation, batch)
        model.apply(operation, batch)
        agree(step)

    java_write("Java insert", "insert", rows(range(30), 1000, "a"))
    java_write("Java upsert", "upsert", rows(range(0, 10, 2), 2000, "b"))
    kept = model.copy()
    java.write(table, "upsert", rows((1, 3, 4, 31, 32), 3000, "rolled_back"))
    data = Table.open(table.path)
    target = data.timeline().latest_completed(Action.DELTA_COMMIT)
    mdt_before = MetadataTable(data.storage, data.base_path, data.timeline()).timeline
    assert mdt_before.is_completed(target.timestamp), "Java wrote the MDT delta commit of its upsert"

    # -- tablesvc rolls back Java's latest upsert -------------------------------------------------------
    result = Table.open(table.path).rollback(target.timestamp, allow_completed=True)
    assert result.status.value == "done", result.render()
    model = kept
    agree("tablesvc rollback of Java's upsert")
    data = Table.open(table.path)
    mdt = MetadataTable(data.storage, data.base_path, data.timeline()).timeline
    assert mdt.files_of(target.timestamp) == (), "the MDT delta commit T left the MDT's timeline"
    [rollback] = [i for i in mdt.completed(Action.ROLLBACK) if i.timestamp == result.instant]
    requested = next(f for f in mdt.files_of(rollback.timestamp) if f.state.value == "requested")
    plan = decode_rollback_plan(data.storage.read_bytes(mdt.path_of(requested)), "MDT rollback plan")
    assert plan.instant_to_rollback.commit_time == target.timestamp
    assert plan.instant_to_rollback.action == "deltacommit"

    # -- Java goes on ------------------------------------------------------------------------------------
    java_write("Java upsert after tablesvc's rollback", "upsert", rows((1, 3, 5, 40), 4000, "c"))
    compacted = java.compaction(table)
    assert any(r.get("state") == "COMPLETED" for r in compacted), compacted
    agree("Java compaction")
    java.write(table, "upsert", rows((6, 7, 41), 5000, "d"))
    model.apply("upsert", rows((6, 7, 41), 5000, "d"))
    assert java.clean(table)
    agree("Java clean")
