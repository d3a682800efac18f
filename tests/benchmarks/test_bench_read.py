"""Snapshot read of a MOR table with 10% updates still in log files (issue #6).

Data (generated once per module inside Spark, outside every timing): ``bench.rows(2_000_000)``
trips over five city partitions written as plain Parquet, then tablesvc tables written from
those files (bucket index, 4 buckets x 5 partitions = 20 file groups): one insert, then an
upsert of 10% of the keys (tens digit 3, newer ``ts``) as avro or as parquet log blocks,
not compacted.  The baseline's plain Parquet copy holds the same rows and columns: the
tablesvc snapshot (meta columns included) written by Spark, partitioned by city.

Every side materialises every row and column:

* tablesvc: ``table.read(spark=spark)`` (planning included) into Spark's ``noop`` sink;
* Spark: ``spark.read.parquet(plain copy)`` into the ``noop`` sink (target: tablesvc <= 1.5x);
  also recorded, as ``baseline_data_columns_s``, Spark reading only the five data columns
  (what a plain table without Hudi's meta columns would hold);
* hudi-rs (in this process, through its Python API): ``HudiTable.read()``, which returns
  every record batch in memory (no target; the ratio is reported).

``store="s3"`` (marker ``s3``; ``-k s3``): the same tables (with logs, and once compacted) copied to
the session's moto S3 endpoint and read there and from local files side by side, with the requests
and bytes each S3 read asked of the endpoint (``bench_s3.py``); the ratio is S3 / local, reported.

Row counts must agree on all sides (and a data-column checksum between tablesvc and the
plain copy, a sample of rows between hudi-rs and the plain copy) before anything is recorded.
"""

from __future__ import annotations

import cProfile
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tablesvc.api import Table
# the same data and checks as the compaction benchmark (one definition of each, beside this module)
from bench_data import DATA_COLUMNS, LOG_FORMATS, build_dataset, checksum, sample_keys
from bench_harness import profile_text

pytestmark = [pytest.mark.benchmark, pytest.mark.spark]

TARGET_RATIO = 1.5
CPUS_FOR_ESTIMATE = 2   # the fixture's local[2]


# -- helpers ---------------------------------------------------------------------------------------
def harness(bench):
    """The benchmark harness module (tests/benchmarks/bench_harness.py)."""
    import bench_harness

    return bench_harness


def timed(bench, fn):
    return harness(bench).timed(fn)


def materialise(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def hudi_rs_read(path: str):
    from hudi import HudiReadOptions, HudiTableBuilder

    return HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions())


def hudi_rs_sample(batches, rows: int) -> list[tuple]:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = pa.Table.from_batches(batches).select(list(DATA_COLUMNS))
    picked = t.filter(pc.is_in(t.column("uuid"), value_set=pa.array(sample_keys(rows))))
    return sorted(tuple(r[c] for c in DATA_COLUMNS) for r in picked.to_pylist())


def plain_sample(spark, path: str, rows: int) -> list[tuple]:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path).where(F.col("uuid").isin(sample_keys(rows)))
    return sorted(tuple(r[c] for c in DATA_COLUMNS) for r in df.select(*DATA_COLUMNS).collect())


def profile_one_slice(table_path: str) -> tuple[float, cProfile.Profile, dict]:
    """``iter_file_slice`` (what each Spark read task runs) of the largest slice, in this process:
    (seconds, profile, what the slice held).  The smallest slice is read first, unprofiled."""
    from tablesvc.merge import ReadContext, SliceSpec, iter_file_slice

    table = Table.open(table_path)
    timeline = table.timeline()
    slices = sorted(table.file_system_view(timeline).latest_file_slices(table.storage),
                    key=lambda s: sum(lf.size for lf in s.log_files))
    ctx = ReadContext.for_table(table, timeline)
    for _ in iter_file_slice(table.storage, SliceSpec.from_file_slice(slices[0]), ctx):
        pass
    s = slices[-1]
    prof = cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    rows = sum(b.num_rows for b in iter_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx))
    prof.disable()
    seconds = time.perf_counter() - started
    info = {"rows": rows, "base_bytes": s.base_file.size if s.base_file else 0,
            "log_bytes": sum(lf.size for lf in s.log_files), "log_files": len(s.log_files), "slices": len(slices)}
    return seconds, prof, info


@dataclass
class ReadData:
    work: Path
    rows: int
    updates: int
    plain_snapshot: str
    tables: dict[str, str] = field(default_factory=dict)    # log format -> table path
    setup_s: float = 0.0


