"""The less central payloads: requested replace / clustering plan, savepoint, restore,
indexing, plus the raw wrapper for files we do not interpret.

All are Avro in both layouts.  Table services mostly need to *read* these (a
pending clustering plan pins file groups; a savepoint pins file slices), so the
models are plain; encoders exist for round trips and tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from timeline.payloads.avro_container import (
    as_dict, as_list, as_tuple, field_names, read_container, read_record, require, write_record,
)
from timeline.payloads.rollback import InstantInfo, RollbackMetadata

REQUESTED_REPLACE_RECORD = "HoodieRequestedReplaceMetadata"
SAVEPOINT_RECORD = "HoodieSavepointMetadata"
RESTORE_PLAN_RECORD = "HoodieRestorePlan"
RESTORE_METADATA_RECORD = "HoodieRestoreMetadata"
INDEX_PLAN_RECORD = "HoodieIndexPlan"
INDEX_COMMIT_RECORD = "HoodieIndexCommitMetadata"


# -- clustering / requested replace -------------------------------------------------------
@dataclass(frozen=True)
class SliceInfo:
    """One file slice in a clustering group (paths may be absolute)."""

    file_id: str | None
    partition_path: str | None = None
    data_file_path: str | None = None
    delta_file_paths: tuple[str, ...] | None = ()
    bootstrap_file_path: str | None = None
    version: int | None = 1

    def to_avro(self) -> dict[str, Any]:
        return {"dataFilePath": self.data_file_path, "deltaFilePaths": as_list(self.delta_file_paths),
                "fileId": self.file_id, "partitionPath": self.partition_path,
                "bootstrapFilePath": self.bootstrap_file_path, "version": self.version}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "SliceInfo":
        return cls(rec.get("fileId"), rec.get("partitionPath"), rec.get("dataFilePath"),
                   as_tuple(rec.get("deltaFilePaths")), rec.get("bootstrapFilePath"), rec.get("version", 1))


@dataclass(frozen=True)
class ClusteringGroup:
    slices: tuple[SliceInfo, ...] | None = ()
    metrics: Mapping[str, float] | None = None
    num_output_file_groups: int | None = 1
    extra_metadata: Mapping[str, str] | None = None
    version: int | None = 1

    def to_avro(self) -> dict[str, Any]:
        return {"slices": None if self.slices is None else [s.to_avro() for s in self.slices],
                "metrics": as_dict(self.metrics), "numOutputFileGroups": self.num_output_file_groups,
                "extraMetadata": as_dict(self.extra_metadata), "version": self.version}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "ClusteringGroup":
        slices = rec.get("slices")
        return cls(None if slices is None else tuple(SliceInfo.from_avro(s) for s in slices),
                   as_dict(rec.get("metrics")), rec.get("numOutputFileGroups", 1),
                   as_dict(rec.get("extraMetadata")), rec.get("version", 1))


@dataclass(frozen=True)
class ClusteringPlan:
    input_groups: tuple[ClusteringGroup, ...] | None = ()
    # HoodieClusteringStrategy kept as its Avro dict (strategyClassName, strategyParams, version)
    strategy: Mapping[str, Any] | None = None
    extra_metadata: Mapping[str, str] | None = None
    version: int | None = 1
    preserve_hoodie_metadata: bool | None = None
    missing_schedule_partitions: tuple[str, ...] | None = None

    def to_avro(self) -> dict[str, Any]:
        groups = self.input_groups
        strategy = None if self.strategy is None else {
            "strategyClassName": self.strategy.get("strategyClassName"),
            "strategyParams": as_dict(self.strategy.get("strategyParams")),
            "version": self.strategy.get("version", 1)}
        return {"inputGroups": None if groups is None else [g.to_avro() for g in groups],
                "strategy": strategy, "extraMetadata": as_dict(self.extra_metadata),
                "version": self.version, "preserveHoodieMetadata": self.preserve_hoodie_metadata,
                "missingSchedulePartitions": as_list(self.missing_schedule_partitions)}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "ClusteringPlan":
        groups = rec.get("inputGroups")
        return cls(None if groups is None else tuple(ClusteringGroup.from_avro(g) for g in groups),
                   as_dict(rec.get("strategy")), as_dict(rec.get("extraMetadata")), rec.get("version", 1),
                   rec.get("preserveHoodieMetadata"), as_tuple(rec.get("missingSchedulePartitions")))


@dataclass(frozen=True)
class RequestedReplaceMetadata:
    """Content of ``replacecommit.requested`` / ``clustering.requested``.

    insert_overwrite writes a record with every field null; clustering fills
    ``clustering_plan`` (operation ``CLUSTER``).
    """

    operation_type: str | None = None
    clustering_plan: ClusteringPlan | None = None
    extra_metadata: Mapping[str, str] | None = None
    version: int | None = 1

    def file_ids(self) -> tuple[tuple[str | None, str | None], ...]:
        """(partition, fileId) of every file group a pending clustering pins."""
        plan = self.clustering_plan
        return tuple((s.partition_path, s.file_id)
                     for g in ((plan.input_groups if plan else None) or ()) for s in g.slices or ())

    def to_avro(self) -> dict[str, Any]:
        return {"operationType": self.operation_type,
                "clusteringPlan": None if self.clustering_plan is None else self.clustering_plan.to_avro(),
                "extraMetadata": as_dict(self.extra_metadata), "version": self.version}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "RequestedReplaceMetadata":
        plan = rec.get("clusteringPlan")
        return cls(rec.get("operationType"), None if plan is None else ClusteringPlan.from_avro(plan),
                   as_dict(rec.get("extraMetadata")), rec.get("version", 1))


def decode_requested_replace(data: bytes, where: str) -> RequestedReplaceMetadata:
    return RequestedReplaceMetadata.from_avro(
        read_record(data, where, "requested replace metadata", (REQUESTED_REPLACE_RECORD,)))


def encode_requested_replace(md: RequestedReplaceMetadata) -> bytes:
    return write_record(REQUESTED_REPLACE_RECORD, md.to_avro(), "requested replace metadata")


# -- savepoint ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SavepointMetadata:
    savepointed_by: str
    savepointed_at: int
    comments: str
    # partition → file names of the latest file slices as of the savepoint
    partition_metadata: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    version: int | None = 1

    def to_avro(self) -> dict[str, Any]:
        return {"savepointedBy": self.savepointed_by, "savepointedAt": self.savepointed_at,
                "comments": self.comments,
                "partitionMetadata": {p: {"partitionPath": p, "savepointDataFile": list(files)}
                                      for p, files in self.partition_metadata.items()},
                "version": self.version}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "SavepointMetadata":
        return cls(rec.get("savepointedBy") or "", rec.get("savepointedAt") or 0, rec.get("comments") or "",
                   {p: tuple((m or {}).get("savepointDataFile") or ())
                    for p, m in (rec.get("partitionMetadata") or {}).items()},
                   rec.get("version", 1))


def decode_savepoint_metadata(data: bytes, where: str) -> SavepointMetadata:
    return SavepointMetadata.from_avro(read_record(data, where, "savepoint metadata", (SAVEPOINT_RECORD,)))


def encode_savepoint_metadata(md: SavepointMetadata) -> bytes:
    return write_record(SAVEPOINT_RECORD, md.to_avro(), "savepoint metadata")


# -- restore ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RestorePlan:
    instants_to_rollback: tuple[InstantInfo, ...] = ()
    version: int | None = 2  # version 2 added savepointToRestoreTimestamp
    savepoint_to_restore_timestamp: str | None = None

    def to_avro(self) -> dict[str, Any]:
        return {"instantsToRollback": [i.to_avro() for i in self.instants_to_rollback],
                "version": self.version, "savepointToRestoreTimestamp": self.savepoint_to_restore_timestamp}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "RestorePlan":
        return cls(tuple(InstantInfo.from_avro(i) for i in rec.get("instantsToRollback") or ()),
                   rec.get("version", 1), rec.get("savepointToRestoreTimestamp"))


@dataclass(frozen=True)
class RestoreMetadata:
    start_restore_time: str
    time_taken_in_millis: int
    instants_to_rollback: tuple[str, ...] = ()
    # rolled-back instant → rollback metadata of each rollback that undid it
    hoodie_restore_metadata: Mapping[str, tuple[RollbackMetadata, ...]] = field(default_factory=dict)
    version: int | None = 1
    restore_instant_info: tuple[InstantInfo, ...] = ()
    extra_metadata: Mapping[str, str] | None = None

    def to_avro(self) -> dict[str, Any]:
        return {"startRestoreTime": self.start_restore_time, "timeTakenInMillis": self.time_taken_in_millis,
                "instantsToRollback": list(self.instants_to_rollback),
                "hoodieRestoreMetadata": {k: [m.to_avro() for m in v]
                                          for k, v in self.hoodie_restore_metadata.items()},
                "version": self.version,
                "restoreInstantInfo": [i.to_avro() for i in self.restore_instant_info],
                "extraMetadata": as_dict(self.extra_metadata)}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any], where: str = "") -> "RestoreMetadata":
        return cls(
            require(rec, "startRestoreTime", where, "restore metadata"),
            rec.get("timeTakenInMillis") or 0,
            tuple(rec.get("instantsToRollback") or ()),
            {k: tuple(RollbackMetadata.from_avro(m, where) for m in v or () if m is not None)
             for k, v in (rec.get("hoodieRestoreMetadata") or {}).items()},
            rec.get("version", 1),
            tuple(InstantInfo.from_avro(i) for i in rec.get("restoreInstantInfo") or ()),
            as_dict(rec.get("extraMetadata")),
        )


def decode_restore_plan(data: bytes, where: str) -> RestorePlan:
    return RestorePlan.from_avro(read_record(data, where, "restore plan", (RESTORE_PLAN_RECORD,)))


def encode_restore_plan(plan: RestorePlan) -> bytes:
    return write_record(RESTORE_PLAN_RECORD, plan.to_avro(), "restore plan")


def decode_restore_metadata(data: bytes, where: str) -> RestoreMetadata:
    return RestoreMetadata.from_avro(
        read_record(data, where, "restore metadata", (RESTORE_METADATA_RECORD,)), where)


def encode_restore_metadata(md: RestoreMetadata) -> bytes:
    return write_record(RESTORE_METADATA_RECORD, md.to_avro(), f"restore metadata {md.start_restore_time}")


# -- generic records (indexing) -----------------------------------------------------------------
def _plain(value: Any) -> Any:
    """Deep copy with tuples for arrays, so the record is safe to keep in a frozen value."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return value


