"""Apache Hudi (Java) as the baseline a user would otherwise run (issue #26, the performance anchor).

``make bench-java`` (marker ``java_baseline``; ``make bench`` leaves these out).  One table, made as
``java_baseline.build_java_data`` says: ``bench.rows(2_000_000)`` trips over five city partitions,
bucket index (4 buckets x 5 partitions = 20 file groups), table version 9, metadata table off;
Java Hudi 1.2.0 inserts every row and upserts 10% of the keys (tens digit 3, newer ts) into log
blocks.  Each case runs both sides on copies of one table (made outside the timing), alternating,
medians (``bench_harness.paired``'s method, ``java_baseline.paired_with_java``):

* compaction: Java's ``CALL run_compaction(op => 'run')`` vs ``Table.compact`` (``tablesvc
  compaction run``), target <= 0.5x;
* snapshot read of the table with 10% in logs: Java's ``spark.read.format("hudi")`` vs
  ``Table.read``, every row and column into Spark's ``noop`` sink on both sides, target <= 1x;
* upsert of the 10%: Java's upsert (datasource write) vs ``Table.write(..., "upsert")``, both
  reading the same Parquet files, target <= 1x;
* clean: Java's ``CALL run_clean(retain_commits => 1)`` vs ``Table.clean`` with
  ``hoodie.cleaner.commits.retained=1``, on a table with two older slices per file group; reported.

After every case the two outputs must agree before anything is recorded: tablesvc's read of each
side's table against an independent model (the Spark SQL merge of the Parquet files; count and a
checksum of every data column), Java's read of each (count and checksum) and hudi-rs's (every row).

Java Hudi must start: without ``make bench-java``'s set-up these tests FAIL, they never skip.
"""

from __future__ import annotations

import dataclasses
import shutil

import pytest
from bench_data import DATA_COLUMNS, NUM_BUCKETS, checksum
from java_baseline import (NO_INLINE_SERVICES, TABLE_NAME, TABLE_VERSION, DRIVER_MEMORY, JavaData, JavaHudi,
                           JavaHudiSetup, JavaHudiUnavailable, JavaTable, build_cleanable, build_java_data, data_files,
                           fresh_copy, hudi_rs_rows, model_checksum, paired_with_java)

from tablesvc.api import Table
from tablesvc.services.result import Status

pytestmark = [pytest.mark.benchmark, pytest.mark.java_baseline, pytest.mark.spark]

TARGETS = {"compaction": 0.5, "read": 1.0, "upsert": 1.0}


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    try:
        setup = JavaHudiSetup.from_env()
        driver = JavaHudi(setup, setup.bundle, tmp_path_factory.mktemp("java-hudi-bench"),
                          driver_memory=DRIVER_MEMORY).start()
    except JavaHudiUnavailable as exc:
        failure = str(exc)
    else:
        yield driver
        driver.close()
        return
    pytest.fail(f"Java Hudi could not start (run `make bench-java`): {failure}", pytrace=False)


@pytest.fixture(scope="module")
def data(spark, bench, java, tmp_path_factory):
    work = tmp_path_factory.mktemp("bench_java")
    ds = build_java_data(spark, java, work, bench.rows(2_000_000))
    yield ds
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def model(spark, data):
    return model_checksum(spark, data)


def java_table(java: JavaHudi, source: str, path: str) -> JavaTable:
    return dataclasses.replace(JavaTable.existing(source, java.bundle), path=path)


def java_checksum(java: JavaHudi, path: str) -> tuple[int, int]:
    got = java.step({"op": "checksum", "path": path, "columns": list(DATA_COLUMNS)})
    return got["rows"], got["hash"]


def check_outputs(spark, java: JavaHudi, data: JavaData, model, ours_path: str, java_path: str) -> str:
    """Both sides' tables read the same rows, by three readers, and tablesvc's as the model."""
    for side, path in (("tablesvc's", ours_path), ("Java's", java_path)):
        got = checksum(Table.open(path).read(spark=spark, columns=DATA_COLUMNS))
        assert got == model, f"tablesvc reads {side} table {path} as {got} (rows, hash), the model is {model}"
    # Spark's hash (Murmur3, seed 42) is the same function on Java's Spark 3.5 and tablesvc's Spark 4
    java_ours, java_theirs = java_checksum(java, ours_path), java_checksum(java, java_path)
    assert java_ours == java_theirs == model, \
        f"Java reads tablesvc's table as {java_ours}, its own as {java_theirs} (rows, hash); the model is {model}"
    rs_ours, rs_theirs = hudi_rs_rows(ours_path), hudi_rs_rows(java_path)
    assert rs_ours.num_rows == data.rows and rs_ours.equals(rs_theirs), \
        f"hudi-rs reads {rs_ours.num_rows} rows from tablesvc's table, {rs_theirs.num_rows} from Java's; they differ"
    return (f"outputs equal: tablesvc's and Java's reads of both tables = the model ({model[0]:,} rows, "
            f"data-column checksum), hudi-rs: every row of both equal")


