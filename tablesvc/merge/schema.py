"""The one Arrow schema every slice read returns, and aligning tables to it.

Output = the five ``_hoodie_*`` meta columns (utf8), then the table's data columns
from its Avro schema, then projected by ``ReadContext.columns``.  Files written
before a column was added read it as nulls; columns the table schema does not
know are dropped; types are cast (struct children by name, recursively).  All
output fields are nullable, so slices of different ages always concatenate.
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import InvalidInputError, LogFormatError
from tablesvc.logformat import avro_schema_to_arrow
from tablesvc.merge.context import ReadContext
from tablesvc.table.meta_fields import COMMIT_TIME, META_FIELDS


def _nullable(field: pa.Field) -> pa.Field:
    return field.with_nullable(True)


@lru_cache(maxsize=32)
def _data_fields(schema_json: str | None) -> tuple[pa.Field, ...]:
    if not schema_json:
        return ()
    try:
        arrow = avro_schema_to_arrow(schema_json)
    except (LogFormatError, ValueError) as exc:
        raise InvalidInputError(f"table schema does not map to Arrow: {exc}") from exc
    return tuple(_nullable(f) for f in arrow if f.name not in META_FIELDS)


def table_schema(ctx: ReadContext) -> pa.Schema:
    """Meta columns + every data column (no projection): what merging works on."""
    meta = [pa.field(n, pa.utf8(), nullable=True) for n in META_FIELDS]
    return pa.schema(meta + list(_data_fields(ctx.table_schema_json)))


def nullable_everywhere(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every field nullable at every depth (struct children, list items, map
    values; map keys stay required, as Arrow and Spark want them).  What a read declares to
    Spark: a nested field the Avro schema calls required still reads as null from a file
    written before it existed (``align_array`` fills it), and Spark checks ``isNullAt`` only
    for fields declared nullable; on a required one it reads the value slot as it is (0, with
    Arrow's null check off, as the Spark profiles have it: docs/performance.md)."""
    return pa.schema([_nullable_field(f) for f in schema], metadata=schema.metadata)


def _nullable_field(field: pa.Field) -> pa.Field:
    return field.with_type(_nullable_type(field.type)).with_nullable(True)


def _nullable_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([_nullable_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(t.key_field, _nullable_field(t.item_field), keys_sorted=t.keys_sorted)
    if pa.types.is_list(t):
        return pa.list_(_nullable_field(t.value_field))
    if pa.types.is_large_list(t):
        return pa.large_list(_nullable_field(t.value_field))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_nullable_field(t.value_field), t.list_size)
    return t


def output_schema(ctx: ReadContext) -> pa.Schema:
    """The schema of every slice read under ``ctx``."""
    full = table_schema(ctx)
    if ctx.columns is None:
        return full
    missing = [c for c in ctx.columns if full.get_field_index(c) < 0]
    if missing:
        raise InvalidInputError(f"{ctx.base_path}: unknown column(s) {', '.join(missing)}; "
                                f"the table has {', '.join(full.names)}")
    return pa.schema([full.field(c) for c in ctx.columns])


def work_schema(ctx: ReadContext) -> pa.Schema:
    """Output columns plus what merging needs (record key, commit time, ordering field)."""
    full = table_schema(ctx)
    if ctx.columns is None:
        return full
    wanted = set(ctx.columns) | {COMMIT_TIME, ctx.record_key_field}
    if ctx.ordering_field:
        wanted.add(ctx.ordering_field)
    return pa.schema([f for f in full if f.name in wanted])


# -- alignment -----------------------------------------------------------------------------

def _combine(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def align_array(arr: pa.Array | pa.ChunkedArray, target: pa.DataType, what: str = "") -> pa.Array:
    """``arr`` as ``target``: cast, struct children matched by name (missing -> null, extra dropped)."""
    arr = _combine(arr)
    if arr.type == target:
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), target)
    if pa.types.is_struct(target) and pa.types.is_struct(arr.type):
        children = []
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        for i in range(target.num_fields):
            tf = target.field(i)
            if tf.name in names:
                child = arr.field(names.index(tf.name))
                children.append(align_array(child, tf.type, f"{what}.{tf.name}"))
            else:
                children.append(pa.nulls(len(arr), tf.type))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if (pa.types.is_list(target) or pa.types.is_large_list(target)) and \
            (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        values = align_array(arr.flatten(), target.value_type, f"{what}[]")
        if arr.offset or arr.null_count:
            # flatten() drops null slots' children; rebuild offsets from the value lengths.
            otype = pa.int32() if pa.types.is_list(target) else pa.int64()
            lengths = pc.fill_null(pc.list_value_length(arr), 0).cast(otype)
            offsets = pa.concat_arrays([pa.array([0], otype), pc.cumulative_sum(lengths)])
        else:
            offsets = arr.offsets
        cls = pa.ListArray if pa.types.is_list(target) else pa.LargeListArray
        out = cls.from_arrays(offsets, values, type=target, mask=arr.is_null() if arr.null_count else None)
        return out
    try:
        safe = not (pa.types.is_timestamp(target) and pa.types.is_timestamp(arr.type))
        return pc.cast(arr, target, safe=safe)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidInputError(f"column {what or '?'}: cannot read {arr.type} as the table type {target}: {exc}") \
            from exc


def align_table(table: pa.Table, schema: pa.Schema, keep_dictionaries: bool = False) -> pa.Table:
    """``table`` with exactly ``schema``'s columns, in order (missing -> nulls, extra dropped).
    ``keep_dictionaries``: a dictionary column whose values already have the field's type stays
    encoded (the result's schema then says so); ``decode_dictionaries`` decodes it later."""
    names = table.column_names
    columns = []
    for field in schema:
        if field.name not in names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        if keep_dictionaries and pa.types.is_dictionary(column.type) and column.type.value_type == field.type:
            columns.append(column)
        else:
            columns.append(align_array(column, field.type, field.name))
    if keep_dictionaries:
        return pa.Table.from_arrays(columns, names=schema.names)
    return pa.Table.from_arrays(columns, schema=schema)


def decode_dictionaries(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` (``schema``'s columns, some perhaps dictionary-encoded) in exactly ``schema``."""
    columns = [table.column(f.name) for f in schema]
    columns = [c.cast(f.type) if c.type != f.type else c for c, f in zip(columns, schema)]
    return pa.Table.from_arrays(columns, schema=schema)


__all__ = ["align_array", "align_table", "decode_dictionaries", "nullable_everywhere", "output_schema", "table_schema",
           "work_schema"]
