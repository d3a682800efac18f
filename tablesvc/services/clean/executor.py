"""Executing a clean: only the files its persisted plan lists are deleted.

Steps and what a crash (kill -9) at each leaves:

| step | files | a crash here leaves |
|---|---|---|
| plan (read-only) | none | nothing |
| ``T.clean.requested`` (the plan) | one file, whole | a pending clean; the next run executes this plan |
| ``T.clean.inflight`` | one file | as above |
| delete the listed files, one by one; a missing file counts as deleted | deletes | some files gone: none of them was in a retained slice, so readers are unaffected; the re-run deletes the rest |
| ``T.clean`` / ``T_C.clean`` with HoodieCleanMetadata | one file, whole | a completed clean |

Pending cleans are always finished (from their own plan) before a new one is planned.
A clean (not a dry run) ends by removing the markers and heartbeats that instants which are
no longer pending left behind (``rollback.remove_leftovers``), as the recovery sweep does.
"""

from __future__ import annotations

import time

from tablesvc.config.loader import ServiceConfig
from tablesvc.services.clean.planner import plan_clean
from tablesvc.services.lifecycle import CLEAN_LIFECYCLE, InstantLifecycle, lease_requirements
from tablesvc.services.metrics import CleanMetrics
from tablesvc.services.result import ServiceResult, Status
from tablesvc.services.rollback.executor import remove_leftovers
from tablesvc.services.metadata_drops import drop_opted_out_partitions, prepend_drop, preview_drop
from tablesvc.table.writable import CLEAN, require_writable
from timeline.instant import Action, Instant, State
from timeline.payloads import (CleanerPlan, CleanMetadata, CleanPartitionMetadata, decode_cleaner_plan,
                               encode_clean_metadata, encode_cleaner_plan)


def _execute(table, requested: Instant, plan: CleanerPlan, fence=None, config=None) -> ServiceResult:
    started = time.monotonic()
    # Another process (a runner, or a writer's inline clean) may run the same plan: deleting is
    # idempotent, so a racing start is joined (CLEAN_LIFECYCLE); only one of us completes it.
    life = InstantLifecycle(table, CLEAN_LIFECYCLE, config=config)     # config: the metadata table's services
    # Hudi 0.x writes the plan into a v6 clean's inflight file too, and its archiver reads it
    # there: an empty one failed Java's archival ("Not an Avro data file").  1.x (v8+) leaves it empty.
    inflight = encode_cleaner_plan(plan) if table.config.version < 8 else b""
    with life.start(requested, inflight_payload=inflight) as run:
        if run.found_completed:
            return _finished_elsewhere(requested.timestamp)
        return _delete_and_commit(table, life, requested, plan, fence, started)


def _delete_and_commit(table, life: InstantLifecycle, requested: Instant, plan: CleanerPlan, fence,
                       started: float) -> ServiceResult:
    partitions = {}
    deleted = failed = 0
    for partition, paths in plan.files_to_delete().items():
        ok, bad = [], []
        for path in paths:
            try:
                table.storage.delete(path)      # False (already gone) counts as deleted: idempotent re-runs
                ok.append(path.rsplit("/", 1)[-1])
            except OSError:
                bad.append(path.rsplit("/", 1)[-1])
        deleted += len(ok)
        failed += len(bad)
        partitions[partition] = CleanPartitionMetadata(partition, plan.policy, tuple(ok), tuple(ok), tuple(bad),
                                                       False)
    ectr = plan.earliest_instant_to_retain.timestamp if plan.earliest_instant_to_retain else ""
    metadata = CleanMetadata(start_clean_time=requested.timestamp,
                             time_taken_in_millis=int((time.monotonic() - started) * 1000),
                             total_files_deleted=deleted, earliest_commit_to_retain=ectr,
                             partition_metadata=partitions,
                             last_completed_commit_timestamp=plan.last_completed_commit_timestamp,
                             policy=plan.policy)
    if failed:
        # Completing would hide files that are still there; leave the clean pending for a re-run.
        return ServiceResult("clean", Status.NOTHING_TO_DO, requested.timestamp,
                             f"{failed} files could not be deleted; the clean stays pending and the next run "
                             "retries it", CleanMetrics(files_deleted=deleted, files_failed=failed))
    # the lease: a runner that lost this job must not complete it (timeline/lease.py)
    done = life.commit(encode_clean_metadata(metadata), lease_requirements(fence))
    if done is None:
        return _finished_elsewhere(requested.timestamp)
    return ServiceResult("clean", Status.DONE, done.timestamp,
                         f"deleted {deleted} files; earliest commit to retain {ectr or '-'}",
                         CleanMetrics(files_deleted=deleted, partitions=len(partitions), policy=plan.policy,
                                      earliest_commit_to_retain=ectr))


