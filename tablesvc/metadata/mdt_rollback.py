"""Rolling back an instant of the metadata table (``<table>/.hoodie/metadata``) with a rollback
instant on its own timeline, as Hudi's metadata write client does (docs/metadata-table.md,
"Rolling back the metadata delta commit T"; docs/metadata-table-write-research.md §1.2, §3, §4).

Java (1.2.0) rolls back a metadata delta commit ``T`` in three cases, each with
``HoodieTableServiceClient.rollback`` on the metadata table:

* a data rollback ``R`` of ``T`` (``HoodieBackedTableMetadataWriter.update(HoodieRollbackMetadata,
  R)``): the metadata rollback is at ``R`` itself (``rollback(T, R)``); nothing when the metadata
  table has no ``T``; a completed ``T`` that the latest metadata compaction already holds is
  refused (``validateRollback``).  Table version 6 writes it at ``R + "006"`` (the caller passes
  the time; the layout is the metadata table's own);
* before every metadata delta commit ``T`` (``commitInternal``): the write client's EAGER
  failed-writes pass when the data table's ``hoodie.cleaner.policy.failed.writes`` is EAGER (the
  default; ``rollbackFailedWrites``: pending rollbacks finished, then the pending delta commits
  whose writer is gone rolled back, newest first (below); ``maintain`` runs it), then an existing
  ``T`` (pending or completed: ``T`` written again) rolled back; both at new instant times
  (``createNewInstantTime``);
* tablesvc's abort of a commit that completed the metadata ``T`` and then failed to complete the
  data instant: as Java's retry would, at a new instant time.

Which pending metadata delta commits the EAGER pass rolls back.  Java's EAGER pass rolls back every
pending one because its metadata write client is then the only writer: with EAGER each metadata
delta commit is written in one hold of the data table's lock, so a pending one is a killed run's.
That no longer holds when another process writes the same table: Hudi 1.2's Spark writers use
streaming metadata writes by default on table versions 8 and 9
(``hoodie.metadata.streaming.write.enabled``: ``HoodieMetadataConfig.Builder.build`` defaults it to
true for Spark, ``HoodieWriteConfig.isMetadataStreamingWritesEnabled`` for version 8+), and then
``SparkRDDWriteClient.commit`` → ``streamWriteToMetadataTable`` requests the metadata ``T`` and
writes its log files during the data write, before taking the data table's lock; only the
completion is under it.  Java itself forces LAZY on such a metadata write client
(``HoodieMetadataWriteUtils.createMetadataWriteConfig``: streaming writes and multi-writer metadata
tables) and starts a heartbeat for the metadata ``T`` on the metadata table
(``BaseHoodieWriteClient.startCommit``); LAZY rolls back only the pending instants whose heartbeat
expired (``getInstantsToRollbackForLazyCleanPolicy``).  tablesvc therefore takes LAZY's rule for
every pending metadata delta commit ``T`` (``writer_alive``) and leaves ``T`` alone while

* ``T``'s own heartbeat on the metadata table (``.hoodie/metadata/.hoodie/.heartbeat/T``) is not
  expired (a Java streaming write, whose data ``T`` has no heartbeat when the data table is EAGER), or
* the data instant ``T`` is pending and the data table's heartbeat of ``T`` is not expired (the
  rule tablesvc's data-side sweep uses, ``services.rollback.pending.classify_pending``:
  ``HEARTBEAT_ALIVE``; a LAZY Java writer, or tablesvc's own write).

Every other pending ``T`` is rolled back: a data ``T`` absent (rolled back, or never requested), a
data ``T`` completed (Java completes the metadata ``T`` first, so its metadata ``T`` can no longer
complete), or a data ``T`` pending with both heartbeats expired or missing (Java with the data table
EAGER and no streaming writes beats none: its pending metadata ``T`` is a killed run's, as before).
Expiry is ``timeline.heartbeat.judged_dead`` with one window, ``hoodie.client.heartbeat.interval_in_ms``
x ``hoodie.client.heartbeat.tolerable.misses`` of the committing command's configuration (Java's
metadata write client takes the defaults, 60 s x 2, which are tablesvc's too).  The caller's own
instant is left to ``roll_back_before_rewrite`` when its heartbeat beats.

A pending rollback of ``T`` is always resumed under its own time (``getPendingRollbackInfo``),
never doubled.  The steps of one rollback ``R`` of ``T`` (``BaseRollbackActionExecutor``,
``MergeOnReadRollbackActionExecutor``, listing-based: the metadata write config sets
``hoodie.rollback.using.markers=false``), all under the data table's lock, which the caller holds:

1. ``R.rollback.requested`` holding the ``HoodieRollbackPlan`` (``_plan``, Java's listing-based
   strategy: a completed ``T``'s log files from its write stats, a pending ``T``'s from a listing
   of the metadata partitions; version 6: a log holding other instants' blocks too gets a rollback
   command block instead of a delete), built with the payload types the data rollback writes
   (``timeline.payloads``);
2. ``R.rollback.inflight`` (empty);
3. a completed ``T`` reverted to inflight: its completed file goes first, so no reader takes ``T``'s
   records from here on;
4. the plan's deletes (a missing file counts as deleted; partial copies a killed create left go
   too) and, version 6, one rollback command block per slice as its next log version (skipped
   when the slice already holds the block of (``R``, ``T``));
5. ``T``'s markers, then ``T``'s inflight and requested files (Java deletes them in
   ``finishRollback`` before ``R`` completes);
6. ``R`` completed with the ``HoodieRollbackMetadata``.

A kill after any step leaves ``R`` pending with its plan; the next rollback of ``T`` (the data
rollback resumed, or any later metadata write's EAGER pass) resumes ``R`` from the step it reached:
every step is idempotent.

The module sits on the metadata floor (docs/architecture.md): it uses the data rollback's payload
types from ``timeline.payloads`` and the log format, not ``services.rollback`` (a higher floor);
its file rules are the data rollback planner's for the metadata table's files (every log file of a
version-8/9 metadata table is its own delta commit's; no base file is ever named with a delta
commit's time).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from tablesvc.errors import FileNameError, TablesvcError
from tablesvc.fsview.names import LogFileName, looks_like_log_file
from tablesvc.logfiles import append_rollback_command_block
from tablesvc.logformat import read_log_file
from tablesvc.storage import discard_partial_copies
from tablesvc.table.config import TableConfig
from timeline.active import Timeline
from timeline.clock import Clock
from timeline.errors import InvalidInstantError, UnknownInstantError
from timeline.heartbeat import judged_dead, last_beat_ms
from timeline.instant import Action, Instant, State, TimelineLayout, validate_instant_time
from timeline.payloads import (
    InstantInfo, RollbackMetadata, RollbackPartitionMetadata, RollbackPlan, RollbackRequest,
    encode_rollback_metadata, encode_rollback_plan,
)
from timeline.storage import join

if TYPE_CHECKING:       # the writer imports this module (write_delta_commit)
    from tablesvc.metadata.writer import MetadataTableWriter

# Hudi's marker folder of an instant, under the metadata table's .hoodie (Java's rollback deletes it)
MARKER_ROOT = ".hoodie/.temp"
# the metadata table's partition initialisations (00000000000000000, …001, …; v6: 14 zeros + suffix)
INIT_PREFIX = "00000000000000"


@dataclass(frozen=True)
class MetadataRollback:
    """One rollback on the metadata table: its instant (completed) and the delta commit it undid."""

    instant: Instant
    target: str
    resumed: bool          # a pending rollback of ``target`` (an earlier, killed run) was finished


def rollback_delta_commit(mdt: MetadataTableWriter, target: str, rollback_time: str) -> MetadataRollback | None:
    """Roll back the metadata table's delta commit ``target`` (pending or completed) with a
    rollback instant at ``rollback_time`` (the module doc's steps); a pending rollback of
    ``target`` is resumed at its own time instead.  None when the metadata table holds no
    ``target`` (Java: "the commit to rollback is not found in MDT").

    Refused (``TablesvcError``, exit 1, nothing written) when a metadata compaction or log
    compaction already holds a completed ``target`` (``MetadataTableWriter.holder_of``): removing
    its log files would not take its records out of the base file.  A data rollback checks this
    before its own rollback is requested (``maintain.rollback_refusal``); this is the backstop."""
    validate_instant_time(rollback_time, "metadata rollback instant")
    timeline = mdt.timeline()
    pending = _pending_rollback_of(mdt, timeline, target)
    if pending is not None:
        return _execute(mdt, pending[0], pending[1], resumed=True)
    instant = _delta_commit(timeline, target)
    if instant is None:
        return None
    if instant.is_completed:
        holder = mdt.holder_of(target, timeline)
        if holder is not None:
            raise TablesvcError(cannot_remove_message(mdt.base_path, target, holder))
    if rollback_time <= target:
        raise InvalidInstantError(f"{mdt.base_path}: rollback instant {rollback_time} must come after the "
                                  f"metadata table's delta commit {target} it rolls back")
    if timeline.files_of(rollback_time):
        raise InvalidInstantError(f"{mdt.base_path}: instant {rollback_time} is on the metadata table's timeline "
                                  f"as {', '.join(f.file_name() for f in timeline.files_of(rollback_time))}; "
                                  f"cannot roll back its delta commit {target} there")
    plan = _plan(mdt, timeline, instant)
    requested = Instant(rollback_time, Action.ROLLBACK, State.REQUESTED)
    mdt.storage.write_new(timeline.path_of(requested), encode_rollback_plan(plan))
    return _execute(mdt, requested, plan, resumed=False)


def rollback_failed_writes(mdt: MetadataTableWriter, new_time: Callable[[], str], *, clock: Clock,
                           heartbeat_window_ms: int) -> list[MetadataRollback]:
    """The metadata write client's EAGER failed-writes pass (``rollbackFailedWrites``), run before
    each metadata delta commit: pending rollbacks are finished under their own times, then every
    pending delta commit whose writer is gone (``writer_alive`` says no: the module doc's "Which
    pending metadata delta commits the EAGER pass rolls back") is rolled back, newest first, each at
    ``new_time()``.  ``clock`` and ``heartbeat_window_ms`` (``hoodie.client.heartbeat.interval_in_ms``
    x ``hoodie.client.heartbeat.tolerable.misses``) judge the heartbeats, as tablesvc's data-side
    sweep does (``timeline.heartbeat.judged_dead``)."""
    done = [_execute(mdt, r, plan, resumed=True) for r, plan in _pending_rollbacks(mdt, mdt.timeline())]
    timeline = mdt.timeline()
    data = _data_timeline(mdt)
    indexing = {i.timestamp for i in data.filter(actions=[Action.INDEXING])}
    for instant in reversed(timeline.pending(Action.DELTA_COMMIT)):
        if instant.timestamp in indexing or instant.timestamp.startswith(INIT_PREFIX):
            # an indexer's catch-up (Java's isIndexingCommit) or a partition's initialisation: the
            # indexer's or the initialising writer's to finish or undo
            continue
        if writer_alive(mdt, data, instant.timestamp, clock=clock, heartbeat_window_ms=heartbeat_window_ms):
            continue
        result = rollback_delta_commit(mdt, instant.timestamp, new_time())
        if result is not None:
            done.append(result)
    return done


def writer_alive(mdt: MetadataTableWriter, data: Timeline, ts: str, *, clock: Clock, heartbeat_window_ms: int) -> bool:
    """Whether the pending metadata delta commit ``ts`` may still be written by a live process, so
    the EAGER pass leaves it: its own heartbeat on the metadata table
    (``.hoodie/metadata/.hoodie/.heartbeat/<ts>``: a Java streaming metadata write, LAZY) is not
    expired, or the data instant ``ts`` is pending and the data table's heartbeat of ``ts`` is not
    expired (the data-side sweep's ``HEARTBEAT_ALIVE``).  A missing heartbeat counts as expired."""
    now = clock.now_ms()
    if not judged_dead(last_beat_ms(mdt.storage, mdt.base_path, ts), now, heartbeat_window_ms):
        return True
    data_instant = data.get(ts)
    if data_instant is None or not data_instant.is_pending:
        return False            # rolled back, never requested, or completed: no writer will complete ``ts``
    return not judged_dead(last_beat_ms(mdt.storage, data.base_path, ts), now, heartbeat_window_ms)


def roll_back_before_rewrite(mdt: MetadataTableWriter, ts: str) -> MetadataRollback | None:
    """What Java's ``commitInternal`` does right before writing the metadata delta commit ``ts``
    (after its EAGER pass, ``rollback_failed_writes``, which ``maintain`` runs): an existing ``ts``
    (pending, or completed: an earlier attempt whose data instant never completed) rolled back at a
    new instant time; a pending rollback of ``ts`` finished under its own."""
    if _delta_commit(mdt.timeline(), ts) is None and _pending_rollback_of(mdt, mdt.timeline(), ts) is None:
        return None
    return rollback_delta_commit(mdt, ts, new_instant_time(mdt))


def eager_on_metadata_table(failed_writes_policy: str) -> bool:
    """Whether the metadata write client rolls back failed writes eagerly: Java derives its policy
    from the data table's ``hoodie.cleaner.policy.failed.writes`` (``HoodieMetadataWriteUtils.
    createMetadataWriteConfig``; multi-writer metadata tables and streaming metadata writes, which
    tablesvc does not configure, take LAZY).  Even EAGER, tablesvc leaves a pending delta commit a
    live writer may still complete (``writer_alive``; the module doc says why)."""
    return failed_writes_policy.strip().upper() == "EAGER"


def new_instant_time(mdt: MetadataTableWriter) -> str:
    """A new instant time (Java: the write client's ``createNewInstantTime``) from the data table's
    generator, after every time on both timelines (the caller holds the data table's lock)."""
    data = _data_timeline(mdt)
    after = max((t for t in (mdt.timeline().max_time(), data.max_time()) if t is not None), default=None)
    return mdt.timeline_writer.generator.next(after=after)


def _data_timeline(mdt: MetadataTableWriter) -> Timeline:
    return Timeline.load(mdt.storage, mdt.base_path.rsplit("/.hoodie/metadata", 1)[0], mdt.config.layout)


def _plan(mdt: MetadataTableWriter, timeline: Timeline, instant: Instant) -> RollbackPlan:
    """The rollback plan of delta commit ``instant``, as Java's listing-based strategy makes it
    (``ListingBasedRollbackStrategy``; the metadata write config sets
    ``hoodie.rollback.using.markers=false``).  Candidates: a completed ``T``'s files from its write
    stats, no listing of a partition folder (``fetchFilesFromCommitMetadata``; this runs under the
    data table's lock); a pending ``T``'s from a listing of the metadata partitions.  Per file
    (``_decision``): deleted, or (version 6) a rollback command block in its slice."""
    t = instant.timestamp
    v6 = mdt.config.layout is TimelineLayout.V1
    if instant.is_completed:
        candidates = {(stat.path or "").rpartition("/")[::2]
                      for stat in timeline.commit_metadata(mdt.storage, instant).write_stats() if stat.path}
    else:
        candidates = {(partition, name) for partition in _partitions(mdt) for name in
                      mdt.storage.list_names(join(mdt.base_path, partition))}
    deletes: dict[str, list[str]] = {}
    commands: dict[tuple[str, str, str], dict[str, int]] = {}
    for partition, name in sorted(candidates):
        path = join(mdt.base_path, partition, name)
        decision = _decision(mdt, path, name, t, v6)
        if decision == "delete":
            deletes.setdefault(partition, []).append(path)
        elif decision == "command":
            log = LogFileName.parse(name)
            commands.setdefault((partition, log.file_id, log.instant), {})[path] = mdt.storage.stat(path).size
    requests = [RollbackRequest(partition, "", "", tuple(paths), {}) for partition, paths in sorted(deletes.items())]
    requests += [RollbackRequest(partition, file_id, base_instant, (), dict(sorted(logs.items())))
                 for (partition, file_id, base_instant), logs in sorted(commands.items())]
    return RollbackPlan(InstantInfo(t, Action.DELTA_COMMIT.value), tuple(requests), 1)


def _partitions(mdt: MetadataTableWriter) -> list[str]:
    """The metadata table's partition folders (one level, as Java's listing finds them)."""
    return sorted(e.name for e in mdt.storage.list_dir(mdt.base_path) if e.is_dir and not e.name.startswith("."))


def _decision(mdt: MetadataTableWriter, path: str, name: str, t: str, v6: bool) -> str | None:
    """What rolling back delta commit ``t`` does to one metadata file (the data rollback planner's
    rules): ``"delete"``, ``"command"`` (version 6: a log that also holds other instants' blocks)
    or None (not ``t``'s)."""
    if not looks_like_log_file(name):
        return None
    try:
        log = LogFileName.parse(name)
    except FileNameError:
        return None
    if not v6:
        return "delete" if log.instant == t else None      # v8/v9: every log file is its own delta commit's
    if log.instant > t:
        return None                                          # a slice based after t holds none of t's blocks
    try:
        contents = read_log_file(mdt.storage, path)
    except FileNotFoundError:
        return None
    mine = [b for b in contents.blocks if b.instant_time == t]
    others = [b for b in contents.blocks if b.instant_time != t]
    if not mine:
        return None
    return "command" if others else "delete"


def _delta_commit(timeline: Timeline, ts: str) -> Instant | None:
    """The metadata table's delta commit ``ts`` (its latest state), if any; a log compaction, which
    also completes as a delta commit, is not one (it is the log compaction's to finish)."""
    files = timeline.files_of(ts)
    if any(f.action is Action.LOG_COMPACTION for f in files):
        return None
    found = [f for f in files if f.action is Action.DELTA_COMMIT]
    return max(found, key=lambda f: f.state.rank) if found else None


def _pending_rollbacks(mdt: MetadataTableWriter, timeline: Timeline) -> list[tuple[Instant, RollbackPlan]]:
    """The metadata table's pending rollbacks with their plans, oldest first."""
    out = []
    for r in timeline.pending(Action.ROLLBACK):
        try:
            plan = timeline.plan_of(mdt.storage, r)
        except UnknownInstantError:
            continue            # no requested file (Hudi never writes one without it): nothing to resume
        if isinstance(plan, RollbackPlan):
            out.append((r, plan))
    return out


def _pending_rollback_of(mdt: MetadataTableWriter, timeline: Timeline,
                         target: str) -> tuple[Instant, RollbackPlan] | None:
    return next(((r, plan) for r, plan in _pending_rollbacks(mdt, timeline) if _target_of(plan) == target), None)


def _target_of(plan: RollbackPlan) -> str | None:
    return plan.instant_to_rollback.commit_time if plan.instant_to_rollback else None


def _execute(mdt: MetadataTableWriter, r: Instant, plan: RollbackPlan, *, resumed: bool) -> MetadataRollback:
    """Steps 2-6 of rollback ``r`` from its persisted plan; each idempotent."""
    started = time.monotonic()
    t = _target_of(plan)
    if t is None:
        raise TablesvcError(f"{mdt.base_path}: rollback {r.timestamp} on the metadata table names no instant "
                            "to roll back in its plan")
    if mdt.config.layout is TimelineLayout.V2 and any(q.log_blocks_to_be_deleted for q in plan.rollback_requests or ()):
        raise TablesvcError(f"{mdt.base_path}: rollback {r.timestamp} of {t} appends rollback blocks, which a "
                            "metadata table of version 8 or 9 does not use")
    writer = mdt.timeline_writer
    inflight = Instant(r.timestamp, Action.ROLLBACK, State.INFLIGHT)
    if r.state is State.REQUESTED:
        writer.start(r, b"")                                          # 2
    timeline = mdt.timeline()
    target = _delta_commit(timeline, t)
    if target is not None and target.is_completed:
        holder = mdt.holder_of(t, timeline)
        if holder is not None:
            raise TablesvcError(cannot_remove_message(mdt.base_path, t, holder))
        target = writer.revert_to_inflight(target)                    # 3
    outcome = _perform(mdt, r.timestamp, t, plan)                     # 4
    mdt.storage.delete_tree(join(mdt.base_path, MARKER_ROOT, t))
    if target is not None:                                            # 5
        writer.remove_pending(Instant(t, Action.DELTA_COMMIT, State.INFLIGHT))
    action = plan.instant_to_rollback.action if plan.instant_to_rollback else Action.DELTA_COMMIT.value
    metadata = RollbackMetadata(
        start_rollback_time=r.timestamp, time_taken_in_millis=int((time.monotonic() - started) * 1000),
        total_files_deleted=sum(len(m.success_delete_files) for m in outcome.values()),
        commits_rollback=(t,), partition_metadata=outcome, version=1, instants_rollback=(InstantInfo(t, action),))
    done = writer.complete(inflight, encode_rollback_metadata(metadata))   # 6
    return MetadataRollback(done, t, resumed)


def _perform(mdt: MetadataTableWriter, r: str, t: str, plan: RollbackPlan) -> dict[str, RollbackPartitionMetadata]:
    """The plan's file operations, idempotent (a missing file counts as deleted); raises, leaving
    ``r`` pending, when a delete fails."""
    deleted: dict[str, list[str]] = {}
    rollback_logs: dict[str, dict[str, int]] = {}
    failed_logs: dict[str, dict[str, int]] = {}
    errors: list[str] = []
    for request in plan.rollback_requests or ():
        partition = request.partition_path or ""
        deleted.setdefault(partition, [])
        for path in request.files_to_be_deleted:
            try:
                mdt.storage.delete(_resolve(mdt, path))
                deleted[partition].append(path)
            except OSError as e:
                errors.append(f"{path}: {e.strerror or e}")
        discard_partial_copies(mdt.storage, [_resolve(mdt, p) for p in request.files_to_be_deleted])
        if request.log_blocks_to_be_deleted:
            failed_logs.setdefault(partition, {}).update(request.log_blocks_to_be_deleted)
            path, size = append_rollback_command_block(mdt.storage, join(mdt.base_path, partition),
                                                       request.file_id or "", request.latest_base_instant or "",
                                                       r, t)
            rollback_logs.setdefault(partition, {})[path] = size
    if errors:
        raise TablesvcError(f"{mdt.base_path}: rollback {r} of {t}: could not delete {len(errors)} file(s): "
                            f"{'; '.join(errors[:5])}; the next rollback of {t} finishes it")
    return {partition: RollbackPartitionMetadata(partition, tuple(deleted[partition]), (),
                                                 rollback_logs.get(partition, {}), failed_logs.get(partition, {}))
            for partition in sorted(deleted)}


def _resolve(mdt: MetadataTableWriter, path: str) -> str:
    """A plan path as storage sees it: absolute (Java writes them without the scheme) or relative."""
    if path.startswith("/") or "://" in path or path.startswith("file:"):
        return path
    return join(mdt.base_path, path)


def cannot_remove_message(mdt_base_path: str, ts: str, holder: Instant) -> str:
    """The one line refusing to roll back delta commit ``ts`` of a metadata table ``holder`` holds."""
    # only compactions commit on a metadata table; a completed log compaction shows as a delta commit
    kind = "compaction" if holder.action in (Action.COMMIT, Action.COMPACTION) else "log compaction"
    return (f"{mdt_base_path}: cannot roll back the metadata table's delta commit {ts}: its "
            f"{kind} {holder.timestamp} already holds it; restore the metadata table with Apache Hudi")


def metadata_rollback_time(config: TableConfig, data_rollback_time: str) -> str:
    """The metadata table's rollback instant for data rollback ``R``: ``R`` (versions 8 and 9),
    ``R + "006"`` (version 6, Hudi 0.x's suffix; ``HoodieBackedTableMetadataWriterTableVersionSix``)."""
    return data_rollback_time + "006" if config.version < 8 else data_rollback_time


__all__ = ["MetadataRollback", "cannot_remove_message", "eager_on_metadata_table", "metadata_rollback_time", "new_instant_time",
           "roll_back_before_rewrite", "rollback_delta_commit", "rollback_failed_writes", "writer_alive"]
