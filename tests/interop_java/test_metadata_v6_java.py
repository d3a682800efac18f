"""Issue #27 on table version 6: a table Java Hudi 0.15.0 wrote with its metadata table (MDT) on
(``tests/data/hudi/v6_metadata/v6_mdt_files``: ``files``, Java's MDT compacted at ``<t>001``), then
tablesvc upserts, log-compacts, compacts, cleans and upserts on until the MDT's own compaction (due
after 10 delta commits, Hudi 0.15's ``<latest delta commit>001``) has run inside a tablesvc commit.
Then Java 0.15 (MDT on) reads, writes, compacts and cleans on top of the MDT tablesvc wrote.

After every step: Java Hudi's ``spark.read`` (MDT on: it lists files through the MDT), hudi-rs
(which lists v6 tables from storage) and tablesvc read exactly the model (``reader_agreement``),
and the MDT's listing equals a storage listing (names and sizes).  With ``column_stats``
(``v6_mdt_colstats``), Java keeps the partition through its steps and every data file on storage
ends with its live column-stats records."""

from __future__ import annotations

import json
import shutil
import time

import pytest
from event_time_model import EventTimeModel
from java_hudi import JavaHudi, JavaTable
from pyspark.sql.types import LongType, StringType, StructField, StructType
from reader_agreement import ThreeReaders
from scenario_rows import assert_ran, rows

from fixture_tables import V6_METADATA_FIXTURES_DIR, v6_metadata_table
from metadata_tables import metadata_listing, storage_listing
from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.mdt_compaction import merge_for
from tablesvc.metadata.mdt_compaction_plan import DEFAULT_MAX_DELTA_COMMITS
from tablesvc.metadata.partition_reader import partition_records
from timeline.instant import Action

pytestmark = pytest.mark.interop_java

SCHEMA = StructType([StructField("id", StringType()), StructField("ts", LongType()),
                     StructField("part", StringType()), StructField("val", StringType())])
MAX_TABLESVC_UPSERTS = DEFAULT_MAX_DELTA_COMMITS + 2


def _mdt_compactions(path: str) -> set[str]:
    table = Table.open(path)
    return {i.timestamp for i in MetadataTable(table.storage, table.base_path, table.timeline())
            .timeline.completed(Action.COMMIT)}


@pytest.mark.parametrize("name", ["v6_mdt_files", "v6_mdt_colstats"])
def test_v6_metadata_table_serviced_by_tablesvc_then_java_015(name, java_hudi_setup, start_java_hudi, spark,
                                                              tmp_path):
    t0 = time.perf_counter()
    bundle = java_hudi_setup.bundle_for(6)
    path = v6_metadata_table(name, tmp_path)
    fixture = json.loads((V6_METADATA_FIXTURES_DIR / f"{name}.json").read_text())
    listed = set(Table.open(str(path)).config.metadata_partitions)
    # every Java step (writes and CALLs) with the options the fixture was made with: Java's MDT
    # compacts every 3 delta commits, and a 0.15 writer without column stats on would delete them
    table = JavaTable(str(path), name, 6, bundle, default_metadata=True, index=tuple(fixture["options"].items()))
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel({r[0]: tuple(r) for r in fixture["model"]})
    tablesvc_compactions: set[str] = set()

    def agree(step: str) -> None:
        readers.check(step, model.rows())
        t = Table.open(table.path)
        assert metadata_listing(t) == storage_listing(table.path), f"after {step}: MDT listing differs from storage"

    def tablesvc_step(step: str, run):
        before = _mdt_compactions(table.path)
        result = run()
        tablesvc_compactions.update(_mdt_compactions(table.path) - before)
        agree(step)
        return result

    def java_write(step: str, operation: str, batch: list[tuple]) -> None:
        java.step(JavaHudi.write_request(table, operation, rows=batch))
        model.apply(operation, batch)
        agree(step)

    agree("Java 0.15's fixture")
    batch = rows((0, 3, 10), 100_000, "t0_")
    model.apply("upsert", batch)
    tablesvc_step("tablesvc upsert", lambda: Table.open(table.path).upsert(
        spark.createDataFrame(batch, SCHEMA), options={"hoodie.compact.inline": "false",
                                                       "hoodie.clean.automatic": "false"}))
    tablesvc_step("tablesvc log compaction",
                  lambda: assert_ran(Table.open(table.path).log_compact(spark=spark), "logcompaction"))
    tablesvc_step("tablesvc compaction", lambda: assert_ran(Table.open(table.path).compact(spark=spark), "compaction"))
    cl = tablesvc_step("tablesvc clean", lambda: assert_ran(
        Table.open(table.path).clean(options={"hoodie.cleaner.commits.retained": "1"}), "clean"))
    assert cl.metrics.files_deleted > 0, cl.render()

    upserts = 0
    while not tablesvc_compactions:
        assert upserts < MAX_TABLESVC_UPSERTS, f"no MDT compaction after {upserts} tablesvc upserts"
        upserts += 1
        batch = rows((upserts % 10, 20 + upserts), 200_000 + 10_000 * upserts, f"t{upserts}_")
        model.apply("upsert", batch)
        tablesvc_step(f"tablesvc upsert {upserts}", lambda b=batch: Table.open(table.path).upsert(
            spark.createDataFrame(b, SCHEMA), options={"hoodie.compact.inline": "false",
                                                       "hoodie.clean.automatic": "false"}))
    (ours,) = tablesvc_compactions
    assert len(ours) == 20 and ours.endswith("001"), ours
    assert list((path / ".hoodie" / "metadata" / "files").glob(f"files-0000-0_1-0-1_{ours}.hfile"))

    # -- Java 0.15 goes on over the MDT tablesvc wrote and compacted ------------------------------------
    java_write("Java upsert after tablesvc's MDT compaction", "upsert", rows((1, 4, 30), 900_000, "j"))
    java_write("Java delete", "delete", rows((3,), 910_000, "x"))
    result = java.compaction(table)
    assert any(r.get("state") == "COMPLETED" for r in result), result
    agree("Java compaction")
    java_write("Java upsert", "upsert", rows((2, 5), 950_000, "k"))
    cleaned = java.clean(table)
    assert cleaned, cleaned
    agree("Java clean")
    final = Table.open(table.path)
    assert set(final.config.metadata_partitions) == listed, "Java kept the metadata partitions"
    if "column_stats" in listed:
        # every data file on storage has its live records, whoever wrote it (0.15: every column)
        records = partition_records(MetadataTable(final.storage, final.base_path, final.timeline()), "column_stats",
                                    merge_for("column_stats"))
        by_file: dict[str, list] = {}
        for v in records.values():
            if v is not None:
                by_file.setdefault(v["ColumnStatsMetadata"]["fileName"], []).append(v["ColumnStatsMetadata"])
        for files in storage_listing(table.path).values():
            for file_name in files:
                bodies = by_file.get(file_name, [])
                assert len(bodies) == 9 and not any(b["isDeleted"] for b in bodies), (file_name, bodies)
    mdt = MetadataTable(final.storage, final.base_path, final.timeline())
    print(f"{name}: tablesvc upserts {upserts}; MDT compaction by tablesvc {ours}; MDT at the end: "
          f"{len(mdt.timeline.completed(Action.DELTA_COMMIT))} delta commits, "
          f"{sorted(_mdt_compactions(table.path))} compactions; {time.perf_counter() - t0:.0f} s")
    print("\n".join(readers.checked))
    shutil.rmtree(tmp_path / "java", ignore_errors=True)


