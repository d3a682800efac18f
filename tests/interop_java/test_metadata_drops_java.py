"""Issue #27, the opt-outs: tablesvc drops metadata-table (MDT) partitions as Java Hudi 1.2's writer
does (docs/metadata-table.md, "Refusals and opt-outs"), and Java Hudi itself accepts the result.

On a copy of a Java-written fixture that keeps an MDT, a tablesvc command (the CLI, in this
process) is given an opt-out key with ``--conf``; it drops the MDT (``hoodie.metadata.enable=false``)
or some of its partitions (column stats with partition stats; the record index) under the table
lock, then runs.  Then:

1. Java Hudi 1.2 reads the table (``spark.read``, metadata table on, its defaults), as do hudi-rs
   and tablesvc; all three equal the model, the rows every reader showed before the drop (clean
   and compaction change no row).
2. Java writes once more: an upsert of a few rows (updates, an older event that must lose, new
   keys) with the table's own key, ordering and partition fields and the MDT as a default Java 1.2
   writer has it (on, no index key set).  The readers equal the model again, and the test records
   what that write did to the MDT (``hoodie.properties`` read after it).

The model is the readings before the drop (checked to agree, Java included) and then our own
event-time merge of what Java wrote (``event_time_model.py``).  Compared: every data column but
timestamps (each reader hands those back in another time zone form), decimals and dates as text.

Table version 8 (``v8_trips_8i3u1d``, written by Hudi 1.0) runs the whole-MDT drop only: a drop of
some partitions keeps ``files``, so tablesvc's command then writes an MDT delta commit, and on that
fixture hudi-rs fails on the new block's record schema (a ColumnStatsMetadata child-count
mismatch with the 1.0-written base file: the ``files`` writer's known issue,
tests/cli/test_metadata_opt_outs_cli.py).
"""

from __future__ import annotations

import datetime
import decimal
import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from event_time_model import EventTimeModel
from java_hudi import JavaHudi, JavaTable, read_properties
from oracles.hudi_rs import read_rows as hudi_rs_read_rows
from reader_agreement import first_difference

from fixture_tables import copy_table
from tablesvc.api import Table
from tablesvc.cli.main import main

pytestmark = pytest.mark.interop_java

LISTED = "hoodie.table.metadata.partitions"
INFLIGHT = "hoodie.table.metadata.partitions.inflight"
WHOLE = ("hoodie.metadata.enable",)
COLUMN_STATS = ("hoodie.metadata.index.column.stats.enable",)
RECORD_INDEX = ("hoodie.metadata.record.index.enable",)


@dataclass(frozen=True)
class DropCase:
    fixture: str
    opt_outs: tuple[str, ...]        # the keys set to false
    command: tuple[str, ...]         # the tablesvc command that drops, then runs
    dropped: frozenset[str]          # the MDT partitions gone from the properties (WHOLE: all)
    changed_column: str              # the column Java's upsert gives new values
    java_lists: frozenset[str]       # what the properties list after Java's upsert (see CASES)

    @property
    def id(self) -> str:
        what = "whole" if self.opt_outs == WHOLE else "+".join(k.split(".")[-2] for k in self.opt_outs)
        return f"{self.fixture.removeprefix('zips:')}-{what}-{self.command[0]}"


