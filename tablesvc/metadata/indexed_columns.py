"""Which columns the ``column_stats`` index covers, their types, and the index version.

Java (``HoodieTableMetadataUtil.getColumnsToIndex``) indexes, when meta fields are populated,
``_hoodie_commit_time``, ``_hoodie_partition_path`` and ``_hoodie_record_key``, then either the
columns of ``hoodie.metadata.index.column.stats.column.list`` or the first
``hoodie.metadata.index.column.stats.max.columns.to.index`` (32) fields of the writer schema whose
type it can index; it records the result, with the index version, as the ``column_stats``
definition of ``.hoodie/.index_defs/index.json`` (``sourceFields``, ``version``; no version: V1).

``indexed_columns`` reads that definition: it is what Java wrote and what its next commit will
use.  ``default_indexed_columns`` is the rule for a table without one (checked against the
definitions of the carried tables).  Each column's type comes from the table's Avro schema (the
meta fields are strings).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tablesvc.errors import TableConfigError
from tablesvc.metadata.column_stats import ColumnType, IndexVersion, ValueType
from tablesvc.table.index_definitions import DEFINITIONS, index_definitions_path
from timeline.storage import Storage

COLUMN_STATS_INDEX = "column_stats"
META_COLUMNS = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
DEFAULT_MAX_COLUMNS = 32     # hoodie.metadata.index.column.stats.max.columns.to.index
# V1 leaves out bytes, fixed and decimal for records that are not Avro (Spark's rows), and wide
# decimals; V2 indexes every primitive and logical type.
_V1_EXCLUDED = frozenset({ValueType.BYTES, ValueType.FIXED, ValueType.DECIMAL})


@dataclass(frozen=True)
class ColumnStatsIndex:
    version: IndexVersion
    columns: Mapping[str, ColumnType]        # in the definition's order


def _fields(table_schema_json: str) -> dict[str, Any]:
    schema = json.loads(table_schema_json)
    return {f["name"]: f["type"] for f in schema.get("fields", ())}


def column_types(table_schema_json: str, names: list[str], where: str) -> dict[str, ColumnType]:
    fields = _fields(table_schema_json)
    out: dict[str, ColumnType] = {}
    for name in names:
        if name in META_COLUMNS or name.startswith("_hoodie_"):
            out[name] = ColumnType(ValueType.STRING)
            continue
        if name not in fields:
            raise TableConfigError(f"{where}: indexed column {name!r} is not a top-level field of the table schema")
        ctype = ColumnType.of_avro(fields[name])
        if ctype is None:
            raise TableConfigError(f"{where}: indexed column {name!r} has a type column stats cannot index")
        out[name] = ctype
    return out


def default_indexed_columns(table_schema_json: str, version: IndexVersion,
                            max_columns: int = DEFAULT_MAX_COLUMNS) -> list[str]:
    """The 3 meta columns, then the first ``max_columns`` indexable fields of the schema."""
    chosen: list[str] = []
    for name, field_type in _fields(table_schema_json).items():
        if name.startswith("_hoodie_"):
            continue
        ctype = ColumnType.of_avro(field_type)
        if ctype is None or (version == IndexVersion.V1 and ctype.value_type in _V1_EXCLUDED):
            continue
        chosen.append(name)
    return list(META_COLUMNS) + chosen[:max_columns]


# HoodieAvroUtils.addMetadataFields: the meta fields a v6 writer schema gets first
V6_META_COLUMNS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
                   "_hoodie_file_name")


def v6_indexed_columns(table_schema_json: str, where: str) -> ColumnStatsIndex:
    """A version-6 table's ``column_stats`` columns as Hudi 0.15 picks them without
    ``hoodie.metadata.index.column.stats.column.list`` (``HoodieTableMetadataUtil.getColumnsToIndex``:
    every field of the writer schema with its meta fields; 0.15 records no index definition), V1
    wrappers.  A field whose type tablesvc cannot index refuses (``column_types``)."""
    names = list(V6_META_COLUMNS) + [n for n in _fields(table_schema_json) if not n.startswith("_hoodie_")]
    return ColumnStatsIndex(IndexVersion.V1, column_types(table_schema_json, names, where))


def indexed_columns(storage: Storage, base_path: str, props: Mapping[str, str],
                    table_schema_json: str) -> ColumnStatsIndex:
    """The ``column_stats`` definition of the table's index definitions, typed."""
    path = index_definitions_path(base_path, dict(props))
    if path is None:
        raise TableConfigError(f"{base_path}: the table keeps column_stats but names no index definitions file")
    try:
        document = json.loads(storage.read_bytes(path).decode("utf-8"))
    except FileNotFoundError:
        raise TableConfigError(f"{path}: missing (the table keeps column_stats)") from None
    except ValueError as e:
        raise TableConfigError(f"{path}: not valid JSON ({e})") from None
    definition = ((document or {}).get(DEFINITIONS) or {}).get(COLUMN_STATS_INDEX)
    if not isinstance(definition, Mapping) or not isinstance(definition.get("sourceFields"), list):
        raise TableConfigError(f"{path}: no {COLUMN_STATS_INDEX} definition with sourceFields")
    raw_version = definition.get("version") or IndexVersion.V1.value
    try:
        version = IndexVersion(raw_version)
    except ValueError:
        raise TableConfigError(f"{path}: column_stats index version {raw_version!r} is not V1 or V2") from None
    names = [str(n) for n in definition["sourceFields"]]
    return ColumnStatsIndex(version, column_types(table_schema_json, names, path))
