"""The Avro schema tablesvc writes the metadata table's records with, and those records' shape.

``schemas/HoodieMetadataRecord.avsc`` is the ``SCHEMA`` header of an HFILE_DATA block of the
``files`` partition that Apache Hudi 1.1.1 wrote (fixture ``mor_avro_v9_txns_simple_meta``),
copied byte for byte, not written by hand: Hudi's ``HoodieMetadataRecord`` with the five
``_hoodie_*`` meta fields first (``tests/unit/test_metadata_writer.py`` checks it against the
fixture).  Readers decode a block with its own header, and Java's reader schema resolves it.

``schemas/HoodieMetadataRecord_0_15.avsc`` is Hudi 0.15's ``HoodieMetadataRecord`` (no secondary
index, record index without its v2 fields): the ``schema`` file-info entry of the ``files`` base
HFile Java 0.15.0 wrote when it initialised fixture ``v6_mdt_files``'s metadata table, copied byte
for byte (the same text as that table's block headers).  tablesvc writes a version-6 metadata table
it creates with it (``metadata/bootstrap.py``), as every later 0.15 write to it is.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from tablesvc.metadata.files_records import TYPE_FILE_LIST, TYPE_PARTITION_LIST

SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / "HoodieMetadataRecord.avsc"
SCHEMA_FILE_V6 = Path(__file__).resolve().parent / "schemas" / "HoodieMetadataRecord_0_15.avsc"


@lru_cache(maxsize=1)
def metadata_record_schema() -> str:
    """The schema's JSON text, exactly as the fixture's block header holds it."""
    return SCHEMA_FILE.read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def metadata_record_schema_v6() -> str:
    """Hudi 0.15's record schema (version-6 metadata tables), exactly as its fixture holds it."""
    return SCHEMA_FILE_V6.read_text(encoding="utf-8")


@lru_cache(maxsize=8)
def _field_names(schema_json: str) -> tuple[str, ...]:
    return tuple(f["name"] for f in json.loads(schema_json)["fields"])


def files_record(kind: int, entries: Mapping[str, tuple[int, bool]], schema_json: str | None = None) -> dict[str, Any]:
    """One ``files``-partition record as Hudi writes it: every field null but ``key`` (``""``:
    the HFile cell key is the key), ``type`` and ``filesystemMetadata`` (name -> size, deleted).
    ``schema_json``: the metadata table's own record schema (its fields; default the bundled one)."""
    if kind not in (TYPE_PARTITION_LIST, TYPE_FILE_LIST):
        raise ValueError(f"a files record has type {TYPE_PARTITION_LIST} or {TYPE_FILE_LIST}, not {kind}")
    record: dict[str, Any] = dict.fromkeys(_field_names(schema_json or metadata_record_schema()))
    record.update(key="", type=kind,
                  filesystemMetadata={name: {"size": size, "isDeleted": deleted}
                                      for name, (size, deleted) in entries.items()})
    return record


__all__ = ["SCHEMA_FILE", "SCHEMA_FILE_V6", "files_record", "metadata_record_schema", "metadata_record_schema_v6"]
