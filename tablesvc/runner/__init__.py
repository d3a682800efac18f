"""The async table-service runner (``tablesvc run``): jobs from the timeline, leased with
fencing tokens (``timeline.lease``), executed by the services' own executors.  See docs/runner.md."""

from tablesvc.runner.jobs import Job, JobKind, pending_jobs
from tablesvc.runner.status import table_status
from tablesvc.runner.worker import Runner, RunnerSettings, RunnerStats, execute_job, schedule_due

__all__ = ["Job", "JobKind", "Runner", "RunnerSettings", "RunnerStats", "execute_job", "pending_jobs",
           "schedule_due", "table_status"]
