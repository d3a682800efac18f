"""What one data-table commit writes into the metadata table's ``record_index`` partition (the
record-level index, RLI: record key -> partition and file group), as Hudi 1.2's writer does
(``HoodieTableMetadataUtil.convertMetadataToRecordIndexRecords``, ``BaseFileRecordParsingUtils``,
``HoodieMetadataPayload.createRecordIndexUpdate/Delete``; docs/metadata-table.md, "record_index").

* a write (delta commit of an insert, upsert or delete): per key it inserted, a record naming its
  new location (``HoodieRecordIndexInfo``: the data partition, the file id as the UUID's two
  64-bit halves plus the ``-N`` index, ``fileIdEncoding`` 0, ``instantTime`` the write's instant as
  epoch milliseconds, ``position`` null); per key it deleted, the key in a DELETE block; nothing
  for an update in place (the key stays in its file group).  Java finds these from the files the
  commit wrote (a new base file's keys; the current log's delete records); tablesvc's write tasks
  report them (``write_key_changes``), which is the same set: a tablesvc write puts new keys into
  new base files (lookup index) or, with the bucket index, into the bucket's log (Java refuses RLI
  inserts in logs; the record is the one Java's "revived key" path writes for a log);
* a compaction (``COMPACT``), a log compaction, a clean: nothing (keys keep their file groups);
* a rollback: the metadata delta commit is removed with every partition's records.

Only the global RLI (``isPartitioned`` false in the index definition, every carried table) is
written.  On a partitioned table a global RLI also indexes keys of other partitions, which
tablesvc's per-partition lookup does not see: an upsert looks its keys up in the index first
(``metadata.record_index_lookup`` in Spark tasks, ``spark.record_index_lookup_job``) and is
refused (exit 2) when one lives in another partition; inserts and deletes found in no or their
own partition are written as on a non-partitioned table.
"""

from __future__ import annotations

import json
import uuid
from functools import lru_cache
from typing import Any

from tablesvc.errors import UnsupportedTableError
from tablesvc.logformat import KeyedRecord
from tablesvc.metadata.record_schema import metadata_record_schema
from tablesvc.metadata.write_key_changes import RECORD_INDEX, WriteKeyChanges
from tablesvc.metadata.writer import PartitionRecords
from tablesvc.table.index_definitions import index_definition
from tablesvc.table.metadata_opt_outs import completed_partitions
from timeline.instant_time import parse_instant, resolve_timezone

TYPE_RECORD_INDEX = 5      # HoodieMetadataRecord.type of record-index records
FILE_ID_ENCODING_UUID = 0  # hoodie.write.fileid.encoding's default: <uuid>-<n> as two longs and an int


@lru_cache(maxsize=8)
def _field_names(schema_json: str) -> tuple[str, ...]:
    return tuple(f["name"] for f in json.loads(schema_json)["fields"])


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def file_id_parts(file_id: str) -> tuple[int, int, int]:
    """(high bits, low bits, file index) of a file id ``<uuid>`` or ``<uuid>-<n>``, as Java's
    ``UUID.getMostSignificantBits`` / ``getLeastSignificantBits`` (signed) and the index
    (-1 without one)."""
    if len(file_id) == 36:
        text, index = file_id, -1
    else:
        text, _, tail = file_id.rpartition("-")
        index = int(tail)
    value = uuid.UUID(text).int
    return _signed64(value >> 64), _signed64(value & ((1 << 64) - 1)), index


def file_id_of(info: dict[str, Any]) -> str:
    """The file id a ``HoodieRecordIndexInfo`` names (both encodings): the reverse of
    ``record_index_record``, as Java's ``getLocationFromRecordIndexInfo``."""
    if info.get("fileIdEncoding") == 1:
        return info["fileId"]
    high, low = info["fileIdHighBits"] & ((1 << 64) - 1), info["fileIdLowBits"] & ((1 << 64) - 1)
    text = str(uuid.UUID(int=(high << 64) | low))
    return text if info["fileIndex"] == -1 else f"{text}-{info['fileIndex']}"


def record_index_record(partition: str, file_id: str, instant_ms: int, schema_json: str | None = None) -> dict[str, Any]:
    """One ``record_index`` record as Hudi writes it (every other field null, ``key`` ``""``: the
    HFile cell key is the record key)."""
    high, low, index = file_id_parts(file_id)
    record: dict[str, Any] = dict.fromkeys(_field_names(schema_json or metadata_record_schema()))
    info = {"partitionName": partition, "fileIdHighBits": high, "fileIdLowBits": low, "fileIndex": index,
            "fileId": "", "instantTime": instant_ms, "fileIdEncoding": FILE_ID_ENCODING_UUID, "position": None}
    record.update(key="", type=TYPE_RECORD_INDEX, recordIndexMetadata=info)
    return record


def is_partitioned_rli(storage: Any, base_path: str, props: dict[str, str]) -> bool:
    definition = index_definition(storage, base_path, props, RECORD_INDEX) or {}
    return str((definition.get("indexOptions") or {}).get("isPartitioned", "false")).lower() == "true"


def record_index_changes(table: Any, ts: str, changes: WriteKeyChanges, schema_json: str) -> PartitionRecords:
    """The ``record_index`` records of the write ``ts`` whose tasks reported ``changes``."""
    props = dict(table.config.props)
    if is_partitioned_rli(table.storage, table.base_path, props):
        raise UnsupportedTableError(f"{table.base_path}: the record index is partitioned (isPartitioned=true in "
                                    "the index definitions); tablesvc keeps only a global record index up to date")
    inserted = list(changes.inserted())
    deleted = list(changes.deleted())
    # A partitioned table's upsert looked its keys up in the built index before it started
    # (spark.record_index_lookup_job); an index still being built (inflight only) could not answer
    if table.config.partition_fields and inserted and RECORD_INDEX not in completed_partitions(props):
        key, group = inserted[0]
        raise UnsupportedTableError(
            f"{table.base_path}: write {ts} inserts keys (e.g. {key!r} in partition {group.partition!r}) on a "
            "partitioned table whose global record_index is still being built (inflight): tablesvc cannot "
            "tell them from keys of other partitions; retry once the index is complete")
    instant_ms = parse_instant(ts, resolve_timezone(table.config.timezone))
    records: dict[str, KeyedRecord] = {}
    for key, group in inserted:
        if key in records:
            # Java's reduceByKeys refuses two locations for one key in one commit too
            raise UnsupportedTableError(f"{table.base_path}: write {ts} inserts record key {key!r} into two file "
                                        "groups; a global record index holds one location per key")
        records[key] = KeyedRecord(key, record_index_record(group.partition, group.file_id, instant_ms, schema_json))
    # a key both inserted and deleted in one commit keeps its insert (Java's reduceByKeys)
    deletes = tuple(sorted({key for key, _ in deleted} - set(records)))
    return PartitionRecords(records=tuple(records[k] for k in sorted(records)), deleted_keys=deletes)


__all__ = ["FILE_ID_ENCODING_UUID", "TYPE_RECORD_INDEX", "file_id_of", "file_id_parts", "is_partitioned_rli",
           "record_index_changes", "record_index_record"]
