"""Issue #27, the metadata table's (MDT's) own log compaction as tablesvc runs it inside its commits
(``hoodie.metadata.log.compaction.enable``), against Java Hudi 1.2: Java writes a partitioned
MERGE_ON_READ table with its MDT defaults (``files``, ``column_stats``, ``partition_stats``); the
table's ``.hoodie/tablesvc.yaml`` turns the MDT's log compaction on with a threshold of 3.  tablesvc
then upserts until it has log-compacted the MDT twice (the second compacting the first's compacted
blocks).  Then Java reads, writes, compacts and cleans on top of that MDT, its readers skipping the
blocks tablesvc's compacted blocks replaced.

After tablesvc's upserts and after every Java step: Java Hudi's ``spark.read`` (MDT on), hudi-rs
and tablesvc read exactly the model (``reader_agreement``), and Java's own comparison of the MDT
with storage (``metadata_validation``: partitions, latest file slices, column stats, partition
stats) finds no difference.  Table versions 8 and 9."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from event_time_model import EventTimeModel
from java_hudi import JavaTable
from metadata_validation import COLUMN_STATS, FILE_SLICES, PARTITION_STATS, validate_metadata_table
from pyspark.sql.types import LongType, StringType, StructField, StructType
from reader_agreement import ThreeReaders
from scenario_rows import rows

from tablesvc.api import Table
from tablesvc.logformat import HeaderKey, read_log_file
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.mdt_log_compaction_plan import ENABLE_KEY, THRESHOLD_KEY
from timeline.instant import Action, State
from timeline.payloads import decode_commit_metadata, decode_compaction_plan

pytestmark = pytest.mark.interop_java

SCHEMA = StructType([StructField("id", StringType()), StructField("ts", LongType()),
                     StructField("part", StringType()), StructField("val", StringType())])
NO_INLINE = {"hoodie.compact.inline": "false", "hoodie.clean.automatic": "false"}
TABLE_YAML = f"{ENABLE_KEY}: true\n{THRESHOLD_KEY}: 3\n"
MAX_TABLESVC_UPSERTS = 12


def _log_compactions(path: str) -> list[str]:
    """The MDT's completed log compactions (a completed one is a deltacommit)."""
    table = Table.open(path)
    timeline = MetadataTable(table.storage, table.base_path, table.timeline()).timeline
    return sorted(i.timestamp for i in timeline.completed(Action.DELTA_COMMIT)
                  if any(f.action is Action.LOG_COMPACTION for f in timeline.files_of(i.timestamp)))


def _compacted_block_times(mdt_root: Path, instant: str) -> set[str]:
    table_storage = Table.open(str(mdt_root.parent.parent)).storage
    out: set[str] = set()
    for log in mdt_root.glob(f"*/.*_{instant}.log.*"):
        for block in read_log_file(table_storage, str(log)).blocks:
            out |= set(dict(block.header).get(HeaderKey.COMPACTED_BLOCK_TIMES, "").split(","))
    return out - {""}


@pytest.mark.parametrize("version", [9, 8])
def test_tablesvc_log_compacts_the_metadata_table_and_java_goes_on(version, java_hudi_setup, start_java_hudi, spark,
                                                                   tmp_path):
    t0 = time.perf_counter()
    bundle = java_hudi_setup.bundle_for(version)
    table = JavaTable(str(tmp_path / "table"), f"mdt_logcompaction_v{version}", version, bundle,
                      default_metadata=True)
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel()
    validated: list[str] = []

    def agree(step: str) -> None:
        readers.check(step, model.rows())
        found = validate_metadata_table(java, table.path)
        assert not found.differences, f"after {step} (v{version}): Java's MDT validation\n{found.render()}"
        assert all(found.count(c) > 0 for c in (FILE_SLICES, COLUMN_STATS, PARTITION_STATS)), found.render()
        validated.append(f"{step}: " + ", ".join(f"{n} {c}" for c, n in found.compared))

    def java_write(step: str, operation: str, batch: list[tuple]) -> None:
        java.write(table, operation, batch)
        model.apply(operation, batch)
        agree(step)

    java_write("Java insert", "insert", rows(range(30), 1000, "a"))
    java_write("Java upsert", "upsert", rows(range(0, 12, 2), 2000, "b"))
    assert not _log_compactions(table.path)
    (Path(table.path) / ".hoodie" / "tablesvc.yaml").write_text(TABLE_YAML)
    mdt_root = Path(table.path) / ".hoodie" / "metadata"

    # -- tablesvc upserts until it log-compacted the MDT twice --------------------------------------
    upserts = 0
    while len(lcs := _log_compactions(table.path)) < 2:
        assert upserts < MAX_TABLESVC_UPSERTS, f"after {upserts} upserts: MDT log compactions {lcs}"
        upserts += 1
        batch = rows((upserts % 30, 30 + upserts), 10_000 * (upserts + 1), f"t{upserts}_")
        model.apply("upsert", batch)
        Table.open(table.path).upsert(spark.createDataFrame(batch, SCHEMA), options=NO_INLINE)
    first, second = lcs[:2]
    assert len(_compacted_block_times(mdt_root, first)) >= 3
    agree(f"tablesvc's {upserts} upserts, MDT log compactions {lcs}")

    # -- Java goes on over the MDT tablesvc log-compacted -------------------------------------------
    java_write("Java upsert after tablesvc's MDT log compactions", "upsert", rows((3, 8, 10, 70), 900_000, "f"))
    result = java.compaction(table)
    assert any(r.get("state") == "COMPLETED" for r in result), result
    agree("Java compaction")
    java.clean(table, retain_commits=1)
    agree("Java clean")
    java_write("Java upsert after its compaction and clean", "upsert", rows((12, 14, 71), 950_000, "g"))
    print(f"v{version}: {upserts} tablesvc upserts; MDT log compactions by tablesvc {lcs} (the first merged "
          f"{sorted(_compacted_block_times(mdt_root, first))}); {time.perf_counter() - t0:.0f} s")
    print("\n".join(readers.checked))
    print("\n".join(validated))