def _avro_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _avro_value(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_avro_value(v) for v in value]
    return value


@dataclass(frozen=True)
class GenericPayload:
    """An Avro payload kept as its record (used for indexing plan / commit metadata).

    ``record_name`` is the short Hudi record name; encoding uses our schema of that
    name, so only fields that schema knows are written.
    """

    record_name: str
    record: Mapping[str, Any]

    def to_avro(self) -> dict[str, Any]:
        return _avro_value(self.record)

    @classmethod
    def from_avro(cls, record_name: str, rec: Mapping[str, Any]) -> "GenericPayload":
        return cls(record_name, _plain(rec))


def decode_generic(data: bytes, where: str, kind: str, record_names: tuple[str, ...]) -> GenericPayload:
    rec = read_container(data, where, kind)
    if rec.short_name not in record_names:
        read_record(data, where, kind, record_names)  # raises the standard mismatch error
    return GenericPayload.from_avro(rec.short_name, rec.record)


def decode_index_plan(data: bytes, where: str) -> GenericPayload:
    return decode_generic(data, where, "index plan", (INDEX_PLAN_RECORD,))


def decode_index_commit_metadata(data: bytes, where: str) -> GenericPayload:
    return decode_generic(data, where, "index commit metadata", (INDEX_COMMIT_RECORD,))


def encode_generic(payload: GenericPayload) -> bytes:
    rec = payload.to_avro()
    # Our schema decides what can be written; absent fields take their null/default.
    out = {name: rec.get(name) for name in field_names(payload.record_name)}
    return write_record(payload.record_name, out, payload.record_name)


# -- raw ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RawPayload:
    """Bytes of a timeline file whose content we do not interpret (e.g. schemacommit)."""

    data: bytes

    def to_bytes(self) -> bytes:
        return self.data
