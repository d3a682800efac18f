"""The user's metadata-table opt-outs, applied before an action (``table.metadata_opt_outs``).

Every changing entry point (write, compaction, log compaction, clean, rollback, the runner) calls
``drop_opted_out_partitions`` before its own instant: when the COMMAND (``--conf``, ``--config``,
the Python API's options) sets a key that drops partitions the table lists as completed, and the
action may go ahead once they are gone, the drop is made under the table lock (properties first,
then folders) and reported as one ``ServiceResult``; when the action would still be refused, nothing
is dropped and the refusal is raised (exit 2).

``hoodie.metadata.enable=false`` in the table's own ``.hoodie/tablesvc.yaml`` keeps its reader
meaning (list storage, not the metadata table) and never deletes anything: a changing command on
a table with a metadata table is then refused (exit 2), saying to pass the key on the command to
drop it, because writing without keeping the metadata table true would make it lie to Java.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tablesvc.config import load_config, service_config
from tablesvc.errors import UnsupportedTableError
from tablesvc.services.result import ServiceResult, Status
from tablesvc.table.config import TableConfig
from tablesvc.table.metadata_opt_outs import (
    ENABLE_KEY, MetadataDrop, MetadataOptOuts, apply_drop, from_command, inflight_partitions, plan_drop,
)
from tablesvc.table.properties import PROPS_FILE, read_properties
from tablesvc.table.writable import TableAction, keeps_metadata_table, writable_refusal
from timeline.storage import join

ACTION = "metadata table"


def _table_file_refusal(table, action: TableAction, cfg) -> str | None:
    """``hoodie.metadata.enable=false`` from the table's own file on a table that keeps a metadata
    table: the reader setting stays a reader setting; changing the table is refused."""
    if (cfg.get(ENABLE_KEY) is False and not from_command(cfg, ENABLE_KEY) and cfg.source(ENABLE_KEY) != "default"
            and keeps_metadata_table(table.config)):
        return (f"{table.base_path}: {ENABLE_KEY}=false in the table's .hoodie/tablesvc.yaml only makes tablesvc's "
                f"reads list storage; {action.name} refused: it would leave the metadata table stale; to drop the "
                f"metadata table as Java Hudi does, pass --conf {ENABLE_KEY}=false on the command")
    return None


def _planned(table, action: TableAction, config: Any) -> tuple[MetadataOptOuts, MetadataDrop] | None:
    cfg = service_config(config) if config is not None else load_config(table.storage, table_path=table.base_path)
    if table.config.version < 8:                     # v6: refused by require_writable, never dropped
        return None
    refusal = _table_file_refusal(table, action, cfg)
    if refusal is not None:
        raise UnsupportedTableError(refusal)
    opt_outs = MetadataOptOuts.of(cfg)
    if not opt_outs:
        return None
    props = dict(table.config.props)
    planned = plan_drop(table.storage, table.base_path, props, opt_outs)
    if planned is None:
        return None
    building = inflight_partitions(props)
    if planned.whole and building:
        # an async indexer may own them (Java's shouldDeleteMetadataPartition looks at completed only)
        raise UnsupportedTableError(
            f"{table.base_path}: {ENABLE_KEY}=false would delete the metadata table while "
            f"hoodie.table.metadata.partitions.inflight lists {', '.join(building)} (an indexer may be building "
            f"them); {action.name} refused: finish or abandon that indexing first")
    refusal = writable_refusal(table, action, planned.partitions, planned.whole)
    if refusal is not None:
        raise UnsupportedTableError(refusal)       # the drop would not let it go ahead: change nothing
    return opt_outs, planned


def preview_drop(table, action: TableAction, config: Any = None) -> ServiceResult | None:
    """What ``drop_opted_out_partitions`` would drop (a dry run's ``DRY_RUN`` result), changing nothing."""
    found = _planned(table, action, config)
    return ServiceResult(ACTION, Status.DRY_RUN, None, f"would have {found[1].describe()}") if found else None


def drop_opted_out_partitions(table, action: TableAction, config: Any = None) -> ServiceResult | None:
    """Drop what ``config`` (None: the table's own ``.hoodie/tablesvc.yaml`` over the defaults)
    switches off, if ``action`` may then go ahead; the drop's one-line result, or None."""
    found = _planned(table, action, config)
    if found is None:
        return None
    opt_outs, storage, base = found[0], table.storage, table.base_path
    with table.lock():
        props = read_properties(storage, base)
        drop = plan_drop(storage, base, props, opt_outs)   # again, under the lock
        if drop is not None and drop.whole and inflight_partitions(props):
            raise UnsupportedTableError(f"{base}: a metadata partition went inflight meanwhile "
                                        f"({', '.join(inflight_partitions(props))}); nothing dropped")
        if drop is not None:
            apply_drop(storage, base, drop)
        table.config = TableConfig.from_properties(read_properties(storage, base), join(base, PROPS_FILE))
    return ServiceResult(ACTION, Status.DONE, None, drop.describe()) if drop is not None else None


def with_drop(result: ServiceResult, drop: ServiceResult | None) -> ServiceResult:
    """A single-result command's result, its reason telling the drop made first."""
    if drop is None:
        return result
    return replace(result, reason=f"{result.reason} (first, {ACTION}: {drop.reason})".lstrip())


def prepend_drop(drop: ServiceResult | None, results: list[ServiceResult]) -> list[ServiceResult]:
    return ([drop] if drop is not None else []) + list(results)


__all__ = ["ACTION", "drop_opted_out_partitions", "prepend_drop", "preview_drop", "with_drop"]
