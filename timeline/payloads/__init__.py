"""Timeline payload codecs: what is inside each timeline file, as frozen dataclasses.

Entry points:

* :func:`decode_payload` — bytes of one timeline file → payload object (or ``None``
  for the files Hudi leaves empty), chosen by the instant's (action, state).
* :func:`encode_payload` — the inverse, for any payload object.
* per-kind ``decode_x(data, where)`` / ``encode_x(obj)`` functions re-exported below.

Dispatch policy (also in docs/payloads.md): an empty file decodes to ``None``
where Hudi writes empty files (requested commit/deltacommit, every inflight state,
requested replacecommit); a file that must hold a plan or metadata but is empty
raises :class:`PayloadError`.  ``schemacommit`` files, which hold no Avro/JSON
payload we model, come back as :class:`RawPayload` so callers can carry them
verbatim.  Non-empty inflight files are decoded by their content: JSON → commit
metadata, Avro → by the record name the writer embedded.
"""

from __future__ import annotations

from typing import Any, Union

from timeline.errors import PayloadError
from timeline.instant import Action, Instant, State, TimelineLayout
from timeline.payloads.avro_container import (
    AvroRecord, is_avro_container, read_container, schema_json, write_record,
)
from timeline.payloads.clean import (
    ActionInstant, CleanFileInfo, CleanMetadata, CleanPartitionMetadata, CleanerPlan,
    decode_clean_metadata, decode_cleaner_plan, encode_clean_metadata, encode_cleaner_plan,
)
from timeline.payloads.commit_metadata import (
    CommitMetadata, WriteStat, decode_commit_metadata, encode_commit_metadata,
)
from timeline.payloads.compaction_plan import (
    CompactionOperation, CompactionPlan, CompactionStrategy, decode_compaction_plan,
    encode_compaction_plan,
)
from timeline.payloads.others import (
    ClusteringGroup, ClusteringPlan, GenericPayload, RawPayload, RequestedReplaceMetadata,
    RestoreMetadata, RestorePlan, SavepointMetadata, SliceInfo,
    decode_index_commit_metadata, decode_index_plan, decode_requested_replace,
    decode_restore_metadata, decode_restore_plan, decode_savepoint_metadata, encode_generic,
    encode_requested_replace, encode_restore_metadata, encode_restore_plan,
    encode_savepoint_metadata,
)
from timeline.payloads.rollback import (
    InstantInfo, RollbackMetadata, RollbackPartitionMetadata, RollbackPlan, RollbackRequest,
    decode_rollback_metadata, decode_rollback_plan, encode_rollback_metadata, encode_rollback_plan,
)

# ReplaceCommitMetadata is CommitMetadata with partition_to_replace_file_ids set.
ReplaceCommitMetadata = CommitMetadata

Payload = Union[CommitMetadata, CompactionPlan, CleanerPlan, CleanMetadata, RollbackPlan,
                RollbackMetadata, RequestedReplaceMetadata, SavepointMetadata, RestorePlan,
                RestoreMetadata, GenericPayload, RawPayload]

__all__ = [
    "ActionInstant", "AvroRecord", "CleanFileInfo", "CleanMetadata", "CleanPartitionMetadata",
    "CleanerPlan", "ClusteringGroup", "ClusteringPlan", "CommitMetadata", "CompactionOperation",
    "CompactionPlan", "CompactionStrategy", "GenericPayload", "InstantInfo", "Payload", "RawPayload",
    "ReplaceCommitMetadata", "RequestedReplaceMetadata", "RestoreMetadata", "RestorePlan",
    "RollbackMetadata", "RollbackPartitionMetadata", "RollbackPlan", "RollbackRequest",
    "SavepointMetadata", "SliceInfo", "WriteStat",
    "decode_payload", "encode_payload", "decode_by_content",
    "decode_commit_metadata", "encode_commit_metadata",
    "decode_compaction_plan", "encode_compaction_plan",
    "decode_cleaner_plan", "encode_cleaner_plan", "decode_clean_metadata", "encode_clean_metadata",
    "decode_rollback_plan", "encode_rollback_plan", "decode_rollback_metadata", "encode_rollback_metadata",
    "decode_requested_replace", "encode_requested_replace",
    "decode_savepoint_metadata", "encode_savepoint_metadata",
    "decode_restore_plan", "encode_restore_plan", "decode_restore_metadata", "encode_restore_metadata",
    "decode_index_plan", "decode_index_commit_metadata", "encode_generic",
    "read_container", "write_record", "schema_json", "is_avro_container",
]

