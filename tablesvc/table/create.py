"""Creating a new MOR table: the ``hoodie.properties`` Apache Hudi and hudi-rs expect.

With ``TableSpec.metadata_table`` the caller builds the metadata table
through ``create_table``'s ``prepare`` hook (``tablesvc.metadata.bootstrap``, a floor above this
one), before ``hoodie.properties`` exists; otherwise ``hoodie.table.metadata.partitions`` stays
empty and readers list storage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from tablesvc.errors import InvalidInputError, TableConfigError
from tablesvc.table.config import SUPPORTED_VERSIONS, MergeMode, TableConfig
from tablesvc.table.properties import write_properties
from timeline.instant import TimelineLayout
from timeline.storage import Storage, join

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


@dataclass(frozen=True)
class TableSpec:
    """What ``tablesvc init`` / ``Table.create`` asks for."""

    name: str
    record_key_fields: tuple[str, ...]
    ordering_field: str | None = None
    partition_fields: tuple[str, ...] = ()
    table_version: int = 8
    hive_style_partitioning: bool = True
    merge_mode: MergeMode | None = None
    database: str = "default"
    create_schema: str | None = None
    num_buckets: int = 4   # bucket index: file groups per partition, fixed at creation
    # hoodie.metadata.enable at creation: build a metadata table (Hudi 1.2's on v8/v9, Hudi 0.15's
    # on v6; `tablesvc init` defaults it to true).  The API's default stays False: callers opt in.
    metadata_table: bool = False
    # hoodie.metadata.index.column.stats.enable: with a create schema, column_stats (and, when
    # partitioned, partition_stats) join files
    metadata_column_stats: bool = True

    def validate(self) -> None:
        if not _NAME.match(self.name):
            raise InvalidInputError(f"table name {self.name!r}: use letters, digits and '_' only")
        if not self.record_key_fields:
            raise InvalidInputError("a record key field is required (--record-key)")
        for f in (*self.record_key_fields, *self.partition_fields, *([self.ordering_field] if self.ordering_field else [])):
            if not _FIELD.match(f):
                raise InvalidInputError(f"field name {f!r} is not a valid column name")
        if self.table_version not in SUPPORTED_VERSIONS:
            raise InvalidInputError(f"table version {self.table_version}: choose one of 6, 8, 9")
        if not 1 <= self.num_buckets <= 100_000:
            raise InvalidInputError(f"hoodie.bucket.index.num.buckets: {self.num_buckets} is not between 1 and 100000")
        if self.merge_mode is MergeMode.CUSTOM:
            raise InvalidInputError("merge mode CUSTOM needs a Java merger class; use EVENT_TIME_ORDERING or "
                                    "COMMIT_TIME_ORDERING")
        if self.merge_mode is MergeMode.EVENT_TIME_ORDERING and not self.ordering_field:
            raise InvalidInputError("merge mode EVENT_TIME_ORDERING needs an ordering field (--ordering-field)")


def _key_generator(spec: TableSpec) -> tuple[str, str]:
    """(v6 class name, v8+ type) of the key generator that matches the key and partition fields."""
    if not spec.partition_fields:
        if len(spec.record_key_fields) > 1:
            return "org.apache.hudi.keygen.ComplexKeyGenerator", "COMPLEX"
        return "org.apache.hudi.keygen.NonpartitionedKeyGenerator", "NON_PARTITION"
    if len(spec.record_key_fields) > 1 or len(spec.partition_fields) > 1:
        return "org.apache.hudi.keygen.ComplexKeyGenerator", "COMPLEX"
    return "org.apache.hudi.keygen.SimpleKeyGenerator", "SIMPLE"


def table_properties(spec: TableSpec) -> dict[str, str]:
    spec.validate()
    mode = spec.merge_mode or (MergeMode.EVENT_TIME_ORDERING if spec.ordering_field else MergeMode.COMMIT_TIME_ORDERING)
    keygen_class, keygen_type = _key_generator(spec)
    v = spec.table_version
    props: dict[str, str] = {
        "hoodie.table.name": spec.name,
        "hoodie.database.name": spec.database,
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": str(v),
        "hoodie.timeline.layout.version": str(TimelineLayout.for_table_version(v).value),
        "hoodie.table.recordkey.fields": ",".join(spec.record_key_fields),
        "hoodie.table.partition.fields": ",".join(spec.partition_fields),
        "hoodie.datasource.write.hive_style_partitioning": str(spec.hive_style_partitioning).lower(),
        "hoodie.datasource.write.partitionpath.urlencode": "false",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.populate.meta.fields": "true",
        "hoodie.table.base.file.format": "PARQUET",
        "hoodie.table.log.file.format": "HOODIE_LOG",
        "hoodie.table.timeline.timezone": "UTC",
        "hoodie.archivelog.folder": "archived",
        "hoodie.compaction.payload.class": mode.payload_class,
        "hoodie.table.metadata.partitions": "",
        "hoodie.table.metadata.partitions.inflight": "",
        # The bucket index: a record's file group is a hash of its key, so writers need
        # no lookup.  Java writers honour these keys as write configs; readers ignore them.
        "hoodie.index.type": "BUCKET",
        "hoodie.bucket.index.num.buckets": str(spec.num_buckets),
        "hoodie.bucket.index.hash.field": ",".join(spec.record_key_fields),
    }
    if spec.ordering_field:
        # v9 (Hudi 1.1) renamed the key; hudi-rs and Java read either.
        props["hoodie.table.ordering.fields" if v >= 9 else "hoodie.table.precombine.field"] = spec.ordering_field
    if v == 6:
        props["hoodie.table.keygenerator.class"] = keygen_class
        props["hoodie.compaction.record.merger.strategy"] = mode.strategy_id
    else:
        props["hoodie.table.initial.version"] = str(v)
        props["hoodie.timeline.path"] = "timeline"
        props["hoodie.timeline.history.path"] = "history"
        props["hoodie.table.keygenerator.type"] = keygen_type
        props["hoodie.record.merge.mode"] = mode.value
        props["hoodie.record.merge.strategy.id"] = mode.strategy_id
    if spec.create_schema:
        props["hoodie.table.create.schema"] = spec.create_schema
    return props


def create_table(storage: Storage, base_path: str, spec: TableSpec,
                 prepare: Callable[[dict[str, str]], dict[str, str]] | None = None) -> TableConfig:
    """Lay out a new, empty table.  ``hoodie.properties`` is written last and exclusively,
    so a crash part-way leaves no table (re-running init completes it) and two
    concurrent inits cannot both succeed.  ``prepare(props)`` runs once the folders exist and
    before that write (the metadata table is built there) and returns the properties to write."""
    props = table_properties(spec)
    if storage.exists(join(base_path, ".hoodie", "hoodie.properties")):
        # before anything is touched: prepare may clear leftovers a killed init left
        raise TableConfigError(f"{base_path} is already a Hudi table ({join(base_path, '.hoodie', 'hoodie.properties')} "
                               "exists)")
    layout = TimelineLayout.for_table_version(spec.table_version)
    for folder in (".hoodie", ".hoodie/.aux", ".hoodie/.temp", layout.timeline_dir):
        try:
            storage.makedirs(join(base_path, folder))
        except (NotADirectoryError, FileExistsError) as e:   # a file where a folder must go
            raise InvalidInputError(f"cannot create the table at {base_path}: part of that path is a file, "
                                    f"not a folder ({e.strerror})") from None
    if prepare is not None:
        props = prepare(props)
    write_properties(storage, base_path, props, create=True)
    return TableConfig.from_properties(props)