# What Java's upsert did to the MDT (``java_lists``; its MDT timeline is printed under -rP).  A
# default Hudi 1.2 Spark writer has the MDT, column stats and partition stats on and the record
# index off.  Before it writes, it drops what its settings switch off (``deleteMetadataIndexIfNecessary``)
# and bootstraps every enabled partition the properties do not list, one delta commit each at
# instants 00000000000000000, ...01, ... (continuing after the fixture's own), from a storage listing.
CASES = [
    # v8: the path that writes no MDT delta commit (see the module's docstring).  Java rebuilt the
    # MDT: files, column_stats, partition_stats, and secondary_index_rider_idx, whose definition the
    # drop left in index.json as Java's drop does; not record_index (off by default).
    DropCase("v8_trips_8i3u1d", WHOLE, ("compaction", "run"), frozenset(), "driver",
             frozenset({"files", "column_stats", "partition_stats", "secondary_index_rider_idx"})),
    # The same rebuild without the two secondary indexes: Hudi 1.2 bootstraps a secondary index
    # only when exactly one is to be initialised ("only one secondary index bootstrap at a time"),
    # and this table defines two; their definitions stay in index.json, unused.
    DropCase("zips:mor_avro_v9_txns_simple_meta", WHOLE, ("clean", "run"), frozenset(), "txn_metadata",
             frozenset({"files", "column_stats", "partition_stats"})),
    # tablesvc's clean wrote the MDT's files delta commit; Java re-initialised column_stats and
    # partition_stats, dropped record_index itself (off by default), kept both secondary indexes,
    # and compacted the MDT (tablesvc's delta commit and all) within its upsert.
    DropCase("zips:mor_avro_v9_txns_simple_meta", COLUMN_STATS, ("clean", "run"),
             frozenset({"column_stats", "partition_stats"}), "txn_metadata",
             frozenset({"files", "column_stats", "partition_stats", "secondary_index_merchant_idx",
                        "secondary_index_txn_date_idx"})),
    # The record index alone cannot let a command go ahead (column stats refuse every action), so
    # both.  Java re-initialised column_stats only: partition stats need a partitioned table, and
    # the record index stays off.
    DropCase("zips:mor_avro_v9_txns_nonpart_meta", COLUMN_STATS + RECORD_INDEX, ("clean", "run"),
             frozenset({"column_stats", "record_index"}), "txn_metadata",
             frozenset({"files", "column_stats", "secondary_index_merchant_idx", "secondary_index_txn_date_idx"})),
]


@dataclass(frozen=True)
class Shape:
    """The fixture's own fields and the columns the readers compare, in the model's order:
    key, ordering value, partition ("" when not partitioned), the rest."""

    key: str
    ordering: str
    partition: str | None
    columns: tuple[str, ...]         # data columns read (no timestamps), key and ordering first

    @classmethod
    def of(cls, path: Path, schema) -> "Shape":
        props = read_properties(path)
        key = props["hoodie.table.recordkey.fields"]
        assert "," not in key, f"{path}: a single record key field expected, got {key}"
        ordering = props.get("hoodie.table.ordering.fields") or props["hoodie.table.precombine.field"]
        partition = props.get("hoodie.table.partition.fields") or None
        first = [key, ordering] + ([partition] if partition else [])
        rest = [f.name for f in schema.fields if not f.name.startswith("_hoodie_") and f.name not in first
                and "timestamp" not in f.dataType.typeName()]
        return cls(key, ordering, partition, tuple(first + rest))

    def row(self, values: dict) -> tuple:
        """A reader's row as the model holds it."""
        head = (values[self.key], values[self.ordering], values[self.partition] if self.partition else "")
        rest = self.columns[3:] if self.partition else self.columns[2:]
        return tuple(_plain(v) for v in head + tuple(values[c] for c in rest))


def _plain(value):
    """Decimals and dates as text: the Java driver's JSON answer carries them so."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value.isoformat()
    return value


def _readings(java: JavaHudi, table: JavaTable, shape: Shape, spark) -> dict[str, list[tuple]]:
    cols = list(shape.columns)
    java_rows = [dict(zip(cols, r)) for r in java.read_columns(table, cols)]
    ours = Table.open(table.path).read(columns=cols, spark=spark).collect()
    return {
        "Java Hudi": sorted(shape.row(r) for r in java_rows),
        "hudi-rs": sorted(shape.row(r) for r in hudi_rs_read_rows(table.path)),
        "tablesvc": sorted(shape.row(r.asDict()) for r in ours),
    }


def _check(step: str, case: DropCase, model: list[tuple], readings: dict[str, list[tuple]]) -> None:
    differences = [f"  {reader} ({len(rows)} rows; model {len(model)}): {diff}"
                   for reader, rows in readings.items() if (diff := first_difference(rows, model))]
    assert not differences, f"{case.id}, step {step!r}: the readers differ from the model\n" + "\n".join(differences)


def _listed(path: Path) -> tuple[set[str], set[str]]:
    props = read_properties(path)
    return ({p for p in props.get(LISTED, "").split(",") if p},
            {p for p in props.get(INFLIGHT, "").split(",") if p})


def _mdt_completed(path: Path) -> set[str]:
    """The MDT's completed instants (``T_C.action`` files), none when it has no MDT."""
    timeline = path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    return {p.name for p in timeline.glob("*_*.*") if p.is_file() and not p.name.startswith(".")} \
        if timeline.is_dir() else set()


