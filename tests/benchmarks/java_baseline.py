"""Apache Hudi (Java) as the benchmarks' baseline (issue #26, the performance anchor): the data,
the timing of both sides and the checks ``test_bench_java_hudi.py`` uses.

Java Hudi runs in a driver process of its own (``tests/interop_java/java_hudi.py``, started with
``make interop``'s ``.venv-hudi``); that module is a helper, not a test file, and this one puts its
folder on ``sys.path`` to import it (tests/conftest.py puts only tests/ and tests/benchmarks there).

**What is timed.**  Java Hudi: the seconds the driver measures inside its own process around the
request's work (``secs`` of its answer: the CALL, the write, the read into the ``noop`` sink), so
neither the JVM's start nor the JSON round trip is in it.  tablesvc: the same work called
in-process through its Python API, in the test session's Spark (already started).  Both sides
run ``local[2]`` with 2 GiB of driver memory.

**The table.**  tablesvc creates it empty (its ``hoodie.properties`` carries the bucket index,
which Java Hudi does not record in a table it creates, and tablesvc writes only bucket-indexed
tables); every data file in it is then written by Java Hudi: the insert of all rows and the
upsert of 10% of them (log blocks), from the same Parquet files tablesvc's upserts read.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import bench_harness
from bench_data import DATA_COLUMNS, NUM_BUCKETS, updates_of

_INTEROP_JAVA = Path(__file__).resolve().parents[1] / "interop_java"
if str(_INTEROP_JAVA) not in sys.path:
    sys.path.insert(0, str(_INTEROP_JAVA))

from java_hudi import JavaHudi, JavaHudiSetup, JavaHudiUnavailable, JavaTable  # noqa: E402

from tablesvc.api import Table, TableSpec  # noqa: E402
from tablesvc.demo.spark_story import trips  # noqa: E402

TABLE_VERSION = 9            # what Hudi 1.2.0 writes by default
DRIVER_MEMORY = "2g"         # the test session's (tests/conftest.py ``spark``)
TABLE_NAME = "bench_java"
# tablesvc's writes here run no service after them, as Java's (JavaTable.write_options)
NO_INLINE_SERVICES = {"hoodie.clean.automatic": "false", "hoodie.compact.inline": "false",
                      "hoodie.log.compaction.inline": "false"}

__all__ = ["JavaHudi", "JavaHudiSetup", "JavaHudiUnavailable", "JavaTable", "JavaData", "build_java_data", "build_cleanable",
           "paired_with_java", "fresh_copy", "data_files", "hudi_rs_rows", "model_checksum", "NO_INLINE_SERVICES"]


# -- the data --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JavaData:
    work: Path
    rows: int
    updates: int
    plain_base: str          # Parquet: every row (what both sides' writes and the model start from)
    plain_updates: str       # Parquet: 10% of the keys, newer ts
    inserted: str            # the table after Java's insert (the upsert case's input)
    uncompacted: str         # after Java's upsert of the updates: 10% of the rows in log blocks
    setup_s: dict            # seconds of each Java step that built the tables


def _java_step(java: JavaHudi, request: dict, what: str, took: dict) -> dict:
    answer = java.step(request)
    took[what] = answer["secs"]
    return answer


def build_java_data(spark, java: JavaHudi, work: Path, rows: int) -> JavaData:
    """Plain Parquet (base and updates) from tablesvc's session; an empty bucket-indexed table made
    by tablesvc; then Java Hudi writes every data file.  Each table is a copy of the one before,
    taken before Java mutates it."""
    plain_base, plain_updates = str(work / "plain_base"), str(work / "plain_updates")
    trips(spark, 0, rows, 1_000_000).write.mode("overwrite").partitionBy("city").parquet(plain_base)
    updates_of(spark, rows).write.mode("overwrite").partitionBy("city").parquet(plain_updates)
    updates = spark.read.parquet(plain_updates).count()
    took: dict[str, float] = {}

    inserted = str(work / "inserted")
    Table.create(inserted, TableSpec(TABLE_NAME, ("uuid",), "ts", ("city",), table_version=TABLE_VERSION,
                                     num_buckets=NUM_BUCKETS))
    table = JavaTable.existing(inserted, java.bundle)
    _java_step(java, JavaHudi.write_request(table, "insert", source=plain_base), "java_insert_s", took)

    uncompacted = str(work / "uncompacted")
    shutil.copytree(inserted, uncompacted)
    table = JavaTable.existing(uncompacted, java.bundle)
    _java_step(java, JavaHudi.write_request(table, "upsert", source=plain_updates), "java_upsert_s", took)

    return JavaData(work, rows, updates, plain_base, plain_updates, inserted, uncompacted, took)


def build_cleanable(java: JavaHudi, data: JavaData) -> str:
    """A copy of the uncompacted table that Java compacts and upserts (the same updates) twice
    more: two older slices in every file group for a clean to remove."""
    cleanable = str(data.work / "cleanable")
    shutil.copytree(data.uncompacted, cleanable)
    table = JavaTable.existing(cleanable, java.bundle)
    for round_ in (1, 2):
        _java_step(java, {"op": "compaction", "path": table.path, "mode": "run", "options": table.procedure_options(),
                          "session": table.session_conf()}, f"java_compaction_{round_}_s", data.setup_s)
        _java_step(java, JavaHudi.write_request(table, "upsert", source=data.plain_updates),
                   f"java_upsert_{round_ + 1}_s", data.setup_s)
    return cleanable


def fresh_copy(source: str, target: str) -> Callable[[], None]:
    def copy() -> None:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
    return copy


# -- timing both sides -----------------------------------------------------------------------------
def _tree(root: int) -> list[int]:
    """``root`` and its descendants, from /proc."""
    return list(bench_harness.process_tree(root))


def _rss_mb(pids: list[int]) -> float:
    return bench_harness.rss_mb(pids)


def _cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15])
        except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError, IndexError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def _run_side(fn: Callable[[], Any], java_pid: int, java_side: bool) -> bench_harness.Measurement:
    """One run of one side: its seconds, the peak RSS and CPU of ITS processes only.  The Java
    driver is a child of this process; tablesvc's side is this process tree without it."""
    import threading

    def side_pids() -> list[int]:
        java = _tree(java_pid)
        return java if java_side else [p for p in _tree(os.getpid()) if p not in java]

    peak, stop = [_rss_mb(side_pids())], threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            peak[0] = max(peak[0], _rss_mb(side_pids()))

    load, cpu = os.getloadavg()[0], _cpu_s(side_pids())
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        result = fn()
    finally:
        wall = time.perf_counter() - started
        stop.set()
        sampler.join()
    cpu = _cpu_s(side_pids()) - cpu
    # Java's figure is its own clock around the work; the wall time here adds the request's round trip
    seconds = float(result["secs"]) if java_side else wall
    m = bench_harness.Measurement(seconds, round(max(peak[0], _rss_mb(side_pids())), 1), result,
                                  round(cpu, 2), round(load, 2))
    m.runs = [round(wall, 3)]     # the caller keeps the wall times apart
    return m


