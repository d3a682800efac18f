"""The typed view of ``hoodie.properties`` that the rest of tablesvc works with."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from tablesvc.errors import TableConfigError, UnsupportedTableError
from timeline.instant import TimelineLayout

SUPPORTED_VERSIONS = (6, 8, 9)

EVENT_TIME_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
CUSTOM_STRATEGY = "1897ef5f-18bc-4557-939c-9d6a8afd1519"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"


class TableType(enum.Enum):
    MERGE_ON_READ = "MERGE_ON_READ"
    COPY_ON_WRITE = "COPY_ON_WRITE"

    @classmethod
    def parse(cls, text: str) -> "TableType":
        t = text.strip().upper()
        t = {"MOR": "MERGE_ON_READ", "COW": "COPY_ON_WRITE"}.get(t, t)
        try:
            return cls(t)
        except ValueError:
            raise TableConfigError(f"hoodie.table.type: unknown table type {text!r}") from None


class MergeMode(enum.Enum):
    """How two versions of a record combine (``hoodie.record.merge.mode``)."""

    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
    CUSTOM = "CUSTOM"

    @property
    def strategy_id(self) -> str:
        return {MergeMode.EVENT_TIME_ORDERING: EVENT_TIME_STRATEGY,
                MergeMode.COMMIT_TIME_ORDERING: COMMIT_TIME_STRATEGY,
                MergeMode.CUSTOM: CUSTOM_STRATEGY}[self]

    @property
    def payload_class(self) -> str:
        return OVERWRITE_PAYLOAD if self is MergeMode.COMMIT_TIME_ORDERING else DEFAULT_PAYLOAD


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    raw = props.get(key)
    if raw is None or raw.strip() == "":
        return default
    v = raw.strip().lower()
    if v not in ("true", "false"):
        raise TableConfigError(f"{key}: expected true or false, got {raw!r}")
    return v == "true"


def _list(props: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = props.get(key, "")
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def infer_merge_mode(props: Mapping[str, str], version: int, ordering_field: str | None) -> MergeMode:
    """Merge mode the way hudi-rs and Java infer it for every table version."""
    explicit = props.get("hoodie.record.merge.mode", "").strip()
    if explicit:
        try:
            return MergeMode(explicit.upper())
        except ValueError:
            raise TableConfigError(f"hoodie.record.merge.mode: unknown value {explicit!r}") from None
    if version >= 8:
        strategy = props.get("hoodie.record.merge.strategy.id", "").strip()
        by_id = {EVENT_TIME_STRATEGY: MergeMode.EVENT_TIME_ORDERING,
                 COMMIT_TIME_STRATEGY: MergeMode.COMMIT_TIME_ORDERING}
        if strategy in by_id:
            return by_id[strategy]
    payload = props.get("hoodie.compaction.payload.class", "").strip()
    if payload:
        if payload == DEFAULT_PAYLOAD or payload.endswith(".EventTimeAvroPayload"):
            return MergeMode.EVENT_TIME_ORDERING
        if payload == OVERWRITE_PAYLOAD:
            return MergeMode.COMMIT_TIME_ORDERING
        return MergeMode.CUSTOM
    return MergeMode.EVENT_TIME_ORDERING if ordering_field else MergeMode.COMMIT_TIME_ORDERING


@dataclass(frozen=True)
class TableConfig:
    name: str
    database: str
    table_type: TableType
    version: int
    layout: TimelineLayout
    record_key_fields: tuple[str, ...]
    ordering_field: str | None
    partition_fields: tuple[str, ...]
    hive_style_partitioning: bool
    url_encode_partitions: bool
    populate_meta_fields: bool
    drop_partition_columns: bool
    merge_mode: MergeMode
    timezone: str
    base_file_format: str
    metadata_partitions: tuple[str, ...]
    key_generator: str
    create_schema: str | None
    props: Mapping[str, str] = field(repr=False, compare=False)

    @classmethod
    def from_properties(cls, props: Mapping[str, str], where: str = "hoodie.properties") -> "TableConfig":
        def need(key: str) -> str:
            value = props.get(key, "").strip()
            if not value:
                raise TableConfigError(f"{where}: required key {key} is missing")
            return value

        name = need("hoodie.table.name")
        version_raw = need("hoodie.table.version")
        if not version_raw.isdigit():
            raise TableConfigError(f"{where}: hoodie.table.version is not a number: {version_raw!r}")
        version = int(version_raw)
        if version not in SUPPORTED_VERSIONS:
            raise UnsupportedTableError(f"{where}: table version {version} is not supported (only 6, 8 and 9)")
        layout_raw = props.get("hoodie.timeline.layout.version", "").strip()
        expected = TimelineLayout.for_table_version(version)
        if layout_raw and layout_raw != str(expected.value):
            raise TableConfigError(f"{where}: hoodie.timeline.layout.version={layout_raw} does not match table "
                                   f"version {version} (expected {expected.value})")
        ordering = _list(props, "hoodie.table.ordering.fields") or _list(props, "hoodie.table.precombine.field")
        if len(ordering) > 1:
            raise UnsupportedTableError(f"{where}: several ordering fields {','.join(ordering)} are not supported")
        ordering_field = ordering[0] if ordering else None
        partitions = tuple(p.split(":")[0] for p in _list(props, "hoodie.table.partition.fields"))
        keygen = (props.get("hoodie.table.keygenerator.type") or props.get("hoodie.table.keygenerator.class") or "")
        create_schema = props.get("hoodie.table.create.schema") or None
        try:
            table_type = TableType.parse(need("hoodie.table.type"))
        except TableConfigError as e:
            message = str(e)
            raise TableConfigError(message if message.startswith(where) else f"{where}: {message}") from None
        return cls(
            name=name,
            database=props.get("hoodie.database.name", ""),
            table_type=table_type,
            version=version,
            layout=expected,
            record_key_fields=_list(props, "hoodie.table.recordkey.fields"),
            ordering_field=ordering_field,
            partition_fields=partitions,
            hive_style_partitioning=_bool(props, "hoodie.datasource.write.hive_style_partitioning", False),
            url_encode_partitions=_bool(props, "hoodie.datasource.write.partitionpath.urlencode", False),
            populate_meta_fields=_bool(props, "hoodie.populate.meta.fields", True),
            drop_partition_columns=_bool(props, "hoodie.datasource.write.drop.partition.columns", False),
            merge_mode=infer_merge_mode(props, version, ordering_field),
            timezone=(props.get("hoodie.table.timeline.timezone") or "UTC").strip().upper(),
            base_file_format=(props.get("hoodie.table.base.file.format") or "PARQUET").strip().upper(),
            metadata_partitions=_list(props, "hoodie.table.metadata.partitions"),
            key_generator=keygen.strip(),
            create_schema=create_schema,
            props=MappingProxyType(dict(props)),
        )

    @property
    def is_mor(self) -> bool:
        return self.table_type is TableType.MERGE_ON_READ

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)

    @property
    def has_metadata_table(self) -> bool:
        """True when readers list files through ``.hoodie/metadata`` (hudi-rs: v8+ with 'files')."""
        return "files" in self.metadata_partitions or \
            self.props.get("hoodie.metadata.enable", "").strip().lower() == "true"

    def summary(self) -> dict[str, object]:
        return {
            "name": self.name, "database": self.database, "type": self.table_type.value,
            "version": self.version, "timeline_layout": self.layout.value,
            "record_key_fields": list(self.record_key_fields), "ordering_field": self.ordering_field,
            "partition_fields": list(self.partition_fields), "hive_style": self.hive_style_partitioning,
            "merge_mode": self.merge_mode.value, "timezone": self.timezone,
            "metadata_table": self.has_metadata_table, "key_generator": self.key_generator,
        }
