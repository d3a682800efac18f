"""Issue #27, the metadata table (MDT) as a default Java writer keeps it: Java Hudi 1.2 writes a
partitioned MERGE_ON_READ table with its Spark defaults for the MDT (on, ``files``,
``column_stats`` and ``partition_stats``; the record index is off by default in 1.2), then
tablesvc log-compacts, compacts, cleans and upserts on it until the MDT's own compaction (due
after 10 delta commits) has run inside a tablesvc commit.  Then Java writes, compacts and cleans
on top of the MDT tablesvc wrote.

After every step: Java Hudi's ``spark.read`` (MDT on), hudi-rs and tablesvc read exactly the
model (``reader_agreement``), and Java's own comparison of the MDT with storage
(``metadata_validation``: partitions, latest file slices, column stats, partition stats) finds no
difference.

Which MDT compaction is tablesvc's: the MDT's completed compactions (completed ``commit`` instants
on ``.hoodie/metadata/.hoodie/timeline``) are recorded before and after every step; one that
appears during a tablesvc step, while the Java driver sits idle waiting for its next request, can
only have been written by tablesvc.  Its base files also carry tablesvc's write token (``1-0-1``).
Table versions 8 and 9."""

from __future__ import annotations

import time

import pytest
from event_time_model import EventTimeModel
from java_hudi import JavaTable
from metadata_validation import COLUMN_STATS, FILE_SLICES, PARTITION_STATS, validate_metadata_table
from pyspark.sql.types import LongType, StringType, StructField, StructType
from reader_agreement import ThreeReaders
from scenario_rows import assert_ran, rows

from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.mdt_compaction_plan import DEFAULT_MAX_DELTA_COMMITS, delta_commits_since_compaction
from timeline.instant import Action

pytestmark = pytest.mark.interop_java

# what a default Hudi 1.2 Spark writer lists in hoodie.table.metadata.partitions (record index off)
JAVA_DEFAULT_PARTITIONS = {"files", "column_stats", "partition_stats"}
SCHEMA = StructType([StructField("id", StringType()), StructField("ts", LongType()),
                     StructField("part", StringType()), StructField("val", StringType())])
# tablesvc upserts after its services: more than enough to reach 10 MDT delta commits from any start
MAX_TABLESVC_UPSERTS = DEFAULT_MAX_DELTA_COMMITS + 2


def _mdt(path: str) -> MetadataTable:
    table = Table.open(path)
    return MetadataTable(table.storage, table.base_path, table.timeline())


def _mdt_compactions(path: str) -> set[str]:
    return {i.timestamp for i in _mdt(path).timeline.completed(Action.COMMIT)}


def _mdt_delta_commits(path: str) -> set[str]:
    return {i.timestamp for i in _mdt(path).timeline.completed(Action.DELTA_COMMIT)}


