"""Services run inline after a successful write, in the writer's Spark session.

| setting | after each write |
|---|---|
| `hoodie.compact.inline=true` | if compaction is due (trigger strategy), schedule it and run it now |
| `hoodie.compact.schedule.inline=true` | if due, only schedule it; `tablesvc compaction run` or the runner executes it |
| `hoodie.log.compaction.inline=true` | if a file slice holds `hoodie.log.compaction.blocks.threshold` log blocks, log-compact it now |
| `hoodie.clean.automatic=true` (default) | clean, when the earliest commit to retain moved |

Defaults are Hudi's for MOR tables: cleaning on, compaction off inline.  Deciding that
nothing is due reads the timeline only: no Spark job, no file listing.
"""

from __future__ import annotations

from tablesvc.config.loader import ServiceConfig
from tablesvc.services.result import ServiceResult


def run_inline_services(table, config: ServiceConfig, spark=None) -> list[ServiceResult]:
    results: list[ServiceResult] = []
    inline = config.get("hoodie.compact.inline")
    schedule_only = config.get("hoodie.compact.schedule.inline")
    if (inline or schedule_only) and table.config.is_mor:
        from tablesvc.services.compaction import compaction_due, run_compaction, schedule_compaction

        from timeline.instant_time import resolve_timezone

        due, reason = compaction_due(table.timeline(), config, table.clock,
                                     tz=resolve_timezone(table.config.timezone))
        if due:
            scheduled = schedule_compaction(table, config)
            results.append(scheduled)
            if inline and scheduled.instant:
                results.extend(run_compaction(table, scheduled.instant, spark=spark, config=config))
        else:
            from tablesvc.services.result import Status

            results.append(ServiceResult("compaction", Status.NOTHING_TO_DO, None, reason))
    if config.get("hoodie.log.compaction.inline") and table.config.is_mor:
        from tablesvc.services.log_compaction import run_log_compaction, schedule_log_compaction

        scheduled = schedule_log_compaction(table, config)
        results.append(scheduled)
        if scheduled.instant:
            results.extend(run_log_compaction(table, scheduled.instant, spark=spark, config=config))
    if config.get("hoodie.clean.automatic"):
        from tablesvc.services.clean import run_clean

        results.extend(run_clean(table, config))
    return results