def paired_with_java(ours: Callable[[], Any], java: JavaHudi, request: Callable[[], dict], *,
                     before_ours: Callable[[], Any] | None = None, before_theirs: Callable[[], Any] | None = None,
                     warmup: int | None = None) -> tuple[bench_harness.Measurement, bench_harness.Measurement, list]:
    """``bench_harness.paired`` with Java Hudi as the baseline: warm-up pairs untimed, then the
    sides in turn (Java, tablesvc, Java, ...), each side's median; Java's seconds are the driver's
    own.  Also returns Java's wall times seen from here (request round trip included)."""
    n, warm = bench_harness.repeats(), (bench_harness.warmups() if warmup is None else warmup)
    pid = java.pid
    ours_runs, theirs_runs = [], []
    for _ in range(warm + n):
        if before_theirs is not None:
            before_theirs()
        req = request()
        theirs_runs.append(_run_side(lambda: java.step(req), pid, java_side=True))
        if before_ours is not None:
            before_ours()
        ours_runs.append(_run_side(ours, pid, java_side=False))
    java_walls = [m.runs[0] for m in theirs_runs[warm:]]
    return (bench_harness._median(ours_runs[warm:], ours_runs[:warm]),
            bench_harness._median(theirs_runs[warm:], theirs_runs[:warm]), java_walls)


# -- the checks ------------------------------------------------------------------------------------
def model_checksum(spark, data: JavaData) -> tuple[int, int]:
    """(rows, checksum) of the independent model: the plain base with every key's latest update
    (by ts) in place of its row, in Spark SQL over the Parquet files (bench_data.checksum's hash)."""
    from bench_data import checksum

    spark.read.parquet(data.plain_base).createOrReplaceTempView("java_bench_base")
    spark.read.parquet(data.plain_updates).createOrReplaceTempView("java_bench_updates")
    cols = ", ".join(DATA_COLUMNS)
    merged = spark.sql(f"""
        WITH latest AS (SELECT {cols} FROM (
            SELECT *, row_number() OVER (PARTITION BY uuid ORDER BY ts DESC) AS rn FROM java_bench_updates) WHERE rn = 1)
        SELECT {", ".join(f"b.{c}" for c in DATA_COLUMNS)} FROM java_bench_base b LEFT ANTI JOIN latest u ON b.uuid = u.uuid
        UNION ALL SELECT {cols} FROM latest""")
    return checksum(merged)


def hudi_rs_rows(path: str):
    """Every row of the table through hudi-rs, data columns, sorted by key (a pyarrow Table)."""
    import pyarrow as pa
    from hudi import HudiReadOptions, HudiTableBuilder

    batches = HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions().with_projection(list(DATA_COLUMNS)))
    return pa.Table.from_batches(batches).select(list(DATA_COLUMNS)).sort_by("uuid")


def data_files(path: str, crc: bool = False) -> set[str]:
    """The table's data files (not under .hoodie), relative to it; with ``crc``, instead, the ``.crc``
    files Java's local file system (Hadoop's checksummed one) writes beside each file it creates."""
    root = Path(path)
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and ".hoodie" not in p.relative_to(root).parts
            and not p.name.startswith(".hoodie_partition") and p.name.endswith(".crc") == crc}
