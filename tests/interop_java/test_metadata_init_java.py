"""Issue #27: a table ``tablesvc init`` creates with its default metadata table (``files``, built as
Java initialises one on an empty table: tablesvc/metadata/bootstrap.py), written by tablesvc, then
read and written by Java Hudi 1.2 with its Spark defaults (which add ``column_stats`` and
``partition_stats`` to the metadata table tablesvc built), then written by tablesvc again, which now
keeps all three partitions.

After every step: Java Hudi's ``spark.read`` (metadata table on), hudi-rs and tablesvc read exactly
the model (``reader_agreement``), and Java's own comparison of the metadata table with storage
(``metadata_validation``: partitions, latest file slices, and column and partition stats once Java
built them) finds no difference."""

from __future__ import annotations

import dataclasses
import time

import pytest
from event_time_model import EventTimeModel
from helpers import tablesvc
from java_hudi import JavaTable
from metadata_validation import COLUMN_STATS, FILE_SLICES, PARTITION_STATS, validate_metadata_table
from pyspark.sql.types import LongType, StringType, StructField, StructType
from reader_agreement import ThreeReaders
from scenario_rows import rows

from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from timeline.instant import Action

pytestmark = pytest.mark.interop_java

SCHEMA = StructType([StructField("id", StringType()), StructField("ts", LongType()),
                     StructField("part", StringType()), StructField("val", StringType())])
NO_INLINE = {"hoodie.compact.inline": "false", "hoodie.clean.automatic": "false"}


@pytest.mark.parametrize("version", [9, 8])
def test_a_table_tablesvc_init_created_with_a_metadata_table_is_read_and_written_by_java(
        version, java_hudi_setup, start_java_hudi, spark, tmp_path):
    t0 = time.perf_counter()
    path = tmp_path / "table"
    proc = tablesvc("init", str(path), "--name", f"init_mdt_v{version}", "--record-key", "id", "--ordering-field",
                    "ts", "--partition-field", "part", "--no-hive-style", "--table-version", str(version))
    assert proc.returncode == 0, proc.stderr
    assert Table.open(str(path)).config.metadata_partitions == ("files",)
    bundle = java_hudi_setup.bundle_for(version)
    table = dataclasses.replace(JavaTable.existing(path, bundle), default_metadata=True)
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel()
    validated: list[str] = []

    def agree(step: str, stats: bool) -> None:
        readers.check(step, model.rows())
        found = validate_metadata_table(java, table.path)
        assert not found.differences, f"after {step} (v{version}): Java's MDT validation\n{found.render()}"
        assert found.count(FILE_SLICES) > 0, found.render()
        if stats:
            assert all(found.count(c) > 0 for c in (COLUMN_STATS, PARTITION_STATS)), found.render()
        validated.append(f"{step}: " + ", ".join(f"{n} {c}" for c, n in found.compared))

    def tablesvc_write(step: str, operation: str, batch: list[tuple], stats: bool) -> None:
        t = Table.open(table.path)
        df = spark.createDataFrame(batch, SCHEMA)
        result = t.insert(df, options=NO_INLINE) if operation == "insert" else t.upsert(df, options=NO_INLINE)
        assert result.instant, result
        model.apply(operation, batch)
        agree(step, stats)

    def java_write(step: str, operation: str, batch: list[tuple]) -> None:
        java.write(table, operation, batch)
        model.apply(operation, batch)
        agree(step, stats=True)

    # -- tablesvc writes into the metadata table it built -----------------------------------------------
    tablesvc_write("tablesvc insert", "insert", rows(range(30), 1000, "a"), stats=False)
    tablesvc_write("tablesvc upsert", "upsert", rows(range(0, 30, 3), 2000, "b"), stats=False)
    # -- Java 1.2 with its defaults: reads through it, writes, adds column and partition stats ---------
    java_write("Java upsert (its defaults)", "upsert", rows((1, 2, 30, 31), 3000, "c"))
    listed = set(Table.open(table.path).config.metadata_partitions)
    assert listed == {"files", "column_stats", "partition_stats"}, listed
    java_write("Java delete", "delete", rows((4, 5), 4000, "d"))
    # -- tablesvc again, now keeping all three partitions --------------------------------------------------
    tablesvc_write("tablesvc upsert after Java", "upsert", rows((0, 6, 31, 40), 5000, "e"), stats=True)
    java_write("Java upsert after tablesvc", "upsert", rows((7, 40, 41), 6000, "f"))
    mdt = MetadataTable(Table.open(table.path).storage, table.path, Table.open(table.path).timeline())
    inits = [i.timestamp for i in mdt.timeline.completed(Action.DELTA_COMMIT) if i.timestamp.startswith("0000")]
    assert inits[0] == "00000000000000000", inits       # tablesvc's files initialisation stays
    print(f"v{version}: metadata table init instants {inits}; {time.perf_counter() - t0:.0f} s")
    print("\n".join(readers.checked))
    print("\n".join(validated))


