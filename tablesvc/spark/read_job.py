"""The Spark log-block reader: one task per file slice, merged rows out as Arrow batches.

The driver plans (timeline + file-system view: metadata only) and ships each task a
small ``SliceSpec``; the task reads the base parquet and the log blocks with
pyarrow/fastavro (``tablesvc.merge``) and yields Arrow record batches through
``mapInArrow``.  No table data passes through the driver.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

from tablesvc.merge import ReadContext, SliceSpec, iter_file_slice, output_schema
from tablesvc.storage import storage_for
from timeline.instant import validate_instant_time

MAX_READ_TASKS = 2000   # beyond this, neighbouring small slices share a task


@dataclass(frozen=True)
class ReadPlan:
    context: ReadContext
    slices: tuple[SliceSpec, ...]          # merged by Python tasks
    native_base_files: tuple[str, ...] = ()  # base-file-only slices Spark's Parquet reader reads


def plan_read(table, as_of: str | None = None, columns: tuple[str, ...] | None = None, *,
              native: bool = True) -> ReadPlan:
    """``native``: let Spark's own Parquet reader read the slices that need no merge
    (``native_scan.split_native`` says which)."""
    if as_of is not None:
        validate_instant_time(as_of, "as-of instant")
    timeline = table.timeline()
    ctx = ReadContext.for_table(table, timeline, as_of=as_of, columns=columns)
    slices = table.file_system_view(timeline).latest_file_slices(table.storage, as_of)
    specs = tuple(SliceSpec.from_file_slice(s) for s in slices)
    if not native:
        return ReadPlan(ctx, specs)
    from tablesvc.spark.native_scan import split_native

    native_files, python = split_native(table, timeline, ctx, specs, tuple(s.base_instant for s in slices))
    return ReadPlan(ctx, tuple(python), tuple(native_files))


def _read_specs(ctx: ReadContext):
    def run(batches):
        storage = storage_for(ctx.base_path)
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                yield from iter_file_slice(storage, pickle.loads(blob), ctx)
    return run


def spark_schema(ctx: ReadContext):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(output_schema(ctx))


def specs_dataframe(spark, specs: tuple[SliceSpec, ...] | list[SliceSpec]):
    """A one-column DataFrame (``spec``: a pickled ``SliceSpec``), one partition per slice
    up to ``MAX_READ_TASKS``: the input of every per-slice Spark job."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    rows = [(pickle.dumps(spec),) for spec in specs]
    rdd = spark.sparkContext.parallelize(rows, max(1, min(len(rows), MAX_READ_TASKS)))
    return spark.createDataFrame(rdd, StructType([StructField("spec", BinaryType(), False)]))


def read_dataframe(spark, table, as_of: str | None = None, columns: tuple[str, ...] | None = None, *,
                   native: bool = True):
    """The table (snapshot, or as of an instant) as a Spark DataFrame: slices with something
    to merge through Python tasks, the others (``native``) through Spark's Parquet reader."""
    plan = plan_read(table, as_of, columns, native=native)
    schema = spark_schema(plan.context)
    parts = []
    if plan.slices:
        parts.append(specs_dataframe(spark, plan.slices).mapInArrow(_read_specs(plan.context), schema))
    if plan.native_base_files:
        # the requested schema fixes the columns and their order (missing ones read as nulls)
        parts.append(spark.read.schema(schema).parquet(*plan.native_base_files))
    if not parts:
        return spark.createDataFrame([], schema)
    df = parts[0]
    for part in parts[1:]:
        df = df.union(part)
    return df
