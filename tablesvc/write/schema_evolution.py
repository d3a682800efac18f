"""The table's Avro schema: built from Arrow, evolved batch by batch, and applied to data.

The table schema (``extraMetadata.schema`` of every commit) never holds the ``_hoodie_*``
meta fields; ``with_meta_fields`` adds them for base files and log blocks.  Avro is
written the way Spark/Hudi write it: record ``<table>_record`` in namespace
``hoodie.<table>``, every top-level field nullable as ``[type, "null"]``.

Evolution rules (``reconcile_schema``):

* first batch: the schema is the incoming one;
* new columns: appended, nullable, in incoming order;
* columns the batch lacks: kept, the batch gets nulls there;
* the same column with another type: refused, except the widenings Avro readers resolve
  (incoming int where the table has long, float where it has double): the incoming
  data is cast up and the table keeps its type.  Widening the *table* (table int,
  incoming long) is refused: older base files would keep int32 columns next to int64
  log blocks, and hudi-rs concatenates them positionally;
* record key, partition and ordering fields must be in every batch.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import pyarrow as pa

from tablesvc.errors import InvalidInputError
from tablesvc.logformat import avro_schema_to_arrow
from tablesvc.table.meta_fields import META_FIELDS

DEFAULT_RECORD_BASE = "hoodie"  # record name base when a first schema is built without a table name

# Incoming type -> table type a column may keep (incoming is cast up).
_PROMOTIONS = {("int", "long"), ("float", "double")}


# -- Arrow -> Avro ---------------------------------------------------------------------------

def _min_fixed_bytes(precision: int) -> int:
    size = 1
    while 2 ** (8 * size - 1) < 10 ** precision:
        size += 1
    return size


def _avro_type(t: pa.DataType, name: str, namespace: str, nullable: bool) -> Any:
    """Avro type of an Arrow type; ``namespace`` names the enclosing record (for named types)."""
    node = _avro_base(t, name, namespace)
    return [node, "null"] if nullable else node


def _avro_base(t: pa.DataType, name: str, namespace: str) -> Any:
    if pa.types.is_dictionary(t):
        return _avro_base(t.value_type, name, namespace)
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_uint8(t) \
            or pa.types.is_uint16(t):
        return "int"
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "long"
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) \
            or pa.types.is_binary_view(t):
        return "bytes"
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise InvalidInputError(f"column {name!r}: decimal precision {t.precision} is over 38")
        return {"type": "fixed", "name": "fixed", "namespace": f"{namespace}.{name}",
                "size": _min_fixed_bytes(t.precision), "logicalType": "decimal",
                "precision": t.precision, "scale": t.scale}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        item = t.value_field
        return {"type": "array", "items": _avro_type(item.type, name, namespace, item.nullable)}
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise InvalidInputError(f"column {name!r}: map keys must be strings in Avro, not {t.key_type}")
        item = t.item_field
        return {"type": "map", "values": _avro_type(item.type, name, namespace, item.nullable)}
    if pa.types.is_struct(t):
        inner = f"{namespace}.{name}"
        return {"type": "record", "name": name, "namespace": namespace,
                "fields": [{"name": f.name, "type": _avro_type(f.type, f.name, inner, f.nullable)}
                           for f in t]}
    raise InvalidInputError(f"column {name!r}: type {t} has no Avro mapping")


def _record(table_name: str, fields: list[dict]) -> dict:
    return {"type": "record", "name": f"{table_name}_record", "namespace": f"hoodie.{table_name}",
            "fields": fields}


def _field_nodes(schema: pa.Schema, table_name: str) -> list[dict]:
    namespace = f"hoodie.{table_name}.{table_name}_record"
    out = []
    for f in schema:
        if f.name in META_FIELDS:
            continue
        if pa.types.is_null(f.type):
            raise InvalidInputError(f"column {f.name!r} has no type (every value is null); cast it first")
        out.append({"name": f.name, "type": _avro_type(f.type, f.name, namespace, True)})
    return out


def arrow_to_avro_schema(arrow_schema: pa.Schema, table_name: str) -> str:
    """The Avro schema (JSON) of an Arrow schema, without meta fields, Hudi/Spark style."""
    return json.dumps(_record(table_name, _field_nodes(arrow_schema, table_name)))


# -- comparing types ---------------------------------------------------------------------------

def _strip_null(node: Any) -> Any:
    if isinstance(node, list):
        rest = [b for b in node if b != "null"]
        return rest[0] if len(rest) == 1 else rest
    return node


def _shape(node: Any) -> Any:
    """A name-free, comparable form of an Avro type."""
    node = _strip_null(node)
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return ("union", tuple(_shape(b) for b in node))
    kind = node.get("type")
    if isinstance(kind, (list, dict)):
        return _shape(kind)
    logical = node.get("logicalType")
    if kind == "record":
        return ("record", tuple((f["name"], _shape(f["type"]), _nullable(f["type"])) for f in node["fields"]))
    if kind == "array":
        return ("array", _shape(node["items"]), _nullable(node["items"]))
    if kind == "map":
        return ("map", _shape(node["values"]), _nullable(node["values"]))
    if logical == "decimal":
        return ("decimal", node.get("precision"), node.get("scale", 0))
    if kind == "fixed":
        return ("fixed", node.get("size"))
    if kind == "enum":
        return "string"
    if logical in ("timestamp-micros", "timestamp-millis"):
        return "timestamp"
    if logical:
        return (kind, logical)
    return kind


def _nullable(node: Any) -> bool:
    return isinstance(node, list) and "null" in node


def _describe(node: Any) -> str:
    shape = _shape(node)
    if isinstance(shape, str):
        return shape
    if shape[0] == "decimal":
        return f"decimal({shape[1]},{shape[2]})"
    if isinstance(shape[1], str):
        return f"{shape[0]}<{shape[1]}>" if shape[0] in ("array", "map") else f"{shape[1]}"
    return shape[0]


# -- evolution ---------------------------------------------------------------------------------

def _top_name(field: str) -> str:
    return field.split(".", 1)[0]


def reconcile_schema(table_schema_json: str | None, incoming: pa.Schema, record_key_fields: Sequence[str],
                     ordering_field: str | None, partition_fields: Sequence[str], *,
                     table_name: str | None = None) -> str:
    """The table schema after writing a batch with ``incoming`` columns (no meta fields).

    ``table_name`` names the record when the table has no schema yet (first batch):
    ``<table_name>_record`` in namespace ``hoodie.<table_name>``; without it the record is
    ``hoodie_record`` in ``hoodie.hoodie`` (readers resolve fields by name, not record name).
    """
    names = set(incoming.names)
    for kind, fields in (("record key", record_key_fields), ("partition", partition_fields),
                         ("ordering", [ordering_field] if ordering_field else [])):
        for f in fields:
            if _top_name(f) not in names:
                raise InvalidInputError(f"{kind} field {f!r} is missing from the incoming data")
    if not table_schema_json:
        return arrow_to_avro_schema(incoming, table_name or DEFAULT_RECORD_BASE)
    table = json.loads(table_schema_json)
    if not isinstance(table, dict) or table.get("type") != "record":
        raise InvalidInputError("the table schema is not an Avro record")
    record_name = table.get("name", "")
    base_name = table_name or (record_name[:-len("_record")] if record_name.endswith("_record") else record_name)
    incoming_nodes = {n["name"]: n for n in _field_nodes(incoming, base_name)}
    fields = [f for f in table["fields"] if f["name"] not in META_FIELDS]
    known = {f["name"] for f in fields}
    for f in fields:
        new = incoming_nodes.get(f["name"])
        if new is None:
            continue
        old_shape, new_shape = _shape(f["type"]), _shape(new["type"])
        if old_shape == new_shape or (new_shape, old_shape) in _PROMOTIONS:
            continue
        raise InvalidInputError(f"column {f['name']!r} changes type from {_describe(f['type'])} to "
                                f"{_describe(new['type'])}; only int->long and float->double data is "
                                "accepted into an existing column")
    appended = [incoming_nodes[n] for n in incoming.names if n in incoming_nodes and n not in known]
    out = dict(table, fields=fields + appended)
    return json.dumps(out)


# -- meta fields and data alignment ------------------------------------------------------------

def with_meta_fields(schema_json: str) -> str:
    """The schema with the five ``_hoodie_*`` fields first (``["null","string"]``, doc "", default null)."""
    schema = json.loads(schema_json)
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in META_FIELDS]
    data = [f for f in schema["fields"] if f["name"] not in META_FIELDS]
    return json.dumps(dict(schema, fields=meta + data))


def align_to_schema(table: pa.Table, schema_json: str) -> pa.Table:
    """``table`` with exactly the schema's columns, in its order and Arrow types.

    Missing columns become nulls; extra columns are dropped; values are cast (a cast
    that would lose data is an ``InvalidInputError`` naming the column).
    """
    target = avro_schema_to_arrow(schema_json)
    names = table.schema.names
    columns = []
    for field in target:
        if field.name not in names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(names.index(field.name))
        if column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise InvalidInputError(f"column {field.name!r}: cannot cast {column.type} to {field.type}: "
                                        f"{exc}") from None
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=target)


__all__ = ["align_to_schema", "arrow_to_avro_schema", "reconcile_schema", "with_meta_fields"]
