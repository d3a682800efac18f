"""Avro Object Container File I/O for timeline payloads (one record per file).

Hudi stores plans and most metadata as a container file with codec ``null`` and
exactly one record.  Reading uses the writer schema embedded in the file, because
Hudi versions differ in which fields they write; the codecs then map the decoded
record by field name, so missing or additional fields are harmless.  Writing uses
our own schemas in ``schemas/``: one ``.avsc`` per named type, each a superset of
every revision we know of, assembled here into one self-contained schema.

Only fastavro and the standard library are used (``timeline`` is the lower floor).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import fastavro

from timeline.errors import PayloadError

NAMESPACE = "org.apache.hudi.avro.model"
AVRO_MAGIC = b"Obj\x01"
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


@dataclass(frozen=True)
class AvroRecord:
    """The single record of a container, with the name of the schema that wrote it."""

    name: str  # full name, e.g. org.apache.hudi.avro.model.HoodieCompactionPlan
    writer_schema: Mapping[str, Any]
    record: Mapping[str, Any]

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


def is_avro_container(data: bytes) -> bool:
    return data[:4] == AVRO_MAGIC


def full_name(record_name: str) -> str:
    return record_name if "." in record_name else f"{NAMESPACE}.{record_name}"


# -- schemas ---------------------------------------------------------------------------
def _load_avsc(name: str) -> dict[str, Any]:
    short = name.rsplit(".", 1)[-1]
    path = SCHEMA_DIR / f"{short}.avsc"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PayloadError(f"{path}: cannot load schema {name}: no such .avsc file") from None


def _expand(node: Any, defined: set[str]) -> Any:
    """Inline each referenced named type at its first use, as Avro requires.

    The .avsc files refer to each other by full name; an Avro parser (fastavro here,
    Java on the other side) wants one document where every name is defined before,
    or where, it is first used.  Walking depth-first in field order matches the
    order in which parsers define names, so later references stay plain names.
    """
    if isinstance(node, str):
        if node.startswith(NAMESPACE + ".") and node not in defined:
            return _expand(_load_avsc(node), defined)
        return node
    if isinstance(node, list):
        return [_expand(x, defined) for x in node]
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "record":
            defined.add(full_name(node["name"]) if "namespace" not in node
                        else f"{node['namespace']}.{node['name']}")
            out = dict(node)
            out["fields"] = [{**fld, "type": _expand(fld["type"], defined)} for fld in node["fields"]]
            return out
        if kind == "array":
            return {**node, "items": _expand(node["items"], defined)}
        if kind == "map":
            return {**node, "values": _expand(node["values"], defined)}
        if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind.startswith(NAMESPACE)):
            return {**node, "type": _expand(kind, defined)}
    return node


@lru_cache(maxsize=None)
def schema_json(record_name: str) -> str:
    """Our complete, self-contained schema for a record, as JSON text."""
    return json.dumps(_expand(_load_avsc(full_name(record_name)), set()))


@lru_cache(maxsize=None)
def parsed_schema(record_name: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_json(record_name)))


def field_names(record_name: str) -> tuple[str, ...]:
    return tuple(f["name"] for f in _load_avsc(full_name(record_name))["fields"])


# -- reading -----------------------------------------------------------------------------
def read_container(data: bytes, where: str, kind: str) -> AvroRecord:
    """Decode the one record of a container with the schema embedded in it."""
    if not is_avro_container(data):
        head = data[:8]
        raise PayloadError(f"{where}: cannot decode {kind}: not an Avro container file "
                           f"({len(data)} bytes, starts with {head!r})")
    try:
        reader = fastavro.reader(io.BytesIO(data))
        records = list(reader)
        schema = reader.writer_schema
    except PayloadError:
        raise
    except Exception as e:  # fastavro raises a variety of types for corrupt input
        raise PayloadError(f"{where}: cannot decode {kind}: corrupt Avro container: {e}") from e
    if len(records) != 1:
        raise PayloadError(f"{where}: cannot decode {kind}: expected exactly one record, "
                           f"found {len(records)}")
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise PayloadError(f"{where}: cannot decode {kind}: top-level writer schema is not a record")
    name = schema.get("name", "")
    if "." not in name:
        name = f"{schema.get('namespace', NAMESPACE)}.{name}"
    return AvroRecord(name, schema, records[0])


def read_record(data: bytes, where: str, kind: str, expected: tuple[str, ...]) -> Mapping[str, Any]:
    """Like :func:`read_container`, checking that the writer record is one of ``expected``.

    The check compares short names only: what matters is which Hudi structure the
    file holds, and some writers used other namespaces in the past.
    """
    rec = read_container(data, where, kind)
    if rec.short_name not in expected:
        raise PayloadError(f"{where}: cannot decode {kind}: file holds {rec.name}, "
                           f"expected {' or '.join(expected)}")
    return rec.record


# -- writing ------------------------------------------------------------------------------
def write_record(record_name: str, record: Mapping[str, Any], where: str = "") -> bytes:
    """One record in a fresh container, codec null, written with our schema."""
    buf = io.BytesIO()
    try:
        fastavro.writer(buf, parsed_schema(record_name), [dict(record)], codec="null")
    except PayloadError:
        raise
    except Exception as e:
        raise PayloadError(f"{where or record_name}: cannot encode {record_name}: {e}") from e
    return buf.getvalue()


# -- small conversion helpers shared by the codecs ------------------------------------------
# Dataclasses hold tuples (immutable) where Avro has arrays; ``None`` stays ``None`` so
# that a null written by Hudi is written back as null, not as an empty array.
def as_tuple(value: Any) -> tuple | None:
    return None if value is None else tuple(value)


def as_list(value: Any) -> list | None:
    return None if value is None else list(value)


def as_dict(value: Any) -> dict | None:
    return None if value is None else dict(value)


def map_of_tuples(value: Mapping[str, Any] | None) -> dict[str, tuple] | None:
    return None if value is None else {k: as_tuple(v) for k, v in value.items()}


def map_of_lists(value: Mapping[str, Any] | None) -> dict[str, list] | None:
    return None if value is None else {k: as_list(v) for k, v in value.items()}


def require(record: Mapping[str, Any], key: str, where: str, kind: str) -> Any:
    """A field without which the payload makes no sense (raises PayloadError)."""
    if record.get(key) is None:
        raise PayloadError(f"{where}: cannot decode {kind}: required field {key!r} is missing or null")
    return record[key]
