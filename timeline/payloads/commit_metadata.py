"""HoodieCommitMetadata / HoodieReplaceCommitMetadata: JSON in layout 1, Avro in layout 2.

One dataclass, :class:`CommitMetadata`, covers both: a replace commit is the same
structure plus ``partitionToReplaceFileIds``.  ``partition_to_replace_file_ids`` is
``None`` for plain commit metadata and a dict (maybe empty) for replace metadata,
which decides the JSON key and the Avro record name on encoding.

Layout 1 JSON is written the way Jackson's default pretty printer writes it in Hudi
0.14/0.15 (same key order, spacing and null handling), so that a re-encoded Hudi
file comes out byte-for-byte identical and every reader (Java, hudi-rs) sees
exactly the shape it already knows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from timeline.errors import PayloadError
from timeline.instant import TimelineLayout
from timeline.payloads.avro_container import (
    as_tuple, is_avro_container, read_record, write_record,
)

COMMIT_RECORD = "HoodieCommitMetadata"
REPLACE_RECORD = "HoodieReplaceCommitMetadata"

# (python attribute, Hudi field) for the write-stat fields we model explicitly.
_STAT_FIELDS: tuple[tuple[str, str], ...] = (
    ("file_id", "fileId"),
    ("path", "path"),
    ("prev_commit", "prevCommit"),
    ("partition_path", "partitionPath"),
    ("num_writes", "numWrites"),
    ("num_deletes", "numDeletes"),
    ("num_update_writes", "numUpdateWrites"),
    ("num_inserts", "numInserts"),
    ("total_write_bytes", "totalWriteBytes"),
    ("total_write_errors", "totalWriteErrors"),
    ("file_size_in_bytes", "fileSizeInBytes"),
    ("total_log_records", "totalLogRecords"),
    ("total_log_files_compacted", "totalLogFilesCompacted"),
    ("total_log_size_compacted", "totalLogSizeCompacted"),
    ("total_updated_records_compacted", "totalUpdatedRecordsCompacted"),
    ("total_log_blocks", "totalLogBlocks"),
    ("total_corrupt_log_block", "totalCorruptLogBlock"),
    ("total_rollback_blocks", "totalRollbackBlocks"),
    ("total_log_read_time_ms", "totalLogReadTimeMs"),
    ("log_version", "logVersion"),
    ("log_offset", "logOffset"),
    ("base_file", "baseFile"),
    ("log_files", "logFiles"),
    ("prev_base_file", "prevBaseFile"),
    ("runtime_stats", "runtimeStats"),
)
_STAT_KNOWN = frozenset(h for _, h in _STAT_FIELDS)

# Key order of HoodieWriteStat as Jackson writes it (Hudi 0.15), then the keys that
# HoodieDeltaWriteStat (log writes) appends.  Keys outside both lists that carry a
# value are appended after them, so nothing is lost.
_JSON_STAT_ORDER = (
    "fileId", "path", "cdcStats", "prevCommit", "numWrites", "numDeletes", "numUpdateWrites",
    "numInserts", "totalWriteBytes", "totalWriteErrors", "tempPath", "partitionPath",
    "totalLogRecords", "totalLogFilesCompacted", "totalLogSizeCompacted",
    "totalUpdatedRecordsCompacted", "totalLogBlocks", "totalCorruptLogBlock",
    "totalRollbackBlocks", "fileSizeInBytes", "minEventTime", "maxEventTime", "runtimeStats",
)
_JSON_DELTA_ORDER = ("logVersion", "logOffset", "baseFile", "logFiles", "recordsStats")
_JSON_RUNTIME_ORDER = ("totalScanTime", "totalUpsertTime", "totalCreateTime")
# Jackson serialises HoodieDeltaWriteStat's unset Option<recordsStats> like this.
_EMPTY_RECORDS_STATS = {"val": None}


@dataclass(frozen=True)
class WriteStat:
    """Statistics of one file written by a commit (HoodieWriteStat / HoodieDeltaWriteStat).

    Counters default to 0 like Java's primitive longs.  Fields we do not model
    (cdcStats, tempPath, min/maxEventTime, totalLogFiles, numUpdates, future ones)
    live in ``extra`` under their Hudi names; null values are not kept there
    because both encoders write null for an absent known field anyway.
    """

    file_id: str | None = None
    path: str | None = None
    prev_commit: str | None = "null"  # Hudi spells "no previous commit" as the string "null"
    partition_path: str | None = None
    num_writes: int | None = 0
    num_deletes: int | None = 0
    num_update_writes: int | None = 0
    num_inserts: int | None = 0
    total_write_bytes: int | None = 0
    total_write_errors: int | None = 0
    file_size_in_bytes: int | None = 0
    total_log_records: int | None = 0
    total_log_files_compacted: int | None = 0
    total_log_size_compacted: int | None = 0
    total_updated_records_compacted: int | None = 0
    total_log_blocks: int | None = 0
    total_corrupt_log_block: int | None = 0
    total_rollback_blocks: int | None = 0
    total_log_read_time_ms: int | None = None  # 1.x only; absent from 0.15 JSON
    # Log writes only (HoodieDeltaWriteStat); None on base-file writes.
    log_version: int | None = None
    log_offset: int | None = None
    base_file: str | None = None
    log_files: tuple[str, ...] | None = None
    prev_base_file: str | None = None  # 1.x compaction stats
    runtime_stats: Mapping[str, int | None] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_log_write(self) -> bool:
        """True for a HoodieDeltaWriteStat (a write into a log file)."""
        return (self.log_version is not None or self.log_offset is not None
                or self.base_file is not None or self.log_files is not None
                or "recordsStats" in self.extra)

    def get(self, hudi_name: str, default: Any = None) -> Any:
        """Any field by its Hudi name, modelled or not."""
        value = self.to_avro().get(hudi_name)
        return default if value is None else value

    def to_avro(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for attr, name in _STAT_FIELDS:
            value = getattr(self, attr)
            if attr == "log_files":
                value = None if value is None else list(value)
            elif attr == "runtime_stats":
                value = None if value is None else dict(value)
            out[name] = value
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "WriteStat":
        kwargs: dict[str, Any] = {}
        for attr, name in _STAT_FIELDS:
            if name in rec:
                value = rec[name]
                if attr == "log_files":
                    value = as_tuple(value)
                elif attr == "runtime_stats" and value is not None:
                    value = dict(value)
                kwargs[attr] = value
        extra = {k: v for k, v in rec.items() if k not in _STAT_KNOWN and v is not None}
        # The unset Option Jackson writes on every delta stat is noise, not data;
        # keep only the fact that the stat is a delta stat (logVersion says so).
        if extra.get("recordsStats") == _EMPTY_RECORDS_STATS and rec.get("logVersion") is not None:
            del extra["recordsStats"]
        return cls(**kwargs, extra=extra)


@dataclass(frozen=True)
class CommitMetadata:
    """HoodieCommitMetadata, or HoodieReplaceCommitMetadata when
    ``partition_to_replace_file_ids`` is not None.

    ``version`` exists only in the Avro form (Hudi 1.x writes null there); ``extra``
    holds unknown top-level JSON keys.
    """

    partition_to_write_stats: Mapping[str, tuple[WriteStat, ...]] | None = field(default_factory=dict)
    compacted: bool | None = False
    extra_metadata: Mapping[str, str] | None = field(default_factory=dict)
    operation_type: str | None = "UNKNOWN"
    partition_to_replace_file_ids: Mapping[str, tuple[str, ...]] | None = None
    version: int | None = 1
    extra: Mapping[str, Any] = field(default_factory=dict)

    # -- conveniences -----------------------------------------------------------------
    @property
    def schema(self) -> str | None:
        """The writer Avro schema (``extraMetadata["schema"]``), without meta fields."""
        value = (self.extra_metadata or {}).get("schema")
        return value or None

    @property
    def is_replace(self) -> bool:
        return self.partition_to_replace_file_ids is not None

    def write_stats(self) -> Iterator[WriteStat]:
        for stats in (self.partition_to_write_stats or {}).values():
            yield from stats

    def partitions(self) -> tuple[str, ...]:
        return tuple(self.partition_to_write_stats or {})

    def replaced_file_ids(self) -> Iterator[tuple[str, str]]:
        """(partition, fileId) of every file group this replace commit hides."""
        for partition, ids in (self.partition_to_replace_file_ids or {}).items():
            for fid in ids:
                yield partition, fid

    # -- dict conversion ----------------------------------------------------------------
    def to_avro(self) -> dict[str, Any]:
        stats = self.partition_to_write_stats
        out: dict[str, Any] = {
            "partitionToWriteStats": None if stats is None else {
                p: [s.to_avro() for s in ss] for p, ss in stats.items()},
            "compacted": self.compacted,
            "extraMetadata": None if self.extra_metadata is None else dict(self.extra_metadata),
            "version": self.version,
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            out["partitionToReplaceFileIds"] = {
                p: list(ids) for p, ids in self.partition_to_replace_file_ids.items()}
        return out

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any], replace: bool | None = None) -> "CommitMetadata":
        """``replace``: True forces replace metadata (missing ids → {}), False drops the
        ids, None keeps whatever the record says."""
        stats = rec.get("partitionToWriteStats")
        replace_ids = rec.get("partitionToReplaceFileIds")
        if replace is True and replace_ids is None:
            replace_ids = {}
        elif replace is False:
            replace_ids = None
        known = {"partitionToWriteStats", "compacted", "extraMetadata", "version",
                 "operationType", "partitionToReplaceFileIds"}
        kwargs: dict[str, Any] = {}
        if "version" in rec:
            kwargs["version"] = rec["version"]
        if "compacted" in rec:
            kwargs["compacted"] = rec["compacted"]
        if "operationType" in rec:
            kwargs["operation_type"] = rec["operationType"]
        return cls(
            partition_to_write_stats=({} if "partitionToWriteStats" not in rec else None) if stats is None else {
                p: tuple(WriteStat.from_avro(s) for s in (ss or ())) for p, ss in stats.items()},
            extra_metadata=None if rec.get("extraMetadata") is None and "extraMetadata" in rec
            else dict(rec.get("extraMetadata") or {}),
            partition_to_replace_file_ids=None if replace_ids is None else {
                p: tuple(ids or ()) for p, ids in replace_ids.items()},
            extra={k: v for k, v in rec.items() if k not in known},
            **kwargs,
        )


# -- decoding --------------------------------------------------------------------------------
def decode_commit_metadata(data: bytes, layout: TimelineLayout, where: str,
                           replace: bool | None = None) -> CommitMetadata:
    """Commit/deltacommit/replacecommit metadata (also inflight workload profiles).

    Empty bytes give empty metadata (Hudi tolerates empty inflight files).  The
    content decides the format: layout 1 holds JSON and layout 2 Avro, but Java 1.x
    also accepts legacy JSON in a layout 2 timeline, so we sniff instead of failing.
    """
    kind = "replace commit metadata" if replace else "commit metadata"
    if not data.strip():
        return CommitMetadata(partition_to_replace_file_ids={} if replace else None)
    if is_avro_container(data):
        rec = read_record(data, where, kind, (COMMIT_RECORD, REPLACE_RECORD))
        return CommitMetadata.from_avro(rec, replace)
    try:
        rec = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        expected = "JSON" if layout is TimelineLayout.V1 else "an Avro container or legacy JSON"
        raise PayloadError(f"{where}: cannot decode {kind}: expected {expected}: {e}") from None
    if not isinstance(rec, dict):
        raise PayloadError(f"{where}: cannot decode {kind}: JSON top level is {type(rec).__name__}, not an object")
    try:
        return CommitMetadata.from_avro(rec, replace)
    except (TypeError, AttributeError, ValueError) as e:
        raise PayloadError(f"{where}: cannot decode {kind}: unexpected JSON structure: {e}") from None


# -- encoding --------------------------------------------------------------------------------
def encode_commit_metadata(md: CommitMetadata, layout: TimelineLayout) -> bytes:
    """Layout 1: Jackson-style JSON; layout 2: Avro container with the full schema."""
    if layout is TimelineLayout.V1:
        return to_json(md).encode("utf-8")
    record = REPLACE_RECORD if md.is_replace else COMMIT_RECORD
    rec = md.to_avro()
    stats = rec["partitionToWriteStats"]
    if stats is not None:
        # Avro records take only schema fields; unknown write-stat keys cannot travel.
        rec["partitionToWriteStats"] = {p: [_avro_stat(s) for s in ss] for p, ss in stats.items()}
    return write_record(record, rec, f"{record} ({md.operation_type})")


_AVRO_STAT_FIELDS: tuple[str, ...] = (
    "fileId", "path", "prevCommit", "numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes",
    "totalWriteErrors", "partitionPath", "totalLogRecords", "totalLogFiles",
    "totalUpdatedRecordsCompacted", "numInserts", "totalLogBlocks", "totalCorruptLogBlock",
    "totalRollbackBlocks", "fileSizeInBytes", "logVersion", "logOffset", "baseFile", "logFiles",
    "cdcStats", "prevBaseFile", "minEventTime", "maxEventTime", "runtimeStats",
    "totalLogFilesCompacted", "totalLogReadTimeMs", "totalLogSizeCompacted", "tempPath", "numUpdates",
)


def _avro_stat(stat: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: stat.get(k) for k in _AVRO_STAT_FIELDS}
    rt = out["runtimeStats"]
    if rt is not None:
        out["runtimeStats"] = {k: rt.get(k) for k in ("totalScanTime", "totalCreateTime", "totalUpsertTime")}
    return out


def to_json(md: CommitMetadata) -> str:
    """The layout 1 JSON text, formatted like Jackson's DefaultPrettyPrinter."""
    top: dict[str, Any] = {}
    stats = md.partition_to_write_stats
    top["partitionToWriteStats"] = None if stats is None else {
        p: [_json_stat(s) for s in ss] for p, ss in stats.items()}
    top["compacted"] = md.compacted
    top["extraMetadata"] = None if md.extra_metadata is None else dict(md.extra_metadata)
    top["operationType"] = md.operation_type
    if md.partition_to_replace_file_ids is not None:
        top["partitionToReplaceFileIds"] = {p: list(v) for p, v in md.partition_to_replace_file_ids.items()}
    for k, v in md.extra.items():
        top.setdefault(k, v)
    return _jackson(top, 0)


