"""Planning a rollback: which files the target instant left, and what to do with each.

The plan is a ``HoodieRollbackPlan`` (``timeline.payloads.RollbackPlan``), persisted as
``R.rollback.requested`` before anything is touched, so a crashed rollback resumes from
exactly the same list.  Per file:

* **delete** — base files named with the target ``T``; log files every valid block of
  which is from ``T`` (v6), or that are named with ``T`` (v8/v9, where every log file
  carries its own write's instant).  A file that is already gone is still listed: a
  missing file counts as deleted.
* **append a rollback command block** (v6 only) — log files that also hold blocks of
  other instants and received ``T``'s blocks (Java appends to the latest log of a slice).
  The request carries ``fileId``/``latestBaseInstant`` and ``logBlocksToBeDeleted``
  (log file → size), as Java's ``MarkerBasedRollbackStrategy`` writes it.

Where the file list comes from:

* a pending target with markers: its markers (``.hoodie/.temp/<T>/``, DIRECT files and
  Java's ``MARKERS<n>`` files);
* otherwise (no markers, or a completed target, whose markers are gone): listing — files
  named with ``T`` in every partition, the log files of ``T``'s commit metadata (completed
  target), and in v6 every log file whose blocks carry ``INSTANT_TIME = T`` (the block
  headers are read; v6 log files are named after their slice, not their write).

Guards: a base file not named with ``T`` is never deleted, and neither is a log file
holding valid blocks of another instant (v6 gets a command block instead, v8 skips it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tablesvc.errors import FileNameError, InvalidInputError
from tablesvc.fsview.names import BaseFileName, LogFileName, looks_like_log_file
from tablesvc.fsview.partitions import list_partitions
from tablesvc.logformat import read_log_file
from tablesvc.write.markers import list_markers, marker_dir
from timeline.active import Timeline
from timeline.errors import UnknownInstantError
from timeline.instant import Action, Instant, TimelineLayout, validate_instant_time
from timeline.payloads import InstantInfo, RollbackPlan, RollbackRequest
from timeline.storage import join

# Actions whose pending instants keep their plan when rolled back (re-executed later).
PLAN_KEEPING_ACTIONS = frozenset({"compaction", "logcompaction", "clustering"})
# Actions a rollback may target.
ROLLBACKABLE = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION,
                          Action.LOG_COMPACTION, Action.CLUSTERING})


@dataclass(frozen=True)
class PlanSummary:
    """Counts of what a plan will do (for results and dry runs)."""

    files_to_delete: tuple[str, ...]
    command_block_files: tuple[str, ...]   # log files that get a rollback block in their slice
    slices_with_command_blocks: int

    @classmethod
    def of(cls, plan: RollbackPlan) -> "PlanSummary":
        deletes: list[str] = []
        logs: list[str] = []
        slices = 0
        for r in plan.rollback_requests or ():
            deletes.extend(r.files_to_be_deleted)
            if r.log_blocks_to_be_deleted:
                slices += 1
                logs.extend(r.log_blocks_to_be_deleted)
        return cls(tuple(deletes), tuple(logs), slices)


def target_instant(timeline: Timeline, timestamp: str) -> Instant | None:
    """The instant at ``timestamp`` other than a rollback (rollback instants are never targets
    of this lookup; they share no timestamp with anything else in practice)."""
    found = [i for i in timeline.instants if i.timestamp == timestamp and i.action is not Action.ROLLBACK]
    return max(found, key=lambda i: i.state.rank) if found else None


def target_action_name(timeline: Timeline, instant: Instant) -> str:
    """What ``instantToRollback.action`` holds: the pending action (``compaction`` for a pending
    compaction) or, for a completed instant, the action of its completed file (``commit``).
    The executor reads it back to decide whether the target keeps its plan."""
    return (timeline.origin_action(instant) if instant.is_pending else instant.action).value


def plan_rollback(table, target_timestamp: str, *, rollback_timestamp: str | None = None) -> RollbackPlan:
    """The rollback plan for ``target_timestamp`` (pending or completed) as the table is now.

    ``rollback_timestamp`` is the rollback instant the plan is made for, when the caller has
    one; Hudi's plan does not record it, so it is only checked to come after the target.
    Raises ``UnknownInstantError`` (exit 2) when the target is not on the timeline and
    ``InvalidInputError`` when it is not an action a rollback undoes.
    """
    validate_instant_time(target_timestamp, "instant to roll back")
    if rollback_timestamp is not None:
        validate_instant_time(rollback_timestamp, "rollback instant")
        if rollback_timestamp <= target_timestamp:
            raise InvalidInputError(f"rollback instant {rollback_timestamp} must come after the instant it rolls "
                                    f"back ({target_timestamp})")
    timeline = table.timeline()
    instant = target_instant(timeline, target_timestamp)
    if instant is None:
        raise UnknownInstantError(f"instant {target_timestamp} is not on the timeline of {table.base_path}")
    check_rollbackable(timeline, instant)
    return build_plan(table, timeline, instant)


def check_rollbackable(timeline: Timeline, instant: Instant) -> None:
    action = timeline.origin_action(instant)
    if action not in ROLLBACKABLE:
        raise InvalidInputError(f"instant {instant.timestamp} is a {action.value}, which rollback does not undo "
                                "(only commit, deltacommit, replacecommit, compaction, logcompaction, clustering)")


def build_plan(table, timeline: Timeline, instant: Instant) -> RollbackPlan:
    t = instant.timestamp
    storage, base = table.storage, table.base_path
    v6 = table.config.layout is TimelineLayout.V1
    candidates: dict[tuple[str, str], bool] = {}   # (partition, file name) -> came from a marker
    markers = list_markers(storage, base, t) if instant.is_pending else []
    if markers:
        for partition, name, _io in markers:
            candidates[(partition, name)] = True
    else:
        for key in listed_files(table, timeline, t, v6, completed=instant if instant.is_completed else None):
            candidates.setdefault(key, False)

    deletes: dict[str, list[str]] = defaultdict(list)
    commands: dict[tuple[str, str, str], dict[str, int]] = defaultdict(dict)
    for (partition, name), from_marker in sorted(candidates.items()):
        path = join(base, partition, name)
        decision = file_decision(storage, path, name, t, v6, from_marker)
        if decision == "delete":
            deletes[partition].append(path)
        elif decision == "command":
            ln = LogFileName.parse(name)
            size = storage.stat(path).size
            commands[(partition, ln.file_id, ln.instant)][path] = size

    requests = [RollbackRequest(partition, "", "", tuple(paths), {}) for partition, paths in sorted(deletes.items())]
    requests += [RollbackRequest(partition, fid, base_instant, (), dict(sorted(logs.items())))
                 for (partition, fid, base_instant), logs in sorted(commands.items())]
    return RollbackPlan(InstantInfo(t, target_action_name(timeline, instant)), tuple(requests), 1)


def file_decision(storage, path: str, name: str, t: str, v6: bool, from_marker: bool) -> str | None:
    """What rolling back ``t`` does to one file: ``"delete"``, ``"command"`` (v6: append a
    rollback command block) or ``None`` (leave the file alone)."""
    if looks_like_log_file(name):
        try:
            ln = LogFileName.parse(name)
        except FileNameError:
            return None
        if not v6 and ln.instant == t:
            return "delete"  # v8/v9: the file is the write's own
        try:
            contents = read_log_file(storage, path)
        except FileNotFoundError:
            return "delete"  # listed by a marker, never written or already deleted: counts as deleted
        mine = [b for b in contents.blocks if b.instant_time == t]
        others = [b for b in contents.blocks if b.instant_time != t]
        if not others:
            # every valid block is T's (or the file holds only a torn append of T): T created it
            return "delete" if (mine or contents.corrupt or from_marker) else None
        if not v6:
            return None  # v8/v9 never append across instants; never delete another write's blocks
        # v6: committed blocks plus T's -> a rollback command block in the slice.  A marker-listed
        # file gets one even if T's block was torn (the block then discards the torn bytes).
        return "command" if (mine or from_marker) else None
    if name.startswith("."):
        return None
    try:
        bn = BaseFileName.parse(name)
    except FileNameError:
        return None
    return "delete" if bn.instant == t else None


def listed_files(table, timeline: Timeline, t: str, v6: bool, *,
                 completed: Instant | None = None) -> set[tuple[str, str]]:
    """(partition, file name) of the files a listing attributes to instant ``t``: data files
    named with it, v6 log files whose blocks carry it (``t`` not completed), and, for
    ``completed`` (``t``'s completed instant), the files of its commit metadata.  ``t`` need not
    be on the timeline any more (a rolled-back instant's late files: ``executor.sweep_rolled_back``)."""
    storage, base = table.storage, table.base_path
    out: set[tuple[str, str]] = set()
    if completed is not None:
        md = timeline.commit_metadata(storage, completed)
        for stat in (md.write_stats() if md is not None else ()):
            if stat.path:
                partition, _, name = stat.path.rpartition("/")
                out.add((partition, name))
    for partition in list_partitions(storage, base, table.config.is_partitioned):
        folder = join(base, partition) if partition else base
        for info in storage.list_dir(folder):
            if info.is_dir:
                continue
            name = info.name
            if looks_like_log_file(name):
                try:
                    ln = LogFileName.parse(name)
                except FileNameError:
                    continue
                if not v6:
                    if ln.instant == t:
                        out.add((partition, name))
                elif ln.instant <= t and completed is None:
                    # v6: logs are named after their slice; only the block headers tell the write
                    try:
                        contents = read_log_file(storage, info.path)
                    except FileNotFoundError:
                        continue
                    if any(b.instant_time == t for b in contents.blocks):
                        out.add((partition, name))
            elif not name.startswith("."):
                try:
                    if BaseFileName.parse(name).instant == t:
                        out.add((partition, name))
                except FileNameError:
                    continue
    return out


def has_markers(table, timestamp: str) -> bool:
    return bool(table.storage.list_dir(marker_dir(table.base_path, timestamp)))


__all__ = ["PLAN_KEEPING_ACTIONS", "PlanSummary", "ROLLBACKABLE", "build_plan", "check_rollbackable",
           "file_decision", "has_markers", "listed_files", "plan_rollback", "target_action_name", "target_instant"]