def _finished_elsewhere(timestamp: str) -> ServiceResult:
    return ServiceResult("clean", Status.NOTHING_TO_DO, timestamp,
                         f"clean {timestamp} was completed by another process meanwhile")


def finish_pending_cleans(table, fence=None, config=None) -> list[ServiceResult]:
    results = []
    timeline = table.timeline()
    for instant in timeline.pending(Action.CLEAN):
        requested = Instant(instant.timestamp, Action.CLEAN, State.REQUESTED)
        plan = decode_cleaner_plan(timeline.read_bytes(table.storage, requested), timeline.path_of(requested))
        results.append(_execute(table, requested, plan, fence, config))
    return results


def schedule_clean(table, config: ServiceConfig) -> ServiceResult:
    """Plan a clean and persist it as ``T.clean.requested`` without executing it (for the
    async runner).  Nothing is planned while another clean is pending: it would list the
    same files."""
    require_writable(table, CLEAN)
    pending = table.timeline().pending(Action.CLEAN)
    if pending:
        return ServiceResult("clean", Status.NOTHING_TO_DO, None, f"clean {pending[0].timestamp} is pending")
    planned = plan_clean(table, config)
    if planned.plan is None:
        return ServiceResult("clean", Status.NOTHING_TO_DO, None, planned.reason)
    payload = encode_cleaner_plan(planned.plan)
    # re-checked under the lock: two runners must not both request a clean
    requested = InstantLifecycle(table, CLEAN_LIFECYCLE).request_built(
        lambda timeline: None if timeline.pending(Action.CLEAN) else payload)
    if requested is None:
        return ServiceResult("clean", Status.NOTHING_TO_DO, None, "another clean was requested meanwhile")
    n = sum(len(v) for v in planned.plan.files_to_delete().values())
    return ServiceResult("clean", Status.SCHEDULED, requested.timestamp, f"{n} files planned for deletion",
                         CleanMetrics(files_to_delete=n))


def run_clean(table, config: ServiceConfig, *, dry_run: bool = False) -> list[ServiceResult]:
    """Finish pending cleans, then plan and execute a new one if anything is due."""
    if dry_run:
        would_drop = preview_drop(table, CLEAN, config)
        if would_drop is None:
            require_writable(table, CLEAN)
        planned = plan_clean(table, config)
        files = [f for v in (planned.plan.files_to_delete().values() if planned.plan else []) for f in v]
        return prepend_drop(would_drop, [ServiceResult("clean", Status.DRY_RUN, None, planned.reason,
                                                       CleanMetrics(files_to_delete=len(files), files=tuple(files)))])
    dropped = drop_opted_out_partitions(table, CLEAN, config)
    require_writable(table, CLEAN)
    results = prepend_drop(dropped, finish_pending_cleans(table, config=config))
    planned = plan_clean(table, config)
    if planned.plan is None:
        results.append(ServiceResult("clean", Status.NOTHING_TO_DO, None, planned.reason,
                                     CleanMetrics(partitions_scanned=planned.partitions_scanned)))
    else:
        requested = InstantLifecycle(table, CLEAN_LIFECYCLE).request(encode_cleaner_plan(planned.plan))
        results.append(_execute(table, requested, planned.plan, config=config))
    remove_leftovers(table)
    return results


def list_cleans(table) -> list[dict]:
    timeline = table.timeline()
    rows = []
    for instant in timeline.filter(actions=[Action.CLEAN]):
        row = {"instant": instant.timestamp, "state": instant.state.value, "files_deleted": None,
               "earliest_commit_to_retain": None, "policy": None}
        if instant.is_completed:
            md = timeline.payload(table.storage, instant)
            row.update(files_deleted=md.total_files_deleted, earliest_commit_to_retain=md.earliest_commit_to_retain,
                       policy=md.policy)
        rows.append(row)
    return rows
