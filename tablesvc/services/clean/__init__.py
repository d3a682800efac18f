"""Cleaning: delete file slices no reader or pending service needs (docs/clean.md)."""

from tablesvc.services.clean.executor import finish_pending_cleans, list_cleans, run_clean, schedule_clean
from tablesvc.services.clean.planner import CleanConfig, PlannedClean, plan_clean

__all__ = ["CleanConfig", "PlannedClean", "finish_pending_cleans", "list_cleans", "plan_clean", "run_clean",
           "schedule_clean"]
