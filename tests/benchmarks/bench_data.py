"""The trips data the Spark benchmarks share (compaction, read, write, scaling): the columns, the
two update batches, the compaction dataset (plain Parquet copies and the MOR tables written from
them), and the checks that compare outputs (an order-independent checksum, a key sample).

One definition of each, imported by the benchmarks (no benchmark imports another).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from tablesvc.api import Table, TableSpec
from tablesvc.demo.spark_story import trips

NUM_BUCKETS = 4
LOG_FORMATS = ("avro", "parquet")
DATA_COLUMNS = ("uuid", "ts", "rider", "fare", "city")


def updates_of(spark, rows: int):
    """The compaction and read benchmarks' update: 10% of the keys (tens digit 3: spread over every
    partition and bucket), newer ts, doubled fare range."""
    from pyspark.sql import functions as F

    return trips(spark, 0, rows, 2_000_000, fare_scale=2.0).where(F.substring("uuid", -2, 1) == "3")


def update_batch(spark, rows: int):
    """The write and scaling benchmarks' update: 10% of the keys of ``trips(spark, 0, rows, ...)``: id ``10 i + (7 i) % 10`` for i < rows // 10, so
    one key in every ten consecutive ids, all five cities and every file group; newer ``ts``, new fare.
    Same columns and formulas as ``trips``."""
    from pyspark.sql import functions as F

    from tablesvc.demo.story_support import CITIES

    cities = F.array(*[F.lit(c) for c in CITIES])
    ids = spark.range(0, rows // 10).select((F.col("id") * 10 + (F.col("id") * 7) % 10).alias("id"))
    return ids.select(F.format_string("trip-%07d", F.col("id")).alias("uuid"),
                      (F.lit(2_000_000) + F.col("id") % 1000).alias("ts"),
                      F.format_string("rider-%03d", F.col("id") % 997).alias("rider"),
                      F.round(F.rand(seed=7) * 160 + 5, 2).alias("fare"),
                      F.element_at(cities, (F.col("id") % len(CITIES) + 1).cast("int")).alias("city"))


def checksum(df) -> tuple[int, int]:
    """(rows, order-independent hash sum of the data columns), computed in Spark."""
    from pyspark.sql import functions as F

    row = df.select(F.count(F.lit(1)).alias("n"),
                    F.sum(F.hash(*DATA_COLUMNS).cast("long")).alias("h")).collect()[0]
    return int(row["n"]), int(row["h"] or 0)


def sample_keys(rows: int) -> list[str]:
    """~2,000 keys in every partition: not updated (ids 0-4 + k * step) and updated (ids 30-34 + k * step)."""
    step = max(100, rows // 200 // 100 * 100)
    return [f"trip-{i:07d}" for start in (0, 1, 2, 3, 4, 30, 31, 32, 33, 34) for i in range(start, rows, step)]


@dataclass
class Dataset:
    work: Path
    rows: int
    updates: int
    plain_base: str
    plain_updates: str
    tables: dict[str, str] = field(default_factory=dict)    # log format -> uncompacted table path
    setup_s: float = 0.0


def build_dataset(spark, work: Path, rows: int, formats=LOG_FORMATS) -> Dataset:
    """Plain Parquet copies first; the tables are written from them (same rows on both sides)."""
    started = time.monotonic()
    plain_base, plain_updates = str(work / "plain_base"), str(work / "plain_updates")
    trips(spark, 0, rows, 1_000_000).write.mode("overwrite").partitionBy("city").parquet(plain_base)
    updates_of(spark, rows).write.mode("overwrite").partitionBy("city").parquet(plain_updates)
    updates = spark.read.parquet(plain_updates).count()
    seed = work / "seed"
    Table.create(str(seed), TableSpec("bench", ("uuid",), "ts", ("city",), num_buckets=NUM_BUCKETS)) \
        .insert(spark.read.parquet(plain_base))
    ds = Dataset(work, rows, updates, plain_base, plain_updates)
    for fmt in formats:
        path = work / f"mor_{fmt}"
        shutil.copytree(seed, path)
        Table.open(str(path)).upsert(spark.read.parquet(plain_updates), log_block_format=fmt)
        ds.tables[fmt] = str(path)
    shutil.rmtree(seed)
    ds.setup_s = round(time.monotonic() - started, 1)
    return ds
