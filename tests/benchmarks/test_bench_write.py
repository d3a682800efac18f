"""The write path: an insert and a 10% upsert through tablesvc, each next to its baselines (issue #6).

Data (generated once per module inside Spark, cached, outside every timing): ``bench.rows(2_000_000)``
trips over five city partitions (``trips``: key ``trip-%07d``, ``ts`` 1,000,000 + id % 1000), and an
update batch of 10% of the keys, spread evenly over the key space and over all five cities (ids
``10 i + 7 i mod 10``), every one with a newer ``ts`` (2,000,000 + id % 1000) and a new fare.  The
tablesvc table has the bucket index with 4 buckets per partition (20 file groups), table version 8,
Avro log blocks.

1. ``write: insert``: ``Table.insert`` of the cached DataFrame into a new MOR table, next to a Spark
   Parquet write of the same DataFrame (``partitionBy("city")``).
2. ``write: upsert 10%``: ``Table.upsert`` of the cached update DataFrame into that table, next to
   delta-rs (``deltalake``) MERGE into a Delta table holding the same 2M rows (written with
   ``write_deltalake`` from Arrow, partitioned by city, outside the timing; the updates are handed to
   delta-rs as an Arrow table materialised before the timing; ``when matched and source.ts >=
   target.ts update all, when not matched insert all``).  Target (issue #6): ratio <= 1.
   A second row times the same upsert into a copy of the inserted table with Parquet log blocks
   (``log_block_format="parquet"``) against the same delta-rs timing; a third keeps the baseline of
   ``make bench-io``: the Spark anti-join + union rewrite of the plain Parquet copy.  A fourth,
   reported only, times the upsert's Spark part alone against delta-rs: its own routing (the
   group hash) and shuffle (``rows_by_file_group``) with a task that counts each file group's rows.

Before anything is recorded the results must agree: row counts of every output (tablesvc through
hudi-rs, Delta through ``deltalake``, the Parquet copies through Spark), and a sample of updated
keys read back through hudi-rs and through deltalake must carry exactly the values of the update
batch (and a sample of untouched keys their original values).  The notes give the load average
before each timing: other work on the machine shows up there.

Besides the timed runs, each case is run once more on a smaller batch with Spark's Python UDF
profiler on (``spark.sql.pyspark.udf.profiler=perf``): the profile of the tablesvc code inside the
Spark tasks (tag pass and file-group writes) is saved as ``profiles/write-*-tasks.txt`` next to the
driver-side profile of the timed run (``profiles/write-*-driver.txt``).  The insert's is taken on a
quarter of the rows.
"""

from __future__ import annotations

import io
import os
import pstats
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tablesvc.demo.spark_story import trips
from tablesvc.spark.write_groups import GROUP_COLUMN
from tablesvc.spark.write_job import _jvm_route, rows_by_file_group
from tablesvc.write import BucketSpec, KeySpec
from tablesvc.api import Table, TableSpec
from bench_data import DATA_COLUMNS, NUM_BUCKETS, update_batch   # beside this module, on sys.path

pytestmark = [pytest.mark.benchmark, pytest.mark.spark]

TARGET_UPSERT_VS_DELTA = 1.0
SAMPLE_KEYS = 500


# -- helpers ---------------------------------------------------------------------------------------
def harness(bench):
    """The benchmark harness module (tests/benchmarks/bench_harness.py)."""
    import bench_harness

    return bench_harness


def tree_bytes(path: str | Path, newer_than: set[str] | None = None) -> int:
    """Bytes of the data files under ``path`` (not ``.hoodie``/``_delta_log``, not Spark's
    ``_SUCCESS``/crc files); with ``newer_than``, only files whose path is not in that set."""
    total = 0
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith((".hoodie", "_"))]
        for f in files:
            p = os.path.join(root, f)
            if f.startswith(("_", ".hoodie")) or f.endswith(".crc") or (newer_than is not None and p in newer_than):
                continue
            total += os.path.getsize(p)
    return total


def file_set(path: str | Path) -> set[str]:
    return {os.path.join(r, f) for r, _d, fs in os.walk(path) for f in fs}


def timed(bench, fn):
    """The harness's ``timed``: wall time, peak RSS, process-tree CPU seconds, load average before."""
    return harness(bench).timed(fn)


def hudi_rs_read(path: str, columns=DATA_COLUMNS):
    """The table's snapshot through hudi-rs (an independent reader), as one Arrow table."""
    import pyarrow as pa
    from hudi import HudiReadOptions, HudiTableBuilder

    batches = HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions().with_projection(list(columns)))
    return pa.Table.from_batches(batches).select(list(columns))


