"""The metadata table's secondary indexes (``secondary_index_<name>``): what one data-table write
changes in them, as Apache Hudi 1.2 computes it (docs/metadata-table.md, "Secondary indexes").

Hudi 1.2 (``SecondaryIndexRecordGenerationUtils.convertWriteStatsToSecondaryIndexRecords``): per
file group a write touched, the record key -> secondary value map of the file group's latest
merged slice *before* the write and of the slice *with* the write (its log files added, or its
new base file alone); then per record key

* new key: an insert of ``(new value, key)``;
* value changed: a delete of ``(old value, key)`` and an insert of ``(new value, key)``;
* key gone (a delete): a delete of ``(old value, key)``;
* value unchanged: nothing.

Compaction, clustering, log compaction (its merged slice is the same before and after), clean
and rollback produce nothing here (rollback removes the metadata table's delta commit instead).

On disk an insert is a data record (type 7, ``SecondaryIndexMetadata.isDeleted`` false) in the
HFILE_DATA block; a delete is the key in a DELETE block (Hudi's payload with ``isDeleted`` true is a
delete record, and the append handle writes those as deletes).  Two records of one key in one
commit: an insert beats a delete (``HoodieTableMetadataUtil.reduceByKeys``).

The keys and their file groups: ``secondary_index_keys``; which indexes a table has and how a
column's values print: ``secondary_index_definitions`` (both re-exported here).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from tablesvc.errors import InvalidInputError
from tablesvc.logformat import KeyedRecord
from tablesvc.metadata.secondary_index_definitions import (
    PARTITIONS_KEY, PREFIX, SecondaryIndex, ValueKind, column_texts, listed_secondary_partitions, secondary_indexes,
    value_kind, value_text,
)
from tablesvc.metadata.secondary_index_keys import (
    ESCAPE, NULL_TEXT, SEPARATOR, escape, group_key, secondary_index_key, separator_position, split_key, unescape,
)

RECORD_TYPE = 7
# Operations whose commit carries no secondary-index records (Java: COMPACT, CLUSTER skip it, and
# a log compaction's merged slices are unchanged)
NO_CHANGES_OPERATIONS = frozenset({"COMPACT", "CLUSTER", "LOG_COMPACT"})


@dataclass(frozen=True)
class SecondaryIndexChanges:
    """What one write changes in one secondary index: keys inserted, keys deleted (disjoint)."""

    partition: str
    inserted: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()


def slice_changes(before: Mapping[str, str | None], after: Mapping[str, str | None]) -> list[tuple[str | None, str, bool]]:
    """(secondary value, record key, deleted) of one file group: ``before`` and ``after`` map each
    live record key to its value's text, in the slice before and with the write (Java's order)."""
    out: list[tuple[str | None, str, bool]] = []
    for key, value in after.items():
        if key not in before:
            out.append((value, key, False))
        elif before[key] != value:
            out.append((before[key], key, True))
            out.append((value, key, False))
    for key, value in before.items():
        if key not in after:
            out.append((value, key, True))
    return out


def reduce_changes(partition: str, changes: Iterable[tuple[str, bool]], instant: str) -> SecondaryIndexChanges:
    """Write ``instant``'s (key, deleted) pairs of one index, reduced as Hudi's ``reduceByKeys``: an
    insert beats a delete of the same key.  Two inserts of one key mean one record key live in
    two of the touched file groups (a non-global index, a duplicate): refused, exit 2."""
    inserted: set[str] = set()
    deleted: set[str] = set()
    for key, is_delete in changes:
        if is_delete:
            deleted.add(key)
        elif key in inserted:
            value, record_key = split_key(key)
            raise InvalidInputError(f"{partition}: write {instant} would insert secondary-index key {key!r} twice "
                                    f"(record key {record_key!r} with value {value!r} in two file groups); "
                                    "nothing committed")
        else:
            inserted.add(key)
    return SecondaryIndexChanges(partition, tuple(sorted(inserted)), tuple(sorted(deleted - inserted)))


def insert_record(schema_json: str) -> dict[str, Any]:
    """The value of an inserted key: every field null but ``key`` (``""``), ``type`` 7 and
    ``SecondaryIndexMetadata`` ``{isDeleted: false}``, as ``createSecondaryIndexRecord`` writes it."""
    record: dict[str, Any] = dict.fromkeys(f["name"] for f in json.loads(schema_json)["fields"])
    record.update(key="", type=RECORD_TYPE, SecondaryIndexMetadata={"isDeleted": False})
    return record


def keyed_inserts(changes: SecondaryIndexChanges, schema_json: str) -> tuple[KeyedRecord, ...]:
    value = insert_record(schema_json)
    return tuple(KeyedRecord(key, dict(value)) for key in changes.inserted)


__all__ = ["ESCAPE", "NO_CHANGES_OPERATIONS", "NULL_TEXT", "PARTITIONS_KEY", "PREFIX", "RECORD_TYPE", "SEPARATOR",
           "SecondaryIndex", "SecondaryIndexChanges", "ValueKind", "column_texts", "escape", "group_key",
           "insert_record", "keyed_inserts", "listed_secondary_partitions", "reduce_changes", "secondary_index_key",
           "secondary_indexes", "separator_position", "slice_changes", "split_key", "unescape", "value_kind",
           "value_text"]
