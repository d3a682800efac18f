"""Keeping the metadata table true on a data-table commit: what ``InstantLifecycle.commit`` calls
under the table lock, after the commit's requirements held and before the data instant's
completed file is written (Java's order: docs/metadata-table-write-research.md §1.1).

Per data action (table versions 8 and 9; the partitions written are those listed in
``hoodie.table.metadata.partitions`` that tablesvc maintains, ``table.metadata_partitions.MAINTAINED``):

* a delta commit (a write, a log compaction), a compaction's commit, a clean: one delta commit of
  the metadata table at the same instant time ``T`` with the ``files`` records derived from the
  instant's own metadata (``files_changes``) and, when listed, the ``column_stats`` and
  ``partition_stats`` records (``stats_changes``; a clean: column-stats deletes only);
* a rollback ``R`` of ``T``: the metadata table's delta commit ``T`` is rolled back with a
  rollback instant at ``R`` on the metadata table (``mdt_rollback``), and no delta commit is
  written at ``R``: Hudi 1.x writes no file records for a rollback either.

Version 6 (a metadata table listing ``files`` and maybe ``column_stats``; docs/metadata-table.md,
"Version 6"): the
same delta commit at ``T`` in the v6 layout, with v6 log names (``writer``); a rollback ``R``
first writes a delta commit at ``R`` with the rollback's ``files`` additions (``from_rollback``,
Hudi 0.15), then rolls ``T`` back at ``R006``; the metadata table's compaction and clean take
0.15's suffixed times (``mdt_compaction.schedule_v6``, ``mdt_clean``), its log compaction
``<latest>005`` when no compaction was scheduled (``mdt_log_compaction.schedule_v6``).

The metadata table's services read the committing command's configuration
(``metadata_services_config``: defaults < ``.hoodie/tablesvc.yaml`` < ``--config`` < ``--conf``).

A table without a metadata table, or whose metadata table lists no ``files`` (readers then list
storage), gets nothing.  Whether an action may run on a table at all is decided earlier, by
``table.writable``.
"""

from __future__ import annotations

from typing import Any, Mapping

from tablesvc.config.loader import ServiceConfig, load_config
from tablesvc.errors import UnsupportedTableError
from tablesvc.metadata.files_changes import from_clean, from_commit, from_rollback
from tablesvc.metadata.listing import lists_files
from tablesvc.metadata.mdt_clean import clean_if_due
from tablesvc.metadata.mdt_compaction import compact_if_due, finish_pending_compactions
from tablesvc.metadata.mdt_log_compaction import (
    finish_pending_log_compactions, log_compact_if_due, log_compact_v6_if_due,
)
from tablesvc.metadata.stats_changes import stats_changes
from tablesvc.metadata.record_index import record_index_changes
from tablesvc.metadata.secondary_index import NO_CHANGES_OPERATIONS as SI_NO_CHANGES_OPERATIONS
from tablesvc.metadata.secondary_index import SecondaryIndexChanges, keyed_inserts, listed_secondary_partitions
from tablesvc.metadata.secondary_index import group_key as si_group_key
from tablesvc.metadata.secondary_index import secondary_indexes
from tablesvc.metadata.write_key_changes import RECORD_INDEX, WriteKeyChanges
from tablesvc.metadata.mdt_rollback import (
    cannot_remove_message, eager_on_metadata_table, metadata_rollback_time, new_instant_time, rollback_delta_commit,
    rollback_failed_writes,
)
from tablesvc.metadata.writer import MetadataTableWriter, PartitionRecords
from tablesvc.table.config import TableConfig
from tablesvc.table.metadata_opt_outs import listed_partitions
from tablesvc.table.metadata_partitions import MetadataPartitionType
from timeline.errors import ConflictError
from timeline.instant import Action, Instant, State
from timeline.payloads import CleanMetadata, CommitMetadata, RollbackMetadata, decode_payload

