"""An upsert's keys looked up in the metadata table's global record index, in Spark tasks: which
incoming keys the index already places in ANOTHER data partition than the one the row names.

Why: on a partitioned table the global record index (``isPartitioned`` false) holds one location
per key across all partitions, while tablesvc's write (like Apache Hudi's default Spark index,
``hoodie.index.type`` SIMPLE) looks a key up in the row's own partition only.  An upsert of a key
that lives in another partition would, with that index, write a second copy of the key in the
new partition and point the record index at it alone (the old copy still read, unindexed).  Java
does otherwise only with a global index (``hoodie.index.type`` RECORD_INDEX or
GLOBAL_RECORD_LEVEL_INDEX, with ``hoodie.record.index.update.partition.path`` false: the row is
written into the partition the key lives in).  tablesvc does neither: such a write is refused
before its instant is requested (``refuse_keys_in_other_partitions``, exit 2).

How: one ``mapInArrow`` computes each row's record key and partition path (the write's own key
code, ``write.add_key_columns``) and the record-index file group the key hashes to (Java's
``mapRecordKeyToFileGroupIndex``); the rows are spread by that group, and each task reads, per
group it holds, that group's latest file slice for its keys only (``metadata.record_index_lookup``:
one HFile seek per key and block).  Only the keys found elsewhere come back, at most ``limit``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import InvalidInputError
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.record_index import is_partitioned_rli
from tablesvc.metadata.record_index_lookup import RecordIndexView
from tablesvc.metadata.write_key_changes import RECORD_INDEX
from tablesvc.metadata.writer import file_group_index
from tablesvc.spark.errors import translate_task_error
from tablesvc.spark.worker_heap import freeze_worker_heap
from tablesvc.storage import task_storage
from tablesvc.table.meta_fields import PARTITION_PATH as PARTITION
from tablesvc.table.meta_fields import RECORD_KEY as KEY
from tablesvc.table.metadata_opt_outs import completed_partitions
from tablesvc.write import KeySpec, add_key_columns

_GROUP = "_rli_group"
_KEYED = f"`{KEY}` string, `{PARTITION}` string, {_GROUP} int"
_FOUND = "key string, partition string, indexed_partition string, indexed_file_id string"


@dataclass(frozen=True, order=True)
class KeyElsewhere:
    """An incoming key the record index places in another partition."""

    key: str
    partition: str              # the partition the incoming row names
    indexed_partition: str      # where the record index says the key lives
    indexed_file_id: str


def _keys_and_groups(key_spec: KeySpec, groups: int):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap()
        for batch in batches:
            keyed = add_key_columns(batch, key_spec)
            keys = keyed.column(KEY)
            group = pa.array([file_group_index(k, groups) for k in keys.to_pylist()], pa.int32())
            yield pa.RecordBatch.from_arrays([keys, keyed.column(PARTITION), group], names=[KEY, PARTITION, _GROUP])
    return run


def _lookup(view: RecordIndexView, base_path: str):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap()
        storage = task_storage(base_path, view.log_context.storage)
        batches = list(batches)        # one task's keys and partition paths: strings only
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        out: dict[str, list[str]] = {"key": [], "partition": [], "indexed_partition": [], "indexed_file_id": []}
        for group in pc.unique(table.column(_GROUP)).to_pylist():
            members = table.filter(pc.equal(table.column(_GROUP), group))
            incoming = dict(zip(members.column(KEY).to_pylist(), members.column(PARTITION).to_pylist()))
            for key, where in view.locations(storage, group, incoming).items():
                if where.partition != incoming[key]:
                    out["key"].append(key)
                    out["partition"].append(incoming[key])
                    out["indexed_partition"].append(where.partition)
                    out["indexed_file_id"].append(where.file_id)
        if out["key"]:
            yield pa.RecordBatch.from_pydict(out)
    return run


def keys_in_other_partitions(df, key_spec: KeySpec, view: RecordIndexView, base_path: str,
                             limit: int = 5) -> list[KeyElsewhere]:
    """Up to ``limit`` keys of the rows of ``df`` that ``view`` places in another partition."""
    if not view.groups:
        return []
    tops = list(dict.fromkeys(f.split(".", 1)[0] for f in (*key_spec.record_key_fields, *key_spec.partition_fields)))
    keyed = df.select(*[f"`{c}`" for c in tops]).mapInArrow(_keys_and_groups(key_spec, len(view.groups)), _KEYED)
    spread = keyed.repartition(len(view.groups), _GROUP)      # a task gathers its keys by group itself
    rows = spread.mapInArrow(_lookup(view, base_path), _FOUND).limit(limit).collect()
    return sorted(KeyElsewhere(r["key"], r["partition"], r["indexed_partition"], r["indexed_file_id"]) for r in rows)


def global_record_index(table) -> RecordIndexView | None:
    """The table's record index when a write must consult it: partitioned table, ``record_index``
    built (listed complete) and global.  None otherwise (the check costs nothing then)."""
    props = dict(table.config.props)
    if not table.config.partition_fields or RECORD_INDEX not in completed_partitions(props):
        return None
    if is_partitioned_rli(table.storage, table.base_path, props):
        return None     # a partitioned record index: refused at the commit (metadata.record_index)
    return RecordIndexView.of(MetadataTable(table.storage, table.base_path, table.timeline()))


def refuse_keys_in_other_partitions(table, df, key_spec: KeySpec) -> None:
    """Before an upsert on a partitioned table with a global record index: exit 2 when an incoming
    key lives in another partition (see the module doc), one line naming the first such key."""
    view = global_record_index(table)
    if view is None:
        return
    try:
        found = keys_in_other_partitions(df, key_spec, view, table.base_path, limit=1)
    except BaseException as e:      # a task's error (a blank key, a damaged file) as tablesvc's own
        raise translate_task_error(e) from None
    if found:
        first = found[0]
        raise InvalidInputError(
            f"{table.base_path}: record key {first.key!r} is upserted into partition {first.partition!r} but the "
            f"global record index holds it in partition {first.indexed_partition!r} (file group "
            f"{first.indexed_file_id}); tablesvc does not move keys between partitions (Hudi decides it by "
            "hoodie.index.type and hoodie.record.index.update.partition.path)")


__all__ = ["KeyElsewhere", "global_record_index", "keys_in_other_partitions", "refuse_keys_in_other_partitions"]
