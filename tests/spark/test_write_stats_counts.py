"""Write stats count a record as an insert when its key was not in the table before, as an update
when it was: in the ``WriteResult`` (the CLI prints it) and in the commit metadata on disk
(``numInserts`` / ``numUpdateWrites`` of every write stat; table version 6 writes commit metadata
as JSON, version 8 as an Avro file, read here with json and fastavro).  Tables tablesvc creates
have the bucket index: once every bucket has its file group, new keys go into the log files of
existing groups, and they are inserts all the same.  Rows are compared with hudi-rs.
"""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pytest
from oracles.hudi_rs import sorted_rows

from tablesvc.api import Table, TableSpec

pytestmark = pytest.mark.spark
CITIES = ("eu", "us")
BUCKETS = 2


class Model:
    """The rows the table holds, and what a write of a batch (unique keys) does to them."""

    def __init__(self):
        self.rows: dict[str, tuple] = {}

    def write(self, batch: list[dict]) -> tuple[int, int]:
        inserts = sum(1 for r in batch if r["uuid"] not in self.rows)
        for r in batch:
            self.rows[r["uuid"]] = (r["uuid"], r["ts"], r["fare"], r["city"])
        return inserts, len(batch) - inserts

    def snapshot(self) -> list[tuple]:
        return sorted(self.rows.values())


def batch(keys, ts: int) -> list[dict]:
    return [{"uuid": f"k{i}", "ts": ts, "fare": float(ts * 1000 + i), "city": CITIES[i % 2]} for i in keys]


def metadata_counts(table: Table, instant: str) -> tuple[int, int, int]:
    """(numInserts, numUpdateWrites, numWrites) summed over the deltacommit's write stats on disk."""
    hoodie = Path(table.base_path) / ".hoodie"
    if table.config.version < 8:
        metadata = json.loads((hoodie / f"{instant}.deltacommit").read_text())
    else:
        [path] = [p for p in (hoodie / "timeline").iterdir() if p.name.startswith(f"{instant}_")
                  and p.name.endswith(".deltacommit")]
        with open(path, "rb") as f:
            [metadata] = list(fastavro.reader(f))
    stats = [s for v in metadata["partitionToWriteStats"].values() for s in v]
    return (sum(s["numInserts"] for s in stats), sum(s["numUpdateWrites"] for s in stats),
            sum(s["numWrites"] for s in stats))


@pytest.mark.parametrize("version", [6, 8])
def test_inserts_and_updates_are_counted_by_whether_the_key_was_there(tmp_path, spark, version):
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), table_version=version,
                                                        num_buckets=BUCKETS))
    model = Model()
    steps = [
        ("insert", batch(range(40), 1)),             # a small insert: every bucket gets its file group
        ("upsert", batch(range(20, 60), 2)),         # half old keys, half new ones
        ("insert", batch(range(60, 80), 3)),         # an insert of new keys only
        ("upsert", batch(range(0, 80, 3), 4)),       # old keys only
    ]
    for step, (operation, rows) in enumerate(steps):
        inserts, updates = model.write(rows)
        result = table.write(spark.createDataFrame(rows), operation)
        assert (result.inserts, result.updates, result.records_written) == (inserts, updates, len(rows)), step
        assert metadata_counts(table, result.instant) == (inserts, updates, len(rows)), step
        assert sorted_rows(table.base_path, ("uuid", "ts", "fare", "city")) == model.snapshot(), step
        if step == 0:   # from here on, new keys go into existing file groups (log files)
            assert result.file_groups_created == BUCKETS * len(CITIES)
        else:
            assert result.file_groups_created == 0