def build_read_data(spark, work: Path, rows: int) -> ReadData:
    """The compaction benchmark's tables (base + 10% updates in avro / parquet logs), and the
    same snapshot as plain Parquet, written by Spark (not the driver)."""
    started = time.monotonic()
    ds = build_dataset(spark, work, rows)
    shutil.rmtree(ds.plain_base)
    shutil.rmtree(ds.plain_updates)
    data = ReadData(work, rows, ds.updates, str(work / "plain_snapshot"), dict(ds.tables))
    Table.open(data.tables[LOG_FORMATS[0]]).read(spark=spark).write.mode("overwrite").partitionBy("city") \
        .parquet(data.plain_snapshot)
    data.setup_s = round(time.monotonic() - started, 1)
    return data


@pytest.fixture(scope="module")
def read_data(spark, bench, tmp_path_factory):
    work = tmp_path_factory.mktemp("bench_read")
    data = build_read_data(spark, work, bench.rows(2_000_000))
    # Warm-up, not timed: the whole pipeline on 10k rows (Python workers import tablesvc,
    # the JVM compiles the Parquet read path, hudi-rs loads).
    small = build_read_data(spark, work / "warm_up", 10_000)
    for path in small.tables.values():
        materialise(Table.open(path).read(spark=spark))
        hudi_rs_read(path)
    materialise(spark.read.parquet(small.plain_snapshot))
    materialise(spark.read.parquet(small.plain_snapshot).select(*DATA_COLUMNS))
    shutil.rmtree(work / "warm_up", ignore_errors=True)
    yield data
    shutil.rmtree(work, ignore_errors=True)


def s3_read_case(bench, spark, read_data: ReadData, local_path: str, case: str, server) -> None:
    """The same snapshot read of a copy of the table in S3 (moto) and of the local table, alternating
    (``bench_s3.paired_s3``), into the ``noop`` sink: times, the ratio S3 / local, and the requests
    and bytes each S3 read asked of the endpoint.  On S3 every slice is read by tablesvc's Python
    tasks (Spark's native Parquet scan is skipped on object stores), locally base-only slices go
    to Spark's own reader."""
    from bench_s3 import delete_tree, paired_s3, s3_notes, upload_table
    from tablesvc.spark.read_job import plan_read

    options = server.options()
    url = upload_table(server, local_path, "bench-read")
    local_plan, s3_plan = plan_read(Table.open(local_path)), plan_read(Table.open(url, options=options))
    assert not s3_plan.native_base_files
    slices = Table.open(local_path).latest_file_slices()
    data_bytes = sum(s.base_file.size for s in slices if s.base_file) + sum(lf.size for s in slices for lf in s.log_files)
    # Same rows on both stores (Spark aggregates: only the counts and checksums reach the driver).
    s3_sum = checksum(Table.open(url, options=options).read(spark=spark))
    assert s3_sum == checksum(spark.read.parquet(read_data.plain_snapshot)) and s3_sum[0] == read_data.rows

    ours, theirs, counts = paired_s3(server, lambda: materialise(Table.open(url, options=options).read(spark=spark)),
                                     lambda: materialise(Table.open(local_path).read(spark=spark)))
    bench.record(case, rows=read_data.rows, bytes=data_bytes, ours=ours, baseline="tablesvc on local files (same table)",
                 theirs=theirs, target="report (S3 / local)",
                 notes=(f"{len(slices)} slices: on S3 all {len(s3_plan.slices)} read by Python tasks, locally "
                        f"{len(local_plan.slices)} by Python tasks and {len(local_plan.native_base_files)} base files by "
                        f"Spark's Parquet reader; every row materialised (noop sink); medians of {len(ours.runs)} "
                        f"alternating runs per side (S3 {ours.runs} s, local {theirs.runs} s); S3 = moto on loopback, "
                        f"one request at a time: its times are not S3's; rows equal the plain copy's (count, checksum); "
                        + s3_notes(counts)),
                 s3=counts, store="s3", slices=len(slices), data_bytes=data_bytes, tablesvc_cpu_s=ours.cpu_s,
                 baseline_cpu_s=theirs.cpu_s, load_1m_before=[theirs.load_1m, ours.load_1m])
    delete_tree(server, url)


# "local": the cases against Spark's Parquet read (and hudi-rs); "s3": the same table copied to the
# session's S3 endpoint (moto), read there and from local files side by side (pytest -k s3 runs them alone).
STORES = ("local", pytest.param("s3", marks=pytest.mark.s3))


