"""Keeping the metadata table true on a data-table commit: what ``InstantLifecycle.commit`` calls
under the table lock, after the commit's requirements held and before the data instant's
completed file is written (Java's order: docs/metadata-table-write-research.md §1.1).

Per data action (table versions 8 and 9; the partitions written are those listed in
``hoodie.table.metadata.partitions`` that tablesvc maintains, ``table.metadata_partitions.MAINTAINED``):

* a delta commit (a write, a log compaction), a compaction's commit, a clean: one delta commit of
  the metadata table at the same instant time ``T`` with the ``files`` records derived from the
  instant's own metadata (``files_changes``) and, when listed, the ``column_stats`` and
  ``partition_stats`` records (``stats_changes``; a clean: column-stats deletes only);
* a rollback ``R`` of ``T``: the metadata table's delta commit ``T`` is removed (its log files
  and timeline files), and no delta commit is written at ``R``: Hudi 1.x writes no file records
  for a rollback either, it rolls back the metadata table's ``T``.

A table without a metadata table, or whose metadata table lists no ``files`` (readers then list
storage), gets nothing.  Whether an action may run on a table at all is decided earlier, by
``table.writable``.
"""

from __future__ import annotations

from typing import Any

from tablesvc.errors import UnsupportedTableError
from tablesvc.metadata.files_changes import from_clean, from_commit
from tablesvc.metadata.listing import lists_files
from tablesvc.metadata.mdt_compaction import compact_if_due
from tablesvc.metadata.stats_changes import stats_changes
from tablesvc.metadata.writer import MetadataTableWriter, cannot_remove_message
from tablesvc.table.config import TableConfig
from tablesvc.table.metadata_opt_outs import listed_partitions
from tablesvc.table.metadata_partitions import MetadataPartitionType
from timeline.instant import Action, Instant, State
from timeline.payloads import CleanMetadata, CommitMetadata, RollbackMetadata, decode_payload

FIRST_VERSION_WRITTEN = 8       # v6 metadata tables (Hudi 0.x layout and payload rules) are not written


def writes_metadata_table(config: TableConfig) -> bool:
    """True when a commit on this table must update its metadata table: readers list its files
    through it (``files`` is listed)."""
    return lists_files(config)


def update_metadata_table(table: Any, instant: Instant, payload: bytes) -> Instant | None:
    """The metadata table's update for ``instant`` (the data instant about to complete, with the
    completed file's ``payload``); ``table`` gives ``storage``, ``base_path``, ``config`` and
    ``instant_times``.  Returns the metadata table's completed delta commit, or None when the
    action writes none (a rollback) or the table has no metadata table to keep."""
    config: TableConfig = table.config
    if not writes_metadata_table(config):
        return None
    if config.version < FIRST_VERSION_WRITTEN:
        raise UnsupportedTableError(f"{table.base_path}: table version {config.version} keeps a metadata table "
                                    "that tablesvc does not write (versions 8 and 9 only)")
    mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times,
                                 listed_partitions(config.props))
    done = Instant(instant.timestamp, instant.action.completed_action, State.COMPLETED)
    decoded = decode_payload(done, payload, config.layout, f"{instant.timestamp}.{done.action.value}")
    if isinstance(decoded, RollbackMetadata):
        for target in decoded.commits_rollback or ():
            mdt.remove_delta_commit(target)
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
    # the metadata table's own compaction, as Java's next write runs it: before T's delta commit,
    # under the same lock, so T's records stay out of the new base files (mdt_compaction)
    compact_if_due(table, mdt)
    return mdt.write_delta_commit(instant.timestamp, changes, schemas)


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


__all__ = ["FIRST_VERSION_WRITTEN", "rollback_refusal", "update_metadata_table", "writes_metadata_table"]