def _json_stat(stat: WriteStat) -> dict[str, Any]:
    rec = stat.to_avro()
    out: dict[str, Any] = {k: rec.get(k) for k in _JSON_STAT_ORDER}
    rt = out["runtimeStats"]
    if rt is not None:
        out["runtimeStats"] = {k: rt[k] for k in _JSON_RUNTIME_ORDER if k in rt}
        out["runtimeStats"].update({k: v for k, v in rt.items() if k not in _JSON_RUNTIME_ORDER})
    if stat.is_log_write:
        for k in _JSON_DELTA_ORDER:
            out[k] = rec.get(k)
        if out["recordsStats"] is None:
            out["recordsStats"] = dict(_EMPTY_RECORDS_STATS)
    for k, v in rec.items():
        if k not in out and v is not None:
            out[k] = v
    return out


_CONTROL = re.compile(r"\\u00([0-9a-f]{2})")


def _json_string(s: str) -> str:
    # Python and Jackson escape the same characters; Jackson prints hex in upper case.
    return _CONTROL.sub(lambda m: "\\u00" + m.group(1).upper(), json.dumps(s, ensure_ascii=False))


def _jackson(value: Any, depth: int) -> str:
    """Jackson DefaultPrettyPrinter: objects one key per line, indented two spaces per
    object level, ``"k" : v``; arrays inline as ``[ a, b ]``; empty ones ``{ }``/``[ ]``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, Mapping):
        if not value:
            return "{ }"
        pad = "  " * (depth + 1)
        items = [f"{pad}{_json_string(str(k))} : {_jackson(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(_jackson(v, depth) for v in value) + " ]"
    raise PayloadError(f"commit metadata: cannot encode JSON value of type {type(value).__name__}")