@pytest.mark.parametrize("fmt", LOG_FORMATS)
@pytest.mark.parametrize("store", STORES)
def test_snapshot_read_vs_spark_parquet_and_hudi_rs(bench, spark, read_data, fmt, store, request):
    if store == "s3":
        s3_read_case(bench, spark, read_data, read_data.tables[fmt], f"read: snapshot, 10% updates in {fmt} logs, "
                     "on S3 (moto)", request.getfixturevalue("s3_endpoint"))
        return

    def measure(fn):
        return timed(bench, fn)

    path = read_data.tables[fmt]
    table = Table.open(path)
    slices = table.latest_file_slices()
    base_bytes = sum(s.base_file.size for s in slices if s.base_file)
    log_bytes = sum(lf.size for s in slices for lf in s.log_files)
    assert all(s.log_files for s in slices), "every slice should still hold its update log"

    # Correctness first (outside the timings): same rows on every side.
    ours_sum = checksum(table.read(spark=spark))
    plain_sum = checksum(spark.read.parquet(read_data.plain_snapshot))
    assert ours_sum == plain_sum, f"tablesvc {ours_sum} != plain copy {plain_sum} (rows, hash)"
    assert ours_sum[0] == read_data.rows

    slice_s, slice_prof, slice_info = profile_one_slice(path)
    folder = bench.out / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"read_{fmt}_slice.txt").write_text(
        f"iter_file_slice of one slice in-process (not in Spark): {slice_s:.3f} s; {slice_info}\n\n"
        "== by internal time (tottime) ==\n" + profile_text(slice_prof, "tottime")
        + "\n== by cumulative time ==\n" + profile_text(slice_prof, "cumulative"))

    spark_data_cols = measure(lambda: materialise(spark.read.parquet(read_data.plain_snapshot).select(*DATA_COLUMNS)))
    with bench.profile(f"read_{fmt}_driver"):
        ours, spark_plain = harness(bench).paired(lambda: materialise(Table.open(path).read(spark=spark)),
                                                  lambda: materialise(spark.read.parquet(read_data.plain_snapshot)))
    # The same job as of the insert: every slice streams its base file (its log file is framed,
    # no block decoded, nothing merged): the cost of the Spark read job without the merge.
    from timeline.instant import Action

    insert_instant = table.timeline().completed(Action.DELTA_COMMIT)[0].timestamp
    base_only = measure(lambda: materialise(Table.open(path).read(as_of=insert_instant, spark=spark)))
    hudi = measure(lambda: hudi_rs_read(path))
    hudi_rows = sum(b.num_rows for b in hudi.result)
    assert hudi_rows == read_data.rows
    assert hudi_rs_sample(hudi.result, read_data.rows) == plain_sample(spark, read_data.plain_snapshot, read_data.rows)
    hudi.result = None

    # What the per-slice Python work alone would take on the fixture's 2 cores (slices are
    # near-equal in size: keys hash evenly over the buckets).
    python_estimate = slice_s * slice_info["slices"] / CPUS_FOR_ESTIMATE
    common = (f"{len(slices)} slices (base + {fmt} log of {read_data.updates:,} updates; "
              f"{base_bytes / 1e6:.1f} MB base, {log_bytes / 1e6:.1f} MB logs); every row materialised "
              f"(Spark noop sink / hudi-rs batches in memory); tablesvc and Spark: medians of {len(ours.runs)} "
              f"alternating runs (tablesvc {ours.runs} s, Spark {spark_plain.runs} s); driver under cProfile; "
              f"one slice in-process {slice_s:.2f} s ({slice_info['rows']:,} rows) -> ~{python_estimate:.1f} s of Python slice work "
              f"on {CPUS_FOR_ESTIMATE} cores")
    extra = dict(updates=read_data.updates, log_format=fmt, slices=len(slices), base_bytes=base_bytes,
                 log_bytes=log_bytes, one_slice_in_process_s=round(slice_s, 3), one_slice=slice_info,
                 python_slice_work_estimate_s=round(python_estimate, 2), data_setup_s=read_data.setup_s,
                 tablesvc_as_of_insert_base_only_s=round(base_only.seconds, 3), tablesvc_cpu_s=ours.cpu_s,
                 load_1m_before=ours.load_1m)
    ratio = ours.seconds / spark_plain.seconds
    bench.record(f"read: snapshot, 10% updates in {fmt} logs", rows=read_data.rows, bytes=base_bytes + log_bytes,
                 ours=ours, baseline="Spark parquet read (same rows + meta columns)", theirs=spark_plain,
                 target=f"ratio <= {TARGET_RATIO}", met=ratio <= TARGET_RATIO,
                 notes=common + f"; Spark reading the 5 data columns only: {spark_data_cols.seconds:.2f} s "
                               f"(ratio {ours.seconds / spark_data_cols.seconds:.2f}); the same tablesvc read "
                               f"as of the insert (base files streamed, no log decoded or merged): "
                               f"{base_only.seconds:.2f} s; process-tree CPU: tablesvc {ours.cpu_s:.1f} s, "
                               f"Spark {spark_plain.cpu_s:.1f} s; load average before: {ours.load_1m}",
                 baseline_cpu_s=spark_plain.cpu_s,
                 baseline_data_columns_s=round(spark_data_cols.seconds, 3),
                 baseline_bytes=sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in
                                    os.walk(read_data.plain_snapshot) for f in fs if f.endswith(".parquet")),
                 **extra)
    bench.record(f"read: snapshot, 10% updates in {fmt} logs, vs hudi-rs", rows=read_data.rows,
                 bytes=base_bytes + log_bytes, ours=ours, baseline="hudi-rs read (in-process, Python API)",
                 theirs=hudi, target="report", met=None,
                 notes=common + "; the tablesvc timing is the one of the row above; hudi-rs runs in this "
                               "process, so its peak RSS includes the idle Spark JVM and workers; process-tree "
                               f"CPU: tablesvc {ours.cpu_s:.1f} s, hudi-rs {hudi.cpu_s:.1f} s",
                 baseline_cpu_s=hudi.cpu_s, **extra)


