"""Which file slices Spark's own Parquet reader can read, instead of a Python task.

A slice with a base file and no log files has nothing to merge: its rows are the base
file's rows, in the table schema.  Sending them through ``mapInArrow`` costs a Python
worker and an Arrow-to-row conversion per row (a read with no merge at all measured
1.7–2.3× Spark's own scan, docs/performance.md); Spark's vectorized reader reads them
directly.  That is only the same answer when Spark reads the file exactly as
``align_table`` would, so a slice goes native only when

* its base file was written under the very schema the read uses: the completed commit
  that made the base file records that schema (``extra_metadata["schema"]``), so no
  column was added, dropped or widened since (archived or schema-less commits stay in
  Python, which aligns old files column by column);
* every output column has a type Spark maps one to one (flat primitives, dates,
  millisecond/microsecond timestamps, decimals; nested types, nanosecond timestamps and
  anything unusual stay in Python);
* the file is not empty (Spark skips a zero-length file silently; Python names it);
* the table is on local files: on an object store Spark's reader would need Hadoop's S3A
  connector, jars that pip does not install, so every slice there goes through Python.

Everything is decided on the driver from the timeline and one ``stat`` per candidate file
(metadata); no file is opened here.
"""

from __future__ import annotations

import pyarrow as pa

from tablesvc.merge import ReadContext, SliceSpec, output_schema
from tablesvc.storage.object_store import is_object_store_url

# Reading more distinct base instants' commit metadata than this on the driver costs more than
# it saves on a small read; such tables keep the Python path for the slices beyond the cap.
MAX_INSTANTS_CHECKED = 256


def _spark_reads_as_is(field: pa.Field) -> bool:
    t = field.type
    if pa.types.is_timestamp(t):
        return t.unit in ("ms", "us")
    return (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_boolean(t) or pa.types.is_integer(t)
            and pa.types.is_signed_integer(t) or pa.types.is_floating(t) and not pa.types.is_float16(t)
            or pa.types.is_date32(t) or pa.types.is_decimal128(t))


def native_columns_ok(ctx: ReadContext) -> bool:
    """Whether every output column reads the same through Spark's Parquet reader."""
    return all(_spark_reads_as_is(f) for f in output_schema(ctx))


def split_native(table, timeline, ctx: ReadContext,
                 specs: tuple[SliceSpec, ...], base_instants: tuple[str | None, ...]
                 ) -> tuple[list[str], list[SliceSpec]]:
    """(base file paths Spark reads natively, slices left to the Python reader).
    ``base_instants[i]`` is the instant that wrote ``specs[i]``'s base file."""
    if not ctx.table_schema_json or not native_columns_ok(ctx) or is_object_store_url(table.base_path):
        # On an object store Spark's own reader would need Hadoop's S3A connector (jars tablesvc does
        # not ship and a configuration of its own); the Python reader reads there through the same
        # client as every other task (docs/storage.md).
        return [], list(specs)
    same_schema: dict[str, bool] = {}
    native: list[str] = []
    python: list[SliceSpec] = []
    for spec, instant in zip(specs, base_instants):
        if spec.log_files or not spec.base_file or instant is None:
            python.append(spec)
            continue
        if instant not in same_schema:
            same_schema[instant] = (len(same_schema) < MAX_INSTANTS_CHECKED
                                    and _written_with(table, timeline, instant) == ctx.table_schema_json)
        if same_schema[instant] and _looks_like_parquet(table.storage, spec.base_file):
            native.append(spec.base_file)
        else:
            python.append(spec)
    return native, python


def _looks_like_parquet(storage, path: str) -> bool:
    """Spark's reader skips a zero-length file without a word (its rows would vanish); the
    Python reader refuses it naming the file, so such a file, or one gone, stays there."""
    try:
        return storage.stat(path).size > 0
    except FileNotFoundError:
        return False


def _written_with(table, timeline, instant: str) -> str | None:
    """The schema the completed commit ``instant`` records, or None (not in the active timeline,
    not completed, or no schema recorded)."""
    done = timeline.get(instant)
    if done is None or not done.is_completed:
        return None
    metadata = timeline.commit_metadata(table.storage, done)
    return (metadata.extra_metadata or {}).get("schema") if metadata is not None else None


__all__ = ["MAX_INSTANTS_CHECKED", "native_columns_ok", "split_native"]
