"""The Avro -> Arrow type mapping shared by both Avro codecs (fastavro and column-wise)."""

from __future__ import annotations

import pyarrow as pa

PRIMITIVE_ARROW: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.utf8(),
}

# (base type, logicalType) -> Arrow type.  Avro's timestamp-* are UTC instants, which
# is also how Spark writes Hudi base files (timestamp[us, tz=UTC]); local-timestamp-*
# have no zone.
LOGICAL_ARROW: dict[tuple[str, str], pa.DataType] = {
    ("int", "date"): pa.date32(),
    ("int", "time-millis"): pa.time32("ms"),
    ("long", "time-micros"): pa.time64("us"),
    ("long", "timestamp-millis"): pa.timestamp("ms", tz="UTC"),
    ("long", "timestamp-micros"): pa.timestamp("us", tz="UTC"),
    ("long", "timestamp-nanos"): pa.timestamp("ns", tz="UTC"),
    ("long", "local-timestamp-millis"): pa.timestamp("ms"),
    ("long", "local-timestamp-micros"): pa.timestamp("us"),
    ("long", "local-timestamp-nanos"): pa.timestamp("ns"),
    ("string", "uuid"): pa.utf8(),
}