# delta commits that are not writes: keys keep their file groups (Java writes no RLI records)
NO_KEY_CHANGE_OPERATIONS = frozenset({"LOG_COMPACT", "COMPACT", "CLUSTER"})
FAILED_WRITES_POLICY_KEY = "hoodie.cleaner.policy.failed.writes"    # the metadata table's derives from it
# v6 metadata tables are written as Hudi 0.15 writes them, files and column_stats only (V6_PARTITIONS;
# docs/metadata-table.md, "Version 6")
FIRST_VERSION_WRITTEN = 6
V6_PARTITIONS = frozenset({MetadataPartitionType.FILES.value.folder, MetadataPartitionType.COLUMN_STATS.value.folder})


def writes_metadata_table(config: TableConfig) -> bool:
    """True when a commit on this table must update its metadata table: readers list its files
    through it (``files`` is listed)."""
    return lists_files(config)


def metadata_services_config(table: Any, config: Any = None) -> ServiceConfig:
    """The configuration the metadata table's own services read inside a commit (its clean,
    compaction and log compaction keys, the cleaner keys its clean derives from, the failed-writes
    policy): the committing command's, with the precedence every command has (``config.loader``):
    built-in defaults < the table's ``.hoodie/tablesvc.yaml`` < ``--config`` < ``--conf``.

    ``config``: a ``ServiceConfig`` (the CLI's, ``Table``'s methods' from their ``options``) is
    used as it is; None (a library caller that gave none) is the table's ``.hoodie/tablesvc.yaml``
    over the defaults; a plain mapping of Hudi keys is layered over the table's file, as
    ``Table.service_config(options)`` layers ``options``."""
    if isinstance(config, ServiceConfig):
        return config
    if config is None:
        return load_config(table.storage, table_path=table.base_path)
    if isinstance(config, Mapping):
        pairs = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in config.items()
                 if v is not None and v != ""]
        return load_config(table.storage, conf_pairs=pairs, table_path=table.base_path)
    raise TypeError(f"expected a ServiceConfig, a mapping of Hudi keys or None, got {type(config).__name__}")


def update_metadata_table(table: Any, instant: Instant, payload: bytes,
                          key_changes: WriteKeyChanges | None = None,
                          secondary_index: Mapping[str, SecondaryIndexChanges] | None = None,
                          config: Any = None) -> Instant | None:
    """The metadata table's update for ``instant`` (the data instant about to complete, with the
    completed file's ``payload``); ``table`` gives ``storage``, ``base_path``, ``config`` and
    ``instant_times``.  ``key_changes``: a write's inserted/updated/deleted keys, as its tasks
    reported them (``write_key_changes``; needed when ``record_index`` is listed).
    ``secondary_index``: a write's changes to each secondary index (``spark.secondary_index_job``;
    needed when a ``secondary_index_*`` partition is listed).  Returns the
    metadata table's completed delta commit, or None when the action writes none (a rollback) or
    the table has no metadata table to keep.  ``config``: the committing command's configuration,
    which the metadata table's own services read (``metadata_services_config``)."""
    services_config = metadata_services_config(table, config)
    config: TableConfig = table.config
    if not writes_metadata_table(config):
        return None
    if config.version < FIRST_VERSION_WRITTEN:
        raise UnsupportedTableError(f"{table.base_path}: table version {config.version} keeps a metadata table "
                                    "that tablesvc does not write (versions 6, 8 and 9 only)")
    v6_refusal = v6_partitions_refusal(table.base_path, config)
    if v6_refusal is not None:          # the backstop of table.writable's refusal
        raise UnsupportedTableError(v6_refusal)
    mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times,
                                 listed_partitions(config.props))
    done = Instant(instant.timestamp, instant.action.completed_action, State.COMPLETED)
    decoded = decode_payload(done, payload, config.layout, f"{instant.timestamp}.{done.action.value}")
    if isinstance(decoded, RollbackMetadata):
        if config.version < 8:          # Hudi 0.15: a delta commit at R with the rollback's files first
            mdt.write_delta_commit(instant.timestamp, {MetadataPartitionType.FILES.value.folder: from_rollback(decoded)})
        # Java rolls back the first instant the rollback names (HBTMW.update(HoodieRollbackMetadata, R))
        if decoded.commits_rollback:
            rollback_delta_commit(mdt, decoded.commits_rollback[0], metadata_rollback_time(config, instant.timestamp))
        return None
    if isinstance(decoded, CleanMetadata):
        files = from_clean(decoded)
    elif isinstance(decoded, CommitMetadata) and done.action in (Action.DELTA_COMMIT, Action.COMMIT):
        files = from_commit(decoded)
    else:
        raise UnsupportedTableError(f"{table.base_path}: instant {instant.timestamp} ({instant.action.value}) "
                                    "changes the metadata table in a way tablesvc does not write")
    changes: dict[str, Any] = {MetadataPartitionType.FILES.value.folder: files}
    # column_stats / partition_stats, when listed: in the same delta commit T (stats_changes)
    stats, schemas = stats_changes(table, mdt, instant.timestamp, decoded)
    changes.update(stats)
    # record_index, when listed: a write's inserted and deleted keys (record_index; nothing for
    # a compaction, log compaction or clean, as Java)
    if RECORD_INDEX in listed_partitions(config.props):
        records = _record_index_records(table, mdt, instant, done, decoded, key_changes)
        if records is not None:
            changes[RECORD_INDEX], schemas = records[0], {**schemas, RECORD_INDEX: records[1]}
    # secondary_index_*, when listed: a write's (value, key) inserts and deletes
    # (secondary_index; nothing for a compaction, log compaction or clean, as Java)
    for partition, (records, schema) in _secondary_index_records(table, mdt, instant, done, decoded,
                                                                 secondary_index).items():
        changes[partition], schemas = records, {**schemas, partition: schema}
    # the metadata table's own services, in Java's order (performTableServices): pending
    # compactions, its clean (mdt_clean), a new compaction; before T's delta commit, under the
    # same lock, so T's records stay out of the new base files (mdt_compaction)
    # (their keys: the command's configuration, metadata_services_config)
    finish_pending_compactions(table, mdt)
    finish_pending_log_compactions(table, mdt)
    clean_if_due(table, mdt, config=services_config)
    compacted = compact_if_due(table, mdt, config=services_config)
    # when hoodie.metadata.log.compaction.enable (mdt_log_compaction); v6 as Hudi 0.15: only when
    # no compaction was scheduled, at <latest delta commit>005
    if config.version >= 8:
        log_compact_if_due(table, mdt, config=services_config)
    elif not compacted:
        log_compact_v6_if_due(table, mdt, config=services_config)
    _rollback_failed_metadata_writes(table, mdt, services_config)
    return mdt.write_delta_commit(instant.timestamp, changes, schemas)


