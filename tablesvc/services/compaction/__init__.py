"""Compaction: merge each chosen file group's base file and log files into a new base file.

``schedule_compaction`` (planner) writes ``C.compaction.requested``; ``run_compaction``
(executor) executes plans and completes them as ``commit``; ``compaction_due`` (triggers)
applies Hudi's trigger strategies.  See docs/compaction.md.
"""

from tablesvc.services.compaction.executor import (
    CompactionTask, compact_file_group, list_compactions, run_compaction,
)
from tablesvc.services.compaction.planner import (
    build_plan, pending_compaction_plans, schedule_compaction, v6_pending_compaction_targets,
)
from tablesvc.services.compaction.triggers import STRATEGIES, compaction_due

__all__ = [
    "CompactionTask", "STRATEGIES", "build_plan", "compact_file_group", "compaction_due",
    "list_compactions", "pending_compaction_plans", "run_compaction", "schedule_compaction",
    "v6_pending_compaction_targets",
]
