"""Executing rollbacks: one instant (``rollback``), every failed one (``rollback_failed``),
and the writer's eager pass (``eager_rollback``).

Steps of one rollback ``R`` of target ``T`` (docs/rollback.md has the crash table):

1. plan (no changes); under the table lock re-read ``T``'s state, re-check its heartbeat
   (pending) or its dependants (completed), pick ``R`` and create ``R.rollback.requested``
   holding the plan;
2. ``R.rollback.inflight``; a heartbeat for ``R`` beats while it runs;
3. a completed ``T`` is reverted to inflight (its completed file deleted);
4. the plan's file operations: deletes (a missing file counts as deleted) and, v6, one
   rollback command block per slice as a new log version ``.<fid>_<base>.log.<max+1>_1-0-1``
   (skipped when the slice already holds the block of (R, T));
5. ``T``'s markers are deleted;
6. ``R`` completes with ``HoodieRollbackMetadata``;
7. ``T``'s timeline files go last: a pending compaction / log compaction / clustering is
   reverted to requested (its plan is re-executed later), anything else is removed;
8. ``T``'s heartbeat file is deleted (and ``R``'s, when a re-run finishes a rollback whose
   process died after completing ``R``).

``rollback_failed`` (the recovery sweep) ends by removing the marker folders and heartbeat
files of instants that are no longer pending (``remove_leftovers``): what a process killed
after completing its instant, or a rollback killed after removing its target, leaves behind.
Which pending instants it rolls back is ``pending.classify_pending``'s verdict ``FAILED``; the
report of what it left pending (``recovery.recover``, ``tablesvc status``) is the same call.

Every step is idempotent, so re-running a half-done rollback finishes it under the same
``R`` (a pending rollback of ``T`` is always resumed, never duplicated).  Steps 2 and 6 are the
one instant lifecycle (``services/lifecycle``, ``ROLLBACK_LIFECYCLE``: heartbeat before the
start, an inflight ``R`` resumed, a completion by another run taken as done); step 1's request
re-checks ``T`` under the lock with its own lock wait, so it stays here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tablesvc.config import load_config, service_config
from tablesvc.errors import ConflictError, InvalidInputError, TablesvcError, UnknownInstantError, UnsupportedTableError
from tablesvc.fsview.names import PARTITION_METAFILE
from tablesvc.logfiles import append_rollback_command_block
from tablesvc.metadata.maintain import rollback_refusal
from tablesvc.services.lifecycle import ROLLBACK_LIFECYCLE, InstantLifecycle
from tablesvc.services.metrics import RollbackMetrics
from tablesvc.services.result import ServiceResult, Status
from tablesvc.services.temporary_copies import sweep_temporary_copies
from tablesvc.services.rollback.pending import (
    INTERVAL_KEY, MISSES_KEY, WRITE_ACTIONS, HeartbeatWindow, Liveness, Verdict,
    classify_pending, rollback_plans, target_of,
)
from tablesvc.services.rollback.planner import (
    PLAN_KEEPING_ACTIONS, PlanSummary, build_plan, check_rollbackable, file_decision, has_markers, listed_files,
    target_action_name, target_instant,
)
from tablesvc.storage import discard_partial_copies
from tablesvc.services.metadata_drops import drop_opted_out_partitions, prepend_drop, with_drop
from tablesvc.table.writable import ROLLBACK, require_writable
from tablesvc.write.markers import MARKER_ROOT, delete_markers, list_markers, marker_dir
from timeline.active import Timeline
from timeline.errors import IllegalTransitionError, InstantExistsError
from timeline.heartbeat import HEARTBEAT_DIR, Heartbeat, heartbeat_path, is_expired
from timeline.instant import Action, Instant, State, TimelineLayout, validate_instant_time
from timeline.lock import DEFAULT_TTL_MS
from timeline.payloads import (
    InstantInfo, RollbackMetadata, RollbackPartitionMetadata, RollbackPlan, encode_rollback_metadata,
    encode_rollback_plan,
)
from timeline.storage import join

ACTION = "rollback"
POLICY_KEY = "hoodie.cleaner.policy.failed.writes"
LOCK_WAIT_KEY = "hoodie.write.lock.wait_time_ms"
# A lock left by a killed process (the very crash a rollback recovers from) expires after
# DEFAULT_TTL_MS, so the rollback waits a little longer than that rather than failing the
# recovery with "lock held".
LOCK_TTL_MS = DEFAULT_TTL_MS


class _Skip(Exception):
    """Inside ``rollback_failed``: the instant is no longer a failed one (alive, completed, gone)."""


@dataclass(frozen=True)
class _Settings:
    interval_ms: int
    misses: int
    policy: str
    lock_wait_ms: int = LOCK_TTL_MS + 5_000

    @classmethod
    def of(cls, table, config) -> "_Settings":
        # Files of a failed write may be in an inflight metadata-table commit too; deleting
        # them here without rolling that back would leave it inconsistent.
        require_writable(table, ROLLBACK)
        cfg = service_config(config) if config is not None else load_config(table.storage, table_path=table.base_path)
        window = HeartbeatWindow.of(cfg)
        return cls(window.interval_ms, window.misses, str(cfg.get(POLICY_KEY)).upper(),
                   max(int(cfg.get(LOCK_WAIT_KEY)), LOCK_TTL_MS + 5_000))

    @property
    def window(self) -> HeartbeatWindow:
        return HeartbeatWindow(self.interval_ms, self.misses)

    @property
    def window_ms(self) -> int:
        return self.window.window_ms


def _expired(table, timestamp: str, s: _Settings) -> bool:
    return Liveness.read(table, timestamp, s.window).expired


def _alive_message(table, instant: Instant, s: _Settings) -> str:
    beat = Liveness.read(table, instant.timestamp, s.window)
    return (f"instant {instant.timestamp} ({instant.action.value}, {instant.state.value}) is still running: "
            f"heartbeat alive: {beat.describe()} (heartbeat {heartbeat_path(table.base_path, instant.timestamp)}, "
            f"judged dead {s.window_ms} ms after its last beat = {INTERVAL_KEY} x {MISSES_KEY}); retry later")


def _blockers(timeline: Timeline, instant: Instant) -> list[Instant]:
    """Instants that stop a completed ``instant`` from being rolled back."""
    later = [i for i in timeline.instants if i.timestamp > instant.timestamp
             and i.action.completed_action not in (Action.ROLLBACK, Action.CLEAN)]
    return later[::-1]  # newest first: the order to roll them back in


def _describe(instants) -> str:
    return ", ".join(f"{i.timestamp} ({i.action.value}, {i.state.value})" for i in instants)


def _resolve(table, path: str) -> str:
    """A plan path as storage sees it: absolute (Java writes ``file:/…``) or relative to the table."""
    if path.startswith("file:") or path.startswith("/") or "://" in path:
        return path
    return join(table.base_path, path)


# =============================================================================================
# Public API
# =============================================================================================

def rollback(table, target_timestamp: str, *, dry_run: bool = False, allow_completed: bool = False,
             config=None, fence=None) -> ServiceResult:
    """Roll back one instant (see the module doc for the steps).

    * unknown instant → ``UnknownInstantError`` (exit 2);
    * pending with a live heartbeat → ``ConflictError`` (exit 3);
    * completed → only with ``allow_completed``, and only when no later instant other than a
      rollback or clean exists (else ``InvalidInputError`` naming the blockers);
    * a pending rollback of the same target is resumed instead of creating a new one;
    * ``fence`` (the async runner's lease check) runs first: a worker that lost the job does
      nothing.  Every step being idempotent, two holders of the same plan delete the same files.
    """
    validate_instant_time(target_timestamp, "instant to roll back")
    dropped = None if dry_run else drop_opted_out_partitions(table, ROLLBACK, config)
    s = _Settings.of(table, config)
    if fence is not None:
        fence()
    result = _rollback(table, target_timestamp, s, dry_run=dry_run, allow_completed=allow_completed,
                       failed_only=False)
    if not dry_run:
        remove_leftovers(table, s.interval_ms, s.misses)   # e.g. the first beat of a rollback killed before R existed
    return with_drop(result, dropped)


def rollback_failed(table, *, dry_run: bool = False, config=None) -> list[ServiceResult]:
    """Finish pending rollbacks, then roll back every failed instant, newest first: pending
    writes (deltacommit, commit, replacecommit) and inflight compactions / log compactions whose
    heartbeat expired; then remove leftover markers and heartbeats of instants that are no
    longer pending.  Empty when nothing failed."""
    dropped = None if dry_run else drop_opted_out_partitions(table, ROLLBACK, config)
    return prepend_drop(dropped, _rollback_failed(table, _Settings.of(table, config), dry_run=dry_run,
                                                  writes_only=False))


def eager_rollback(table, *, config=None) -> list[ServiceResult]:
    """What a writer runs before it starts (``hoodie.cleaner.policy.failed.writes=EAGER``, the
    default): finish pending rollbacks and roll back failed writes (not compactions)."""
    s = _Settings.of(table, config)
    if s.policy != "EAGER":
        return []
    return _rollback_failed(table, s, dry_run=False, writes_only=True)


# =============================================================================================
# Internals
# =============================================================================================

def _rollback_failed(table, s: _Settings, *, dry_run: bool, writes_only: bool) -> list[ServiceResult]:
    """Acts on exactly what ``pending.classify_pending`` calls ``FAILED`` (the report of what is
    left pending comes from the same function); ``_rollback`` re-checks each under the lock."""
    results: list[ServiceResult] = []
    # 1. pending rollbacks whose process died first: a half-done rollback is finished under its
    #    own instant (whatever its target is: the eager pass finishes them too)
    for p in classify_pending(table, s.window):
        if p.verdict is Verdict.FAILED and p.rollback is not None:
            results.append(_resume(table, p.rollback, p.rollback_plan, s, dry_run=dry_run, allow_completed=False))
    # 2. failed instants, newest first (a dry run skips those step 1 already would resume)
    for p in reversed(classify_pending(table, s.window)):
        if p.verdict is not Verdict.FAILED or p.rollback is not None:
            continue
        if writes_only and p.action not in WRITE_ACTIONS:
            continue
        try:
            results.append(_rollback(table, p.instant.timestamp, s, dry_run=dry_run, allow_completed=False,
                                     failed_only=True))
        except _Skip:
            continue
    # 3. leftovers (markers, heartbeats) of instants that finished but whose process died first
    if not dry_run and not writes_only:
        remove_leftovers(table, s.interval_ms, s.misses)
    return results


def _rollback(table, t: str, s: _Settings, *, dry_run: bool, allow_completed: bool,
              failed_only: bool) -> ServiceResult:
    timeline = table.timeline()
    plans = rollback_plans(table, timeline)
    # a pending rollback of T: resume it (never a second rollback instant)
    for r, plan in plans:
        if r.is_pending and target_of(plan) == t:
            if not _expired(table, r.timestamp, s):
                if failed_only:
                    raise _Skip()
                raise ConflictError(f"rollback {r.timestamp} of instant {t} is running in another process "
                                    f"(heartbeat {heartbeat_path(table.base_path, r.timestamp)}); retry later")
            return _resume(table, r, plan, s, dry_run=dry_run, allow_completed=allow_completed)

    instant = target_instant(timeline, t)
    done = [r for r, plan in plans if r.is_completed and target_of(plan) == t]
    if instant is None:
        if failed_only:
            raise _Skip()
        if done:
            if not dry_run:
                _cleanup_target_leftovers(table, t, done[-1].timestamp)
            return ServiceResult(ACTION, Status.NOTHING_TO_DO, done[-1].timestamp,
                                 f"instant {t} was already rolled back by {done[-1].timestamp}")
        same = [i for i in timeline.instants if i.timestamp == t]
        if same:
            raise InvalidInputError(f"instant {t} is a {same[0].action.value}, which rollback does not undo")
        raise UnknownInstantError(f"instant {t} is not on the timeline of {table.base_path}")
    check_rollbackable(timeline, instant)
    origin = timeline.origin_action(instant)

    if instant.is_pending:
        if origin.value in PLAN_KEEPING_ACTIONS and instant.state is State.REQUESTED:
            if failed_only:
                raise _Skip()
            return ServiceResult(ACTION, Status.NOTHING_TO_DO, None,
                                 f"{origin.value} {t} is only requested: it wrote nothing, and its plan will be "
                                 "executed")
        if not _expired(table, t, s):
            if failed_only:
                raise _Skip()
            raise ConflictError(_alive_message(table, instant, s))
        if done and not has_markers(table, t):
            # A rollback of T completed but the process died before T's timeline files went
            # (step 7): finish those steps; no new rollback instant.
            r = done[-1]
            if dry_run:
                return ServiceResult(ACTION, Status.DRY_RUN, r.timestamp,
                                     f"would finish rollback {r.timestamp} of {t}: remove {t}'s timeline files")
            plan = dict(plans)[r]
            _finish_target(table, t, plan.instant_to_rollback.action if plan.instant_to_rollback else origin.value)
            _delete_heartbeat(table, t)
            _delete_heartbeat(table, r.timestamp)   # R's own, if its process died before stopping it
            return ServiceResult(ACTION, Status.DONE, r.timestamp, f"finished rollback of {t} ({origin.value})",
                                 RollbackMetrics(target=t, resumed=True))
    else:
        if failed_only:
            raise _Skip()  # never touch a completed instant unless asked (anchors C.7)
        if not allow_completed:
            raise InvalidInputError(f"instant {t} ({instant.action.value}) is completed; rolling back a completed "
                                    "instant needs --allow-completed")
        latest = timeline.latest_completed(*WRITE_ACTIONS)
        blockers = _blockers(timeline, instant)
        if latest is None or latest.timestamp != t or blockers:
            raise InvalidInputError(f"cannot roll back {t}: later instants depend on it: "
                                    f"{_describe(blockers) or 'none'}; roll those back first, newest first")

    held = rollback_refusal(table, t)
    if held is not None:       # also re-checked under the lock right before R is requested (_request)
        raise UnsupportedTableError(f"cannot roll back {t}: {held}")
    plan = build_plan(table, timeline, instant)
    summary = PlanSummary.of(plan)
    if dry_run:
        return ServiceResult(ACTION, Status.DRY_RUN, None,
                             f"would roll back {t} ({target_action_name(timeline, instant)}, {instant.state.value})",
                             RollbackMetrics(target=t, files_to_delete=len(summary.files_to_delete),
                                             command_blocks=summary.slices_with_command_blocks))
    snapshot = timeline.files_of(t)
    r = _request(table, t, plan, snapshot, instant, s, failed_only=failed_only)
    return _resume(table, r, plan, s, dry_run=False, allow_completed=allow_completed, resumed=False)


def _request(table, t: str, plan: RollbackPlan, snapshot, instant: Instant, s: _Settings, *,
             failed_only: bool) -> Instant:
    """Under the table lock: re-read T (anchors C.7), then create ``R.rollback.requested``."""
    with table.lock(wait_ms=s.lock_wait_ms):
        timeline = table.timeline()
        now = timeline.files_of(t)
        problem = None
        if now != snapshot:
            problem = f"instant {t} changed state while the rollback was planned; retry"
        elif instant.is_pending and not _expired(table, t, s):
            problem = _alive_message(table, instant, s)
        elif any(r.is_pending and target_of(p) == t for r, p in rollback_plans(table, timeline)):
            problem = f"another rollback of {t} was requested meanwhile; retry"
        elif instant.is_completed and _blockers(timeline, instant):
            problem = f"cannot roll back {t}: later instants depend on it: {_describe(_blockers(timeline, instant))}"
        held = rollback_refusal(table, t)
        if held is not None:
            # before R exists: its commit would refuse after the plan deleted T's files (R pending forever)
            raise UnsupportedTableError(f"cannot roll back {t}: {held}")
        if problem:
            if failed_only:
                raise _Skip()
            raise ConflictError(problem)
        ts = table.instant_times.next(after=timeline.max_time())
        requested = Instant(ts, Action.ROLLBACK, State.REQUESTED)
        # One beat before R exists: another process's sweep must not take the R it sees for a
        # dead one and resume it alongside us (``_resume`` keeps beating from here on).
        Heartbeat(table.storage, table.base_path, ts, table.clock, s.interval_ms).beat()
        try:
            table.storage.write_new(timeline.path_of(requested), encode_rollback_plan(plan))
        except FileExistsError:
            raise InstantExistsError(f"timeline file {timeline.path_of(requested)} already exists") from None
        return requested


def _resume(table, r: Instant, plan: RollbackPlan, s: _Settings, *, dry_run: bool,
            allow_completed: bool, resumed: bool = True) -> ServiceResult:
    """Run (or finish) rollback ``r`` from its persisted plan; every step is idempotent."""
    t = target_of(plan)
    if t is None:
        raise InvalidInputError(f"rollback {r.timestamp}: its plan names no instant to roll back")
    action = plan.instant_to_rollback.action
    summary = PlanSummary.of(plan)
    if dry_run:
        return ServiceResult(ACTION, Status.DRY_RUN, r.timestamp,
                             f"would {'resume' if r.is_pending else 'finish'} rollback {r.timestamp} of {t} ({action})",
                             RollbackMetrics(target=t, files_to_delete=len(summary.files_to_delete),
                                             command_blocks=summary.slices_with_command_blocks))
    if table.config.layout is TimelineLayout.V2 and summary.command_block_files:
        raise InvalidInputError(f"rollback {r.timestamp}: its plan appends rollback blocks, which table version "
                                f"{table.config.version} does not use (only deletes)")
    started = time.monotonic()
    writer = table.timeline_writer
    # R's heartbeat beats from before its state is read; a re-run resumes R where it stopped
    life = InstantLifecycle(table, ROLLBACK_LIFECYCLE, heartbeat_interval_ms=s.interval_ms)
    with life.start(Instant(r.timestamp, Action.ROLLBACK, State.REQUESTED)) as run:
        if not run.found_completed:
            target = target_instant(run.timeline, t)
            if target is not None and target.is_completed:
                if not allow_completed:
                    # The plan was made for a pending T that completed since, or a rollback of a
                    # completed T died before step 3.  No file was touched yet: give R up.
                    life.abort()
                    return ServiceResult(ACTION, Status.NOTHING_TO_DO, r.timestamp,
                                         f"abandoned rollback {r.timestamp}: instant {t} is completed (roll it back "
                                         "with --instant and --allow-completed)")
                writer.revert_to_inflight(target)
            outcome = _perform(table, r.timestamp, t, plan)
            delete_markers(table.storage, table.base_path, t)
            metadata = RollbackMetadata(
                start_rollback_time=r.timestamp,
                time_taken_in_millis=int((time.monotonic() - started) * 1000),
                total_files_deleted=sum(len(m.success_delete_files) for m in outcome.values()),
                commits_rollback=(t,), partition_metadata=outcome, version=1,
                instants_rollback=(InstantInfo(t, action),))
            life.commit(encode_rollback_metadata(metadata))    # completed by another run: fine (ROLLBACK_LIFECYCLE)
        else:
            outcome = {}
        _finish_target(table, t, action)
    _delete_heartbeat(table, t)
    done = table.timeline()
    completed = next((i for i in done.instants if i.timestamp == r.timestamp and i.action is Action.ROLLBACK), None)
    return ServiceResult(ACTION, Status.DONE, r.timestamp, f"rolled back {t} ({action})",
                         RollbackMetrics(
                             target=t, files_deleted=sum(len(m.success_delete_files) for m in outcome.values()),
                             command_blocks=sum(len(m.rollback_log_files or {}) for m in outcome.values()),
                             resumed=resumed, completion_time=completed.completion_time if completed else None))


def _discard_partial_copies(storage, paths: list[str]) -> None:
    """A task killed mid-create leaves a partial temporary copy of a file the plan deletes (its
    marker came first): remove it too, so the rolled-back instant leaves nothing behind.  The
    same goes for the partition metadata file, which a write creates after its first marker in
    a new partition."""
    folders = {path.rpartition("/")[0] for path in paths}
    discard_partial_copies(storage, [*paths, *(f"{folder}/{PARTITION_METAFILE}" for folder in sorted(folders))])


def _perform(table, r: str, t: str, plan: RollbackPlan) -> dict[str, RollbackPartitionMetadata]:
    """The plan's file operations, idempotent.  Raises (leaving R inflight) if a delete fails."""
    storage = table.storage
    success: dict[str, list[str]] = {}
    rollback_logs: dict[str, dict[str, int]] = {}
    failed_logs: dict[str, dict[str, int]] = {}
    errors: list[str] = []
    for req in plan.rollback_requests or ():
        part = req.partition_path or ""
        success.setdefault(part, [])
        for path in req.files_to_be_deleted:
            try:
                storage.delete(_resolve(table, path))  # False when already gone: counts as deleted
                success[part].append(path)
            except OSError as e:
                errors.append(f"{path}: {e.strerror or e}")
        _discard_partial_copies(storage, [_resolve(table, p) for p in req.files_to_be_deleted])
        if req.log_blocks_to_be_deleted:
            failed_logs.setdefault(part, {}).update(req.log_blocks_to_be_deleted)
            folder = join(table.base_path, part) if part else table.base_path
            block_file, size = append_rollback_command_block(table.storage, folder, req.file_id or "",
                                                             req.latest_base_instant or "", r, t)
            rollback_logs.setdefault(part, {})[block_file] = size
    if errors:
        raise TablesvcError(f"rollback {r} of {t}: could not delete {len(errors)} file(s): {'; '.join(errors[:5])}; "
                            "re-run the rollback to finish it")
    out = {}
    for part in sorted(success):
        out[part] = RollbackPartitionMetadata(
            part, tuple(success[part]), (), rollback_logs.get(part, {}), failed_logs.get(part, {}))
    return out


def _finish_target(table, t: str, action: str) -> None:
    """Step 7: a pending compaction-like target goes back to requested (plan kept); anything
    else loses its timeline files (inflight first, then requested)."""
    timeline = table.timeline()
    target = target_instant(timeline, t)
    if target is None:
        return
    writer = table.timeline_writer
    if target.is_completed:
        raise IllegalTransitionError(f"instant {t} is completed again; its rollback cannot remove it")
    if action in PLAN_KEEPING_ACTIONS:
        if target.state is State.INFLIGHT:
            writer.revert_to_requested(target)
        return
    writer.remove_pending(target)


def _delete_heartbeat(table, t: str) -> None:
    table.storage.delete(heartbeat_path(table.base_path, t))


def _cleanup_target_leftovers(table, t: str, r: str) -> None:
    delete_markers(table.storage, table.base_path, t)
    _delete_heartbeat(table, t)
    _delete_heartbeat(table, r)


def remove_leftovers(table, interval_ms: int = 60_000, misses: int = 2, *,
                     temporary_copies: bool = True) -> list[str]:
    """Delete the marker folders and heartbeat files of instants that are no longer pending.

    A process killed after completing its instant (a write, compaction, log compaction or
    rollback) but before deleting its markers or stopping its heartbeat leaves them behind;
    so does a rollback killed after removing its target, and a writer killed between its
    first beat and its requested file.  They are listed *before* the timeline is read:
    markers are only made once their instant is on the timeline, so a marker folder whose
    instant is not pending in the later snapshot has finished (or was rolled back, or
    archived) and nobody uses it any more; when it was rolled back, the files its markers list
    and those a listing attributes to it are a late task's and go too (``sweep_rolled_back``).
    A heartbeat comes *before* its instant (a writer beats, then requests), so one whose
    instant is not on the timeline yet may belong to a write being requested right now: it
    goes only once it has expired (``interval_ms`` × ``misses``), which a live writer's never
    does.  Pending instants keep theirs, alive or not (rolling those back is the sweep's job).
    Temporary copies that creates killed before their link left (``storage.local.temporary_name_for``) go once
    older than the same window (``temporary_copies.sweep_temporary_copies``), unless
    ``temporary_copies`` is False (the inline clean's fast path: that sweep lists every
    partition folder, which the fast path exists to avoid after each write).
    Returns the removed paths.
    """
    storage, base = table.storage, table.base_path
    removed = sweep_temporary_copies(table, interval_ms * misses) if temporary_copies else []
    markers = [i.name for i in storage.list_dir(join(base, MARKER_ROOT)) if i.is_dir and i.name.isdigit()]
    beats = [i.name for i in storage.list_dir(join(base, HEARTBEAT_DIR)) if not i.is_dir and i.name.isdigit()]
    if not markers and not beats:
        return removed
    timeline = table.timeline()
    pending = {i.timestamp for i in timeline.pending()}
    for ts in markers:
        if ts in pending:
            continue
        if timeline.get(ts) is None and not timeline.is_committed_or_archived(ts):
            # Rolled back, yet marked again: a task that outlived its process wrote on after the
            # rollback; its files are nobody's (sweep_rolled_back), then the markers.
            removed += sweep_rolled_back(table, ts)
        else:
            delete_markers(storage, base, ts)
        removed.append(marker_dir(base, ts))
    for ts in beats:
        if ts not in pending and is_expired(storage, base, ts, table.clock, interval_ms, misses):
            storage.delete(heartbeat_path(base, ts))
            removed.append(heartbeat_path(base, ts))
    return removed


def sweep_rolled_back(table, instant: str) -> list[str]:
    """What a late task wrote of ``instant`` after it was rolled back and left the timeline (a
    worker that lost its lease, a killed writer's surviving task): the files its markers list (a
    marker comes before its file, and the rollback had already removed the markers it found)
    and those a listing attributes to it (``planner.listed_files``: a file whose marker the
    rollback removed before the late task finished writing it); then the markers.  Each file
    goes only if rolling ``instant`` back would delete it (``planner.file_decision``: a v6 log
    holding blocks of another instant stays).  Nothing can commit ``instant`` any more, so none
    of this is anybody's.  Returns the paths deleted."""
    storage, base = table.storage, table.base_path
    v6 = table.config.layout is TimelineLayout.V1
    found = {(partition, name) for partition, name, _io in list_markers(storage, base, instant)}
    found |= listed_files(table, table.timeline(), instant, v6)
    deleted: list[str] = []
    stale: list[str] = []
    for partition, name in sorted(found):
        path = join(base, partition, name)
        stale.append(path)
        if file_decision(storage, path, name, instant, v6, from_marker=True) == "delete" and storage.delete(path):
            deleted.append(path)
    deleted += discard_partial_copies(storage, stale)   # late tasks killed before the link
    delete_markers(storage, base, instant)
    return deleted


__all__ = ["eager_rollback", "remove_leftovers", "rollback", "rollback_failed", "sweep_rolled_back"]