@pytest.mark.parametrize("store", STORES)
def test_snapshot_read_after_compaction_vs_spark_parquet(bench, spark, read_data, store, request):
    """The same table once compacted: no slice has anything to merge, so every base file is read
    by Spark's own Parquet reader (tablesvc/spark/native_scan.py) and the ratio shows what is
    left of tablesvc's cost (planning, the metadata checks, the union).  On S3 (``store="s3"``)
    the same compacted table is read by tablesvc's Python tasks, next to the local read."""
    from tablesvc.services.compaction import run_compaction
    from tablesvc.spark.read_job import plan_read, read_dataframe

    path = str(read_data.work / f"compacted_{store}")
    shutil.copytree(read_data.tables[LOG_FORMATS[0]], path)
    run_compaction(Table.open(path), spark=spark)
    if store == "s3":
        s3_read_case(bench, spark, read_data, path, "read: snapshot after compaction (no logs), on S3 (moto)",
                     request.getfixturevalue("s3_endpoint"))
        shutil.rmtree(path, ignore_errors=True)
        return
    plan = plan_read(Table.open(path))
    assert plan.slices == () and plan.native_base_files, "every slice should be read natively"
    ours_sum = checksum(Table.open(path).read(spark=spark))
    assert ours_sum == checksum(spark.read.parquet(read_data.plain_snapshot))

    with bench.profile("read_compacted_driver"):
        ours, spark_plain = harness(bench).paired(lambda: materialise(Table.open(path).read(spark=spark)),
                                                  lambda: materialise(spark.read.parquet(read_data.plain_snapshot)))
    python_path = timed(bench, lambda: materialise(read_dataframe(spark, Table.open(path), native=False)))
    ratio = ours.seconds / spark_plain.seconds
    bench.record("read: snapshot after compaction (no logs)", rows=read_data.rows,
                 bytes=sum(os.path.getsize(p) for p in plan.native_base_files), ours=ours,
                 baseline="Spark parquet read (same rows + meta columns)", theirs=spark_plain,
                 target=f"ratio <= {TARGET_RATIO}", met=ratio <= TARGET_RATIO,
                 notes=f"{len(plan.native_base_files)} base-file-only slices, all read by Spark's Parquet reader; medians "
                       f"of {len(ours.runs)} alternating runs (tablesvc {ours.runs} s, Spark {spark_plain.runs} s); "
                       f"the same read through Python tasks (native=False): {python_path.seconds:.2f} s "
                       f"(ratio {python_path.seconds / spark_plain.seconds:.2f}); load average before: "
                       f"{ours.load_1m}",
                 python_path_s=round(python_path.seconds, 3), baseline_cpu_s=spark_plain.cpu_s)
    shutil.rmtree(path, ignore_errors=True)