def _tablesvc(capsys, path: Path, case: DropCase) -> list[dict]:
    confs = [a for key in case.opt_outs for a in ("--conf", f"{key}=false")]
    if case.command[0] == "clean":
        confs += ["--conf", "hoodie.cleaner.commits.retained=1"]
    capsys.readouterr()
    rc = main([*case.command, str(path), *confs, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, f"tablesvc {' '.join(case.command)} {' '.join(confs)}: exit {rc}: {err}"
    return json.loads(out)


def _upsert(spark, path: Path, shape: Shape, case: DropCase, folder: Path) -> list[dict]:
    """Java's upsert, as rows of every data column (timestamps too): three updates with a later
    event, one with an earlier event (it must lose), two new keys; written to Parquet for Java."""
    df = Table.open(str(path)).read(spark=spark)
    data = df.select(*[f.name for f in df.schema.fields if not f.name.startswith("_hoodie_")])
    stored = sorted((r.asDict() for r in data.collect()), key=lambda r: r[shape.key])
    assert len(stored) >= 6, f"{case.fixture}: too few rows for the upsert ({len(stored)})"
    batch = []
    for n, row in enumerate(stored[:3]):
        batch.append({**row, shape.ordering: row[shape.ordering] + 1_000_000, case.changed_column: f"java-update-{n}"})
    older = stored[3]
    batch.append({**older, shape.ordering: older[shape.ordering] - 1, case.changed_column: "java-older-loses"})
    for n, row in enumerate(stored[4:6]):
        batch.append({**row, shape.key: f"java-new-{n}", shape.ordering: row[shape.ordering] + 2_000_000,
                      case.changed_column: f"java-insert-{n}"})
    names = data.schema.fieldNames()
    spark.createDataFrame([tuple(r[c] for c in names) for r in batch], data.schema) \
        .coalesce(1).write.mode("overwrite").parquet(str(folder))
    return batch


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_java_reads_and_writes_after_tablesvc_drops(case, java_hudi, fixture_root, spark, capsys, tmp_path):
    path = copy_table(fixture_root.path(case.fixture), tmp_path)
    before_listed, _ = _listed(path)
    assert "files" in before_listed and before_listed >= case.dropped, before_listed
    table = replace(JavaTable.existing(path, java_hudi.bundle), default_metadata=True)
    shape = Shape.of(path, Table.open(str(path)).read(spark=spark).schema)

    # the model: the rows before the drop, which every reader shows (Java through the fixture's MDT)
    before = _readings(java_hudi, table, shape, spark)
    model = EventTimeModel({r[0]: r for r in before["hudi-rs"]})
    assert len(model) > 0
    _check("before the drop", case, model.rows(), before)

    # -- tablesvc: the drop, then the command ------------------------------------------------------
    results = _tablesvc(capsys, path, case)
    assert results[0]["action"] == "metadata table" and results[0]["status"] == "done", results
    assert results[-1]["action"] == case.command[0] and results[-1]["status"] == "done", results
    listed, inflight = _listed(path)
    if case.opt_outs == WHOLE:
        assert (listed, inflight) == (set(), set()) and not (path / ".hoodie" / "metadata").exists(), listed
    else:
        assert (listed, inflight) == (before_listed - case.dropped, set()), listed
        assert not any((path / ".hoodie" / "metadata" / p).exists() for p in case.dropped)
    step = f"after tablesvc {' '.join(case.command)} with {', '.join(k + '=false' for k in case.opt_outs)}"
    _check(step, case, model.rows(), _readings(java_hudi, table, shape, spark))

    # -- Java writes once more, its MDT settings its defaults -------------------------------------------
    batch = _upsert(spark, path, shape, case, tmp_path / "upsert")
    mdt_before = _mdt_completed(path)
    java_hudi.step(JavaHudi.write_request(table, "upsert", source=str(tmp_path / "upsert")))
    model.apply("upsert", [shape.row(r) for r in batch])
    after_java, after_java_inflight = _listed(path)
    print(f"{case.id}: MDT partitions before {sorted(before_listed)}, after tablesvc {sorted(listed)}, "
          f"after Java's upsert {sorted(after_java)}; MDT instants Java completed: "
          f"{sorted(_mdt_completed(path) - mdt_before)}")
    assert (after_java, after_java_inflight) == (case.java_lists, set()), after_java
    _check("after Java's upsert", case, model.rows(), _readings(java_hudi, table, shape, spark))
