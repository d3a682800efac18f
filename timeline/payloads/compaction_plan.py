"""HoodieCompactionPlan: content of ``compaction.requested`` and ``logcompaction.requested``.

Avro in both layouts.  We write plan version 2, where operations name files by
their file *names* (version 1 used absolute paths).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from timeline.payloads.avro_container import (
    as_dict, as_list, as_tuple, read_record, write_record,
)

RECORD = "HoodieCompactionPlan"
LATEST_PLAN_VERSION = 2
# Java's compactor reads TOTAL_LOG_FILES_SIZE from every operation's metrics
# (it becomes totalLogSizeCompacted), so a plan without it breaks the Java executor.
METRIC_KEYS = ("TOTAL_LOG_FILES", "TOTAL_IO_READ_MB", "TOTAL_IO_WRITE_MB", "TOTAL_IO_MB",
               "TOTAL_LOG_FILES_SIZE")
LOG_COMPACTION_EXECUTOR = "org.apache.hudi.table.action.compact.LogCompactionExecutionHelper"


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact."""

    base_instant_time: str | None
    file_id: str | None
    partition_path: str | None = None
    data_file_path: str | None = None  # base file name; None for a log-only slice
    delta_file_paths: tuple[str, ...] | None = ()  # log file names
    metrics: Mapping[str, float] | None = field(default_factory=dict)
    bootstrap_file_path: str | None = None

    def to_avro(self) -> dict[str, Any]:
        return {
            "baseInstantTime": self.base_instant_time,
            "deltaFilePaths": as_list(self.delta_file_paths),
            "dataFilePath": self.data_file_path,
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "metrics": None if self.metrics is None else {k: float(v) for k, v in self.metrics.items()},
            "bootstrapFilePath": self.bootstrap_file_path,
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "CompactionOperation":
        metrics = rec.get("metrics")
        return cls(
            base_instant_time=rec.get("baseInstantTime"),
            file_id=rec.get("fileId"),
            partition_path=rec.get("partitionPath"),
            data_file_path=rec.get("dataFilePath"),
            delta_file_paths=as_tuple(rec.get("deltaFilePaths")),
            metrics=None if metrics is None else {k: float(v) for k, v in metrics.items()},
            # renamed externalDataFilePath in Hudi 1.1; accept either spelling
            bootstrap_file_path=rec.get("bootstrapFilePath", rec.get("externalDataFilePath")),
        )


@dataclass(frozen=True)
class CompactionStrategy:
    """Executor override; log compaction names its executor here."""

    compactor_class_name: str | None = None
    strategy_params: Mapping[str, str] | None = None
    version: int | None = 1

    def to_avro(self) -> dict[str, Any]:
        return {"compactorClassName": self.compactor_class_name,
                "strategyParams": as_dict(self.strategy_params), "version": self.version}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "CompactionStrategy":
        return cls(rec.get("compactorClassName"), as_dict(rec.get("strategyParams")), rec.get("version", 1))


@dataclass(frozen=True)
class CompactionPlan:
    operations: tuple[CompactionOperation, ...] | None = ()
    extra_metadata: Mapping[str, str] | None = None
    version: int | None = LATEST_PLAN_VERSION
    strategy: CompactionStrategy | None = None
    preserve_hoodie_metadata: bool | None = False
    missing_schedule_partitions: tuple[str, ...] | None = ()

    def file_ids(self) -> tuple[tuple[str | None, str | None], ...]:
        """(partition, fileId) of every file group in the plan."""
        return tuple((op.partition_path, op.file_id) for op in self.operations or ())

    def to_avro(self) -> dict[str, Any]:
        return {
            "operations": None if self.operations is None else [op.to_avro() for op in self.operations],
            "extraMetadata": as_dict(self.extra_metadata),
            "version": self.version,
            "strategy": None if self.strategy is None else self.strategy.to_avro(),
            "preserveHoodieMetadata": self.preserve_hoodie_metadata,
            "missingSchedulePartitions": as_list(self.missing_schedule_partitions),
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "CompactionPlan":
        ops = rec.get("operations")
        strategy = rec.get("strategy")
        return cls(
            operations=None if ops is None else tuple(CompactionOperation.from_avro(o) for o in ops),
            extra_metadata=as_dict(rec.get("extraMetadata")),
            # A writer schema without the field means a version-1-era writer.
            version=rec.get("version", 1),
            strategy=None if strategy is None else CompactionStrategy.from_avro(strategy),
            preserve_hoodie_metadata=rec.get("preserveHoodieMetadata", False),
            missing_schedule_partitions=as_tuple(rec.get("missingSchedulePartitions")),
        )


def decode_compaction_plan(data: bytes, where: str) -> CompactionPlan:
    return CompactionPlan.from_avro(read_record(data, where, "compaction plan", (RECORD,)))


def encode_compaction_plan(plan: CompactionPlan) -> bytes:
    return write_record(RECORD, plan.to_avro(), "compaction plan")
