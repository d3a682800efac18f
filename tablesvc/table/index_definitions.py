"""``.hoodie/.index_defs/index.json``: the table's index definitions, as Java Hudi 1.x keeps them.

The file's place is ``hoodie.table.index.defs.path`` (relative to the table).  Java writes it with
Jackson's default pretty printer (``HoodieIndexMetadata.toJson``) and rewrites it whole when a
definition goes (``HoodieTableMetaClient.deleteIndexDefinition``); ``render_index_definitions``
writes the same text, so a Java-written file that loses nothing comes back byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

from tablesvc.errors import TableConfigError
from timeline.storage import Storage, join

INDEX_DEFS_PATH_KEY = "hoodie.table.index.defs.path"
DEFINITIONS = "indexDefinitions"


def index_definitions_path(base_path: str, props: dict[str, str]) -> str | None:
    """The file's path, or None when the table names none."""
    relative = (props.get(INDEX_DEFS_PATH_KEY) or "").strip()
    return join(base_path, relative) if relative else None


def _pretty(value: Any, indent: int) -> str:
    # Jackson's DefaultPrettyPrinter: objects one field a line, two spaces deeper, " : " between
    # name and value, an empty object "{ }"; arrays on one line, "[ a, b ]", an empty one "[ ]".
    if isinstance(value, dict):
        if not value:
            return "{ }"
        inner = " " * (indent + 2)
        fields = [f"{inner}{json.dumps(k, ensure_ascii=False)} : {_pretty(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(fields) + "\n" + " " * indent + "}"
    if isinstance(value, list):
        return "[ " + ", ".join(_pretty(v, indent) for v in value) + " ]" if value else "[ ]"
    return json.dumps(value, ensure_ascii=False)


def render_index_definitions(document: dict[str, Any]) -> bytes:
    return _pretty(document, 0).encode("utf-8")


def _read(storage: Storage, path: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The document and its definitions, or None when the file is absent."""
    try:
        text = storage.read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        return None
    try:
        document = json.loads(text)
    except ValueError as e:
        raise TableConfigError(f"{path}: not valid JSON ({e})") from None
    definitions = document.get(DEFINITIONS) if isinstance(document, dict) else None
    if not isinstance(definitions, dict):
        raise TableConfigError(f"{path}: no {DEFINITIONS} object")
    return document, definitions


def definition_names(storage: Storage, base_path: str, props: dict[str, str]) -> frozenset[str]:
    path = index_definitions_path(base_path, props)
    found = _read(storage, path) if path is not None else None
    return frozenset(found[1]) if found else frozenset()


def index_definition(storage: Storage, base_path: str, props: dict[str, str], name: str) -> dict[str, Any] | None:
    """The definition named ``name`` (``record_index``, ``column_stats``, ...), or None."""
    path = index_definitions_path(base_path, props)
    found = _read(storage, path) if path is not None else None
    definition = found[1].get(name) if found else None
    return definition if isinstance(definition, dict) else None


def drop_index_definition(storage: Storage, base_path: str, props: dict[str, str], name: str) -> bool:
    """Remove definition ``name`` (rewriting the file whole, as Java does); False when the table
    has no such file or the file no such definition (nothing written)."""
    path = index_definitions_path(base_path, props)
    found = _read(storage, path) if path is not None else None
    if found is None or name not in found[1]:
        return False
    document, definitions = found
    del definitions[name]
    storage.write_replace(path, render_index_definitions(document))
    return True


__all__ = ["INDEX_DEFS_PATH_KEY", "definition_names", "drop_index_definition", "index_definition", "index_definitions_path", "render_index_definitions"]