def delta_read(path: str, columns=DATA_COLUMNS):
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_dataset().to_table(columns=list(columns))


def rows_by_key(table, keys) -> dict[str, dict]:
    import pyarrow as pa
    import pyarrow.compute as pc

    picked = table.filter(pc.is_in(table.column("uuid"), value_set=pa.array(list(keys), pa.string())))
    return {r["uuid"]: r for r in picked.to_pylist()}


def check_sample(reader: str, got: dict[str, dict], expected: dict[str, dict]) -> None:
    missing = sorted(set(expected) - set(got))
    assert not missing, f"{reader}: {len(missing)} sampled keys missing, e.g. {missing[:3]}"
    wrong = [k for k, row in expected.items() if got[k] != row]
    assert not wrong, (f"{reader}: {len(wrong)} of {len(expected)} sampled keys differ, e.g. {wrong[0]}: "
                       f"got {got[wrong[0]]}, expected {expected[wrong[0]]}")


def udf_profile(spark, name: str, bench, fn) -> str:
    """Run ``fn`` with Spark's Python UDF profiler on; save the merged worker-side profile of every
    Python function Spark ran (mapInArrow / applyInArrow bodies) as ``profiles/<name>.txt``.

    Returns the top of that profile (for the notes)."""
    spark.profile.clear()
    spark.conf.set("spark.sql.pyspark.udf.profiler", "perf")
    try:
        fn()
    finally:
        spark.conf.unset("spark.sql.pyspark.udf.profiler")
    dump = Path(tempfile.mkdtemp(prefix="tablesvc-udf-prof-"))
    try:
        spark.profile.dump(str(dump), type="perf")
        files = sorted(str(p) for p in dump.rglob("*.pstats"))
        folder = bench.out / "profiles"
        folder.mkdir(parents=True, exist_ok=True)
        if not files:
            (folder / f"{name}.txt").write_text("the UDF profiler returned no profile\n")
            return ""
        out = io.StringIO()
        stats = pstats.Stats(*files, stream=out)
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(25)
        (folder / f"{name}.txt").write_text(out.getvalue())
        return out.getvalue()
    finally:
        shutil.rmtree(dump, ignore_errors=True)
        spark.profile.clear()


# -- data and the timed insert (module scope: the upsert starts from the inserted table) ----------
@dataclass
class Written:
    work: Path
    rows: int
    updates_n: int
    base: object             # cached Spark DataFrames
    updates: object
    mor: str                 # tablesvc table (after the insert; the upsert changes it)
    plain: str               # Spark Parquet copy of the base rows
    insert: object = None    # Measurement
    plain_write: object = None
    insert_result: object = None


def warm_up(spark, work: Path) -> None:
    """Every code path once on 10k rows, untimed: Python workers start and import tablesvc, the JVM
    compiles the Parquet, shuffle and Arrow paths, delta-rs and hudi-rs load."""
    from deltalake import DeltaTable, write_deltalake

    small = trips(spark, 0, 10_000, 1_000_000)
    table = Table.create(str(work / "warm_mor"), TableSpec("warm", ("uuid",), "ts", ("city",), num_buckets=2))
    table.insert(small)
    table.upsert(update_batch(spark, 10_000))
    small.write.mode("overwrite").partitionBy("city").parquet(str(work / "warm_plain"))
    arrow = small.toArrow()
    write_deltalake(str(work / "warm_delta"), arrow, partition_by=["city"])
    upd = update_batch(spark, 10_000).toArrow()
    (DeltaTable(str(work / "warm_delta")).merge(upd, "target.uuid = source.uuid AND target.city = source.city",
                                                source_alias="source", target_alias="target")
     .when_matched_update_all(predicate="source.ts >= target.ts").when_not_matched_insert_all().execute())
    hudi_rs_read(str(work / "warm_mor"))
    for p in ("warm_mor", "warm_plain", "warm_delta"):
        shutil.rmtree(work / p, ignore_errors=True)


@pytest.fixture(scope="module")
def written(spark, bench):
    pytest.importorskip("deltalake", reason="make bench installs the bench extra (pip install -e '.[test,bench]')")
    rows = bench.rows(2_000_000)
    work = Path(tempfile.mkdtemp(prefix="tablesvc-bench-write-"))
    base = trips(spark, 0, rows, 1_000_000).cache()
    updates = update_batch(spark, rows).cache()
    assert base.count() == rows
    updates_n = updates.count()
    assert updates_n == rows // 10
    warm_up(spark, work)
    w = Written(work, rows, updates_n, base, updates, str(work / "mor"), str(work / "plain"))
    table = Table.create(w.mor, TableSpec("bench", ("uuid",), "ts", ("city",), num_buckets=NUM_BUCKETS))
    with bench.profile("write-insert-driver"):
        w.insert = timed(bench, lambda: table.insert(base))
    w.insert_result = w.insert.result
    w.plain_write = timed(bench, lambda: base.write.mode("overwrite").partitionBy("city").parquet(w.plain))
    try:
        yield w
    finally:
        base.unpersist()
        updates.unpersist()
        shutil.rmtree(work, ignore_errors=True)


