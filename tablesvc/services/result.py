"""What every service run returns: status, the instant it acted on, why, and metrics."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping


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
    metrics: Mapping[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 0

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "status": self.status.value, "instant": self.instant,
                "reason": self.reason, "metrics": dict(self.metrics)}

    def render(self) -> str:
        head = f"{self.action}: {self.status.value.replace('_', ' ')}"
        if self.instant:
            head += f" ({self.instant})"
        if self.reason:
            head += f": {self.reason}"
        if self.metrics:
            head += "; " + ", ".join(f"{k}={v}" for k, v in self.metrics.items())
        return head
