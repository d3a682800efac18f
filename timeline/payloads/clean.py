"""HoodieCleanerPlan (``clean.requested``) and HoodieCleanMetadata (completed ``clean``).

Avro in both layouts.  We write version 2 of both: the plan lists full file paths
in ``filePathsToBeDeletedPerPartition`` (the version 1 field
``filesToBeDeletedPerPartition`` is left null), and the metadata's three file
lists hold file names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from timeline.payloads.avro_container import (
    as_dict, as_list, as_tuple, map_of_lists, map_of_tuples, read_record, require, write_record,
)

PLAN_RECORD = "HoodieCleanerPlan"
METADATA_RECORD = "HoodieCleanMetadata"
LATEST_CLEAN_PLAN_VERSION = 2
LATEST_CLEAN_METADATA_VERSION = 2
POLICIES = ("KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS", "KEEP_LATEST_BY_HOURS")


@dataclass(frozen=True)
class ActionInstant:
    """HoodieActionInstant: an instant as (timestamp, action, state)."""

    timestamp: str
    action: str
    state: str

    def to_avro(self) -> dict[str, Any]:
        return {"timestamp": self.timestamp, "action": self.action, "state": self.state}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "ActionInstant":
        return cls(rec.get("timestamp") or "", rec.get("action") or "", rec.get("state") or "")


@dataclass(frozen=True)
class CleanFileInfo:
    file_path: str | None
    is_bootstrap_base_file: bool | None = False

    def to_avro(self) -> dict[str, Any]:
        return {"filePath": self.file_path, "isBootstrapBaseFile": self.is_bootstrap_base_file}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "CleanFileInfo":
        return cls(rec.get("filePath"), rec.get("isBootstrapBaseFile"))


@dataclass(frozen=True)
class CleanerPlan:
    policy: str
    earliest_instant_to_retain: ActionInstant | None = None
    last_completed_commit_timestamp: str = ""
    file_paths_to_be_deleted_per_partition: Mapping[str, tuple[CleanFileInfo, ...]] | None = \
        field(default_factory=dict)
    partitions_to_be_deleted: tuple[str, ...] | None = None
    version: int | None = LATEST_CLEAN_PLAN_VERSION
    # Deprecated version-1 field: kept only so an old plan survives a round trip.
    files_to_be_deleted_per_partition: Mapping[str, tuple[str, ...]] | None = None
    extra_metadata: Mapping[str, str] | None = None

    def files_to_delete(self) -> dict[str, tuple[str, ...]]:
        """Paths per partition, from whichever field the plan version uses."""
        if self.file_paths_to_be_deleted_per_partition is not None:
            return {p: tuple(i.file_path for i in infos if i.file_path)
                    for p, infos in self.file_paths_to_be_deleted_per_partition.items()}
        return {p: tuple(v) for p, v in (self.files_to_be_deleted_per_partition or {}).items()}

    def to_avro(self) -> dict[str, Any]:
        fp = self.file_paths_to_be_deleted_per_partition
        return {
            "earliestInstantToRetain": None if self.earliest_instant_to_retain is None
            else self.earliest_instant_to_retain.to_avro(),
            "lastCompletedCommitTimestamp": self.last_completed_commit_timestamp,
            "policy": self.policy,
            "filesToBeDeletedPerPartition": map_of_lists(self.files_to_be_deleted_per_partition),
            "version": self.version,
            "filePathsToBeDeletedPerPartition": None if fp is None else {
                p: [i.to_avro() for i in infos] for p, infos in fp.items()},
            "partitionsToBeDeleted": as_list(self.partitions_to_be_deleted),
            "extraMetadata": as_dict(self.extra_metadata),
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any], where: str = "") -> "CleanerPlan":
        eitr = rec.get("earliestInstantToRetain")
        fp = rec.get("filePathsToBeDeletedPerPartition")
        return cls(
            policy=require(rec, "policy", where, "cleaner plan"),
            earliest_instant_to_retain=None if eitr is None else ActionInstant.from_avro(eitr),
            last_completed_commit_timestamp=rec.get("lastCompletedCommitTimestamp") or "",
            file_paths_to_be_deleted_per_partition=None if fp is None else {
                p: tuple(CleanFileInfo.from_avro(i) for i in infos or ()) for p, infos in fp.items()},
            partitions_to_be_deleted=as_tuple(rec.get("partitionsToBeDeleted")),
            version=rec.get("version", 1),
            files_to_be_deleted_per_partition=map_of_tuples(rec.get("filesToBeDeletedPerPartition")),
            extra_metadata=as_dict(rec.get("extraMetadata")),
        )


@dataclass(frozen=True)
class CleanPartitionMetadata:
    partition_path: str
    policy: str
    delete_path_patterns: tuple[str, ...] = ()
    success_delete_files: tuple[str, ...] = ()
    failed_delete_files: tuple[str, ...] = ()
    is_partition_deleted: bool | None = False

    def to_avro(self) -> dict[str, Any]:
        return {
            "partitionPath": self.partition_path,
            "policy": self.policy,
            "deletePathPatterns": list(self.delete_path_patterns),
            "successDeleteFiles": list(self.success_delete_files),
            "failedDeleteFiles": list(self.failed_delete_files),
            "isPartitionDeleted": self.is_partition_deleted,
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "CleanPartitionMetadata":
        return cls(
            partition_path=rec.get("partitionPath") or "",
            policy=rec.get("policy") or "",
            delete_path_patterns=tuple(rec.get("deletePathPatterns") or ()),
            success_delete_files=tuple(rec.get("successDeleteFiles") or ()),
            failed_delete_files=tuple(rec.get("failedDeleteFiles") or ()),
            is_partition_deleted=rec.get("isPartitionDeleted"),
        )


@dataclass(frozen=True)
class CleanMetadata:
    start_clean_time: str
    time_taken_in_millis: int
    total_files_deleted: int
    # Java's incremental cleaner starts its next scan from here: "" only if none.
    earliest_commit_to_retain: str
    partition_metadata: Mapping[str, CleanPartitionMetadata] = field(default_factory=dict)
    last_completed_commit_timestamp: str = ""
    policy: str = ""
    version: int | None = LATEST_CLEAN_METADATA_VERSION
    bootstrap_partition_metadata: Mapping[str, CleanPartitionMetadata] | None = None
    extra_metadata: Mapping[str, str] | None = None

    def to_avro(self) -> dict[str, Any]:
        bpm = self.bootstrap_partition_metadata
        return {
            "policy": self.policy,
            "startCleanTime": self.start_clean_time,
            "timeTakenInMillis": self.time_taken_in_millis,
            "totalFilesDeleted": self.total_files_deleted,
            "earliestCommitToRetain": self.earliest_commit_to_retain,
            "lastCompletedCommitTimestamp": self.last_completed_commit_timestamp,
            "partitionMetadata": {p: m.to_avro() for p, m in self.partition_metadata.items()},
            "version": self.version,
            "bootstrapPartitionMetadata": None if bpm is None else {p: m.to_avro() for p, m in bpm.items()},
            "extraMetadata": as_dict(self.extra_metadata),
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any], where: str = "") -> "CleanMetadata":
        bpm = rec.get("bootstrapPartitionMetadata")
        return cls(
            start_clean_time=require(rec, "startCleanTime", where, "clean metadata"),
            time_taken_in_millis=rec.get("timeTakenInMillis") or 0,
            total_files_deleted=rec.get("totalFilesDeleted") or 0,
            earliest_commit_to_retain=rec.get("earliestCommitToRetain") or "",
            partition_metadata={p: CleanPartitionMetadata.from_avro(m)
                                for p, m in (rec.get("partitionMetadata") or {}).items()},
            last_completed_commit_timestamp=rec.get("lastCompletedCommitTimestamp") or "",
            policy=rec.get("policy") or "",
            version=rec.get("version", 1),
            bootstrap_partition_metadata=None if bpm is None else {
                p: CleanPartitionMetadata.from_avro(m) for p, m in bpm.items()},
            extra_metadata=as_dict(rec.get("extraMetadata")),
        )


def decode_cleaner_plan(data: bytes, where: str) -> CleanerPlan:
    return CleanerPlan.from_avro(read_record(data, where, "cleaner plan", (PLAN_RECORD,)), where)


def encode_cleaner_plan(plan: CleanerPlan) -> bytes:
    return write_record(PLAN_RECORD, plan.to_avro(), "cleaner plan")


def decode_clean_metadata(data: bytes, where: str) -> CleanMetadata:
    return CleanMetadata.from_avro(read_record(data, where, "clean metadata", (METADATA_RECORD,)), where)


def encode_clean_metadata(md: CleanMetadata) -> bytes:
    return write_record(METADATA_RECORD, md.to_avro(), f"clean metadata {md.start_clean_time}")
