"""Which secondary indexes a table has, and how tablesvc prints the indexed column's values.

An index is listed in ``hoodie.table.metadata.partitions`` (``secondary_index_<name>``) and
defined in ``.hoodie/.index_defs/index.json``.  tablesvc keeps only the indexes it can key exactly
as Java Hudi 1.2 does, and refuses a write to any other (``UnsupportedTableError``, exit 2, one
line naming the index) before anything is written:

* an expression index, or one on several columns;
* a column whose values' text is not reproduced: floats, decimals, bytes, nested types, and
  ``timestamp-millis``/``local-timestamp-millis`` (Spark holds microseconds, but which unit Java's
  text uses for such a column is not settled by a Java-written fixture yet);
* an index version Hudi's ``HoodieIndexVersion.isValidIndexDefinition`` rejects: on table
  version 8 a secondary index must be V1 (or name no version); V1 and V2 only;
* a table with ``hoodie.populate.meta.fields=false``: the changes are keyed by the stored
  ``_hoodie_record_key``, which such a table does not keep.

The value's text is what Spark's row value prints (Hudi's Spark reader context): a string as is,
an int or long in decimal, a date as its day number, a timestamp-micros as its microseconds, a
boolean ``true``/``false``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from tablesvc.errors import UnsupportedTableError
from tablesvc.table.index_definitions import DEFINITIONS, index_definitions_path

PREFIX = "secondary_index_"
PARTITIONS_KEY = "hoodie.table.metadata.partitions"
POPULATE_META_FIELDS_KEY = "hoodie.populate.meta.fields"
VERSIONS = {"V1": 1, "V2": 2}


class ValueKind:
    """How a column's values print in Spark's rows (the secondary key's text)."""

    TEXT = "text"          # string
    INTEGER = "integer"    # int, long, date (days), timestamp-micros (micros)
    BOOLEAN = "boolean"


@dataclass(frozen=True)
class SecondaryIndex:
    """One secondary index of the table: its metadata partition and the column it indexes."""

    partition: str       # secondary_index_<name>, also Hudi's index name
    source_field: str
    version: int         # 1 or 2 (index.json's "version"; absent: V1 on table version 8, V2 on 9)
    kind: str            # ValueKind


def value_kind(field_type: Any, where: str) -> str:
    """The ``ValueKind`` of an Avro field type (nullable unions unwrapped), or refused (exit 2)."""
    branches = [t for t in (field_type if isinstance(field_type, list) else [field_type]) if t != "null"]
    if len(branches) == 1:
        t = branches[0]
        base, logical = (t.get("type"), t.get("logicalType")) if isinstance(t, dict) else (t, None)
        if base == "string" and logical in (None, "uuid"):
            return ValueKind.TEXT
        if base == "boolean":
            return ValueKind.BOOLEAN
        if base == "int" and logical in (None, "date"):
            return ValueKind.INTEGER
        if base == "long" and logical in (None, "timestamp-micros", "local-timestamp-micros"):
            return ValueKind.INTEGER
        if base == "long" and logical in ("timestamp-millis", "local-timestamp-millis"):
            raise UnsupportedTableError(f"{where}: tablesvc does not write secondary-index keys of a {logical} "
                                        "column yet (the text Java Hudi writes for it is not settled)")
    raise UnsupportedTableError(f"{where}: tablesvc does not write secondary-index keys of type "
                                f"{json.dumps(field_type)} (strings, integers, dates, timestamp-micros, "
                                "booleans only)")


def value_text(value: Any, kind: str) -> str | None:
    """The secondary key's text of one column value (a Python value: a date as days, a timestamp
    as its microseconds; ``column_texts`` converts a whole column)."""
    if value is None:
        return None
    if kind == ValueKind.TEXT:
        return str(value)
    if kind == ValueKind.BOOLEAN:
        return "true" if value else "false"
    return str(int(value))


def column_texts(column: Any, kind: str) -> list[str | None]:
    """The secondary keys' texts of a pyarrow column as the merge reader returns it: dates as
    their day numbers, timestamps as microseconds (Spark's units), whatever the Arrow unit."""
    import pyarrow as pa

    if pa.types.is_date32(column.type):
        column = column.cast(pa.int32())
    elif pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())
        kind = ValueKind.INTEGER
    return [value_text(v, kind) for v in column.to_pylist()]


def listed_secondary_partitions(props: Mapping[str, str]) -> tuple[str, ...]:
    """The completed secondary-index partitions ``hoodie.table.metadata.partitions`` lists."""
    return tuple(sorted(p for p in (props.get(PARTITIONS_KEY) or "").split(",") if p.startswith(PREFIX)))


def _version(definition: Mapping[str, Any], table_version: int, where: str) -> int:
    text = definition.get("version")
    if text in (None, ""):
        return 2 if table_version >= 9 else 1
    version = VERSIONS.get(str(text).upper())
    if version is None:
        raise UnsupportedTableError(f"{where}: index version {text!r} is not one of {', '.join(VERSIONS)}")
    if table_version == 8 and version != 1:
        raise UnsupportedTableError(f"{where}: index version {text} on table version 8, where Hudi accepts "
                                    "only V1 secondary indexes (HoodieIndexVersion.isValidIndexDefinition)")
    return version


def secondary_indexes(storage: Any, base_path: str, props: Mapping[str, str], table_version: int,
                      schema_json: str) -> tuple[SecondaryIndex, ...]:
    """Every listed secondary index with its definition (``.hoodie/.index_defs/index.json``) and
    column type; an index tablesvc cannot keep (module docstring) is refused (exit 2)."""
    listed = listed_secondary_partitions(props)
    if not listed:
        return ()
    if str(props.get(POPULATE_META_FIELDS_KEY, "true")).strip().lower() == "false":
        raise UnsupportedTableError(f"{base_path}: {POPULATE_META_FIELDS_KEY}=false: the secondary indexes "
                                    f"{', '.join(listed)} are keyed by the stored record key, which this table "
                                    "does not keep; tablesvc does not write to it")
    path = index_definitions_path(base_path, dict(props))
    try:
        document = json.loads(storage.read_bytes(path).decode("utf-8")) if path else {}
    except FileNotFoundError:
        document = {}
    definitions = document.get(DEFINITIONS) or {}
    fields = {f["name"]: f["type"] for f in json.loads(schema_json)["fields"]}
    out = []
    for partition in listed:
        definition = definitions.get(partition)
        where = f"{path or base_path}: index {partition}"
        if not isinstance(definition, dict):
            raise UnsupportedTableError(f"{where}: listed in hoodie.table.metadata.partitions but not defined")
        sources = definition.get("sourceFields") or []
        if definition.get("indexFunction", "identity") not in ("identity", "") or len(sources) != 1:
            raise UnsupportedTableError(f"{where}: only an identity index on one column is written "
                                        f"(function {definition.get('indexFunction')!r}, fields {sources})")
        if sources[0] not in fields:
            raise UnsupportedTableError(f"{where}: column {sources[0]!r} is not a top-level field of the table schema")
        version = _version(definition, table_version, where)
        out.append(SecondaryIndex(partition, sources[0], version, value_kind(fields[sources[0]], where)))
    return tuple(out)


__all__ = ["PARTITIONS_KEY", "PREFIX", "SecondaryIndex", "ValueKind", "column_texts", "listed_secondary_partitions",
           "secondary_indexes", "value_kind", "value_text"]