# Avro record (short name) → decoder, for files decoded by content.
_BY_RECORD = {
    "HoodieCommitMetadata": lambda d, w, lay: decode_commit_metadata(d, lay, w),
    "HoodieReplaceCommitMetadata": lambda d, w, lay: decode_commit_metadata(d, lay, w),
    "HoodieCompactionPlan": lambda d, w, lay: decode_compaction_plan(d, w),
    "HoodieCleanerPlan": lambda d, w, lay: decode_cleaner_plan(d, w),
    "HoodieCleanMetadata": lambda d, w, lay: decode_clean_metadata(d, w),
    "HoodieRollbackPlan": lambda d, w, lay: decode_rollback_plan(d, w),
    "HoodieRollbackMetadata": lambda d, w, lay: decode_rollback_metadata(d, w),
    "HoodieRequestedReplaceMetadata": lambda d, w, lay: decode_requested_replace(d, w),
    "HoodieSavepointMetadata": lambda d, w, lay: decode_savepoint_metadata(d, w),
    "HoodieRestorePlan": lambda d, w, lay: decode_restore_plan(d, w),
    "HoodieRestoreMetadata": lambda d, w, lay: decode_restore_metadata(d, w),
    "HoodieIndexPlan": lambda d, w, lay: decode_index_plan(d, w),
    "HoodieIndexCommitMetadata": lambda d, w, lay: decode_index_commit_metadata(d, w),
}


def decode_by_content(data: bytes, layout: TimelineLayout, where: str) -> Payload | None:
    """Decode a file whose kind is not fixed by its name (inflight files).

    Empty → None; Avro → by embedded record name; anything else is taken to be
    JSON commit metadata (the only JSON payload Hudi writes).
    """
    if not data.strip():
        return None
    if is_avro_container(data):
        name = read_container(data, where, "timeline payload").short_name
        decoder = _BY_RECORD.get(name)
        if decoder is None:
            raise PayloadError(f"{where}: cannot decode timeline payload: unknown Avro record {name}")
        return decoder(data, where, layout)
    return decode_commit_metadata(data, layout, where)


def _required(kind: str, decoder: Any):
    """Wrap a decoder for files that must not be empty."""
    def run(data: bytes, layout: TimelineLayout, where: str) -> Payload:
        if not data:
            raise PayloadError(f"{where}: cannot decode {kind}: file is empty")
        return decoder(data, where)
    return run


def _optional(data: bytes, layout: TimelineLayout, where: str) -> Payload | None:
    return decode_by_content(data, layout, where)


def _commit(replace: bool | None):
    def run(data: bytes, layout: TimelineLayout, where: str) -> CommitMetadata:
        return decode_commit_metadata(data, layout, where, replace=replace)
    return run


def _requested_replace(data: bytes, layout: TimelineLayout, where: str) -> Payload | None:
    # Hudi 0.x may leave replacecommit.requested empty for insert_overwrite.
    return decode_requested_replace(data, where) if data else None


def _raw(data: bytes, layout: TimelineLayout, where: str) -> RawPayload | None:
    return RawPayload(data) if data else None


