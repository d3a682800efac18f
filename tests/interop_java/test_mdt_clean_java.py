"""Issue #27, the metadata table's (MDT's) own clean as tablesvc runs it inside its commits, against
Java Hudi 1.2: Java writes a partitioned MERGE_ON_READ table with its MDT defaults (``files``,
``column_stats``, ``partition_stats``); the table's ``.hoodie/tablesvc.yaml`` keeps 1 file version,
so the MDT policy tablesvc derives keeps 2 (``ceil(1.2 x 1)``, Java's derivation).  tablesvc then
upserts until the MDT has compacted twice inside tablesvc commits and cleaned itself (the slices
before the older of its two newest compactions deleted).  Then Java reads, writes and compacts on
top of that MDT, its own MDT services reading tablesvc's MDT clean instant.

After tablesvc's MDT clean and after every Java step: Java Hudi's ``spark.read`` (MDT on), hudi-rs
and tablesvc read exactly the model (``reader_agreement``), and Java's own comparison of the MDT
with storage (``metadata_validation``: partitions, latest file slices, column stats, partition
stats) finds no difference.  An MDT clean that appears during a tablesvc step, while the Java
driver sits idle, can only be tablesvc's.  Table versions 8 and 9."""

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
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.mdt_compaction_plan import DEFAULT_MAX_DELTA_COMMITS
from timeline.instant import Action
from timeline.payloads import decode_clean_metadata

pytestmark = pytest.mark.interop_java

SCHEMA = StructType([StructField("id", StringType()), StructField("ts", LongType()),
                     StructField("part", StringType()), StructField("val", StringType())])
NO_INLINE = {"hoodie.compact.inline": "false", "hoodie.clean.automatic": "false"}
TABLE_YAML = "hoodie.cleaner.policy: KEEP_LATEST_FILE_VERSIONS\nhoodie.cleaner.fileversions.retained: 1\n"
# two MDT compactions of 10 delta commits, 3 instants after the second before the clean, margin
MAX_TABLESVC_UPSERTS = 2 * DEFAULT_MAX_DELTA_COMMITS + 8


def _mdt(path: str) -> MetadataTable:
    table = Table.open(path)
    return MetadataTable(table.storage, table.base_path, table.timeline())


def _completed(path: str, action: Action) -> set[str]:
    return {i.timestamp for i in _mdt(path).timeline.completed(action)}


def _mdt_files(mdt_root: Path) -> set[str]:
    """``partition/name`` of the MDT's data files: not the partition marker, nor the Hadoop ``.crc``
    files beside Java's (storage deletes those with their file; a clean lists only the file)."""
    return {f"{p.parent.name}/{p.name}" for p in mdt_root.glob("*/*")
            if p.name != ".hoodie_partition_metadata" and not p.name.endswith(".crc")}


def _deleted_by(path: str, cleans: set[str]) -> set[str]:
    mdt = _mdt(path)
    out: set[str] = set()
    for k in cleans:
        done = [f for f in mdt.timeline.files_of(k) if f.is_completed][0]
        md = decode_clean_metadata(mdt.storage.read_bytes(mdt.timeline.path_of(done)), k)
        out |= {f"{p.partition_path}/{n}" for p in md.partition_metadata.values() for n in p.success_delete_files}
    return out


@pytest.mark.parametrize("version", [9, 8])
def test_tablesvc_cleans_the_metadata_table_and_java_goes_on(version, java_hudi_setup, start_java_hudi, spark,
                                                             tmp_path):
    t0 = time.perf_counter()
    bundle = java_hudi_setup.bundle_for(version)
    table = JavaTable(str(tmp_path / "table"), f"mdt_clean_v{version}", version, bundle, default_metadata=True)
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
    (Path(table.path) / ".hoodie" / "tablesvc.yaml").write_text(TABLE_YAML)
    java_compactions = _completed(table.path, Action.COMMIT)
    assert not _completed(table.path, Action.CLEAN)
    mdt_root = Path(table.path) / ".hoodie" / "metadata"
    ever: set[str] = set()

    # -- tablesvc upserts until two of its MDT compactions and an MDT clean after the second ---------
    ours: list[str] = []
    cleans: set[str] = set()
    upserts = 0
    while not (len(ours) >= 2 and any(k > ours[1] for k in cleans)):
        assert upserts < MAX_TABLESVC_UPSERTS, f"after {upserts} upserts: MDT compactions {ours}, cleans {cleans}"
        ever |= _mdt_files(mdt_root)
        upserts += 1
        batch = rows((upserts % 30, 30 + upserts), 10_000 * (upserts + 1), f"t{upserts}_")
        model.apply("upsert", batch)
        Table.open(table.path).upsert(spark.createDataFrame(batch, SCHEMA), options=NO_INLINE)
        ours = sorted(_completed(table.path, Action.COMMIT) - java_compactions)
        cleans = _completed(table.path, Action.CLEAN)
    present = _mdt_files(mdt_root)
    deleted = _deleted_by(table.path, cleans)
    assert deleted and not (deleted & present), sorted(deleted & present)[:5]
    assert ever - present <= deleted, sorted((ever - present) - deleted)[:5]
    agree(f"tablesvc's {upserts} upserts, MDT compactions {ours}, MDT cleans {sorted(cleans)}")

    # -- Java goes on over the MDT tablesvc cleaned -------------------------------------------------
    java_write("Java upsert after tablesvc's MDT clean", "upsert", rows((3, 8, 10, 70), 900_000, "f"))
    result = java.compaction(table)
    assert any(r.get("state") == "COMPLETED" for r in result), result
    agree("Java compaction")
    java_write("Java upsert after its compaction", "upsert", rows((12, 14, 71), 950_000, "g"))
    print(f"v{version}: {upserts} tablesvc upserts; MDT compactions by tablesvc {ours}; MDT cleans by tablesvc "
          f"{sorted(cleans)} deleted {len(deleted)} files; {time.perf_counter() - t0:.0f} s")
    print("\n".join(readers.checked))
    print("\n".join(validated))
