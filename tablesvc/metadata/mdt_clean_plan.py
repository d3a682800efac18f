"""When the metadata table cleans itself, with which policy, and what its plan deletes (Hudi 1.2,
table versions 8 and 9; docs/metadata-table.md, "The metadata table's clean").

* **Policy** (``HoodieMetadataWriteUtils.createMetadataWriteConfig``): derived from the data
  table's cleaner keys unless ``hoodie.metadata.derive.from.datatable.clean.policy`` is false:
  KEEP_LATEST_COMMITS retains ``max(20, 1.2 x commits)`` commits (truncated), KEEP_LATEST_FILE_VERSIONS
  ``ceil(1.2 x versions)`` slices, KEEP_LATEST_BY_HOURS ``ceil(1.2 x hours)`` hours; not derived:
  KEEP_LATEST_FILE_VERSIONS with 2.
* **When** (``HoodieBackedTableMetadataWriter.cleanIfNecessary``): after pending compactions ran,
  if the metadata table has no completed compaction yet or at least 3 completed instants (of any
  action) later than its latest completed compaction; then (``CleanPlanActionExecutor.needsCleaning``,
  trigger NUM_COMMITS, ``hoodie.clean.trigger.max.commits`` = 1) if at least one commit completed
  after the previous clean's last completed commit.  A pending clean is finished instead of
  planning a new one (``hoodie.clean.multiple.enabled`` is false).
* **What** (``CleanPlanner``): every partition folder of the metadata table (it has no metadata
  table of its own, so Java lists its folders), every file group, by policy:
  KEEP_LATEST_COMMITS / BY_HOURS delete a slice whose base instant is earlier than the earliest
  commit to retain (ECTR), unless it is the group's latest slice or the newest slice based before
  the ECTR; KEEP_LATEST_FILE_VERSIONS keeps the newest N slices (N - 1 when a pending compaction
  reserves one).  A slice a pending compaction or log compaction reads is never deleted; the ECTR
  never passes the earliest pending commit or compaction.  A plan that deletes nothing is not
  written (no empty cleans: ``hoodie.clean.empty.interval.hours`` is off by default).

The data table's clean planner (``services.clean.planner``) lives on a higher floor than the
metadata hook that runs this one (tests/unit/test_floors.py), and the metadata table needs none of
its data-table cases (replaced file groups, savepoints, bootstrap files, incremental partition
scans), so the metadata table's plan is made here from the same file-system view.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tablesvc.config.loader import ServiceConfig
from tablesvc.config.registry import CleanerPolicy
from tablesvc.fsview.view import FileSlice, FileSystemView
from tablesvc.metadata.mdt_compaction_plan import metadata_partitions
from tablesvc.table.config import TableConfig
from timeline.active import Timeline
from timeline.instant import Action, Instant, State
from timeline.instant_time import format_instant, resolve_timezone
from timeline.payloads import ActionInstant, CleanerPlan, CleanFileInfo, CleanMetadata, CompactionPlan
from timeline.storage import Storage, join

DERIVE_KEY = "hoodie.metadata.derive.from.datatable.clean.policy"
MIN_COMMITS_RETAINED = 20             # HoodieMetadataWriteUtils: max(20, 1.2 x the data table's)
SCALE = 1.2
FILE_VERSIONS_NOT_DERIVED = 2
# cleanIfNecessary: completed metadata instants after the latest compaction before a clean runs
INSTANTS_AFTER_COMPACTION = 3
# hoodie.clean.trigger.max.commits (Hudi's default; the metadata write config copies the data's)
TRIGGER_MAX_COMMITS = 1
# HoodieTimeline.getCommitsAndCompactionTimeline: what counts as a commit for the ECTR
COMMIT_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION,
                            Action.LOG_COMPACTION, Action.CLUSTERING})


@dataclass(frozen=True)
class MetadataCleanPolicy:
    """The metadata table's cleaner policy and its one retained amount."""

    policy: CleanerPolicy
    commits_retained: int = 0
    file_versions_retained: int = 0
    hours_retained: int = 0

    @classmethod
    def derived_from(cls, data: ServiceConfig) -> "MetadataCleanPolicy":
        """The policy Java's metadata writer derives from the data table's configuration."""
        if not data.get(DERIVE_KEY):
            return cls(CleanerPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=FILE_VERSIONS_NOT_DERIVED)
        policy = CleanerPolicy(data.get("hoodie.cleaner.policy"))
        if policy is CleanerPolicy.KEEP_LATEST_COMMITS:
            # Java: (int) Math.max(20.0, commits * 1.2): a double, truncated
            return cls(policy, commits_retained=int(max(float(MIN_COMMITS_RETAINED),
                                                        data.get("hoodie.cleaner.commits.retained") * SCALE)))
        if policy is CleanerPolicy.KEEP_LATEST_FILE_VERSIONS:
            return cls(policy, file_versions_retained=math.ceil(data.get("hoodie.cleaner.fileversions.retained")
                                                                * SCALE))
        # Java reads the data table's hours as an int before scaling them
        return cls(policy, hours_retained=math.ceil(int(data.get("hoodie.cleaner.hours.retained")) * SCALE))

    def describe(self) -> str:
        amount = {CleanerPolicy.KEEP_LATEST_COMMITS: f"{self.commits_retained} commits",
                  CleanerPolicy.KEEP_LATEST_FILE_VERSIONS: f"{self.file_versions_retained} file versions",
                  CleanerPolicy.KEEP_LATEST_BY_HOURS: f"{self.hours_retained} hours"}[self.policy]
        return f"{self.policy.value}, {amount}"