@pytest.mark.parametrize("version", [8, 9])
def test_java_default_metadata_table_serviced_by_tablesvc(version, java_hudi_setup, start_java_hudi, spark,
                                                          tmp_path):
    t0 = time.perf_counter()
    bundle = java_hudi_setup.bundle_for(version)
    table = JavaTable(str(tmp_path / "table"), f"mdt_defaults_v{version}", version, bundle, default_metadata=True)
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel()
    validated: list[str] = []
    tablesvc_compactions: set[str] = set()

    def agree(step: str) -> None:
        readers.check(step, model.rows())
        found = validate_metadata_table(java, table.path)
        assert not found.differences, f"after {step} (v{version}): Java's MDT validation\n{found.render()}"
        # the checks must have run, not been skipped: the table keeps all three partitions
        assert all(found.count(c) > 0 for c in (FILE_SLICES, COLUMN_STATS, PARTITION_STATS)), found.render()
        validated.append(f"{step}: " + ", ".join(f"{n} {c}" for c, n in found.compared))

    def java_write(step: str, operation: str, batch: list[tuple]) -> None:
        java.write(table, operation, batch)
        model.apply(operation, batch)
        agree(step)

    def tablesvc_step(step: str, run) -> object:
        before = _mdt_compactions(table.path)
        result = run()
        tablesvc_compactions.update(_mdt_compactions(table.path) - before)
        agree(step)
        return result

    # -- Java writes with its MDT defaults ----------------------------------------------------------
    java_write("Java insert", "insert", rows(range(40), 1000, "a"))
    listed = set(Table.open(table.path).config.metadata_partitions)
    assert listed == JAVA_DEFAULT_PARTITIONS, f"a default Java 1.2 writer listed {sorted(listed)}"
    java_write("Java upsert", "upsert", rows(range(0, 20, 2), 2000, "b") + rows(range(40, 44), 2000, "b"))
    java_write("Java upsert of older events (they lose)", "upsert", rows((1, 3, 6), 10, "old"))
    java_write("Java delete", "delete", rows((5, 13), 3000, "d"))
    java_write("Java upsert", "upsert", rows((2, 4, 9, 11, 41), 4000, "c"))
    java_mdt_delta_commits = _mdt_delta_commits(table.path)
    java_mdt_compactions = _mdt_compactions(table.path)
    since_before = delta_commits_since_compaction(_mdt(table.path).timeline)

    # -- tablesvc's services, then its upserts until the MDT compacts inside one of its commits ------
    lc = tablesvc_step("tablesvc log compaction",
                       lambda: assert_ran(Table.open(table.path).log_compact(spark=spark), "logcompaction"))
    c = tablesvc_step("tablesvc compaction",
                      lambda: assert_ran(Table.open(table.path).compact(spark=spark), "compaction"))
    java_write("Java upsert after tablesvc's compaction", "upsert", rows((0, 1, 27, 44), 5000, "e"))
    cl = tablesvc_step("tablesvc clean", lambda: assert_ran(
        Table.open(table.path).clean(options={"hoodie.cleaner.commits.retained": "1"}), "clean"))
    assert cl.metrics.files_deleted > 0, cl.render()
    tablesvc_instants = [lc.instant, c.instant, cl.instant]

    upserts = 0
    while not tablesvc_compactions:
        assert upserts < MAX_TABLESVC_UPSERTS, (
            f"no MDT compaction after {upserts} tablesvc upserts; MDT delta commits since its last compaction: "
            f"{delta_commits_since_compaction(_mdt(table.path).timeline)}")
        upserts += 1
        batch = rows((upserts, 20 + upserts, 60 + upserts), 10_000 * (upserts + 1), f"t{upserts}_")
        model.apply("upsert", batch)
        result = tablesvc_step(f"tablesvc upsert {upserts}", lambda b=batch: Table.open(table.path).upsert(
            spark.createDataFrame(b, SCHEMA), options={"hoodie.compact.inline": "false",
                                                       "hoodie.clean.automatic": "false"}))
        tablesvc_instants.append(result.instant)

    # the compaction is tablesvc's, on the MDT's timeline, with the base files tablesvc names
    assert not (tablesvc_compactions & java_mdt_compactions)
    (ours,) = tablesvc_compactions
    base_files = sorted(p.name for p in (tmp_path / "table" / ".hoodie" / "metadata").glob(f"*/*_{ours}.hfile"))
    assert base_files and all(n.endswith(f"_1-0-1_{ours}.hfile") for n in base_files), base_files
    assert set(tablesvc_instants) <= _mdt_delta_commits(table.path), "every tablesvc instant has its MDT delta commit"

    # -- Java goes on over the MDT tablesvc wrote and compacted --------------------------------------
    java_write("Java upsert after tablesvc's MDT compaction", "upsert", rows((3, 8, 10, 70), 900_000, "f"))
    result = java.compaction(table)
    assert any(r.get("state") == "COMPLETED" for r in result), result
    agree("Java compaction")
    java.write(table, "upsert", rows((12, 14, 71), 950_000, "g"))
    model.apply("upsert", rows((12, 14, 71), 950_000, "g"))
    cleaned = java.clean(table)
    assert cleaned, cleaned
    agree("Java clean")
    final = _mdt(table.path)
    assert set(Table.open(table.path).config.metadata_partitions) == JAVA_DEFAULT_PARTITIONS
    print(f"v{version}: Java MDT delta commits before tablesvc {len(java_mdt_delta_commits)} "
          f"(since compaction {since_before}); tablesvc upserts {upserts}; MDT compaction by tablesvc {ours}; "
          f"MDT at the end: {len(final.timeline.completed(Action.DELTA_COMMIT))} delta commits, "
          f"{len(final.timeline.completed(Action.COMMIT))} compactions; {time.perf_counter() - t0:.0f} s")
    print("\n".join(readers.checked))
    print("\n".join(validated))