def _rollback_failed_metadata_writes(table: Any, mdt: MetadataTableWriter, config: ServiceConfig) -> None:
    """The metadata write client's EAGER pass before its delta commit (Java's ``commitInternal``
    runs ``rollbackFailedWrites``): pending metadata rollbacks finished, pending metadata delta
    commits whose writer is gone (heartbeats: ``mdt_rollback.writer_alive``) rolled back at new times."""
    policy = str(config.get(FAILED_WRITES_POLICY_KEY))
    if eager_on_metadata_table(policy):
        window_ms = int(config.get("hoodie.client.heartbeat.interval_in_ms")) * int(
            config.get("hoodie.client.heartbeat.tolerable.misses"))
        rollback_failed_writes(mdt, lambda: new_instant_time(mdt), clock=table.clock, heartbeat_window_ms=window_ms)


def _record_index_records(table: Any, mdt: MetadataTableWriter, instant: Instant, done: Instant, decoded: Any,
                          key_changes: WriteKeyChanges | None) -> tuple[PartitionRecords, str] | None:
    is_write = (isinstance(decoded, CommitMetadata) and done.action is Action.DELTA_COMMIT
                and decoded.operation_type not in NO_KEY_CHANGE_OPERATIONS)
    if not is_write:
        return None
    if key_changes is None:
        # the record index was listed after the write's tasks ran (a Java indexer): they did not
        # report their keys; a new attempt will
        raise ConflictError(f"{table.base_path}: the metadata table's record_index appeared while write "
                            f"{instant.timestamp} ran; its keys were not collected: retry the write")
    schema = mdt.partition_schema(RECORD_INDEX, mdt.timeline())
    records = record_index_changes(table, instant.timestamp, key_changes, schema)
    if not records.records and not records.deleted_keys:
        return None
    return records, schema


