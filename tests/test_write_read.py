"""The write path and the Spark reader, batch after batch, against an independent model and hudi-rs.

Each scenario writes many batches (inserts, upserts with higher and lower ordering
values, in-batch duplicates, deletes of present and absent keys, re-inserts, a new
column) through Spark, and after every batch compares three things sorted by key:
the in-test model, tablesvc's read, and hudi-rs's read.  Time travel to every earlier
instant must equal the model as it was then.
"""

from __future__ import annotations

import copy
import random

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from tablesvc.table import Table, TableSpec

pytestmark = pytest.mark.spark
CITIES = ("chennai", "san_francisco", "sao_paulo")
BASE_COLUMNS = ("uuid", "ts", "rider", "fare", "city")


class Model:
    """Event-time semantics: the greater ts wins, ties go to the later write; deletes remove."""

    def __init__(self):
        self.rows: dict[str, dict] = {}

    def upsert(self, batch: list[dict]) -> None:
        combined: dict[str, dict] = {}
        for r in batch:  # in-batch duplicates: greatest ts, ties to the later row
            cur = combined.get(r["uuid"])
            if cur is None or r["ts"] >= cur["ts"]:
                combined[r["uuid"]] = r
        for key, r in combined.items():
            cur = self.rows.get(key)
            if cur is None or r["ts"] >= cur["ts"]:
                self.rows[key] = r

    def delete(self, keys: list[str]) -> None:
        for k in keys:
            self.rows.pop(k, None)

    def snapshot(self, columns) -> list[tuple]:
        return sorted(tuple(r.get(c) for c in columns) for r in self.rows.values())


def hudi_rows(path: str, columns, as_of: str | None = None) -> list[tuple]:
    t = HudiTableBuilder.from_base_uri(path).build()
    opts = HudiReadOptions() if as_of is None else HudiReadOptions().with_as_of_timestamp(as_of)
    batches = t.read(opts)
    if not batches:
        return []
    tbl = pa.Table.from_batches(batches)
    return sorted(tuple(r.get(c) for c in columns) for r in tbl.to_pylist())


def our_rows(table: Table, spark, columns, as_of: str | None = None) -> list[tuple]:
    df = table.read(as_of=as_of, spark=spark)
    present = [c for c in columns if c in df.columns]
    return sorted(tuple(r[c] if c in present else None for c in columns) for r in df.select(*present).collect())


def check(table, spark, model, columns, label):
    expected = model.snapshot(columns)
    assert our_rows(table, spark, columns) == expected, f"tablesvc read after {label}"
    assert hudi_rows(table.base_path, columns) == expected, f"hudi-rs read after {label}"


def make_rows(rng, keys, ts, with_tip=False):
    rows = []
    for k in keys:
        r = {"uuid": k, "ts": ts + rng.randrange(100), "rider": f"rider-{rng.randrange(50)}",
             "fare": round(rng.uniform(1, 99), 2), "city": CITIES[int(k[1:]) % 3]}
        if with_tip:
            r["tip"] = round(rng.uniform(0, 9), 2) if rng.random() < 0.8 else None
        rows.append(r)
    return rows


def df_of(spark, rows, with_tip=False):
    schema = "uuid string, ts long, rider string, fare double, city string" + (", tip double" if with_tip else "")
    cols = list(BASE_COLUMNS) + (["tip"] if with_tip else [])
    return spark.createDataFrame([tuple(r.get(c) for c in cols) for r in rows], schema)


@pytest.mark.parametrize("version", [6, 8])
def test_many_batches_match_model_tablesvc_and_hudi_rs(tmp_path, spark, version):
    rng = random.Random(version)
    table = Table.create(str(tmp_path / "trips"), TableSpec("trips", ("uuid",), "ts", ("city",),
                                                            table_version=version, num_buckets=2))
    model = Model()
    history: list[tuple[str, dict]] = []
    columns = BASE_COLUMNS

    def committed(result):
        assert result is not None
        history.append((result.instant, copy.deepcopy(model.rows)))

    # 1. inserts
    batch = make_rows(rng, [f"k{i:03d}" for i in range(120)], 1_000)
    model.upsert(batch)
    committed(table.insert(df_of(spark, batch)))
    check(table, spark, model, columns, "insert")

    # 2. upserts: higher ts, lower ts (ignored under event time), new keys, in-batch duplicates
    higher = make_rows(rng, [f"k{i:03d}" for i in range(0, 30)], 5_000)
    lower = make_rows(rng, [f"k{i:03d}" for i in range(30, 40)], 0)
    new = make_rows(rng, [f"k{i:03d}" for i in range(120, 140)], 5_000)
    dups = make_rows(rng, ["k050", "k050", "k051", "k051"], 6_000)
    dups[1]["ts"] = dups[0]["ts"] + 1          # the later, greater one wins
    dups[3]["ts"] = dups[2]["ts"]              # a tie: the later row wins
    batch = higher + lower + new + dups
    model.upsert(batch)
    committed(table.upsert(df_of(spark, batch)))
    check(table, spark, model, columns, "upserts")

    # 3. deletes of present and absent keys
    gone = [f"k{i:03d}" for i in range(60, 75)] + ["k900", "k901"]
    model.delete(gone)
    committed(table.delete(df_of(spark, make_rows(rng, gone, 0))))
    check(table, spark, model, columns, "deletes")

    # 4. re-insert some deleted keys, update others, with a new nullable column
    back = make_rows(rng, [f"k{i:03d}" for i in range(60, 65)] + [f"k{i:03d}" for i in range(90, 100)],
                     9_000, with_tip=True)
    model.upsert(back)
    committed(table.upsert(df_of(spark, back, with_tip=True)))
    columns = BASE_COLUMNS + ("tip",)
    check(table, spark, model, columns, "re-insert with new column")

    # 5. a batch without the new column: it reads as null for those rows
    later = make_rows(rng, [f"k{i:03d}" for i in range(100, 110)], 12_000)
    model.upsert(later)
    committed(table.upsert(df_of(spark, later)))
    check(table, spark, model, columns, "batch without the new column")

    # Time travel to every instant equals the model at that point.
    for instant, rows in history:
        then = Model()
        then.rows = rows
        expected = then.snapshot(columns)
        assert our_rows(table, spark, columns, as_of=instant) == expected, f"tablesvc as of {instant}"
        assert hudi_rows(table.base_path, columns, as_of=instant) == expected, f"hudi-rs as of {instant}"

    timeline = table.timeline()
    assert [i.timestamp for i in timeline.completed_writes()] == [h[0] for h in history]
    assert timeline.pending() == ()
    assert not list((tmp_path / "trips" / ".hoodie" / ".temp").glob("*/**/*.marker.*"))
