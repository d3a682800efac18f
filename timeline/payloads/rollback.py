"""HoodieRollbackPlan (``rollback.requested``) and HoodieRollbackMetadata (completed ``rollback``).

Avro in both layouts.  ``InstantInfo`` (HoodieInstantInfo) lives here because the
rollback records introduced it; restore payloads reuse it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from timeline.payloads.avro_container import as_dict, read_record, require, write_record

PLAN_RECORD = "HoodieRollbackPlan"
METADATA_RECORD = "HoodieRollbackMetadata"


@dataclass(frozen=True)
class InstantInfo:
    """HoodieInstantInfo: an instant time and its action (e.g. ``deltacommit``)."""

    commit_time: str
    action: str

    def to_avro(self) -> dict[str, Any]:
        return {"commitTime": self.commit_time, "action": self.action}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "InstantInfo":
        return cls(rec.get("commitTime") or "", rec.get("action") or "")


@dataclass(frozen=True)
class RollbackRequest:
    """File operations in one file group.

    ``files_to_be_deleted`` are absolute paths.  A non-empty
    ``log_blocks_to_be_deleted`` (log file → size) means "append a rollback command
    block" (layout 1 MOR); ``fileId``/``latestBaseInstant`` are "" for pure deletions.
    """

    partition_path: str
    file_id: str | None = ""
    latest_base_instant: str | None = ""
    files_to_be_deleted: tuple[str, ...] = ()
    log_blocks_to_be_deleted: Mapping[str, int] | None = field(default_factory=dict)

    def to_avro(self) -> dict[str, Any]:
        return {
            "partitionPath": self.partition_path,
            "fileId": self.file_id,
            "latestBaseInstant": self.latest_base_instant,
            "filesToBeDeleted": list(self.files_to_be_deleted),
            "logBlocksToBeDeleted": as_dict(self.log_blocks_to_be_deleted),
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "RollbackRequest":
        return cls(
            partition_path=rec.get("partitionPath") or "",
            file_id=rec.get("fileId"),
            latest_base_instant=rec.get("latestBaseInstant"),
            files_to_be_deleted=tuple(rec.get("filesToBeDeleted") or ()),
            log_blocks_to_be_deleted=as_dict(rec.get("logBlocksToBeDeleted")),
        )


@dataclass(frozen=True)
class RollbackPlan:
    instant_to_rollback: InstantInfo | None
    rollback_requests: tuple[RollbackRequest, ...] | None = ()
    version: int | None = 1

    def to_avro(self) -> dict[str, Any]:
        reqs = self.rollback_requests
        return {
            "instantToRollback": None if self.instant_to_rollback is None else self.instant_to_rollback.to_avro(),
            # Hudi spells this field with a capital R.
            "RollbackRequests": None if reqs is None else [r.to_avro() for r in reqs],
            "version": self.version,
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "RollbackPlan":
        inst = rec.get("instantToRollback")
        reqs = rec.get("RollbackRequests")
        return cls(
            instant_to_rollback=None if inst is None else InstantInfo.from_avro(inst),
            rollback_requests=None if reqs is None else tuple(RollbackRequest.from_avro(r) for r in reqs),
            version=rec.get("version", 1),
        )


@dataclass(frozen=True)
class RollbackPartitionMetadata:
    partition_path: str
    success_delete_files: tuple[str, ...] = ()
    failed_delete_files: tuple[str, ...] = ()
    # files that received a rollback command block → their size afterwards
    rollback_log_files: Mapping[str, int] | None = None
    # log files the failed commit had written → size (older revision: writtenLogFiles)
    log_files_from_failed_commit: Mapping[str, int] | None = None

    def to_avro(self) -> dict[str, Any]:
        return {
            "partitionPath": self.partition_path,
            "successDeleteFiles": list(self.success_delete_files),
            "failedDeleteFiles": list(self.failed_delete_files),
            "rollbackLogFiles": as_dict(self.rollback_log_files),
            "logFilesFromFailedCommit": as_dict(self.log_files_from_failed_commit),
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "RollbackPartitionMetadata":
        return cls(
            partition_path=rec.get("partitionPath") or "",
            success_delete_files=tuple(rec.get("successDeleteFiles") or ()),
            failed_delete_files=tuple(rec.get("failedDeleteFiles") or ()),
            rollback_log_files=as_dict(rec.get("rollbackLogFiles")),
            log_files_from_failed_commit=as_dict(
                rec.get("logFilesFromFailedCommit", rec.get("writtenLogFiles"))),
        )


@dataclass(frozen=True)
class RollbackMetadata:
    start_rollback_time: str
    time_taken_in_millis: int
    total_files_deleted: int
    commits_rollback: tuple[str, ...]
    partition_metadata: Mapping[str, RollbackPartitionMetadata] = field(default_factory=dict)
    version: int | None = 1
    instants_rollback: tuple[InstantInfo, ...] = ()

    def to_avro(self) -> dict[str, Any]:
        return {
            "startRollbackTime": self.start_rollback_time,
            "timeTakenInMillis": self.time_taken_in_millis,
            "totalFilesDeleted": self.total_files_deleted,
            "commitsRollback": list(self.commits_rollback),
            "partitionMetadata": {p: m.to_avro() for p, m in self.partition_metadata.items()},
            "version": self.version,
            "instantsRollback": [i.to_avro() for i in self.instants_rollback],
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any], where: str = "") -> "RollbackMetadata":
        return cls(
            start_rollback_time=require(rec, "startRollbackTime", where, "rollback metadata"),
            time_taken_in_millis=rec.get("timeTakenInMillis") or 0,
            total_files_deleted=rec.get("totalFilesDeleted") or 0,
            commits_rollback=tuple(rec.get("commitsRollback") or ()),
            partition_metadata={p: RollbackPartitionMetadata.from_avro(m)
                                for p, m in (rec.get("partitionMetadata") or {}).items()},
            version=rec.get("version", 1),
            instants_rollback=tuple(InstantInfo.from_avro(i) for i in rec.get("instantsRollback") or ()),
        )


def decode_rollback_plan(data: bytes, where: str) -> RollbackPlan:
    return RollbackPlan.from_avro(read_record(data, where, "rollback plan", (PLAN_RECORD,)))


def encode_rollback_plan(plan: RollbackPlan) -> bytes:
    return write_record(PLAN_RECORD, plan.to_avro(), "rollback plan")


def decode_rollback_metadata(data: bytes, where: str) -> RollbackMetadata:
    return RollbackMetadata.from_avro(read_record(data, where, "rollback metadata", (METADATA_RECORD,)), where)


def encode_rollback_metadata(md: RollbackMetadata) -> bytes:
    return write_record(METADATA_RECORD, md.to_avro(), f"rollback metadata {md.start_rollback_time}")