# -- when -------------------------------------------------------------------------------------------
def clean_due(mdt: Timeline) -> bool:
    """``cleanIfNecessary``'s gate: no completed compaction yet, or at least 3 completed instants
    (any action) later than the latest one."""
    last = mdt.latest_completed(Action.COMMIT, Action.REPLACE_COMMIT)
    if last is None:
        return True
    after = sum(1 for i in mdt.newest_first(after=last.timestamp) if i.is_completed)
    return after >= INSTANTS_AFTER_COMPACTION


def commits_since_last_clean(storage: Storage, mdt: Timeline) -> int:
    """``CleanPlanActionExecutor.getCommitsSinceLastCleaning``: completed commits later than the
    previous clean's last completed commit (all of them without a clean)."""
    commits = [i for i in mdt.instants if i.is_completed and _is_commit(i)]
    last_clean = mdt.latest_completed(Action.CLEAN)
    if last_clean is None or not mdt.read_bytes(storage, last_clean):
        return len(commits)             # Java counts every commit after an empty clean file too
    previous: CleanMetadata = mdt.payload(storage, last_clean)
    since = previous.last_completed_commit_timestamp or ""
    return sum(1 for i in commits if i.timestamp > since)


def _is_commit(instant: Instant) -> bool:
    return instant.action in COMMIT_ACTIONS


# -- the earliest commit to retain -----------------------------------------------------------------
def earliest_commit_to_retain(mdt: Timeline, policy: MetadataCleanPolicy, now_ms: int,
                              timezone: str) -> Instant | None:
    """``CleanerUtils.getEarliestCommitToRetain`` over the commits-and-compaction timeline."""
    commits = [i for i in mdt.instants if _is_commit(i)]
    completed = [i for i in commits if i.is_completed]
    if policy.policy is CleanerPolicy.KEEP_LATEST_COMMITS:
        if len(completed) <= policy.commits_retained:
            return None
        nth = completed[len(completed) - policy.commits_retained]
        pending = next((i for i in commits if not i.is_completed), None)
        if pending is None or nth.timestamp <= pending.timestamp:
            return nth
        # a pending commit or compaction may still need what it started from
        return next((i for i in reversed(completed) if i.timestamp < pending.timestamp), None)
    if policy.policy is CleanerPolicy.KEEP_LATEST_BY_HOURS:
        cutoff = format_instant(now_ms - policy.hours_retained * 3_600_000, resolve_timezone(timezone))
        return next((i for i in completed if i.timestamp >= cutoff), None)
    return None