def _log_compaction_shape(path: str, instant: str) -> dict:
    """What a metadata log compaction wrote: its plan's strategy and flags, its commit's operation,
    and per compacted log file the block types and header keys."""
    table = Table.open(path)
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    files = {f.state: f for f in mdt.timeline.files_of(instant)}
    plan = decode_compaction_plan(table.storage.read_bytes(mdt.timeline.path_of(files[State.REQUESTED])), "plan")
    commit = decode_commit_metadata(table.storage.read_bytes(mdt.timeline.path_of(files[State.COMPLETED])),
                                    mdt.config.layout, "commit")
    blocks, base_files, ascending = set(), set(), True
    for stats in commit.partition_to_write_stats.values():
        for stat in stats:
            base_files.add(stat.base_file)
            for block in read_log_file(table.storage, f"{mdt.base_path}/{stat.path}").blocks:
                blocks.add((block.block_type.name, tuple(sorted(k.name for k, _ in block.header))))
                times = dict(block.header)[HeaderKey.COMPACTED_BLOCK_TIMES].split(",")
                ascending &= times == sorted(times)
    return {"strategy": plan.strategy.compactor_class_name if plan.strategy else None,
            "preserve": plan.preserve_hoodie_metadata, "plan_version": plan.version,
            "completed_as": files[State.COMPLETED].action.value, "operation": commit.operation_type,
            "blocks": sorted(blocks), "plan_extra": plan.extra_metadata, "stat_base_files": base_files,
            "times_oldest_first": ascending}


@pytest.mark.parametrize("version", [9])
def test_java_log_compacts_the_metadata_table_and_tablesvc_reads_and_goes_on(version, java_hudi_setup,
                                                                            start_java_hudi, spark, tmp_path):
    """Java 1.2 with the MDT's log compaction on (threshold 2) log-compacts its MDT: tablesvc and
    hudi-rs read through it, tablesvc's log compaction writes the same shape (plan, action, block
    types and headers), and tablesvc's log compactions over Java's keep Java's metadata check clean."""
    bundle = java_hudi_setup.bundle_for(version)
    table = JavaTable(str(tmp_path / "table"), f"mdt_java_logcompaction_v{version}", version, bundle,
                      default_metadata=True, writer=((ENABLE_KEY, "true"), (THRESHOLD_KEY, "2")))
    java = start_java_hudi(bundle, tmp_path / "java")
    readers = ThreeReaders(java, table, spark)
    model = EventTimeModel()

    def agree(step: str) -> None:
        readers.check(step, model.rows())
        found = validate_metadata_table(java, table.path)
        assert not found.differences, f"after {step} (v{version}): Java's MDT validation\n{found.render()}"

    batch = rows(range(30), 1000, "a")
    java.write(table, "insert", batch)
    model.apply("insert", batch)
    writes = 0
    while not (javas := _log_compactions(table.path)):
        assert writes < 6, "Java did not log-compact its MDT"
        writes += 1
        batch = rows((writes, 10 + writes), 2000 * writes, f"j{writes}_")
        java.write(table, "upsert", batch)
        model.apply("upsert", batch)
    agree(f"Java's {writes + 1} writes, its MDT log compaction {javas}")
    java_shape = _log_compaction_shape(table.path, javas[0])
    print("Java's MDT log compaction:", java_shape)
    (Path(table.path) / ".hoodie" / "tablesvc.yaml").write_text(f"{ENABLE_KEY}: true\n{THRESHOLD_KEY}: 2\n")
    upserts = 0
    while len(ours := [lc for lc in _log_compactions(table.path) if lc not in javas]) < 1:
        assert upserts < 6, f"after {upserts} upserts: no tablesvc MDT log compaction ({_log_compactions(table.path)})"
        upserts += 1
        batch = rows((upserts % 30, 40 + upserts), 10_000 * (upserts + 1), f"t{upserts}_")
        model.apply("upsert", batch)
        Table.open(table.path).upsert(spark.createDataFrame(batch, SCHEMA), options=NO_INLINE)
    agree(f"tablesvc's {upserts} upserts, its MDT log compaction {ours}")
    our_shape = _log_compaction_shape(table.path, ours[0])
    print("tablesvc's MDT log compaction:", our_shape)
    assert our_shape == java_shape
    batch = rows((3, 8, 70), 900_000, "f")
    java.write(table, "upsert", batch)
    model.apply("upsert", batch)
    agree("Java upsert after tablesvc's MDT log compaction")