_R, _I, _C = State.REQUESTED, State.INFLIGHT, State.COMPLETED
_DISPATCH = {
    (Action.COMMIT, _R): _optional, (Action.COMMIT, _I): _optional, (Action.COMMIT, _C): _commit(None),
    (Action.DELTA_COMMIT, _R): _optional, (Action.DELTA_COMMIT, _I): _optional,
    (Action.DELTA_COMMIT, _C): _commit(None),
    (Action.REPLACE_COMMIT, _R): _requested_replace, (Action.REPLACE_COMMIT, _I): _optional,
    (Action.REPLACE_COMMIT, _C): _commit(True),
    (Action.CLUSTERING, _R): _required("requested replace metadata", decode_requested_replace),
    (Action.CLUSTERING, _I): _optional,
    (Action.COMPACTION, _R): _required("compaction plan", decode_compaction_plan),
    (Action.COMPACTION, _I): _optional,
    (Action.LOG_COMPACTION, _R): _required("compaction plan", decode_compaction_plan),
    (Action.LOG_COMPACTION, _I): _optional,
    (Action.CLEAN, _R): _required("cleaner plan", decode_cleaner_plan), (Action.CLEAN, _I): _optional,
    (Action.CLEAN, _C): _required("clean metadata", decode_clean_metadata),
    (Action.ROLLBACK, _R): _required("rollback plan", decode_rollback_plan), (Action.ROLLBACK, _I): _optional,
    (Action.ROLLBACK, _C): _required("rollback metadata", decode_rollback_metadata),
    (Action.SAVEPOINT, _I): _optional,
    (Action.SAVEPOINT, _C): _required("savepoint metadata", decode_savepoint_metadata),
    (Action.RESTORE, _R): _required("restore plan", decode_restore_plan), (Action.RESTORE, _I): _optional,
    (Action.RESTORE, _C): _required("restore metadata", decode_restore_metadata),
    (Action.INDEXING, _R): _required("index plan", decode_index_plan), (Action.INDEXING, _I): _optional,
    (Action.INDEXING, _C): _required("index commit metadata", decode_index_commit_metadata),
    (Action.SCHEMA_COMMIT, _R): _raw, (Action.SCHEMA_COMMIT, _I): _raw, (Action.SCHEMA_COMMIT, _C): _raw,
}


def decode_payload(instant: Instant, data: bytes, layout: TimelineLayout, where: str = "") -> Payload | None:
    """Decode one timeline file, choosing the codec from the instant's action and state.

    ``where`` names the file in error messages (defaults to the instant's file name).
    """
    where = where or instant.file_name()
    decoder = _DISPATCH.get((instant.action, instant.state))
    if decoder is None:  # unreachable for instants Instant accepts; kept as a guard
        raise PayloadError(f"{where}: cannot decode timeline payload: no codec for "
                           f"{instant.action.value} in state {instant.state.value}")
    return decoder(data, layout, where)


_ENCODERS: dict[type, Any] = {
    CompactionPlan: encode_compaction_plan,
    CleanerPlan: encode_cleaner_plan,
    CleanMetadata: encode_clean_metadata,
    RollbackPlan: encode_rollback_plan,
    RollbackMetadata: encode_rollback_metadata,
    RequestedReplaceMetadata: encode_requested_replace,
    SavepointMetadata: encode_savepoint_metadata,
    RestorePlan: encode_restore_plan,
    RestoreMetadata: encode_restore_metadata,
    GenericPayload: encode_generic,
}


def encode_payload(payload: Payload | None, layout: TimelineLayout) -> bytes:
    """Bytes for a timeline file holding ``payload`` (``None`` → empty file)."""
    if payload is None:
        return b""
    if isinstance(payload, CommitMetadata):
        return encode_commit_metadata(payload, layout)
    if isinstance(payload, RawPayload):
        return payload.data
    encoder = _ENCODERS.get(type(payload))
    if encoder is None:
        raise PayloadError(f"cannot encode timeline payload of type {type(payload).__name__}")
    return encoder(payload)
