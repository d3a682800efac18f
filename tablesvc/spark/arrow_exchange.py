"""The read's Arrow types on their way into Spark, where Spark's own are coarser.

Spark's Arrow exchange (``mapInArrow``) takes timestamps in microseconds only: a batch with a
millisecond timestamp (Avro ``timestamp-millis`` / ``local-timestamp-millis``) is refused
(``UNSUPPORTED_ARROWTYPE``), so a read of such a table failed in its first merge task.  The
read's tasks hand such columns to Spark in microseconds (exact: every millisecond is a whole
number of microseconds), with the same time zone flag, at any depth.  ``read --output``
casts them back to the read's own Arrow schema (``parquet_output``), so the files keep
milliseconds.

Nanosecond timestamps, times of day and Avro ``fixed`` without a decimal logical type are not
carried: Spark has no type to hold them exactly, and a read of them still fails in Spark.
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa


def spark_carried_type(t: pa.DataType) -> pa.DataType:
    """``t`` as Spark's Arrow exchange takes it (the same type when Spark takes it as it is)."""
    if pa.types.is_timestamp(t) and t.unit == "ms":
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        carried = [f.with_type(spark_carried_type(f.type)) for f in fields]
        return t if carried == fields else pa.struct(carried)
    if pa.types.is_map(t):
        key, item = t.key_field, t.item_field
        carried_key, carried_item = key.with_type(spark_carried_type(key.type)), item.with_type(spark_carried_type(item.type))
        return t if (carried_key, carried_item) == (key, item) else pa.map_(carried_key, carried_item, t.keys_sorted)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        value = t.value_field
        carried = value.with_type(spark_carried_type(value.type))
        if carried == value:
            return t
        if pa.types.is_fixed_size_list(t):
            return pa.list_(carried, t.list_size)
        return pa.large_list(carried) if pa.types.is_large_list(t) else pa.list_(carried)
    return t


@lru_cache(maxsize=32)
def _carried_schema(schema: pa.Schema) -> pa.Schema | None:
    """``schema`` with Spark-carried types, or None when Spark takes it as it is (no cast)."""
    carried = pa.schema([f.with_type(spark_carried_type(f.type)) for f in schema], metadata=schema.metadata)
    return None if carried.equals(schema) else carried


def for_spark(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` in types Spark's Arrow exchange takes (a merge task's output, before Spark)."""
    carried = _carried_schema(batch.schema)
    return batch if carried is None else batch.cast(carried)
