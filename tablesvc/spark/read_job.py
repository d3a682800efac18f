"""The Spark log-block reader: file slices packed into tasks, merged rows out as Arrow batches.

The driver plans (timeline + file-system view: metadata only) and ships each task a
small ``SliceSpec``; the task reads the base parquet and the log blocks with
pyarrow/fastavro (``tablesvc.merge``) and yields Arrow record batches through
``mapInArrow``.  No table data passes through the driver.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import pyarrow as pa

from tablesvc.merge import ReadContext, SliceSpec, iter_file_slice, nullable_everywhere, output_schema
from tablesvc.spark.arrow_exchange import for_spark
from tablesvc.spark.executor_env import prepare_executors
from tablesvc.spark.progress import TaskCounters, expect_file_groups, task_counters
from tablesvc.spark.worker_heap import freeze_worker_heap
from tablesvc.storage import task_storage
from tablesvc.storage.object_store import is_object_store_url
from timeline.time_travel import resolve_as_of


@dataclass(frozen=True)
class ReadPlan:
    context: ReadContext
    slices: tuple[SliceSpec, ...]          # merged by Python tasks
    native_base_files: tuple[str, ...] = ()  # base-file-only slices Spark's Parquet reader reads
    weights: tuple[int | None, ...] = ()     # bytes of each of ``slices`` (task packing), when known


def plan_read(table, as_of: str | None = None, columns: tuple[str, ...] | None = None, *,
              native: bool = True) -> ReadPlan:
    """``native``: let Spark's own Parquet reader read the slices that need no merge
    (``native_scan.split_native`` says which).  ``as_of``: any form ``parse_as_of`` takes; a time
    the table cannot show (cleaned, before its first commit) is refused (``resolve_as_of``)."""
    timeline = table.timeline()
    if as_of is not None:
        as_of = resolve_as_of(table.storage, timeline, as_of)
    ctx = ReadContext.for_table(table, timeline, as_of=as_of, columns=columns)
    slices = table.file_system_view(timeline).latest_file_slices(table.storage, as_of)
    specs = tuple(SliceSpec.from_file_slice(s) for s in slices)
    weight = {(s.partition, s.file_id): s.total_size for s in slices}
    if not native:
        return ReadPlan(ctx, specs, (), tuple(weight[(s.partition, s.file_id)] for s in specs))
    from tablesvc.spark.native_scan import split_native

    native_files, python = split_native(table, timeline, ctx, specs, tuple(s.base_instant for s in slices))
    return ReadPlan(ctx, tuple(python), tuple(native_files),
                    tuple(weight[(s.partition, s.file_id)] for s in python))


def _read_specs(ctx: ReadContext, groups: Sequence[bytes], counters: TaskCounters | None = None):
    """``counters``: the progress lines' accumulators (slices merged, rows), or None.  Batches
    go to Spark in types it takes (``arrow_exchange.for_spark``: millisecond timestamps as
    microseconds)."""
    def run(batches):
        storage = task_storage(ctx.base_path, ctx.storage)
        for spec in task_items(batches, groups):
            if counters is None:
                yield from map(for_spark, iter_file_slice(storage, spec, ctx))
                continue
            rows = 0
            for batch in iter_file_slice(storage, spec, ctx):
                rows += batch.num_rows
                yield for_spark(batch)
            counters.add(1, rows)
    return run


def arrow_schema(ctx: ReadContext) -> pa.Schema:
    """The read's exact Arrow schema, nullable at every depth (``nullable_everywhere``)."""
    return nullable_everywhere(output_schema(ctx))


def spark_schema(ctx: ReadContext):
    """The read's schema as Spark sees it (Spark's types are coarser: one timestamp unit)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema(ctx))


@dataclass(frozen=True)
class PackedTasks:
    """Items packed into Spark tasks (``pack_tasks``): the input of every per-slice Spark job.

    ``frame`` has one row per task, each in its own partition, whose ``id`` indexes
    ``groups``: each task's items, pickled.  The task function captures ``groups`` and reads
    its items with ``task_items`` (PySpark broadcasts a large function by itself).  The frame
    is ``spark.range``: built in the JVM, so a task starts without the extra Python worker
    that ``createDataFrame`` over an RDD of rows would run to convert them (about 60-90 ms
    of a 4-task job's wall time, measured)."""

    frame: Any
    groups: tuple[bytes, ...]


def pack_tasks(spark, specs: Sequence[Any], weights: Sequence[int | None] | None = None) -> PackedTasks:
    """``specs`` packed into tasks by ``task_packing.pack`` (``weights``: bytes per item, when
    known)."""
    from tablesvc.spark.task_packing import pack, session_packing

    items = list(specs)
    packing = pack(weights if weights is not None else [None] * len(items), **session_packing(spark))
    groups = tuple(pickle.dumps([items[i] for i in group]) for group in packing)
    n = max(1, len(groups))
    return PackedTasks(spark.range(0, len(groups), 1, n), groups)


def task_items(batches: Iterator[Any], groups: Sequence[bytes]) -> Iterator[Any]:
    """The items ``pack_tasks`` gave this task, in order (inside a ``mapInArrow`` function over
    ``PackedTasks.frame``).  It first lets the Python worker freeze its heap
    (``worker_heap.freeze_worker_heap``)."""
    freeze_worker_heap()
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield from pickle.loads(groups[index])


@dataclass(frozen=True)
class TableRead:
    """A read as a Spark DataFrame, and the exact Arrow schema of its rows: Spark's types are
    coarser (a millisecond timestamp is a microsecond one there), so a writer that must keep the
    table's types (``parquet_output``, ``read --output``) casts back to ``arrow_schema``."""

    frame: Any
    arrow_schema: pa.Schema


def read_dataframe(spark, table, as_of: str | None = None, columns: tuple[str, ...] | None = None, *,
                   native: bool = True):
    """The table (snapshot, or as of an instant) as a Spark DataFrame: slices with something
    to merge through Python tasks, the others (``native``) through Spark's Parquet reader."""
    return read_table(spark, table, as_of, columns, native=native).frame


def read_table(spark, table, as_of: str | None = None, columns: tuple[str, ...] | None = None, *,
               native: bool = True) -> TableRead:
    """``read_dataframe``, with the read's exact Arrow schema."""
    prepare_executors(spark, object_store=is_object_store_url(table.base_path))
    plan = plan_read(table, as_of, columns, native=native)
    schema = spark_schema(plan.context)
    parts = []
    if plan.slices:
        tasks = pack_tasks(spark, plan.slices, plan.weights or None)
        expect_file_groups(len(plan.slices))   # progress lines count the slices merged here
        parts.append(tasks.frame.mapInArrow(_read_specs(plan.context, tasks.groups, task_counters(spark)), schema))
    if plan.native_base_files:
        # the requested schema fixes the columns and their order (missing ones read as nulls)
        parts.append(spark.read.schema(schema).parquet(*plan.native_base_files))
    if not parts:
        return TableRead(spark.createDataFrame([], schema), arrow_schema(plan.context))
    df = parts[0]
    for part in parts[1:]:
        df = df.union(part)
    return TableRead(df, arrow_schema(plan.context))
