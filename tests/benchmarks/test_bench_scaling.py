"""How cost grows with rows, file groups and log blocks (issue #6, docs/performance.md).

One MOR table per point, each with 10% of its keys updated (newer ``ts``) and not compacted:

* rows: 250k, 500k, 1M rows in 20 file groups (4 buckets x 5 partitions), one log block per slice;
* file groups: 500k rows in 5, 20, 80 file groups (1, 4, 16 buckets x 5 partitions), one block each;
* log blocks: 500k rows in 20 file groups, the same 10% of updates in 1, 4 or 16 upserts (that
  many log blocks per slice).

At each point: a snapshot read into Spark's ``noop`` sink and a full compaction of a copy
(schedule + run), each the median of ``TABLESVC_BENCH_REPEATS`` runs.  The growth exponent k
of ``cost ~ x^k`` between the first and the last point of each series is recorded (k = 1: linear).
Every point checks its row count through hudi-rs after the compaction before anything is recorded.
"""

from __future__ import annotations

import math
import shutil
import statistics
import time
from pathlib import Path

import pytest

from tablesvc.demo.story_support import trips
from tablesvc.api import Table, TableSpec

pytestmark = [pytest.mark.benchmark, pytest.mark.spark]


def harness(bench):
    import bench_harness

    return bench_harness


def updates(spark, rows: int, part: int, parts: int):
    """Part ``part`` of ``parts`` of the write benchmark's 10% update batch (one key in ten, in
    every partition and file group, newer ts)."""
    from pyspark.sql import functions as F

    from bench_data import update_batch

    ten = update_batch(spark, rows)
    return ten.where(F.abs(F.hash("uuid")) % parts == part) if parts > 1 else ten


def build(spark, path: Path, rows: int, buckets: int, blocks: int) -> str:
    table = Table.create(str(path), TableSpec("scale", ("uuid",), "ts", ("city",), num_buckets=buckets))
    table.insert(trips(spark, 0, rows, 1_000_000))
    for part in range(blocks):
        Table.open(str(path)).upsert(updates(spark, rows, part, blocks))
    return str(path)


def median_s(fn, before=None) -> float:
    runs = []
    for _ in range(harness(None).repeats()):
        if before is not None:
            before()
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def measure_point(spark, path: str, scratch: Path, rows: int) -> tuple[float, float]:
    """(read s, compaction s) of the table at ``path``; the compaction runs on fresh copies."""
    from hudi import HudiReadOptions, HudiTableBuilder

    from tablesvc.services.compaction import run_compaction

    read_s = median_s(lambda: Table.open(path).read(spark=spark).write.format("noop").mode("overwrite").save())
    copy = scratch / "compacting"

    def fresh() -> None:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(path, copy)

    compact_s = median_s(lambda: run_compaction(Table.open(str(copy)), spark=spark), before=fresh)
    hudi_rows = sum(b.num_rows for b in HudiTableBuilder.from_base_uri(str(copy)).build().read(HudiReadOptions()))
    assert hudi_rows == rows, f"{copy}: hudi-rs reads {hudi_rows} rows after the compaction, expected {rows}"
    slices = Table.open(path).latest_file_slices()
    assert all(s.log_files for s in slices), "every slice should hold updates in its logs"
    assert all(not s.log_files for s in Table.open(str(copy)).latest_file_slices())
    shutil.rmtree(copy, ignore_errors=True)
    return read_s, compact_s


def exponent(x1: float, y1: float, x2: float, y2: float) -> float:
    return round(math.log(y2 / y1) / math.log(x2 / x1), 2)


SERIES = {
    # name: (x label, [(x, rows, buckets, blocks)])
    "rows": ("rows", [(250_000, 250_000, 4, 1), (500_000, 500_000, 4, 1), (1_000_000, 1_000_000, 4, 1)]),
    "file groups": ("file groups", [(5, 500_000, 1, 1), (20, 500_000, 4, 1), (80, 500_000, 16, 1)]),
    "log blocks": ("log blocks per slice", [(1, 500_000, 4, 1), (4, 500_000, 4, 4), (16, 500_000, 4, 16)]),
}


@pytest.mark.parametrize("series", list(SERIES))
def test_cost_growth(bench, spark, tmp_path_factory, series):
    label, points = SERIES[series]
    work = tmp_path_factory.mktemp(f"scaling_{series.replace(' ', '_')}")
    scale = bench.scale
    results = []
    try:
        build(spark, work / "warm", 20_000, 1, 1)       # workers warm, outside the timings
        measure_point(spark, str(work / "warm"), work, 20_000)
        for x, rows, buckets, blocks in points:
            n = max(20_000, int(rows * scale))
            path = build(spark, work / f"t_{x}", n, buckets, blocks)
            read_s, compact_s = measure_point(spark, path, work, n)
            results.append((x, n, read_s, compact_s))
            shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (x1, _, r1, c1), (x2, n2, r2, c2) = results[0], results[-1]
    k_read, k_compact = exponent(x1, r1, x2, r2), exponent(x1, c1, x2, c2)
    table = "; ".join(f"{x:,} {label}: read {r:.2f} s, compaction {c:.2f} s" for x, _, r, c in results)
    ours = harness(bench).Measurement(c2, 0.0)
    base = harness(bench).Measurement(c1, 0.0)
    bench.record(f"scaling: cost vs {label}", rows=n2, bytes=0, ours=ours,
                 baseline=f"the same at {x1:,} {label}", theirs=base, target="report", met=None,
                 notes=(f"{table}.  Growth exponent (cost ~ x^k) from {x1:,} to {x2:,} {label}: read k = {k_read}, "
                        f"compaction k = {k_compact}; medians of {harness(bench).repeats()} runs; 10% of keys "
                        "updated in log blocks; every compacted copy counted through hudi-rs"),
                 points=[{"x": x, "rows": n, "read_s": round(r, 3), "compaction_s": round(c, 3)}
                         for x, n, r, c in results],
                 read_exponent=k_read, compaction_exponent=k_compact)
