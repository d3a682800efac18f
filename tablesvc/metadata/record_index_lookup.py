"""Where the metadata table's ``record_index`` (the global record-level index) says record keys
live: the lookup a write on a partitioned table needs before it may insert a key (Hudi's
``HoodieBackedTableMetadata.readRecordIndexLocations``, read without Java).

The index is one ``record_index`` partition of the metadata table, split into N file groups
(``record-index-0000-0`` ...); a key lives in group ``|javaHash(key) % N|`` of the groups sorted by
file id (``writer.file_group_index``, Java's ``mapRecordKeyToFileGroupIndex``).  One group's
answer is its latest file slice merged as every metadata reader merges it (``reader``,
``partition_reader``): the base HFile's cell for the key (a seek: one data block), then the
chosen log blocks oldest first (the metadata table's block selection, and only blocks of
instants valid for the data table, ``valid_instants``), a newer record replacing an older one
and a DELETE-block key removing it.

``RecordIndexView`` holds paths and the read context only (no bytes): it is what a Spark task
receives (``spark/record_index_lookup_job``); each task reads the groups its keys hash to.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Iterable

import fastavro

from tablesvc.errors import LogFormatError
from tablesvc.hfile import HFileReader, read_hfile
from tablesvc.logformat import BlockType, block_deletes, read_log_file
from tablesvc.logformat.avro_content import parse_avro_schema
from tablesvc.merge.blocks import select_from_contents
from tablesvc.merge.context import ReadContext
from tablesvc.metadata.reader import MetadataTable
from tablesvc.metadata.record_index import file_id_of
from tablesvc.metadata.write_key_changes import RECORD_INDEX
from tablesvc.metadata.writer import file_group_index
from timeline.storage import Storage


@dataclass(frozen=True)
class Location:
    """Where the record index puts a key: its data partition and file group."""

    partition: str
    file_id: str


@dataclass(frozen=True)
class RecordIndexGroup:
    """The latest slice of one record-index file group: paths only."""

    file_id: str
    base_file: str | None
    log_files: tuple[str, ...]


@dataclass(frozen=True)
class RecordIndexView:
    """The ``record_index`` partition as of the data timeline it was built from (picklable)."""

    groups: tuple[RecordIndexGroup, ...]     # sorted by file id: a key's group is its hash's index
    log_context: ReadContext                 # the metadata table's block selection
    valid_instants: frozenset[str]           # metadata delta commits valid for the data table

    @classmethod
    def of(cls, mdt: MetadataTable) -> "RecordIndexView":
        groups = tuple(RecordIndexGroup(s.file_id, s.base_file.path if s.base_file is not None else None,
                                        tuple(lf.path for lf in s.log_files))
                       for s in sorted(mdt.partition_slices(RECORD_INDEX), key=lambda s: s.file_id))
        return cls(groups, mdt.log_read_context(), mdt.valid_instants)

    def group_of(self, key: str) -> int:
        """The index (into ``groups``) of the file group holding ``key``'s entry."""
        return file_group_index(key, len(self.groups))

    def locations(self, storage: Storage, group: int, keys: Iterable[str]) -> dict[str, Location]:
        """Where group ``group`` (``group_of`` of each key) puts ``keys``: only keys it holds live."""
        wanted = set(keys)
        found: dict[str, Location | None] = {}
        spec = self.groups[group]
        if spec.base_file is not None:
            reader = read_hfile(storage, spec.base_file)
            if reader.schema is None:
                raise LogFormatError(f"{spec.base_file}: the HFile's file info holds no Avro schema")
            found.update(_cells(reader, reader.schema, wanted))
        if spec.log_files:
            contents = [read_log_file(storage, p) for p in spec.log_files]
            selection = select_from_contents(contents, self.log_context, hfile_blocks=True)
            for chosen in selection.blocks:       # oldest first: a later word replaces an earlier one
                block, path = chosen.block, chosen.path
                if block.instant_time not in self.valid_instants:
                    continue
                if block.block_type == BlockType.HFILE_DATA:
                    if block.schema is None:
                        raise LogFormatError(f"{path}: HFILE_DATA block at offset {block.offset} has no SCHEMA header")
                    found.update(_cells(HFileReader(block.content, path, block.content_offset), block.schema, wanted))
                elif block.block_type == BlockType.DELETE:
                    found.update((d.record_key, None) for d in block_deletes(block, path) if d.record_key in wanted)
                else:
                    raise LogFormatError(f"{path}: {block.block_type.name} block at offset {block.offset} in the "
                                         "metadata table (only HFILE_DATA and DELETE are)")
        return {key: where for key, where in found.items() if where is not None}


def _cells(reader: HFileReader, schema_json: str, wanted: set[str]) -> Iterable[tuple[str, Location]]:
    """The record-index entries of ``wanted`` keys an HFile (base file or log block) holds."""
    schema = parse_avro_schema(schema_json)
    for key in sorted(wanted):
        value = reader.get(key)
        if value is None:
            continue
        record = fastavro.schemaless_reader(io.BytesIO(value), schema, None)
        info = record.get("recordIndexMetadata")
        if info is None:
            raise LogFormatError(f"{reader.path}: record_index entry of key {key!r} has no recordIndexMetadata")
        yield key, Location(info["partitionName"], file_id_of(info))


def lookup_locations(storage: Storage, view: RecordIndexView, keys: Iterable[str]) -> dict[str, Location]:
    """Every key of ``keys`` the record index holds, with its location (on one process: the tests'
    and small tables' path; a write looks up in Spark tasks, one group per task run)."""
    by_group: dict[int, list[str]] = {}
    for key in keys:
        by_group.setdefault(view.group_of(key), []).append(key)
    out: dict[str, Location] = {}
    for group, members in sorted(by_group.items()):
        out.update(view.locations(storage, group, members))
    return out


__all__ = ["Location", "RecordIndexGroup", "RecordIndexView", "lookup_locations"]
