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
"""

from __future__ import annotations

import time

from tablesvc.config.loader import ServiceConfig
from tablesvc.errors import UnsupportedTableError
from tablesvc.services.clean.planner import plan_clean
from tablesvc.services.result import ServiceResult, Status
from timeline.instant import Action, Instant, State
from timeline.payloads import (CleanerPlan, CleanMetadata, CleanPartitionMetadata, decode_cleaner_plan,
                               encode_clean_metadata, encode_cleaner_plan)


def _refuse_metadata_table(table) -> None:
    if table.config.has_metadata_table:
        raise UnsupportedTableError(
            f"{table.base_path}: the table keeps a metadata table that tablesvc does not update; "
            "cleaning would leave it listing deleted files, so tablesvc refuses to clean")


def _execute(table, requested: Instant, plan: CleanerPlan) -> ServiceResult:
    started = time.monotonic()
    writer = table.timeline_writer
    timeline = table.timeline()
    current = timeline.get(requested.timestamp)
    inflight = requested if current is not None and current.state is State.INFLIGHT else writer.start(requested)
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
                             "retries it", {"files_deleted": deleted, "files_failed": failed})
    done = writer.complete(inflight, encode_clean_metadata(metadata))
    return ServiceResult("clean", Status.DONE, done.timestamp,
                         f"deleted {deleted} files; earliest commit to retain {ectr or '-'}",
                         {"files_deleted": deleted, "partitions": len(partitions), "policy": plan.policy,
                          "earliest_commit_to_retain": ectr})


def finish_pending_cleans(table) -> list[ServiceResult]:
    results = []
    timeline = table.timeline()
    for instant in timeline.pending(Action.CLEAN):
        requested = Instant(instant.timestamp, Action.CLEAN, State.REQUESTED)
        plan = decode_cleaner_plan(timeline.read_bytes(table.storage, requested), timeline.path_of(requested))
        results.append(_execute(table, requested, plan))
    return results


def run_clean(table, config: ServiceConfig, *, dry_run: bool = False) -> list[ServiceResult]:
    """Finish pending cleans, then plan and execute a new one if anything is due."""
    _refuse_metadata_table(table)
    if dry_run:
        planned = plan_clean(table, config)
        files = [f for v in (planned.plan.files_to_delete().values() if planned.plan else []) for f in v]
        return [ServiceResult("clean", Status.DRY_RUN, None, planned.reason,
                              {"files_to_delete": len(files), "files": files})]
    results = finish_pending_cleans(table)
    planned = plan_clean(table, config)
    if planned.plan is None:
        return results + [ServiceResult("clean", Status.NOTHING_TO_DO, None, planned.reason,
                                        {"partitions_scanned": planned.partitions_scanned})]
    requested = table.timeline_writer.request(Action.CLEAN, encode_cleaner_plan(planned.plan))
    return results + [_execute(table, requested, planned.plan)]


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
