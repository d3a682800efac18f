"""One instant lifecycle for every action: request -> start -> work -> commit under the table
lock once its requirements are re-checked -> or abort (docs/architecture.md, "One instant
lifecycle").

* ``rules.py``: what the actions differ by (heartbeat, racing start, completed elsewhere,
  abort or leave inflight), one ``LifecycleRules`` value per action;
* ``requirements.py``: what must still hold at a transition, as frozen values with a name;
* ``collisions.py``: table version 6, another writer's instant at the instant's own time (a Hudi
  0.x writer takes its time outside the lock): found under the lock, the instant abandoned;
* ``pending_writes.py``: the writes in progress as a v6 service counts them (a Hudi 0.x writer
  beats its heartbeat before it requests its instant), and the requirement that none is;
* ``instant_lifecycle.py``: the lifecycle itself, and the one place where an instant commits
  (where the metadata table will be written too).
"""

from tablesvc.services.lifecycle.instant_lifecycle import InstantLifecycle, StartedInstant
from tablesvc.services.lifecycle.pending_writes import (
    WRITE_ACTIONS, NoWriteInProgress, WriteInProgress, writes_in_progress,
)
from tablesvc.services.lifecycle.requirements import (
    CommitRequirement, Fence, LeaseHeld, StillInflight, StillRequested, check_all, family_state, lease_requirements,
)
from tablesvc.services.lifecycle.rules import (
    CLEAN_LIFECYCLE, COMPACTION_LIFECYCLE, LOG_COMPACTION_LIFECYCLE, ROLLBACK_LIFECYCLE, WRITE_LIFECYCLE,
    CompletedElsewhere, HeartbeatFrom, LifecycleRules, Markers, OnFailure, RacingStart, Start,
)

__all__ = [
    "CLEAN_LIFECYCLE", "COMPACTION_LIFECYCLE", "CommitRequirement", "CompletedElsewhere", "Fence", "HeartbeatFrom",
    "InstantLifecycle", "LOG_COMPACTION_LIFECYCLE", "LeaseHeld", "LifecycleRules", "Markers", "NoWriteInProgress",
    "OnFailure", "ROLLBACK_LIFECYCLE", "RacingStart", "Start", "StartedInstant", "StillInflight", "StillRequested",
    "WRITE_ACTIONS", "WRITE_LIFECYCLE", "WriteInProgress", "check_all", "family_state", "lease_requirements",
    "writes_in_progress",
]
