"""``tablesvc status``: what a monitor needs to know about a table's services, as one dict.

Fields (docs/runner.md): pending jobs (in the order workers take them), current leases,
jobs set aside after repeated failures, every pending instant with what ``tablesvc rollback``
does with it (``services.rollback.pending``: the verdict the rollback itself acts on), the age
of the oldest pending compaction, delta commits since the last compaction, and log blocks per
file group in the latest slices.
Reading it lists the timeline, the lease folder and the latest log files' block headers;
it changes nothing.
"""

from __future__ import annotations

from typing import Any

from tablesvc.config import ServiceConfig
from tablesvc.runner.jobs import pending_jobs
from tablesvc.services.compaction.triggers import delta_commits_since, last_completed_compaction
from tablesvc.services.plan_execution import HEARTBEAT_INTERVAL_KEY, HEARTBEAT_MISSES_KEY
from tablesvc.services.rollback.pending import pending_instants
from timeline.instant import Action
from timeline.instant_time import parse_instant, resolve_timezone
from timeline.lease import LeaseStore


def _log_blocks_per_file_group(table, timeline) -> list[dict[str, Any]]:
    from tablesvc.merge import ReadContext, select_blocks

    ctx = ReadContext.for_table(table, timeline)
    out = []
    for s in table.file_system_view(timeline).latest_file_slices(table.storage):
        if not s.log_files:
            continue
        selection = select_blocks(table.storage, tuple(lf.path for lf in s.log_files), ctx)
        out.append({"partition": s.partition, "file_id": s.file_id, "log_files": len(s.log_files),
                    "log_blocks": len(selection.blocks)})
    return sorted(out, key=lambda r: (-r["log_blocks"], r["partition"], r["file_id"]))


def table_status(table, config: ServiceConfig, max_failures: int = 3) -> dict[str, Any]:
    timeline = table.timeline()
    now_ms = table.clock.now_ms()
    leases = LeaseStore(table.storage, table.base_path, table.clock)
    jobs = pending_jobs(table, timeline, int(config.get(HEARTBEAT_INTERVAL_KEY)), int(config.get(HEARTBEAT_MISSES_KEY)))
    job_rows, set_aside = [], []
    for job in jobs:
        row = job.as_dict()
        failures = leases.failures(job.id)
        row["failures"] = failures.count
        if failures.count >= max_failures:
            set_aside.append({"job": job.id, "failures": failures.count, "last_error": failures.last_error})
        lease = leases.current(job.id)
        if lease is not None:
            row["lease"] = lease.as_dict() | {"expired": lease.expired(now_ms)}
        job_rows.append(row)
    tz = resolve_timezone(table.config.timezone)
    pending_compactions = [i for i in timeline.pending() if timeline.origin_action(i) is Action.COMPACTION]
    oldest_age = None
    if pending_compactions:
        oldest_age = round((now_ms - parse_instant(pending_compactions[0].timestamp, tz)) / 1000, 1)
    last = last_completed_compaction(timeline)
    last_compaction = last.timestamp if last else None
    since = delta_commits_since(timeline, last_compaction)
    return {
        "table": table.base_path,
        "name": table.config.name,
        "version": table.config.version,
        "pending_jobs": job_rows,
        "leases": [r["lease"] for r in job_rows if "lease" in r],
        "set_aside": set_aside,
        "pending_instants": [p.as_dict() for p in pending_instants(table, config, timeline)],
        "oldest_pending_compaction_age_s": oldest_age,
        "last_compaction": last_compaction,
        "delta_commits_since_last_compaction": len(since),
        "log_blocks_per_file_group": _log_blocks_per_file_group(table, timeline),
    }


__all__ = ["table_status"]
