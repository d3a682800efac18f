"""Planning a clean: which file slices no reader or pending service needs any more.

Policies (``hoodie.cleaner.policy``):

* KEEP_LATEST_COMMITS (``hoodie.cleaner.commits.retained``, 10): with n completed writes
  (commits, delta commits, replace commits, compaction commits) and n > retained, the
  earliest commit to retain (ECTR) is the (n - retained)-th.  Per file group, keep every
  slice based after the ECTR and the newest slice based at or before it (what a reader
  at the ECTR uses); older slices go.
* KEEP_LATEST_BY_HOURS (``hoodie.cleaner.hours.retained``, 24): the ECTR is the first
  completed write at or after now - hours (table timezone, injected clock); same rule.
* KEEP_LATEST_FILE_VERSIONS (``hoodie.cleaner.fileversions.retained``, 3): keep the
  newest N slices of every file group (N - 1 when a pending compaction reserves one).

Always kept: the latest slice of every live file group; slices a pending compaction or log
compaction reads; files a savepoint holds.  File groups replaced at or before the ECTR go
entirely; with KEEP_LATEST_FILE_VERSIONS every replaced file group goes (as in Hudi).
The ECTR never passes the earliest pending write or compaction.
Planning is incremental: with a previous clean, only partitions written by instants
between its ECTR and the new one are scanned (``hoodie.cleaner.incremental.mode``), unless
that ECTR is older than the active timeline's start (archived writes: every partition).
A plan that deletes nothing is never written (Hudi's "nothing to clean"), ECTR moved or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Iterator

from tablesvc.config.loader import ServiceConfig
from tablesvc.config.registry import CleanerPolicy
from tablesvc.fsview.view import FileGroup, FileSlice, FileSystemView
from timeline.active import Timeline, WRITE_ACTIONS, gc_paused
from timeline.instant import Action, Instant
from timeline.instant_time import format_instant, resolve_timezone
from timeline.payloads import ActionInstant, CleanFileInfo, CleanerPlan, CleanMetadata, CompactionPlan
from timeline.storage import join


@dataclass(frozen=True)
class CleanConfig:
    policy: CleanerPolicy
    commits_retained: int
    file_versions_retained: int
    hours_retained: float
    incremental: bool

    @classmethod
    def from_service_config(cls, config: ServiceConfig) -> "CleanConfig":
        return cls(CleanerPolicy(config.get("hoodie.cleaner.policy")),
                   config.get("hoodie.cleaner.commits.retained"),
                   config.get("hoodie.cleaner.fileversions.retained"),
                   config.get("hoodie.cleaner.hours.retained"),
                   config.get("hoodie.cleaner.incremental.mode"))


@dataclass(frozen=True)
class PlannedClean:
    plan: CleanerPlan | None      # None: nothing to record
    reason: str
    files: int
    partitions_scanned: int


def _earliest_commit_to_retain(timeline: Timeline, cfg: CleanConfig, now_ms: int, tz) -> Instant | None:
    # Each step looks at the recent end of the timeline only (or bisects to the window): on a
    # long active timeline this decides "nothing to clean" without walking every instant.
    if cfg.policy is CleanerPolicy.KEEP_LATEST_COMMITS:
        ectr = _nth_newest_write(timeline, cfg.commits_retained)
    elif cfg.policy is CleanerPolicy.KEEP_LATEST_BY_HOURS:
        ectr = _first_write_in_window(timeline, format_instant(now_ms - int(cfg.hours_retained * 3_600_000), tz))
    else:
        return None
    pending = timeline.pending(*WRITE_ACTIONS, Action.COMPACTION, Action.LOG_COMPACTION)
    if ectr is not None and pending and pending[0].timestamp < ectr.timestamp:
        # A pending write or compaction may still need what it started from.
        ectr = next(_writes_newest_first(timeline, timeline.position(pending[0].timestamp)), None)
    return ectr


def _writes_newest_first(timeline: Timeline, end: int) -> Iterator[Instant]:
    """The completed writes among ``timeline.instants[:end]``, newest first."""
    instants = timeline.instants
    for k in range(end - 1, -1, -1):
        if _is_completed_write(instants[k]):
            yield instants[k]


def _is_completed_write(instant: Instant) -> bool:
    return instant.is_completed and instant.action in WRITE_ACTIONS


def _nth_newest_write(timeline: Timeline, n: int) -> Instant | None:
    """KEEP_LATEST_COMMITS: with more than ``n`` completed writes, the n-th newest (which is
    ``completed_writes()[len - n]``); else None."""
    if n < 1:   # the config refuses it; keep the plain definition rather than guess
        completed = timeline.completed_writes()
        return completed[len(completed) - n] if len(completed) > n else None
    newest = list(islice(_writes_newest_first(timeline, len(timeline.instants)), n + 1))
    return newest[n - 1] if len(newest) > n else None


def _first_write_in_window(timeline: Timeline, cutoff: str) -> Instant | None:
    """KEEP_LATEST_BY_HOURS: the first completed write at or after ``cutoff``, or None when it
    is the first completed write of all; when every write is older, the latest one (only what
    the latest needs is retained)."""
    instants = timeline.instants
    start = timeline.position(cutoff)
    recent = next((instants[k] for k in range(start, len(instants)) if _is_completed_write(instants[k])), None)
    if recent is None:
        return next(_writes_newest_first(timeline, len(instants)), None)
    older = next(_writes_newest_first(timeline, start), None)
    return recent if older is not None else None


def _previous_clean(table, timeline: Timeline) -> CleanMetadata | None:
    done = timeline.latest_completed(Action.CLEAN)
    return timeline.payload(table.storage, done) if done is not None else None


def _partitions_written(table, timeline: Timeline, start: str, end: str) -> set[str]:
    """Partitions written or replaced by completed writes with start <= instant < end."""
    out: set[str] = set()
    instants = timeline.instants
    for k in range(timeline.position(start), timeline.position(end)):
        if _is_completed_write(instants[k]):
            md = timeline.commit_metadata(table.storage, instants[k])
            out.update(md.partitions())
            out.update(p for p, _ in md.replaced_file_ids())
    return out


def _reserved_slices(table, timeline: Timeline) -> set[tuple[str, str, str]]:
    """(partition, file id, base instant) of slices pending compactions or log compactions read."""
    out = set()
    for instant in timeline.pending(Action.COMPACTION, Action.LOG_COMPACTION):
        plan = timeline.plan_of(table.storage, instant)
        if isinstance(plan, CompactionPlan):
            for op in plan.operations or ():
                out.add((op.partition_path or "", op.file_id or "", op.base_instant_time or ""))
    return out


def _savepointed_files(table, timeline: Timeline) -> set[str]:
    files: set[str] = set()
    for instant in timeline.completed(Action.SAVEPOINT):
        md = timeline.payload(table.storage, instant)
        for names in (getattr(md, "partition_metadata", None) or {}).values():
            files.update(names)
    return files


def _slices_to_delete(group: FileGroup, cfg: CleanConfig, ectr: Instant | None,
                      reserved: set[tuple[str, str, str]]) -> list[FileSlice]:
    newest_first = list(reversed(group.slices))
    doomed: list[FileSlice] = []
    if cfg.policy is CleanerPolicy.KEEP_LATEST_FILE_VERSIONS:
        keep = cfg.file_versions_retained
        if any((group.partition, group.file_id, s.base_instant) in reserved for s in newest_first):
            keep = max(1, keep - 1)
        doomed = newest_first[keep:]
    elif ectr is not None:
        # Keep every slice based after the ECTR, and the newest one based at or before it (what
        # a reader at the ECTR uses; it may be the latest slice itself).  Older slices go.
        upto = [s for s in newest_first if s.base_instant <= ectr.timestamp]
        doomed = [s for s in upto[1:] if s is not newest_first[0]]
    return [s for s in doomed if (group.partition, group.file_id, s.base_instant) not in reserved]


def nothing_to_clean(table, config: ServiceConfig, timeline: Timeline) -> str | None:
    """Why no clean is due, when ``timeline`` alone shows it (no file listing); None when only a
    plan can tell.  ``plan_clean`` returns exactly this reason in that case."""
    cfg = CleanConfig.from_service_config(config)
    ectr = _earliest_commit_to_retain(timeline, cfg, table.clock.now_ms(), resolve_timezone(table.config.timezone))
    return _timeline_says_nothing(timeline, cfg, ectr, _previous_ectr(table, timeline))


def _previous_ectr(table, timeline: Timeline) -> str:
    previous = _previous_clean(table, timeline)
    return previous.earliest_commit_to_retain if previous else ""


def _timeline_says_nothing(timeline: Timeline, cfg: CleanConfig, ectr: Instant | None, prev_ectr: str) -> str | None:
    if cfg.policy is not CleanerPolicy.KEEP_LATEST_FILE_VERSIONS and ectr is None:
        why = (f"{len(timeline.completed_writes())} completed commits <= {cfg.commits_retained} retained "
               "(KEEP_LATEST_COMMITS)" if cfg.policy is CleanerPolicy.KEEP_LATEST_COMMITS else
               f"no completed commit is older than {cfg.hours_retained} hours (KEEP_LATEST_BY_HOURS)")
        return f"nothing to clean: {why}"
    if (ectr is not None and ectr.timestamp == prev_ectr and cfg.policy is not CleanerPolicy.KEEP_LATEST_FILE_VERSIONS
            and not timeline.pending(Action.CLEAN)):
        # Decided from the timeline alone: slices only become cleanable when the ECTR moves.
        return f"nothing to clean: the earliest commit to retain is still {prev_ectr}"
    return None


def _files_to_delete(table, view: FileSystemView, partitions: set[str], replaced: set[tuple[str, str]],
                     cfg: CleanConfig, ectr: Instant | None, reserved: set[tuple[str, str, str]],
                     savepointed: set[str]) -> dict[str, list[str]]:
    """Partition -> paths of the files of the slices to delete (savepointed files kept)."""
    files: dict[str, list[str]] = {}
    for group in view.groups:
        if group.partition not in partitions:
            continue
        if (group.partition, group.file_id) in replaced:
            doomed = list(group.slices)
        else:
            doomed = _slices_to_delete(group, cfg, ectr, reserved)
        folder = join(table.base_path, group.partition)   # join(base, partition, name) == folder/name
        for s in doomed:
            for name in s.file_names:
                if name not in savepointed:
                    files.setdefault(s.partition, []).append(f"{folder}/{name}")
    return files


def plan_clean(table, config: ServiceConfig, timeline: Timeline | None = None) -> PlannedClean:
    cfg = CleanConfig.from_service_config(config)
    timeline = timeline or table.timeline()
    tz = resolve_timezone(table.config.timezone)
    ectr = _earliest_commit_to_retain(timeline, cfg, table.clock.now_ms(), tz)
    prev_ectr = _previous_ectr(table, timeline)
    reason = _timeline_says_nothing(timeline, cfg, ectr, prev_ectr)
    if reason is not None:
        return PlannedClean(None, reason, 0, 0)
    written = None
    # As Hudi's CleanPlanner: a previous ECTR older than the active timeline's start means the
    # writes after it were (partly) archived, and their partitions are no longer known: scan all.
    prev_ectr_archived = bool(prev_ectr) and timeline.start is not None and prev_ectr < timeline.start
    if (cfg.incremental and prev_ectr and not prev_ectr_archived and ectr is not None
            and cfg.policy is not CleanerPolicy.KEEP_LATEST_FILE_VERSIONS):
        written = _partitions_written(table, timeline, prev_ectr, ectr.timestamp)
    # Names only: a clean deletes whole slices and needs no file sizes (no stat per data file).
    # Incremental: the other partitions are found (listed) but not grouped.
    view = FileSystemView.build(table.storage, table.base_path, table.config, timeline, sizes=False, only=written)
    partitions = set(view.partitions)
    reserved = _reserved_slices(table, timeline)
    savepointed = _savepointed_files(table, timeline)
    if cfg.policy is CleanerPolicy.KEEP_LATEST_FILE_VERSIONS:
        # As in Hudi (CleanPlanner.getFilesToCleanKeepingLatestVersions): a replaced file group is
        # cleanable whole; file versions only count for live groups.
        replaced = view.replaced_file_ids(table.storage)
    else:
        replaced = view.replaced_file_ids(table.storage, ectr.timestamp) if ectr else set()
    last = timeline.latest_completed(*WRITE_ACTIONS)
    with gc_paused():   # a path and a CleanFileInfo per deleted file: many objects, no cycles
        files = _files_to_delete(table, view, partitions, replaced, cfg, ectr, reserved, savepointed)
        plan = CleanerPlan(
            policy=cfg.policy.value,
            earliest_instant_to_retain=ActionInstant(ectr.timestamp, ectr.action.value, "COMPLETED") if ectr else None,
            last_completed_commit_timestamp=last.timestamp if last else "",
            file_paths_to_be_deleted_per_partition={p: tuple(CleanFileInfo(f, False) for f in sorted(v))
                                                    for p, v in sorted(files.items())},
            partitions_to_be_deleted=())
    count = sum(len(v) for v in files.values())
    if count:
        return PlannedClean(plan, f"{count} files in {len(files)} partitions", count, len(partitions))
    # As Hudi (CleanPlanActionExecutor: "Nothing to clean here"), a plan that deletes nothing is not
    # written, even when the ECTR moved: the next clean's incremental window then starts at the
    # last recorded clean's ECTR (or it scans every partition), and time travel keeps every instant.
    moved = (f" (the earliest commit to retain would move to {ectr.timestamp}; no clean instant is written "
             "for that alone)" if ectr is not None else "")
    return PlannedClean(None, f"nothing to clean: every file group holds only slices that are retained{moved}",
                        0, len(partitions))