def timing_note(ours, theirs, java_walls) -> str:
    return (f"medians of {len(ours.runs)} alternating runs per side (tablesvc {ours.runs} s, Java {theirs.runs} s, "
            f"Java's as seen from the test process with the request's round trip {java_walls} s); Java timed inside "
            f"its driver around the work, no JVM start; both local[2], driver memory {DRIVER_MEMORY}; CPU of each "
            f"side's processes: tablesvc {ours.cpu_s} s, Java {theirs.cpu_s} s; peak RSS tablesvc "
            f"{ours.peak_rss_mb:.0f} MB, Java {theirs.peak_rss_mb:.0f} MB; load average before "
            f"{ours.load_1m} / {theirs.load_1m}")


def table_bytes(path: str) -> int:
    from pathlib import Path

    return sum((Path(path) / f).stat().st_size for f in data_files(path))


def record(bench, java, data, case: str, key: str, baseline: str, ours, theirs, java_walls, notes: str, **extra):
    target = TARGETS.get(key)
    ratio = ours.seconds / theirs.seconds
    bench.record(case, rows=data.rows, bytes=table_bytes(data.uncompacted), ours=ours,
                 baseline=f"Apache Hudi {java.bundle.version} (Java): {baseline}", theirs=theirs,
                 target="" if target is None else f"ratio <= {target}",
                 met=None if target is None else ratio <= target,
                 notes=notes + "; " + timing_note(ours, theirs, java_walls) + ".",
                 java_wall_runs_s=java_walls, tablesvc_cpu_s=ours.cpu_s, baseline_cpu_s=theirs.cpu_s,
                 table_version=TABLE_VERSION, file_groups=5 * NUM_BUCKETS, updates=data.updates,
                 java_setup_s=data.setup_s, **extra)


def test_compaction_vs_java_run_compaction(bench, spark, java, data, model):
    ours_path, java_path = str(data.work / "compact_tablesvc"), str(data.work / "compact_java")
    table = java_table(java, data.uncompacted, java_path)
    ours, theirs, walls = paired_with_java(
        lambda: Table.open(ours_path).compact(spark=spark), java,
        lambda: {"op": "compaction", "path": java_path, "mode": "run", "options": table.procedure_options(),
                 "session": table.session_conf()},
        before_ours=fresh_copy(data.uncompacted, ours_path), before_theirs=fresh_copy(data.uncompacted, java_path))
    done = [r for r in ours.result if r.action == "compaction" and r.status is Status.DONE]
    assert len(done) == 1, [r.render() for r in ours.result]
    assert any(r.get("state") == "COMPLETED" for r in theirs.result["result"]), theirs.result
    for side, path in (("tablesvc", ours_path), ("Java", java_path)):
        slices = Table.open(path).latest_file_slices()
        assert len(slices) == 5 * NUM_BUCKETS and all(s.base_file and not s.log_files for s in slices), \
            f"{side}'s compaction left log files or missed file groups in {path}"
    agreed = check_outputs(spark, java, data, model, ours_path, java_path)
    record(bench, java, data, f"compaction vs Java Hudi: {data.rows / 1e6:g}M rows, 10% updates in logs", "compaction", "CALL run_compaction(op => 'run')", ours, theirs, walls,
        f"{data.updates:,} updates in Avro log blocks written by Java, 20 file groups compacted by each side on a "
        f"fresh copy (tablesvc: Table.compact = `tablesvc compaction run`, schedule + run); {agreed}",
        compaction_metrics=done[0].metrics.as_dict())


