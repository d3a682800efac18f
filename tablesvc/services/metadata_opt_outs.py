"""The user's metadata-table opt-outs, applied before an action (``table.metadata_opt_outs``).

Every changing entry point (write, compaction, log compaction, clean, rollback, the runner) calls
``drop_opted_out_partitions`` before its own instant: when the configuration SETS a key that drops
partitions the table lists, and the action may go ahead once they are gone, the drop is made under
the table lock (properties first, then folders) and reported as one ``ServiceResult``; when the
action would still be refused, nothing is dropped and the refusal is raised (exit 2).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tablesvc.config import load_config, service_config
from tablesvc.errors import UnsupportedTableError
from tablesvc.services.result import ServiceResult, Status
from tablesvc.table.config import TableConfig
from tablesvc.table.metadata_opt_outs import MetadataDrop, MetadataOptOuts, apply_drop, plan_drop
from tablesvc.table.properties import PROPS_FILE, read_properties
from tablesvc.table.writable import TableAction, writable_refusal
from timeline.storage import join

ACTION = "metadata table"


def _planned(table, action: TableAction, config: Any) -> tuple[MetadataOptOuts, MetadataDrop] | None:
    cfg = service_config(config) if config is not None else load_config(table.storage, table_path=table.base_path)
    opt_outs = MetadataOptOuts.of(cfg)
    if not opt_outs or table.config.version < 8:     # v6: refused by require_writable, never dropped
        return None
    planned = plan_drop(table.storage, table.base_path, dict(table.config.props), opt_outs)
    if planned is None:
        return None
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
        drop = plan_drop(storage, base, read_properties(storage, base), opt_outs)   # again, under the lock
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
