"""Which record keys one tablesvc write inserted, updated and deleted, per file group: what the
metadata table's key-based indexes (``record_index``; secondary indexes build on it) need from a
write, computed by the write's own Spark tasks where they already know which keys a file group
holds (``spark/write_job``), and handed to the commit (``metadata.maintain``).

A write task writes one file group at a time (docs/write-path.md):

* a NEW file group (a base file): every key it writes is an insert (the lookup index found it in
  no file group of its partition; the bucket index's new bucket held nothing);
* an EXISTING file group (one log file): with the lookup index every key was found in that group
  (the join routed it there), so an upsert's keys are updates and a delete's keys are deletes;
  with the bucket index the task asks the group's latest slice which keys it holds
  (``write.existing_keys.present_key_mask``): those are updates (or deletes), the rest inserts
  (an upsert) or nothing (a delete of a key the group does not hold writes a delete record that
  changes nothing).

A key never moves between file groups in a tablesvc write: an update's or a delete's old file
group is the group it is written into (``FileGroupKeyChanges.file_id``), and an insert's old file
group is none.  A key whose partition path changes is, for tablesvc's non-global lookup, an insert
into the new partition (the old partition keeps its row), as for Hudi's non-global indexes; on a
partitioned table with a global record index such an upsert is refused before it starts
(``spark.record_index_lookup_job``).

The API (stable; the secondary-index work builds on it): ``FileGroupKeyChanges``,
``WriteKeyChanges``, ``group_key_changes``, ``wants_key_changes``, ``KEY_INDEXED_PARTITIONS``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

RECORD_INDEX = "record_index"
SECONDARY_INDEX_PREFIX = "secondary_index_"
KEY_INDEXED_PARTITIONS = (RECORD_INDEX, SECONDARY_INDEX_PREFIX)   # exact name, family prefix
_LISTS = ("hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight")


def wants_key_changes(props: Mapping[str, str]) -> bool:
    """True when the table's properties list (completed or inflight) a metadata partition indexed
    by record key: the write tasks must then report their key changes."""
    for prop in _LISTS:
        for name in (props.get(prop) or "").split(","):
            if name == RECORD_INDEX or name.startswith(SECONDARY_INDEX_PREFIX):
                return True
    return False


@dataclass(frozen=True)
class FileGroupKeyChanges:
    """What one write did to the keys of one file group (each key at most once in the three)."""

    partition: str                    # the data partition path ("" when non-partitioned)
    file_id: str
    instant: str                      # the write's instant: the file written for these keys
    existed: bool                     # the file group held a slice before the write
    inserted: tuple[str, ...] = ()    # keys new to this file group (a new location)
    updated: tuple[str, ...] = ()     # keys the group held and the write rewrote (same location)
    deleted: tuple[str, ...] = ()     # keys the group held and the write deleted

    def to_json(self) -> str:
        return json.dumps({"p": self.partition, "f": self.file_id, "t": self.instant, "e": self.existed,
                           "i": list(self.inserted), "u": list(self.updated), "d": list(self.deleted)},
                          separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "FileGroupKeyChanges":
        d = json.loads(text)
        return cls(d["p"], d["f"], d["t"], bool(d["e"]), tuple(d["i"]), tuple(d["u"]), tuple(d["d"]))

    @property
    def is_empty(self) -> bool:
        return not (self.inserted or self.updated or self.deleted)


@dataclass(frozen=True)
class WriteKeyChanges:
    """Every file group's key changes of one write (the driver's collection of the tasks')."""

    groups: tuple[FileGroupKeyChanges, ...] = ()

    @classmethod
    def of(cls, groups: Iterable[FileGroupKeyChanges]) -> "WriteKeyChanges":
        return cls(tuple(sorted((g for g in groups if not g.is_empty), key=lambda g: (g.partition, g.file_id))))

    def inserted(self) -> Iterable[tuple[str, FileGroupKeyChanges]]:
        return ((k, g) for g in self.groups for k in g.inserted)

    def updated(self) -> Iterable[tuple[str, FileGroupKeyChanges]]:
        return ((k, g) for g in self.groups for k in g.updated)

    def deleted(self) -> Iterable[tuple[str, FileGroupKeyChanges]]:
        return ((k, g) for g in self.groups for k in g.deleted)

    @property
    def counts(self) -> tuple[int, int, int]:
        """(inserted, updated, deleted) over all file groups."""
        return (sum(len(g.inserted) for g in self.groups), sum(len(g.updated) for g in self.groups),
                sum(len(g.deleted) for g in self.groups))


def group_key_changes(partition: str, file_id: str, instant: str, existed: bool, is_delete: bool,
                      keys: pa.Array | pa.ChunkedArray, present: pa.Array | None = None, *,
                      keep_updates: bool = True) -> FileGroupKeyChanges:
    """The key changes of one file group's write: ``keys`` (unique, the batch after dedupe) written
    into a new group (``existed`` False) or an existing one; ``present`` (bucket index only): for
    each key, whether the group held it before (None: every key was found there, the lookup
    index's routing).  ``is_delete``: the write is a delete.  ``keep_updates`` False leaves
    ``updated`` empty: an upsert's updates are most of its keys, and the record index needs none
    of them, so the write does not ship them to the driver unless a consumer asks."""
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    if not existed:
        inserted = () if is_delete else tuple(arr.to_pylist())
        return FileGroupKeyChanges(partition, file_id, instant, False, inserted=inserted)
    if present is None:
        held, new = tuple(arr.to_pylist()), ()
    else:
        held = tuple(pc.filter(arr, present).to_pylist())
        new = tuple(pc.filter(arr, pc.invert(present)).to_pylist())
    if is_delete:
        return FileGroupKeyChanges(partition, file_id, instant, True, deleted=held)
    return FileGroupKeyChanges(partition, file_id, instant, True, inserted=new, updated=held if keep_updates else ())


__all__ = ["KEY_INDEXED_PARTITIONS", "RECORD_INDEX", "SECONDARY_INDEX_PREFIX", "FileGroupKeyChanges",
           "WriteKeyChanges", "group_key_changes", "wants_key_changes"]
