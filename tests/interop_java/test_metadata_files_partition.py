"""Issue #27, the files partition: Java Hudi 1.2 writes a MERGE_ON_READ table with its metadata
table on but column stats, partition stats and the record index off (so the metadata table lists
``files`` only); tablesvc log-compacts, compacts and cleans it, writing the metadata table's
delta commits; Java reads through the metadata table, writes on (updating the metadata table
tablesvc wrote to) and reads again.  After every step Java Hudi (metadata table on), hudi-rs
(which lists v8/v9 through it) and tablesvc read the model, and the metadata table's listing
equals storage's.  Table versions 8 and 9."""

from __future__ import annotations

import pytest
from event_time_model import EventTimeModel
from java_hudi import JavaTable
from metadata_tables import metadata_listing, storage_listing
from reader_agreement import ThreeReaders
from scenario_rows import assert_ran, rows

from tablesvc.api import Table
from tablesvc.logformat import HeaderKey, read_log_file
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.record_schema import metadata_record_schema
from timeline.instant import Action

pytestmark = pytest.mark.interop_java


def _listing_agrees(path: str, step: str) -> None:
    table = Table.open(path)
    assert metadata_listing(table) == storage_listing(path), f"after {step}: metadata listing != storage"


def _mdt_delta_commits(path: str) -> set[str]:
    table = Table.open(path)
    return {i.timestamp for i in MetadataTable(table.storage, table.base_path, table.timeline())
            .timeline.completed(Action.DELTA_COMMIT)}


@pytest.mark.parametrize("version", [8, 9])
def test_java_files_only_metadata_table_serviced_by_tablesvc(version, java_hudi_setup, start_java_hudi, spark,
                                                             tmp_path):
    bundle = java_hudi_setup.bundle_for(version)
    table = JavaTable(str(tmp_path / "table"), f"mdt_files_v{version}", version, bundle, files_only_metadata=True)
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel()

    def java_write(step: str, operation: str, batch: list[tuple]) -> None:
        java.write(table, operation, batch)
        model.apply(operation, batch)
        readers.check(step, model.rows())
        _listing_agrees(table.path, step)

    java_write("Java insert", "insert", rows(range(24), 1000, "a"))
    opened = Table.open(table.path)
    assert opened.config.version == version
    assert opened.config.metadata_partitions == ("files",), opened.config.metadata_partitions
    java_write("Java upsert", "upsert", rows(range(0, 12, 2), 2000, "b") + rows(range(24, 27), 2000, "b"))
    java_write("Java upsert of older events (they lose)", "upsert", rows((1, 3, 6), 10, "old"))
    java_write("Java upsert", "upsert", rows((2, 4, 9, 11, 26), 4000, "c"))

    # what Java's own blocks carry, beside the schema tablesvc writes (printed for the record)
    java_log = sorted((tmp_path / "table" / ".hoodie" / "metadata" / "files").glob(".files-*"))[-1]
    java_schema = dict(read_log_file(opened.storage, str(java_log)).blocks[0].header)[HeaderKey.SCHEMA]
    print(f"Java {bundle.label} block schema == tablesvc's: {java_schema == metadata_record_schema()}")

    tablesvc = Table.open(table.path)
    lc = assert_ran(tablesvc.log_compact(spark=spark), "logcompaction")
    readers.check("tablesvc log compaction", model.rows())
    _listing_agrees(table.path, "tablesvc log compaction")
    c = assert_ran(Table.open(table.path).compact(spark=spark), "compaction")
    readers.check("tablesvc compaction", model.rows())
    _listing_agrees(table.path, "tablesvc compaction")
    java_write("Java upsert after tablesvc's compaction", "upsert", rows((0, 1, 27), 5000, "e"))
    cl = assert_ran(Table.open(table.path).clean(options={"hoodie.cleaner.commits.retained": "1"}), "clean")
    assert cl.metrics.files_deleted > 0, cl.render()
    readers.check("tablesvc clean", model.rows())
    _listing_agrees(table.path, "tablesvc clean")
    assert {lc.instant, c.instant, cl.instant} <= _mdt_delta_commits(table.path)

    # Java goes on over the metadata table tablesvc wrote to
    java_write("Java upsert after tablesvc's services", "upsert", rows((3, 8, 10, 28), 6000, "f"))
    java_write("Java delete", "delete", rows((5, 7), 7000, "d"))
    result = java.compaction(table)
    assert any(r.get("state") == "COMPLETED" for r in result), result
    readers.check("Java compaction", model.rows())
    _listing_agrees(table.path, "Java compaction")
    assert Table.open(table.path).config.metadata_partitions == ("files",)
    print("\n".join(readers.checked))