def test_snapshot_read_vs_java_read(bench, spark, java, data, model):
    path = data.uncompacted

    def ours():
        Table.open(path).read(spark=spark).write.format("noop").mode("overwrite").save()

    ours_m, theirs, walls = paired_with_java(ours, java, lambda: {"op": "scan", "path": path})
    got = checksum(Table.open(path).read(spark=spark, columns=DATA_COLUMNS))
    assert got == model, f"tablesvc reads {got}, the model is {model}"
    java_sum = java_checksum(java, path)
    assert java_sum == model, f"Java reads {java_sum} (rows, hash), the model is {model}"
    rs = hudi_rs_rows(path)
    assert rs.num_rows == data.rows
    record(bench, java, data, f"snapshot read vs Java Hudi: {data.rows / 1e6:g}M rows, 10% in logs", "read",
           "spark.read.format(\"hudi\")", ours_m, theirs, walls,
           f"every row and column (meta columns too) into Spark's noop sink on both sides, planning included; "
           f"tablesvc's and Java's reads = the model ({model[0]:,} rows, data-column checksum), hudi-rs "
           f"{rs.num_rows:,} rows")


def test_upsert_vs_java_upsert(bench, spark, java, data, model):
    ours_path, java_path = str(data.work / "upsert_tablesvc"), str(data.work / "upsert_java")
    table = java_table(java, data.inserted, java_path)
    ours, theirs, walls = paired_with_java(
        lambda: Table.open(ours_path).write(spark.read.parquet(data.plain_updates), "upsert",
                                            options=NO_INLINE_SERVICES),
        java, lambda: JavaHudi.write_request(table, "upsert", source=data.plain_updates),
        before_ours=fresh_copy(data.inserted, ours_path), before_theirs=fresh_copy(data.inserted, java_path))
    for side, path in (("tablesvc", ours_path), ("Java", java_path)):
        slices = Table.open(path).latest_file_slices()
        assert sum(1 for s in slices if s.log_files) == 5 * NUM_BUCKETS, f"{side}'s upsert wrote no log to some groups"
    agreed = check_outputs(spark, java, data, model, ours_path, java_path)
    record(bench, java, data, f"upsert 10% vs Java Hudi: {data.updates:,} updates into {data.rows / 1e6:g}M rows",
           "upsert", "upsert (datasource write, bucket index)", ours, theirs, walls,
           f"both read the same Parquet files of {data.updates:,} updates and write them as Avro log blocks into "
           f"a fresh copy of the table Java inserted (no inline services on either side); {agreed}")


def test_clean_vs_java_run_clean(bench, spark, java, data, model):
    cleanable = build_cleanable(java, data)
    ours_path, java_path = str(data.work / "clean_tablesvc"), str(data.work / "clean_java")
    table = java_table(java, cleanable, java_path)
    before = data_files(cleanable)
    ours, theirs, walls = paired_with_java(
        lambda: Table.open(ours_path).clean(options={"hoodie.cleaner.commits.retained": "1"}), java,
        lambda: {"op": "clean", "path": java_path, "table": TABLE_NAME, "retain_commits": 1,
                 "options": table.procedure_options(), "session": table.session_conf()},
        before_ours=fresh_copy(cleanable, ours_path), before_theirs=fresh_copy(cleanable, java_path))
    done = [r for r in ours.result if r.action == "clean" and r.status is Status.DONE]
    assert len(done) == 1, [r.render() for r in ours.result]
    left_ours, left_java = data_files(ours_path), data_files(java_path)
    deleted = len(before - left_ours)
    assert deleted > 0 and left_ours == left_java, \
        (f"tablesvc's clean left {len(left_ours)} of {len(before)} data files, Java's {len(left_java)}; only "
         f"tablesvc's left: {sorted(left_ours - left_java)[:5]}, only Java's: {sorted(left_java - left_ours)[:5]}")
    agreed = check_outputs(spark, java, data, model, ours_path, java_path)
    # Java deletes the .crc file its file system wrote beside each data file, and so does tablesvc
    crc_before, crc_ours, crc_java = (len(data_files(p, crc=True)) for p in (cleanable, ours_path, java_path))
    assert crc_ours == crc_java, f"checksum files left: tablesvc {crc_ours}, Java {crc_java} (of {crc_before})"
    record(bench, java, data, f"clean vs Java Hudi: {deleted} of {len(before)} data files", "clean",
           "CALL run_clean(retain_commits => 1)", ours, theirs, walls,
           f"a table with two compactions and three upserts by Java (older slices in all 20 file groups); both "
           f"plan and execute (KEEP_LATEST_COMMITS, 1 commit retained) and delete the same {deleted} files; Java "
           f"both delete their Hadoop .crc files too ({crc_before} -> {crc_java} / {crc_ours}); "
           f"{agreed}", files_deleted=deleted, data_files_before=len(before),
           crc_files_before_after=[crc_before, crc_ours, crc_java])
