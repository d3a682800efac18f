"""Table services on the timeline: one planner and one executor per action.

A planner persists an immutable plan as ``<instant>.<action>.requested``; an executor
reads the plan back, does the work (Spark tasks per file group where there is data to
move), and completes the instant under the table lock.  Every run returns a
``ServiceResult``, whose ``metrics`` is the service's own typed value (``services/metrics.py``).
"""

from tablesvc.services.metrics import (
    CleanMetrics, CompactionMetrics, CompactionPlanMetrics, LogCompactionMetrics, LogCompactionPlanMetrics,
    PlanMetrics, RollbackMetrics, ServiceMetrics,
)
from tablesvc.services.result import ServiceResult, Status

__all__ = ["CleanMetrics", "CompactionMetrics", "CompactionPlanMetrics", "LogCompactionMetrics",
           "LogCompactionPlanMetrics", "PlanMetrics", "RollbackMetrics", "ServiceMetrics", "ServiceResult", "Status"]
