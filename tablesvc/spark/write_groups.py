"""How the write job brings each file group's rows together (``write_job``, step 4).

The rows carry one 64-bit hash of their partition path and file group (``group_column``);
the job partitions and sorts them by it, and each ``mapInArrow`` task takes every run of
equal hashes as one file group (``consecutive_groups``), splitting a run again where two
file groups' hashes collide (``split_file_groups``).  docs/write-path.md says why.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import TablesvcError
from tablesvc.write import PARTITION_PATH_COLUMN as PARTITION

FG_COLUMN = "_tablesvc_file_group"     # the file group a row is routed to (write_job)
GROUP_COLUMN = "_tablesvc_group"   # what the write job partitions and sorts by (group_column)


def group_column(partition=None, file_group=None):
    """One 64-bit hash of the partition path and the file group, which the write job partitions
    and sorts its rows by, so that each task meets one file group's rows after the other; of the
    ``PARTITION`` and ``FG_COLUMN`` columns, or of the two given expressions (routing in the JVM:
    the rows then carry the hash alone, and the task finds partition and file group again).
    Not ``groupBy(partition, file group).applyInArrow``: Spark sorts by one long with a radix
    sort, but by two strings sharing their first bytes with comparisons, and the grouped UDF
    adds its own cost; the write of 200k rows into 20 file groups took 0.1 s less this way
    (docs/performance.md).  File groups whose hashes collide share a run of rows, which the
    task splits again (``split_file_groups``)."""
    from pyspark.sql import functions as F

    return F.xxhash64(F.col(PARTITION) if partition is None else partition,
                      F.col(FG_COLUMN) if file_group is None else file_group)


def write_partitions(spark) -> int | None:
    """How many shuffle partitions the write job asks for: None (``spark.sql.shuffle.partitions``)
    where adaptive execution coalesces them, else the session's default parallelism, at most the
    shuffle partitions.  ``mapInArrow`` runs a Python task for every partition, empty or not:
    with adaptive execution off and 200 shuffle partitions, an upsert of 3,000 rows into 15 file
    groups took 2.65 s, and 0.34 s in as many partitions as cores (local[2], medians of 4)."""
    conf = spark.conf
    if conf.get("spark.sql.adaptive.enabled", "true").lower() == "true" and \
            conf.get("spark.sql.adaptive.coalescePartitions.enabled", "true").lower() == "true":
        return None
    shuffle = int(conf.get("spark.sql.shuffle.partitions", "200"))
    return max(1, min(shuffle, spark.sparkContext.defaultParallelism))


def consecutive_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """The rows of each run of equal ``GROUP_COLUMN`` values, batches sorted by it: one file
    group's rows at a time in memory (the batches of the run, not copied).  A value met again
    after its run ended means the rows were not sorted: writing its file group a second time
    would split it, so the task fails instead."""
    current, pieces, done = None, [], set()
    for batch in batches:
        if batch.num_rows == 0:
            continue
        ids = batch.column(GROUP_COLUMN).to_numpy(zero_copy_only=False)
        starts = np.concatenate(([0], np.flatnonzero(ids[1:] != ids[:-1]) + 1))
        ends = np.append(starts[1:], len(ids))
        for start, end in zip(starts.tolist(), ends.tolist()):
            value = int(ids[start])
            if pieces and value != current:
                yield pa.Table.from_batches(pieces)
                pieces = []
                done.add(current)
            if value in done:
                if FG_COLUMN in batch.schema.names:    # not routed in Spark (an input may hold PARTITION)
                    partition, fg = (batch.column(c)[start].as_py() for c in (PARTITION, FG_COLUMN))
                    which = f"file group {fg!r} of partition {partition!r}"
                else:
                    which = f"group hash {value}"
                raise TablesvcError(f"write task: the rows of {which} arrived in two runs (the write job's sort "
                                    "by the group hash did not hold); nothing of this write is committed")
            current = value
            pieces.append(batch.slice(start, end - start))
    if pieces:
        yield pa.Table.from_batches(pieces)


def split_file_groups(rows: pa.Table) -> list[pa.Table]:
    """``rows`` per (partition path, file group), in order of first appearance; ``rows`` as they
    are when they hold one (always, unless two file groups' ``group_column`` hashes collide)."""
    partition, fg = rows.column(PARTITION), rows.column(FG_COLUMN)
    if pc.count_distinct(partition, mode="all").as_py() <= 1 and pc.count_distinct(fg, mode="all").as_py() <= 1:
        return [rows]
    positions: dict[tuple, list[int]] = {}
    for i, pair in enumerate(zip(partition.to_pylist(), fg.to_pylist())):
        positions.setdefault(pair, []).append(i)
    return [rows.take(pa.array(rows_of, pa.int64())) for rows_of in positions.values()]