# -- 1. insert ------------------------------------------------------------------------------------
def test_insert_vs_spark_parquet(written, spark, bench):
    w = written
    result = w.insert_result
    assert result is not None and result.inserts == w.rows and result.file_groups_created == 5 * NUM_BUCKETS
    hudi = hudi_rs_read(w.mor)
    assert hudi.num_rows == w.rows, f"hudi-rs reads {hudi.num_rows} rows, expected {w.rows}"
    assert spark.read.parquet(w.plain).count() == w.rows
    # A sample of keys must read back through hudi-rs exactly as the cached input holds them.
    step = max(1, w.rows // SAMPLE_KEYS)
    keys = [f"trip-{i:07d}" for i in range(0, w.rows, step)]
    expected = rows_by_key(w.base.where(w.base.uuid.isin(keys)).toArrow(), keys)
    check_sample("hudi-rs after the insert", rows_by_key(hudi, keys), expected)

    # Worker-side profile on a quarter of the rows (the profiler slows the tasks; not timed).
    udf_profile(spark, "write-insert-tasks", bench, lambda: Table.create(
        str(w.work / "prof_insert"), TableSpec("prof", ("uuid",), "ts", ("city",), num_buckets=NUM_BUCKETS))
        .insert(w.base.sample(fraction=0.25, seed=1)))
    shutil.rmtree(w.work / "prof_insert", ignore_errors=True)

    bench.record("write: insert", rows=w.rows, bytes=tree_bytes(w.mor), ours=w.insert,
                 baseline="Spark parquet write (partitionBy city)", theirs=w.plain_write,
                 notes=f"{w.rows:,} rows from a cached Spark DataFrame into a new MOR table (bucket index, "
                       f"{5 * NUM_BUCKETS} file groups, one base file each) vs the same DataFrame written as "
                       "Parquet by Spark; both checked: row counts (hudi-rs, Spark) and "
                       f"{len(keys)} sampled keys through hudi-rs. Process-tree CPU: tablesvc "
                       f"{w.insert.cpu_s:.1f} s, Spark {w.plain_write.cpu_s:.1f} s; load average before: tablesvc "
                       f"{w.insert.load_1m:.1f}, Spark {w.plain_write.load_1m:.1f}.",
                 tablesvc_cpu_s=w.insert.cpu_s, baseline_cpu_s=w.plain_write.cpu_s,
                 baseline_bytes=tree_bytes(w.plain), file_groups=result.file_groups_created,
                 tablesvc_internal_s=result.seconds)


# -- 2. upsert 10% --------------------------------------------------------------------------------
def test_upsert_vs_delta_merge_and_spark_rewrite(written, spark, bench):
    import pyarrow as pa
    from deltalake import DeltaTable, __version__ as deltalake_version, write_deltalake

    w = written
    delta_pristine = str(w.work / "delta_pristine")
    delta = str(w.work / "delta")
    mor_avro = str(w.work / "mor_avro_logs")
    mor_parquet = str(w.work / "mor_parquet_logs")
    # Outside the timing: the Delta table holding the same rows, the updates as Arrow.  Every
    # timed run starts from a fresh copy of its side's table (made untimed); the runs alternate
    # with delta-rs's (harness.paired) and medians are compared.
    base_arrow = w.base.toArrow()
    write_deltalake(delta_pristine, base_arrow, partition_by=["city"])
    updates_arrow = w.updates.toArrow()
    assert isinstance(updates_arrow, pa.Table) and updates_arrow.num_rows == w.updates_n
    assert DeltaTable(delta_pristine).to_pyarrow_dataset().count_rows() == w.rows
    delta_files_before = len(DeltaTable(delta_pristine).file_uris())
    files_before = file_set(w.mor)

    def fresh(source: str, target: str):
        def copy() -> None:
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target)
        return copy

    def delta_merge():
        return (DeltaTable(delta)
                .merge(updates_arrow, "target.uuid = source.uuid AND target.city = source.city",
                       source_alias="source", target_alias="target")
                .when_matched_update_all(predicate="source.ts >= target.ts")
                .when_not_matched_insert_all()
                .execute())

    paired = harness(bench).paired
    with bench.profile("write-upsert-driver"):
        ours, theirs = paired(lambda: Table.open(mor_avro).upsert(w.updates), delta_merge,
                              before_ours=fresh(w.mor, mor_avro), before_theirs=fresh(delta_pristine, delta))
    ours_pq, theirs_pq = paired(lambda: Table.open(mor_parquet).upsert(w.updates, log_block_format="parquet"),
                                delta_merge, before_ours=fresh(w.mor, mor_parquet),
                                before_theirs=fresh(delta_pristine, delta))

    # The floor under both: the write's own routing (the group hash of partition path and bucket)
    # and shuffle (rows_by_file_group), run over by a task that only counts each file group's
    # rows.  What Spark costs before tablesvc encodes or writes anything, next to delta-rs's
    # whole MERGE.
    cfg = Table.open(w.mor).config
    route = _jvm_route(w.updates.schema, KeySpec.from_config(cfg), BucketSpec.from_props(cfg.props))
    assert route is not None, "the benchmark's keys route in the JVM"

    def count_rows(batches):
        from tablesvc.spark.write_groups import consecutive_groups

        for rows in consecutive_groups(batches):
            yield pa.RecordBatch.from_pydict({"rows": [rows.num_rows]})

    def shuffle_only():
        hashed = w.updates.withColumn(GROUP_COLUMN, route.group_hash())    # as write_dataframe routes it
        return rows_by_file_group(hashed, hashed=True).mapInArrow(count_rows, "rows long").collect()

    floor, theirs_floor = paired(shuffle_only, delta_merge, before_theirs=fresh(delta_pristine, delta))
    counts = [r["rows"] for r in floor.result]
    assert sum(counts) == w.updates_n and len(counts) == NUM_BUCKETS * 5, counts  # 4 buckets x 5 cities

    merged_plain = (spark.read.parquet(w.plain).join(w.updates.select("uuid"), "uuid", "left_anti")
                    .unionByName(w.updates))
    rewrite = timed(bench, lambda: merged_plain.write.mode("overwrite").partitionBy("city")
                      .parquet(str(w.work / "plain_merged")))

    # The results must agree before anything is recorded.
    result, result_pq, merge_metrics = ours.result, ours_pq.result, theirs.result
    for r in (result, result_pq):
        assert r.records_written == w.updates_n and r.file_groups_created == 0, r
    assert merge_metrics["num_target_rows_updated"] == w.updates_n, merge_metrics
    assert merge_metrics["num_target_rows_inserted"] == 0, merge_metrics
    assert spark.read.parquet(str(w.work / "plain_merged")).count() == w.rows
    upd_keys = updates_arrow.column("uuid").to_pylist()
    sample = upd_keys[:: max(1, len(upd_keys) // SAMPLE_KEYS)]
    expected = rows_by_key(updates_arrow, sample)
    touched = set(upd_keys)
    untouched = [f"trip-{i:07d}" for i in range(1, w.rows, max(1, w.rows // SAMPLE_KEYS))]
    untouched = [k for k in untouched if k not in touched]
    before = rows_by_key(base_arrow, untouched)
    del base_arrow
    for reader, read in (("hudi-rs (tablesvc table, avro logs)", lambda: hudi_rs_read(mor_avro)),
                         ("hudi-rs (tablesvc table, parquet logs)", lambda: hudi_rs_read(mor_parquet)),
                         ("deltalake", lambda: delta_read(delta))):
        got = read()
        assert got.num_rows == w.rows, f"{reader} reads {got.num_rows} rows after the upsert, expected {w.rows}"
        check_sample(f"{reader}, updated keys", rows_by_key(got, sample), expected)
        check_sample(f"{reader}, untouched keys", rows_by_key(got, untouched), before)
        del got

    log_bytes = tree_bytes(mor_avro, newer_than=files_before)   # before the profiled run adds more
    log_bytes_pq = tree_bytes(mor_parquet, newer_than=files_before)
    delta_live_bytes = sum(os.path.getsize(u.removeprefix("file://")) for u in DeltaTable(delta).file_uris())
    udf_profile(spark, "write-upsert-tasks", bench, lambda: Table.open(mor_avro).upsert(w.updates))
    udf_profile(spark, "write-upsert-parquet-logs-tasks", bench,
                lambda: Table.open(mor_parquet).upsert(w.updates, log_block_format="parquet"))

    common = (f"{w.updates_n:,} updated keys (10%, spread over every city and file group, all with a newer ts) "
              f"into the {w.rows:,}-row table; tablesvc's input is a Spark DataFrame cached before the timing")
    delta_how = (f"delta-rs gets the same rows as an Arrow table materialised before the timing and MERGEs on "
                 "uuid and city (when matched and source.ts >= target.ts update all, when not matched insert all) "
                 f"into a Delta table written from the same {w.rows:,} rows (partitioned by city, "
                 f"{delta_files_before} files); it rewrites every file holding a matched key "
                 f"({merge_metrics.get('num_target_files_added')} files, {delta_live_bytes / 1e6:.1f} MB live after)")
    checked = (f"Checked: row counts through hudi-rs and deltalake, {len(sample)} updated + {len(untouched)} "
               "untouched keys through both")
    delta_extra = dict(delta_rows_updated=merge_metrics["num_target_rows_updated"],
                       delta_files_added=merge_metrics.get("num_target_files_added"),
                       delta_files_removed=merge_metrics.get("num_target_files_removed"),
                       delta_live_bytes_after=delta_live_bytes)
    for fmt, m, r, nbytes, theirs in (("avro", ours, result, log_bytes, theirs),
                                      ("parquet", ours_pq, result_pq, log_bytes_pq, theirs_pq)):
        ratio = m.seconds / theirs.seconds
        case = ("write: upsert 10% (vs delta-rs MERGE)" if fmt == "avro"
                else "write: upsert 10%, parquet log blocks (vs delta-rs MERGE)")
        bench.record(case, rows=w.updates_n, bytes=nbytes, ours=m,
                     baseline=f"delta-rs {deltalake_version} MERGE", theirs=theirs,
                     target=f"ratio <= {TARGET_UPSERT_VS_DELTA:g}", met=ratio <= TARGET_UPSERT_VS_DELTA,
                     notes=(f"{common}; medians of {len(m.runs)} alternating runs per side, each on a fresh "
                            f"copy (tablesvc {m.runs} s, delta-rs {theirs.runs} s); tablesvc appends one {fmt} "
                            f"log file per file group ({r.files_written} files, {nbytes / 1e6:.1f} MB){' (the default block format)' if fmt == 'avro' else ''}; "
                            f"{delta_how}. {checked}. Process-tree CPU: tablesvc {m.cpu_s:.1f} s, delta-rs "
                            f"{theirs.cpu_s:.1f} s; load average before: tablesvc {m.load_1m:.1f}, delta-rs "
                            f"{theirs.load_1m:.1f}."),
                     tablesvc_cpu_s=m.cpu_s, baseline_cpu_s=theirs.cpu_s,
                     tablesvc_files_written=r.files_written, tablesvc_internal_s=r.seconds, log_block_format=fmt,
                     **delta_extra)
    bench.record("write: upsert 10%, Spark's routing and shuffle alone (vs delta-rs MERGE)", rows=w.updates_n,
                 bytes=0, ours=floor, baseline=f"delta-rs {deltalake_version} MERGE", theirs=theirs_floor,
                 notes=(f"{common}; the upsert's own routing (group hash) and shuffle (rows_by_file_group) to its "
                        f"{len(counts)} file groups, each group's rows handed to a Python task that counts them "
                        "and writes nothing: the part of the upsert that is Spark's, before any block is encoded, "
                        "any file written or the timeline touched. Reported, not judged; medians of "
                        f"{len(floor.runs)} alternating runs (shuffle {floor.runs} s, delta-rs {theirs_floor.runs} s)."
                        f" Process-tree CPU: shuffle {floor.cpu_s:.1f} s, delta-rs {theirs_floor.cpu_s:.1f} s."),
                 tablesvc_cpu_s=floor.cpu_s, baseline_cpu_s=theirs_floor.cpu_s)
    bench.record("write: upsert 10% (vs Spark rewrite)", rows=w.updates_n, bytes=log_bytes, ours=ours,
                 baseline="Spark anti-join + union rewrite of the Parquet copy", theirs=rewrite,
                 notes=(f"{common}; avro log blocks; the baseline rewrites the whole Parquet copy (what a user "
                        f"without MOR does). Process-tree CPU: tablesvc {ours.cpu_s:.1f} s, Spark "
                        f"{rewrite.cpu_s:.1f} s; load average before: tablesvc {ours.load_1m:.1f}, Spark "
                        f"{rewrite.load_1m:.1f}."),
                 tablesvc_cpu_s=ours.cpu_s, baseline_cpu_s=rewrite.cpu_s,
                 baseline_bytes=tree_bytes(w.work / "plain_merged"))