def test_v6_metadata_log_compaction_by_tablesvc_then_java_015(java_hudi_setup, start_java_hudi, spark, tmp_path):
    """A tablesvc upsert with ``hoodie.metadata.log.compaction.enable`` (threshold 2, as the
    write's options: ``--conf``) log-compacts the v6 metadata table inside its commit at ``<latest
    delta commit>005`` (Hudi 0.15's ``compactIfNecessary``), the compacted log files named by their
    slice's base instant at the next version; then Java 0.15 reads through that metadata table,
    writes, compacts and cleans over it, and every reader agrees with the model and storage."""
    from tablesvc.metadata.mdt_log_compaction_plan import ENABLE_KEY, THRESHOLD_KEY

    name = "v6_mdt_colstats"
    bundle = java_hudi_setup.bundle_for(6)
    path = v6_metadata_table(name, tmp_path)
    fixture = json.loads((V6_METADATA_FIXTURES_DIR / f"{name}.json").read_text())
    table = JavaTable(str(path), name, 6, bundle, default_metadata=True, index=tuple(fixture["options"].items()))
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel({r[0]: tuple(r) for r in fixture["model"]})

    def agree(step: str) -> None:
        readers.check(step, model.rows())
        t = Table.open(table.path)
        assert metadata_listing(t) == storage_listing(table.path), f"after {step}: MDT listing differs from storage"

    def log_compactions() -> list[str]:
        t = Table.open(table.path)
        mdt = MetadataTable(t.storage, t.base_path, t.timeline()).timeline
        return [i.timestamp for i in mdt.completed(Action.DELTA_COMMIT)
                if any(f.action is Action.LOG_COMPACTION for f in mdt.files_of(i.timestamp))]

    t = Table.open(table.path)
    latest = MetadataTable(t.storage, t.base_path, t.timeline()).timeline.latest_completed(Action.DELTA_COMMIT)
    batch = rows((0, 3, 10), 100_000, "t0_")
    model.apply("upsert", batch)
    Table.open(table.path).upsert(spark.createDataFrame(batch, SCHEMA), options={
        "hoodie.compact.inline": "false", "hoodie.clean.automatic": "false", ENABLE_KEY: "true", THRESHOLD_KEY: "2"})
    assert log_compactions() == [latest.timestamp + "005"]
    agree("tablesvc upsert with the metadata table's log compaction")

    java.step(JavaHudi.write_request(table, "upsert", rows((1, 4, 30), 900_000, "j")))
    model.apply("upsert", rows((1, 4, 30), 900_000, "j"))
    agree("Java upsert after tablesvc's MDT log compaction")
    result = java.compaction(table)
    assert any(r.get("state") == "COMPLETED" for r in result), result
    agree("Java compaction")
    java.step(JavaHudi.write_request(table, "delete", rows((3,), 910_000, "x")))
    model.apply("delete", rows((3,), 910_000, "x"))
    agree("Java delete")
    print("\n".join(readers.checked))
    shutil.rmtree(tmp_path / "java", ignore_errors=True)
