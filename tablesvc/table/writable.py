"""Can tablesvc change this table?  One check, ``require_writable(table, action)``, for every command.

What refuses a table depends on what the command does to it, so each action is a small frozen value
naming what it needs.  A table that keeps a metadata table (MDT): an action may go ahead on a v8/v9
table only when every partition ``hoodie.table.metadata.partitions`` (and ``.inflight``) lists is
either kept true by tablesvc's own commits (``metadata_partitions.MAINTAINED``, the one switch the
MDT writer flips) or stays true by itself under that action (``leaves_true``, from what Java's
writer records per action: docs/metadata-table-write-research.md §1.3); a v6 table with an MDT
only when its MDT lists ``files`` and at most ``column_stats`` besides (tablesvc writes a v6 MDT
as Hudi 0.15 does: docs/metadata-table.md, "Version 6").  The refusal names the partitions and the key that would drop them
first (``table.metadata_opt_outs``).  Writes and compactions need a merge-on-read table;
compactions also need the record keys stored in the files (``hoodie.populate.meta.fields``) and a
merge mode tablesvc can apply.  Refusals are ``UnsupportedTableError`` (exit 2), one line naming
the table, raised before anything changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from tablesvc.errors import UnsupportedTableError
from tablesvc.table import metadata_partitions
from tablesvc.table.config import MergeMode
from tablesvc.table.metadata_opt_outs import listed_partitions, opt_out_key
from tablesvc.table.metadata_partitions import MetadataPartitionType

_KIND = MetadataPartitionType
# what tablesvc keeps of a version-6 metadata table, as Hudi 0.15 writes it (docs/metadata-table.md, "Version 6")
_V6_KEPT = frozenset({_KIND.FILES.value.folder, _KIND.COLUMN_STATS.value.folder})


@dataclass(frozen=True)
class TableAction:
    """What a command does to a table, as far as whether it may do it goes."""

    name: str
    # MDT partitions whose content this action leaves as it was (Java's writer records nothing for
    # them on this action), so tablesvc need not update them
    leaves_true: frozenset[MetadataPartitionType] = frozenset()
    merge_on_read_only: str | None = None   # the refusal of a copy-on-write table, when it has one
    merges_records: bool = False        # needs stored record keys and a merge mode tablesvc has


# Writes add files (files, column_stats, partition_stats, bloom_filters) and may insert, delete or
# change indexed values (record_index, secondary indexes): nothing stays true.
WRITE = TableAction("write", merge_on_read_only="tablesvc writes merge-on-read tables only")
_MOR_ONLY = "compaction applies to merge-on-read tables only"
# Compaction moves no record to another file group and changes no value: Java records nothing for
# the record index on COMPACT and skips secondary indexes on it; its new base files change files,
# column_stats, partition_stats and bloom_filters.
COMPACT = TableAction("compact", frozenset({_KIND.RECORD_INDEX, _KIND.SECONDARY_INDEX}),
                      merge_on_read_only=_MOR_ONLY, merges_records=True)
# Log compaction rewrites a slice's log blocks as one: the same keys in the same file groups with the
# same values, so the record index and secondary indexes stay true (Java recomputes both from the
# merged logs; the diff can only repeat deletes of keys already deleted).  It adds a log file and
# no base file: bloom_filters (base files only, not delta write stats) stay true; files,
# column_stats (log files have stats) and partition_stats do not.
LOG_COMPACT = TableAction("log compact", frozenset({_KIND.RECORD_INDEX, _KIND.SECONDARY_INDEX, _KIND.BLOOM_FILTERS}),
                          merge_on_read_only=_MOR_ONLY, merges_records=True)
# Clean deletes files of slices no reader's latest view holds: Java's clean updates files,
# column_stats and bloom_filters, and neither partition_stats (aggregates of the latest slices) nor
# the record index nor secondary indexes.
CLEAN = TableAction("clean", frozenset({_KIND.RECORD_INDEX, _KIND.SECONDARY_INDEX, _KIND.PARTITION_STATS}))
# A rollback's MDT step is Java's MDT rollback: the instant's delta commit T leaves every MDT
# partition at once (``metadata.maintain`` removes T's log files and timeline files, whichever
# partitions they are in), so every partition is as it was before T: all stay true.
ROLLBACK = TableAction("rollback", frozenset(MetadataPartitionType))
# The runner (``tablesvc run``, ``runner.worker.schedule_due``) compacts, log-compacts, cleans and
# rolls back: it starts only on a table where every one of them may go ahead (each executor still
# checks its own action), so a table with record_index or secondary indexes can be served.
SERVICE = TableAction("service", COMPACT.leaves_true & LOG_COMPACT.leaves_true & CLEAN.leaves_true
                      & ROLLBACK.leaves_true)


def _stale_partitions(listed: tuple[str, ...], action: TableAction) -> list[str]:
    # MAINTAINED read at each call: the writer's hook flips it, tests pin it
    kept = metadata_partitions.MAINTAINED | action.leaves_true
    return [p for p in listed if MetadataPartitionType.of(p) not in kept]


def keeps_metadata_table(config) -> bool:
    """The table keeps a metadata table that decides what tablesvc may do (this module alone asks
    ``TableConfig.has_metadata_table``; the commit's re-check and the drops ask through here)."""
    return bool(config.has_metadata_table)


def metadata_table_refusal(table, action: TableAction, dropping: tuple[str, ...] = (),
                           dropping_whole: bool = False) -> str | None:
    """Why the table's MDT stops ``action`` (one line), or None; ``dropping``: partitions a drop
    about to be made takes away first (``dropping_whole``: the whole MDT)."""
    cfg = table.config
    if not cfg.has_metadata_table:
        return None
    listed = listed_partitions(dict(cfg.props)) or (_KIND.FILES.value.folder,)
    if cfg.version < 8 and any(p not in _V6_KEPT for p in listed):
        return (f"{table.base_path}: a table version {cfg.version} table with a metadata table "
                f"(hoodie.table.metadata.partitions={','.join(listed)}): tablesvc keeps only files and column_stats "
                f"of a version-6 metadata table, and does not drop the others; {action.name} refused")
    if dropping_whole:
        return None
    if _KIND.FILES.value.folder not in cfg.metadata_partitions:
        # hoodie.metadata.enable=true in hoodie.properties without a completed files partition: a
        # metadata table being built (or left half-built) that tablesvc can neither keep nor skip
        return (f"{table.base_path}: hoodie.properties says hoodie.metadata.enable=true but "
                f"hoodie.table.metadata.partitions does not list files (listed: {','.join(listed) or 'none'}): "
                f"a metadata table tablesvc does not keep; {action.name} refused")
    stale = _stale_partitions(tuple(p for p in listed if p not in dropping), action)
    if not stale:
        return None
    by_key: dict[str, list[str]] = {}
    for p in stale:
        by_key.setdefault(opt_out_key(p), []).append(p)
    ways = "; ".join(f"{key}=false ({', '.join(parts)})" for key, parts in by_key.items())
    return (f"{table.base_path}: {action.name} would leave the metadata table's {', '.join(stale)} stale "
            f"(tablesvc does not update them); to go ahead, drop them first as Java Hudi does: {ways}")


def writable_refusal(table, action: TableAction, dropping: tuple[str, ...] = (),
                     dropping_whole: bool = False) -> str | None:
    """Why tablesvc may not ``action`` this table (the one-line message), or None when it may."""
    cfg = table.config
    refusal = metadata_table_refusal(table, action, dropping, dropping_whole)
    if refusal is not None:
        return refusal
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
           "keeps_metadata_table", "metadata_table_refusal", "require_writable", "writable_refusal"]