def _secondary_index_records(table: Any, mdt: MetadataTableWriter, instant: Instant, done: Instant, decoded: Any,
                             secondary_index: Mapping[str, SecondaryIndexChanges] | None
                             ) -> dict[str, tuple[PartitionRecords, str]]:
    listed = listed_secondary_partitions(table.config.props)
    is_write = (isinstance(decoded, CommitMetadata) and done.action is Action.DELTA_COMMIT
                and decoded.operation_type not in SI_NO_CHANGES_OPERATIONS)
    if not listed or not is_write:
        return {}
    missing = [p for p in listed if secondary_index is None or p not in secondary_index]
    if missing:
        # listed after the write computed its changes (a Java indexer): a new attempt computes them
        raise ConflictError(f"{table.base_path}: the metadata table's {', '.join(missing)} appeared while write "
                            f"{instant.timestamp} ran; its secondary-index changes were not computed: retry the write")
    versions = {ix.partition: ix.version for ix in secondary_indexes(
        table.storage, table.base_path, table.config.props, table.config.version,
        (decoded.extra_metadata or {}).get("schema") or table.config.create_schema)}
    out: dict[str, tuple[PartitionRecords, str]] = {}
    timeline = mdt.timeline()
    for partition in listed:
        change = secondary_index[partition]
        if not change.inserted and not change.deleted:
            continue
        schema = mdt.partition_schema(partition, timeline)
        version = versions[partition]
        out[partition] = (PartitionRecords(records=keyed_inserts(change, schema), deleted_keys=change.deleted,
                                           group_key=lambda key, v=version: si_group_key(key, v)), schema)
    return out


def v6_partitions_refusal(base_path: str, config: TableConfig) -> str | None:
    """Why tablesvc cannot keep a version-6 table's metadata table (one line), or None: it lists
    partitions other than ``files`` and ``column_stats`` (inflight ones too), which tablesvc does
    not write on a v6 metadata table."""
    if config.version >= 8 or not writes_metadata_table(config):
        return None
    others = [p for p in listed_partitions(config.props) if p not in V6_PARTITIONS]
    if not others:
        return None
    return (f"{base_path}: a table version {config.version} table whose metadata table lists "
            f"{', '.join(others)}: tablesvc keeps only files and column_stats of a version-6 metadata table")


def remove_aborted_delta_commit(table: Any, timestamp: str) -> bool:
    """Roll back the metadata table's delta commit ``timestamp`` when the data instant it belongs
    to is being aborted (the caller holds the table lock): the commit wrote it, then failed to
    write the data table's completed file.  Java readers trust a completed metadata delta commit
    whose data instant is not completed, so it goes, as a rollback of the data instant takes it:
    with a rollback instant on the metadata table at a new instant time, as Java's retry of the
    instant would (``mdt_rollback.rollback_delta_commit``).  Nothing when the data instant did
    complete (then it is not this abort's), or the table keeps no metadata table tablesvc writes;
    True when one was rolled back."""
    config: TableConfig = table.config
    if not writes_metadata_table(config) or config.version < FIRST_VERSION_WRITTEN:
        return False
    if table.timeline().is_completed(timestamp):
        return False
    mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times, listed_partitions(config.props))
    return rollback_delta_commit(mdt, timestamp, new_instant_time(mdt)) is not None


def rollback_refusal(table: Any, target: str) -> str | None:
    """Why rolling back data instant ``target`` cannot take its metadata delta commit out (one
    line), or None: a metadata compaction or log compaction already holds it (``writer.holder_of``).
    Asked before the rollback is requested, so that nothing is deleted for a rollback whose
    commit would refuse."""
    config: TableConfig = table.config
    if not writes_metadata_table(config) or config.version < FIRST_VERSION_WRITTEN:
        return None
    mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times, listed_partitions(config.props))
    holder = mdt.holder_of(target)
    return None if holder is None else cannot_remove_message(mdt.base_path, target, holder)


__all__ = ["FIRST_VERSION_WRITTEN", "V6_PARTITIONS", "remove_aborted_delta_commit", "rollback_refusal",
           "update_metadata_table", "v6_partitions_refusal", "writes_metadata_table"]
