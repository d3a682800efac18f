"""Log compaction (Hudi RFC-48): merge a file slice's log blocks into one compacted block.

``schedule_log_compaction`` (planner) writes ``L.logcompaction.requested``; ``run_log_compaction``
(executor) executes plans and completes them as ``deltacommit`` (``LOG_COMPACT``).  Readers
skip the blocks listed in the compacted block's ``COMPACTED_BLOCK_TIMES``.  See docs/log-compaction.md.
"""

from tablesvc.services.log_compaction.executor import (
    LogCompactionTask, MergedLog, compacted_blocks, list_log_compactions, log_compact_file_group, merge_log_blocks,
    run_log_compaction,
)
from tablesvc.services.log_compaction.planner import (
    DEFAULT_THRESHOLD, THRESHOLD_KEY, blocks_threshold, build_log_compaction_plan, schedule_log_compaction,
)

__all__ = [
    "DEFAULT_THRESHOLD", "LogCompactionTask", "MergedLog", "THRESHOLD_KEY", "blocks_threshold",
    "build_log_compaction_plan", "compacted_blocks", "list_log_compactions", "log_compact_file_group",
    "merge_log_blocks", "run_log_compaction", "schedule_log_compaction",
]