def test_a_v6_table_tablesvc_init_created_with_its_metadata_table_is_written_by_java_015(
        java_hudi_setup, start_java_hudi, spark, tmp_path):
    """Version 6: ``tablesvc init`` builds Hudi 0.15's metadata table (``files`` at
    ``00000000000000010``); tablesvc writes into it, then Java 0.15 (metadata table on) reads,
    writes, compacts and cleans over it, and tablesvc writes again.  After every step the three
    readers read the model and the metadata table lists exactly what storage holds."""
    from metadata_tables import metadata_listing, storage_listing

    path = tmp_path / "table"
    proc = tablesvc("init", str(path), "--name", "init_mdt_v6", "--record-key", "id", "--ordering-field",
                    "ts", "--partition-field", "part", "--no-hive-style", "--table-version", "6")
    assert proc.returncode == 0, proc.stderr
    assert Table.open(str(path)).config.metadata_partitions == ("files",)
    assert (path / ".hoodie" / "metadata" / ".hoodie" / "00000000000000010.deltacommit").is_file()
    bundle = java_hudi_setup.bundle_for(6)
    table = dataclasses.replace(JavaTable.existing(path, bundle), default_metadata=True)
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel()

    def agree(step: str) -> None:
        readers.check(step, model.rows())
        t = Table.open(table.path)
        assert t.uses_metadata_table, step
        assert metadata_listing(t) == storage_listing(table.path), f"after {step}: MDT listing differs from storage"

    def tablesvc_write(step: str, operation: str, batch: list[tuple]) -> None:
        t = Table.open(table.path)
        df = spark.createDataFrame(batch, SCHEMA)
        result = t.insert(df, options=NO_INLINE) if operation == "insert" else t.upsert(df, options=NO_INLINE)
        assert result.instant, result
        model.apply(operation, batch)
        agree(step)

    def java_write(step: str, operation: str, batch: list[tuple]) -> None:
        java.write(table, operation, batch)
        model.apply(operation, batch)
        agree(step)

    tablesvc_write("tablesvc insert", "insert", rows(range(30), 1000, "a"))
    tablesvc_write("tablesvc upsert", "upsert", rows(range(0, 30, 3), 2000, "b"))
    java_write("Java 0.15 upsert", "upsert", rows((1, 2, 30, 31), 3000, "c"))
    java_write("Java 0.15 delete", "delete", rows((4, 5), 4000, "d"))
    compacted = java.compaction(table)
    assert any(r.get("state") == "COMPLETED" for r in compacted), compacted
    agree("Java 0.15 compaction")
    java_write("Java 0.15 upsert after its compaction", "upsert", rows((6, 7, 40), 5000, "e"))
    cleaned = java.clean(table)
    assert cleaned, cleaned
    agree("Java 0.15 clean")
    tablesvc_write("tablesvc upsert after Java", "upsert", rows((0, 8, 31, 41), 6000, "f"))
    final = Table.open(table.path)
    assert final.config.metadata_partitions == ("files",)
    mdt = MetadataTable(final.storage, final.base_path, final.timeline())
    inits = [i.timestamp for i in mdt.timeline.completed(Action.DELTA_COMMIT) if i.timestamp.startswith("0000")]
    assert inits == ["00000000000000010"], inits       # Java 0.15 kept tablesvc's initialisation
    print("\n".join(readers.checked))
