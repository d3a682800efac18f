"""Can tablesvc change this table?  One check, ``require_writable(table, action)``, for every command.

What refuses a table depends on what the command does to it, so each action is a small frozen value
naming what it needs: every action refuses a table that keeps a metadata table (tablesvc does not
update it, so readers listing through it would go wrong; each action says how); writes and
compactions need a merge-on-read table; compactions also need the record keys stored in the files
(``hoodie.populate.meta.fields``) and a merge mode tablesvc can apply.  Refusals are
``UnsupportedTableError`` (exit 2), one line naming the table, raised before anything changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from tablesvc.errors import UnsupportedTableError
from tablesvc.table.config import MergeMode


@dataclass(frozen=True)
class TableAction:
    """What a command does to a table, as far as whether it may do it goes."""

    name: str
    metadata_table_harm: str            # what doing it would do to a metadata table, and so what tablesvc does
    names_metadata_partitions: bool     # the message lists hoodie.table.metadata.partitions
    merge_on_read_only: str | None = None   # the refusal of a copy-on-write table, when it has one
    merges_records: bool = False        # needs stored record keys and a merge mode tablesvc has


WRITE = TableAction("write", "readers listing through it would miss new files, so tablesvc refuses to write",
                    names_metadata_partitions=True, merge_on_read_only="tablesvc writes merge-on-read tables only")
_COMPACTION_HARM = ("readers listing through it would miss the compacted base files, so tablesvc refuses to "
                    "compact it")
COMPACT = TableAction("compact", _COMPACTION_HARM, names_metadata_partitions=True,
                      merge_on_read_only="compaction applies to merge-on-read tables only", merges_records=True)
LOG_COMPACT = TableAction("log compact", _COMPACTION_HARM, names_metadata_partitions=True,
                          merge_on_read_only="compaction applies to merge-on-read tables only", merges_records=True)
CLEAN = TableAction("clean", "cleaning would leave it listing deleted files, so tablesvc refuses to clean",
                    names_metadata_partitions=False)
ROLLBACK = TableAction("rollback", "roll back its failed instants with Apache Hudi, or remove the metadata table "
                       "first", names_metadata_partitions=False)
SERVICE = TableAction("service", "its services would leave it stale, so tablesvc does not service it",
                      names_metadata_partitions=False)


def writable_refusal(table, action: TableAction) -> str | None:
    """Why tablesvc may not ``action`` this table (the one-line message), or None when it may."""
    cfg = table.config
    if cfg.has_metadata_table:
        listed = (f" (hoodie.table.metadata.partitions={','.join(cfg.metadata_partitions) or '-'})"
                  if action.names_metadata_partitions else "")
        return (f"{table.base_path}: the table keeps a metadata table{listed} that tablesvc does not update; "
                f"{action.metadata_table_harm}")
    if action.merge_on_read_only and not cfg.is_mor:
        return f"{table.base_path}: {action.merge_on_read_only}"
    if action.merges_records:
        if cfg.merge_mode is MergeMode.CUSTOM:
            return (f"{table.base_path}: merge mode CUSTOM needs a record merger tablesvc does not have; "
                    "compaction must merge exactly as the reader does")
        if not cfg.populate_meta_fields:
            return (f"{table.base_path}: hoodie.populate.meta.fields=false: without stored record keys a "
                    "compaction cannot merge records")
    return None


def is_writable(table, action: TableAction) -> bool:
    return writable_refusal(table, action) is None


def require_writable(table, action: TableAction) -> None:
    """Refuse (``UnsupportedTableError``, exit 2) a table tablesvc may not ``action``."""
    refusal = writable_refusal(table, action)
    if refusal is not None:
        raise UnsupportedTableError(refusal)


__all__ = ["CLEAN", "COMPACT", "LOG_COMPACT", "ROLLBACK", "SERVICE", "TableAction", "WRITE", "is_writable",
           "require_writable", "writable_refusal"]