# -- what -------------------------------------------------------------------------------------------
def _reserved(storage: Storage, mdt: Timeline) -> set[tuple[str, str, str]]:
    """(partition, file id, base instant) of the slices pending compactions and log compactions read."""
    out: set[tuple[str, str, str]] = set()
    for instant in mdt.pending(Action.COMPACTION, Action.LOG_COMPACTION):
        plan = mdt.plan_of(storage, instant)
        if isinstance(plan, CompactionPlan):
            out.update((op.partition_path or "", op.file_id or "", op.base_instant_time or "")
                       for op in plan.operations or ())
    return out


def _doomed_by_commits(slices_newest_first: list[FileSlice], ectr: Instant) -> list[FileSlice]:
    """``getFilesToCleanKeepingLatestCommits``: slices based before the ECTR, but the latest and
    the newest one based before the ECTR (what a reader at the ECTR uses)."""
    latest = slices_newest_first[0].base_instant
    before = next((s.base_instant for s in slices_newest_first if s.base_instant < ectr.timestamp), None)
    return [s for s in slices_newest_first
            if s.base_instant not in (latest, before) and s.base_instant < ectr.timestamp]


def _doomed_by_versions(slices_newest_first: list[FileSlice], keep: int, group_reserved: bool) -> list[FileSlice]:
    """``getFilesToCleanKeepingLatestVersions``: the newest ``keep`` slices stay (one fewer when a
    pending compaction reserves a slice of the group)."""
    return slices_newest_first[max(0, keep - 1 if group_reserved else keep):]


def build_clean_plan(storage: Storage, mdt_base_path: str, config: TableConfig, mdt: Timeline,
                     policy: MetadataCleanPolicy, now_ms: int) -> CleanerPlan | None:
    """The metadata table's clean plan, or None when it would delete nothing."""
    ectr = earliest_commit_to_retain(mdt, policy, now_ms, config.timezone)
    if policy.policy is not CleanerPolicy.KEEP_LATEST_FILE_VERSIONS and ectr is None:
        return None
    reserved = _reserved(storage, mdt)
    view = FileSystemView.build(storage, mdt_base_path, config, mdt, metadata_partitions(storage, mdt_base_path),
                                sizes=False)
    files: dict[str, list[str]] = {}
    for group in view.groups:
        if not group.slices:
            continue
        newest_first = list(reversed(group.slices))
        keyed = [(group.partition, group.file_id, s.base_instant) for s in newest_first]
        unreserved = [s for s, key in zip(newest_first, keyed) if key not in reserved]
        if policy.policy is CleanerPolicy.KEEP_LATEST_FILE_VERSIONS:
            doomed = _doomed_by_versions(unreserved, policy.file_versions_retained,
                                         any(key in reserved for key in keyed))
        else:
            doomed = [s for s in _doomed_by_commits(newest_first, ectr) if s in unreserved]
        folder = join(mdt_base_path, group.partition)
        for s in doomed:
            files.setdefault(group.partition, []).extend(f"{folder}/{name}" for name in s.file_names)
    if not any(files.values()):
        return None
    last = next((i for i in reversed(mdt.instants) if i.is_completed and _is_commit(i)), None)
    return CleanerPlan(
        policy=policy.policy.value,
        earliest_instant_to_retain=(ActionInstant(ectr.timestamp, ectr.action.value, State.COMPLETED.name)
                                    if ectr is not None else None),
        last_completed_commit_timestamp=last.timestamp if last else "",
        file_paths_to_be_deleted_per_partition={p: tuple(CleanFileInfo(f, False) for f in sorted(v))
                                                for p, v in sorted(files.items())},
        partitions_to_be_deleted=(), extra_metadata={})


__all__ = ["DERIVE_KEY", "MetadataCleanPolicy", "build_clean_plan", "clean_due", "commits_since_last_clean",
           "earliest_commit_to_retain"]
