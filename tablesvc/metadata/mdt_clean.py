"""The metadata table's own clean (table versions 8 and 9; version 6 at Hudi 0.15's
``<latest delta commit>002``, its plan in the inflight file too), run as Hudi 1.2's writer runs it: in
the metadata table's table services at the start of a write, under the data table's lock, after
pending compactions and before a new compaction (``HoodieBackedTableMetadataWriter.
performTableServices``; when, which policy, what: ``mdt_clean_plan``).

tablesvc runs it in ``metadata.maintain``, under the lock ``InstantLifecycle.commit`` holds, before
the metadata delta commit of the data instant ``T`` being committed, as it runs the metadata
table's compaction.  The clean takes a new instant time (v8/v9: ``writeClient.clean()`` creates
one; only the version-6 writer suffixes the data instant's time), later than every time on both
timelines.  The metadata table's clean has no metadata table of its own to update (Java's
metadata write config turns the metadata table off).

One clean ``K`` on the metadata timeline, each step one whole file:

1. ``K.clean.requested``: the plan (Avro ``HoodieCleanerPlan``, the data table's clean schema);
2. ``K.clean.inflight``: empty (Hudi 1.x);
3. the planned files are deleted one by one (one already gone counts as deleted);
4. ``K_<completion>.clean``: ``HoodieCleanMetadata``.

**A kill at any step** leaves a pending clean on the metadata timeline.  Readers ignore it: a
clean changes no file slice a reader uses (only slices older than the retained ones go), and a
clean instant, pending or completed, makes no file visible or hidden.  The next commit
whose gate opens (``clean_due``; the gate is still open on the next commit, as nothing that closes
it happened) finishes it from its persisted plan before anything new is planned, as Java's
``clean()`` does (``CleanActionExecutor`` runs every pending clean; a new one is only planned when
none is pending).  A Java writer finishes it the same way.
"""

from __future__ import annotations

import time
from typing import Any

from tablesvc.config.loader import ServiceConfig, load_config
from tablesvc.metadata.mdt_clean_plan import (
    TRIGGER_MAX_COMMITS,
    MetadataCleanPolicy,
    build_clean_plan,
    clean_due,
    commits_since_last_clean,
)
from tablesvc.metadata.writer import MetadataTableWriter
from timeline.active import Timeline
from timeline.clock import SystemClock
from timeline.instant import Action, Instant, State
from timeline.payloads import (CleanMetadata, CleanPartitionMetadata, decode_cleaner_plan, encode_clean_metadata,
                               encode_cleaner_plan)

V6_CLEAN_SUFFIX = "002"       # HoodieTableMetadataUtil.OperationSuffix.CLEAN (Hudi 0.x): a v6 clean's time


def execute(mdt: MetadataTableWriter, instant: str) -> Instant | None:
    """Run the metadata table's pending clean ``instant`` from its plan to its completed file;
    None when a file could not be deleted (the clean stays pending for the next commit)."""
    started = time.monotonic()
    timeline = mdt.timeline()
    requested = Instant(instant, Action.CLEAN, State.REQUESTED)
    plan = decode_cleaner_plan(mdt.storage.read_bytes(timeline.path_of(requested)),
                               f"{mdt.base_path}: {requested.file_name()}")
    states = {f.state for f in timeline.files_of(instant)}
    # version 6: the inflight file holds the plan too (Hudi 0.x's transitionCleanRequestedToInflight)
    inflight = (Instant(instant, Action.CLEAN, State.INFLIGHT) if State.INFLIGHT in states
                else mdt.timeline_writer.start(requested, encode_cleaner_plan(plan) if mdt.config.version < 8
                                               else b""))
    partitions: dict[str, CleanPartitionMetadata] = {}
    deleted = failed = 0
    for partition, paths in plan.files_to_delete().items():
        ok, bad = [], []
        for path in paths:
            try:
                mdt.storage.delete(path)        # already gone (an earlier attempt): counts as deleted
                ok.append(path.rsplit("/", 1)[-1])
            except OSError:
                bad.append(path.rsplit("/", 1)[-1])
        deleted, failed = deleted + len(ok), failed + len(bad)
        partitions[partition] = CleanPartitionMetadata(partition, plan.policy, tuple(ok), tuple(ok), tuple(bad),
                                                       False)
    if failed:
        # completing would record files that are still there as deleted; the next commit retries
        return None
    ectr = plan.earliest_instant_to_retain.timestamp if plan.earliest_instant_to_retain else ""
    metadata = CleanMetadata(start_clean_time=instant, time_taken_in_millis=int((time.monotonic() - started) * 1000),
                             total_files_deleted=deleted, earliest_commit_to_retain=ectr,
                             partition_metadata=partitions,
                             last_completed_commit_timestamp=plan.last_completed_commit_timestamp,
                             policy=plan.policy)
    return mdt.timeline_writer.complete(inflight, encode_clean_metadata(metadata))


def clean_if_due(table: Any, mdt: MetadataTableWriter, policy: MetadataCleanPolicy | None = None, *,
                 config: ServiceConfig | None = None) -> list[Instant]:
    """The metadata table's clean at the start of a tablesvc commit (under the data table's lock,
    pending compactions already finished): finish pending cleans, else plan and run a new one
    when due.  ``table`` gives ``storage``, ``base_path``, ``config``, ``instant_times`` (and
    ``clock``, for KEEP_LATEST_BY_HOURS); ``policy``: default derived from ``config`` (the
    committing command's configuration, ``maintain.metadata_services_config``; None: the table's
    ``.hoodie/tablesvc.yaml`` over the defaults).
    Returns the cleans completed."""
    timeline = mdt.timeline()
    if timeline.latest_completed(Action.DELTA_COMMIT) is None or not clean_due(timeline):
        return []
    pending = timeline.pending(Action.CLEAN)
    if pending:
        return [done for p in pending if (done := execute(mdt, p.timestamp)) is not None]
    if commits_since_last_clean(mdt.storage, timeline) < TRIGGER_MAX_COMMITS:
        return []
    if policy is None:
        policy = MetadataCleanPolicy.derived_from(config if config is not None
                                                  else load_config(table.storage, table_path=table.base_path))
    now_ms = (getattr(table, "clock", None) or SystemClock()).now_ms()
    plan = build_clean_plan(mdt.storage, mdt.base_path, mdt.config, timeline, policy, now_ms)
    if plan is None:
        return []
    if mdt.config.version < 8:
        # Hudi 0.15 (cleanIfNecessary): at <latest completed delta commit>002, once
        instant = timeline.latest_completed(Action.DELTA_COMMIT).timestamp + V6_CLEAN_SUFFIX
        if timeline.files_of(instant):
            return []
    else:
        data = Timeline.load(table.storage, table.base_path, table.config.layout)
        after = max((t for t in (timeline.max_time(), data.max_time()) if t is not None), default=None)
        instant = table.instant_times.next(after=after)
    mdt.storage.write_new(timeline.path_of(Instant(instant, Action.CLEAN, State.REQUESTED)), encode_cleaner_plan(plan))
    done = execute(mdt, instant)
    return [done] if done is not None else []


__all__ = ["clean_if_due", "execute"]
