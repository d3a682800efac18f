"""What every service run returns: status, the instant it acted on, why, and metrics."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from tablesvc.services.metrics import ServiceMetrics


class Status(enum.Enum):
    DONE = "done"              # the action ran and its instant completed
    SCHEDULED = "scheduled"    # a plan was written (.requested), not executed
    NOTHING_TO_DO = "nothing_to_do"
    DRY_RUN = "dry_run"        # what would happen; nothing changed


@dataclass(frozen=True)
class ServiceResult:
    action: str                       # "compaction", "rollback", ...
    status: Status
    instant: str | None = None        # the service's own instant (or the planned one)
    reason: str = ""                  # why nothing was done / what was done, one line
    metrics: ServiceMetrics = field(default_factory=ServiceMetrics)   # the service's own type (metrics.py)

    @property
    def exit_code(self) -> int:
        return 0

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "status": self.status.value, "instant": self.instant,
                "reason": self.reason, "metrics": self.metrics.as_dict()}

    def render(self) -> str:
        head = f"{self.action}: {self.status.value.replace('_', ' ')}"
        if self.instant:
            head += f" ({self.instant})"
        if self.reason:
            head += f": {self.reason}"
        shown = self.metrics.as_dict()
        if shown:
            head += "; " + ", ".join(f"{k}={v}" for k, v in shown.items())
        return head
