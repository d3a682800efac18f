"""One instant's life, the same for every action: request -> start -> work -> commit, or abort.

Every action (the write, compaction, log compaction, clean, rollback) moves its instant through
this class; what they differ by is a ``LifecycleRules`` value (``rules.py``), what must still hold
at a transition is a list of requirement values (``requirements.py``).  The work in between is
the action's own.

1. ``request``: the instant's first file (a write starts its heartbeat first, under the lock,
   so that no process ever sees the pending write without one and takes it for a failed one).
2. ``start``: requested -> inflight, per ``rules.start``; a context manager that owns the
   heartbeat: it stops when the run leaves, however it leaves.  A run that raises is aborted
   (``OnFailure.ABORT``) or left inflight without a heartbeat, which is how the next run or the
   recovery sweep knows that it died (``OnFailure.LEAVE_INFLIGHT``).
3. ``remove_orphans``: files that carry a marker of the instant but no write stat (failed task
   attempts) are deleted; with requirements (the lease), under the lock once they hold.
4. ``commit``: ``TimelineWriter.complete`` under the table lock, with ONE precheck that checks
   each requirement in order on the timeline of that lock hold; then the markers go.
5. ``abort``: the files the markers list, the markers, then the pending instant.
6. ``abandon`` (table version 6): another writer's instant took the same time
   (``collisions.py``); only what this run wrote goes, by exact name, and the other writer's
   files, the shared heartbeat and the shared marker folder stay.

What a crash at each step leaves is the action's doc's table (docs/write-path.md,
docs/compaction.md, docs/log-compaction.md, docs/rollback.md, ``clean/executor.py``).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from tablesvc.errors import ConflictError
from tablesvc.services.lifecycle.collisions import (
    InstantTimeCollision, checks_collisions, collision_requirements, foreign_files_at, settle_past_own_time,
    still_pending,
)
from tablesvc.metadata.maintain import remove_aborted_delta_commit, update_metadata_table, writes_metadata_table
from tablesvc.metadata.write_key_changes import WriteKeyChanges
from tablesvc.services.lifecycle.requirements import (
    CommitRequirement, MetadataTableKept, StillRequested, check_all, family_state,
)
from tablesvc.services.lifecycle.rules import (
    CompletedElsewhere, HeartbeatFrom, LifecycleRules, Markers, OnFailure, RacingStart, Start,
)
from tablesvc.write.markers import IOType, delete_markers, list_markers, marker_path, remove_orphans
from timeline.active import Timeline
from timeline.errors import IllegalTransitionError, InstantExistsError, StorageError
from timeline.heartbeat import Heartbeat
from timeline.instant import Action, Instant, State
from timeline.payloads import WriteStat
from timeline.storage import join

# Actions whose plan must outlive a collision: once a v6 compaction's plan exists, Hudi 0.x writes
# put their logs into the new slice it starts, and dropping the plan would orphan those logs.
_KEEP_PLAN_ON_COLLISION = (Action.COMPACTION,)


@dataclass(frozen=True)
class StartedInstant:
    """What ``InstantLifecycle.start`` yields."""

    instant: Instant                # the instant, inflight
    found: State | None             # its state before the start (REQUESTED when this run started it)
    timeline: Timeline | None       # the timeline ``found`` was read from (``Start.RESUME``), else None

    @property
    def found_completed(self) -> bool:
        """Another process (or an earlier run) completed it: nothing is left but the action's
        own after-steps (``Start.RESUME`` only)."""
        return self.found is State.COMPLETED


class InstantLifecycle:
    """The life of one instant of ``rules.action`` on ``table`` (one object per instant and run).

    ``heartbeat_interval_ms``: the heartbeat's interval, needed once a heartbeat starts (rules
    with a heartbeat; a lifecycle that only requests a plan needs none).  ``config``: the
    command's configuration (a ``ServiceConfig``, a mapping of Hudi keys, or None: the table's
    ``.hoodie/tablesvc.yaml`` over the defaults), which the commit hands to the metadata table's
    own services (``metadata.maintain.metadata_services_config``)."""

    def __init__(self, table: Any, rules: LifecycleRules, *, heartbeat_interval_ms: int | None = None,
                 config: Any = None):
        self.table = table
        self.rules = rules
        self._config = config
        self._interval_ms = heartbeat_interval_ms
        self._heartbeat: Heartbeat | None = None
        self._inflight: Instant | None = None
        self._inflight_payload = b""
        self._committed = False
        self._aborted = False
        # The completed file's write failed without an answer (an object store's timeout): it may
        # still land, so nothing of the run may be undone now; the instant stays for a rollback.
        self._completion_unknown = False
        self._own_files: set[str] = set()      # what this run wrote, relative to the table (write stats)

    @property
    def inflight(self) -> Instant:
        if self._inflight is None:
            raise RuntimeError(f"the {self.rules.label} instant has not been started")
        return self._inflight

    # -- request ------------------------------------------------------------------------------
    def request(self, payload: bytes = b"", timestamp: str | None = None) -> Instant:
        """Create the requested instant (its time generated unless given)."""
        writer = self.table.timeline_writer
        if self.rules.heartbeat is not HeartbeatFrom.BEFORE_REQUEST:
            return writer.request(self.rules.action, payload, timestamp)
        beating: list[Heartbeat] = []

        def beat_first(ts: str) -> None:
            # Before the requested file exists (as Hudi does): a pending write without a heartbeat
            # looks failed to every rollback sweep, which would roll back this live write.
            beating.append(self._beat(ts))

        try:
            requested = writer.request(self.rules.action, payload, timestamp, before_create=beat_first)
        except BaseException:
            for heartbeat in beating:
                heartbeat.stop()
            raise
        self._heartbeat = beating[0]
        return requested

    def request_built(self, build: Callable[[Timeline], bytes | None], timestamp: str | None = None, *,
                      ahead_ms: int = 0) -> Instant | None:
        """A plan: its payload built by ``build(timeline)`` in the same lock hold as the create
        (None creates nothing); executed later by another run.  ``ahead_ms``: its generated time is
        that far ahead of the clock at least (a v6 compaction's)."""
        return self.table.timeline_writer.request_built(self.rules.action, build, timestamp=timestamp,
                                                        ahead_ms=ahead_ms)

    # -- start --------------------------------------------------------------------------------
    @contextmanager
    def start(self, requested: Instant, requirements: Sequence[CommitRequirement] = (), *,
              inflight_payload: bytes = b"") -> Iterator[StartedInstant]:
        """requested -> inflight per ``rules.start``, then the body runs; the heartbeat stops when
        it leaves.  ``requirements`` are checked under the lock before an ``IF_STILL_REQUESTED``
        start (the lease; ``StillRequested`` is added here).  ``inflight_payload``: the content of
        the inflight file, when Hudi writes one (a v6 clean: its plan)."""
        rules = self.rules
        self._inflight_payload = inflight_payload
        if requirements and rules.start is not Start.IF_STILL_REQUESTED:
            raise ValueError(f"a {rules.start.value} start checks no requirements")
        if rules.start is Start.FRESH:
            started = self._start_fresh(requested)
        elif rules.start is Start.IF_STILL_REQUESTED:
            started = self._start_if_still_requested(requested, requirements)
        else:
            if rules.heartbeat is HeartbeatFrom.BEFORE_START:
                self._heartbeat = self._beat(requested.timestamp)
            try:
                started = self._resume(requested)
            except BaseException:
                self._stop_heartbeat()
                raise
        self._inflight = started.instant
        failed = True
        try:
            yield started
            failed = False
        except BaseException:
            if rules.on_failure is OnFailure.ABORT and not (self._committed or self._aborted
                                                            or self._completion_unknown):
                self._abort_after_failure()
            elif not (self._committed or self._aborted or self._completion_unknown) and self._own_files \
                    and self._shares_time(started.instant.timestamp):
                # v6: another writer's instant has this time; once it completes, every file named
                # with the time counts as committed to a reader, so this run's go now (a rollback
                # later would read that writer's markers as this run's too)
                with self.table.timeline_writer.lock():
                    self._abandon_locked(started.instant, bool(still_pending(self._foreign(started.instant.timestamp))))
            raise
        finally:
            # an unknown completion keeps its heartbeat file: it expires like a killed writer's,
            # which gives a late completed file time to land before anyone rolls the instant back
            self._end_heartbeat(delete=not self._completion_unknown, failed=failed)
        if self._committed and rules.markers is Markers.AFTER_HEARTBEAT:
            self._after_commit(lambda: delete_markers(self.table.storage, self.table.base_path,
                                                      self.inflight.timestamp))

    def _start_fresh(self, requested: Instant) -> StartedInstant:
        try:
            inflight = self._transition(requested)
        except BaseException:
            # the requested instant stays: the sweep rolls it back once its heartbeat expired
            self._stop_heartbeat(delete=False)
            raise
        return StartedInstant(inflight, State.REQUESTED, None)

    def _start_if_still_requested(self, requested: Instant,
                                  requirements: Sequence[CommitRequirement]) -> StartedInstant:
        rules, writer = self.rules, self.table.timeline_writer
        ts = requested.timestamp
        # checks, heartbeat and transition in one lock hold: two executors cannot both take it
        with writer.lock():
            try:
                check_all((*self._collision_requirements(ts), *requirements,
                           StillRequested(ts, rules.label, rules.action)), self.table)
            except InstantTimeCollision as collision:
                self._abandon_locked(Instant(ts, rules.action, State.REQUESTED), collision.foreign_pending)
                raise
            if rules.heartbeat is HeartbeatFrom.WITH_START:
                self._heartbeat = self._beat(ts)
            try:
                inflight = self._transition(Instant(ts, rules.action, State.REQUESTED))
            except BaseException:
                # Stop beating whatever failed (a lost race, a storage error), or a long-lived
                # process (the runner) would keep the heartbeat alive and nobody could recover it.
                self._stop_heartbeat(delete=False)
                raise
        return StartedInstant(inflight, State.REQUESTED, None)

    def _resume(self, requested: Instant) -> StartedInstant:
        rules, ts = self.rules, requested.timestamp
        timeline = self.table.timeline()
        found = family_state(timeline, ts, rules.action)
        inflight = Instant(ts, rules.action, State.INFLIGHT)
        if found is State.REQUESTED:
            joined = self._transition(Instant(ts, rules.action, State.REQUESTED))
            if joined is None and self._state_now(ts) is State.COMPLETED:
                found = State.COMPLETED       # the other process finished it meanwhile
            inflight = joined or inflight
        return StartedInstant(inflight, found, timeline)

    def _transition(self, requested: Instant) -> Instant | None:
        """``TimelineWriter.start``; a lost race per ``rules.racing_start`` (None: joined)."""
        try:
            return self.table.timeline_writer.start(requested, self._inflight_payload)
        except (InstantExistsError, IllegalTransitionError) as e:
            if self.rules.racing_start is RacingStart.CONFLICT:
                raise ConflictError(f"{self.rules.label} {requested.timestamp}: {e}") from None
            if self.rules.racing_start is RacingStart.JOIN:
                # another process (a runner, a writer's inline service) took the same plan; its
                # steps are idempotent, so go on: only one of the two will complete it
                return None
            raise

    # -- work ---------------------------------------------------------------------------------
    def remove_orphans(self, stats: Mapping[str, Sequence[WriteStat]],
                       requirements: Sequence[CommitRequirement] = ()) -> None:
        """Delete files a failed task attempt left behind: a marker of the instant, no write stat.

        With requirements (the lease), under the table lock once they hold: a worker that lost
        its job must not delete the files of the worker that took it over (they carry markers
        of the same instant)."""
        written = {s.path for v in stats.values() for s in v}
        self._own_files |= written
        ts = self.inflight.timestamp
        # v6: the marker folder is shared with a Hudi 0.x write that took the same time, whose
        # markers (``MARKERS<n>``) would list its files as orphans of ours: checked first
        requirements = (*self._collision_requirements(ts), *requirements)
        if not requirements:
            remove_orphans(self.table.storage, self.table.base_path, ts, written)
            return
        with self.table.timeline_writer.lock():
            try:
                check_all(requirements, self.table)
            except InstantTimeCollision as collision:
                self._abandon_locked(self.inflight, collision.foreign_pending)
                raise
            remove_orphans(self.table.storage, self.table.base_path, ts, written)

    # -- commit / abort -----------------------------------------------------------------------
    def commit(self, metadata: bytes, requirements: Sequence[CommitRequirement] = (),
               key_changes: WriteKeyChanges | None = None,
               secondary_index: Mapping[str, Any] | None = None) -> Instant | None:
        """inflight -> completed under the table lock, once every requirement holds on the
        timeline of that lock hold (checked in order: the first that fails refuses the commit
        and the instant stays inflight); then the markers go (``rules.markers``).

        The one place where an instant commits, and so where the metadata table is updated: in
        the same lock hold, once the requirements held and before the data instant's completed
        file (``metadata.maintain``: Java's order, the metadata table's delta commit first).

        ``key_changes``: a write's keys inserted, updated and deleted per file group, as its tasks
        reported them, for the metadata table's key-indexed partitions (``record_index``).
        ``secondary_index``: a write's changes per secondary index (``spark.secondary_index_job``).

        None when another process completed the same instant and the rules say that is fine."""
        inflight = self.inflight
        # v6: commit only once a Hudi 0.x writer that took this time would have requested it, and
        # check for that first (before a requirement that would only say "busy")
        settle_past_own_time(self.table, inflight.timestamp, self.rules.action)
        requirements = (*self._collision_requirements(inflight.timestamp), *requirements,
                        *self._metadata_requirements(inflight))

        def precheck(timeline: Timeline) -> None:
            check_all(requirements, self.table, timeline)
            # decided here, from the properties ``MetadataTableKept`` just read under this lock
            if writes_metadata_table(self.table.config):
                update_metadata_table(self.table, inflight, metadata, key_changes, secondary_index,
                                      config=self._config)

        try:
            # no requirement and no metadata table: no precheck, and ``complete`` decides from
            # the instant's own files
            done = self.table.timeline_writer.complete(
                inflight, metadata, precheck if requirements or writes_metadata_table(self.table.config) else None)
        except InstantTimeCollision as collision:
            with self.table.timeline_writer.lock():
                self._abandon_locked(inflight, collision.foreign_pending)
            raise
        except StorageError as e:
            # The completed file's PUT may have reached the store although its answer did not (a
            # timeout: the request can still be applied later).  Undoing the run now could delete
            # the files of an instant that then shows completed, so the instant is left as a
            # process killed here leaves it: pending for ``tablesvc rollback``, or completed.
            self._completion_unknown = True
            raise StorageError(f"{e} (completing {inflight.timestamp}: it may still show completed; "
                               "run `tablesvc rollback` once its heartbeat expired)") from None
        except (InstantExistsError, IllegalTransitionError):
            if (self.rules.completed_elsewhere is CompletedElsewhere.IS_FINE
                    and self._state_now(self.inflight.timestamp) is State.COMPLETED):
                return None
            raise
        except BaseException:
            # Raised once the completed file may be written (the storage lock found lost when the
            # hold ends, a signal): a completed instant is never undone, and one whose state cannot
            # be read now is left as a killed process leaves it.
            try:
                completed = self._state_now(inflight.timestamp) is State.COMPLETED
            except Exception:
                completed = None
            if completed:
                self._committed = True
            elif completed is None:
                self._completion_unknown = True
            raise
        self._committed = True
        if self.rules.markers is Markers.AT_COMMIT:
            if self._shares_time(inflight.timestamp):
                # the folder is the other writer's too
                self._after_commit(lambda: self._delete_own_markers(inflight.timestamp))
            else:
                self._after_commit(lambda: delete_markers(self.table.storage, self.table.base_path,
                                                          self.inflight.timestamp))
        return done

    def abort(self) -> None:
        """Undo the run now: the files its markers list, the markers, then the pending instant.
        A process killed before this leaves the instant pending for a rollback to undo the same
        way."""
        storage, base, ts = self.table.storage, self.table.base_path, self.inflight.timestamp
        if self._state_now(ts) is State.COMPLETED:
            # the completed file landed after all (a commit whose failure came after its write):
            # its files are the table's now, nothing is undone
            self._committed = True
            return
        if writes_metadata_table(self.table.config):
            # the commit may have completed the metadata table's delta commit T and then failed
            # to write T's completed file: T's metadata goes first, while T is still pending
            with self.table.timeline_writer.lock():
                remove_aborted_delta_commit(self.table, ts)
        if self.rules.markers is not Markers.NONE:
            for partition, file_name, _io in list_markers(storage, base, ts):
                storage.delete(join(base, partition, file_name))
            delete_markers(storage, base, ts)
        self.table.timeline_writer.remove_pending(self.inflight)
        self._aborted = True

    def _abandon_locked(self, instant: Instant, foreign_pending: bool) -> None:
        """Give the instant up after a collision (the caller holds the table lock): the files this
        run wrote (write stats) and their markers, by exact name, then its own inflight file and,
        unless its plan must outlive the collision (a compaction: it goes back to requested), its
        own requested file.  Never the other writer's timeline files (``TimelineWriter.remove_pending``
        would take the whole action family: a log compaction's is the delta commit's), never the
        marker folder, and the heartbeat file only once no foreign instant of the time is pending
        (it is one path for both writers)."""
        storage, base, ts, action = self.table.storage, self.table.base_path, instant.timestamp, self.rules.action
        self._stop_heartbeat(delete=not foreign_pending)
        for rel in sorted(self._own_files):
            storage.delete(join(base, rel))
        self._delete_own_markers(ts)
        timeline_dir = join(base, self.table.config.layout.timeline_dir)
        mine = [Instant(ts, action, State.INFLIGHT)]
        if action not in _KEEP_PLAN_ON_COLLISION:
            mine.append(Instant(ts, action, State.REQUESTED))
        for own in mine:
            storage.delete(join(timeline_dir, own.file_name()))
        self._aborted = True

    def _delete_own_markers(self, timestamp: str) -> None:
        """The markers of the files this run wrote, by exact name (the folder may be shared)."""
        storage, base = self.table.storage, self.table.base_path
        for rel in self._own_files:
            partition, _, name = rel.rpartition("/")
            for io in IOType:
                storage.delete(marker_path(base, timestamp, partition, name, io))

    def _shares_time(self, timestamp: str) -> bool:
        """v6: another writer's timeline file has this instant's time (after the commit: a foreign
        instant that completed first, which a compaction lets pass)."""
        return bool(self._foreign(timestamp))

    def _foreign(self, timestamp: str) -> tuple[Instant, ...]:
        if not checks_collisions(self.table, self.rules.action):
            return ()
        return foreign_files_at(self.table.timeline(), timestamp, self.rules.action)

    # -- helpers ------------------------------------------------------------------------------
    def _collision_requirements(self, timestamp: str) -> tuple[CommitRequirement, ...]:
        return collision_requirements(self.table, timestamp, self.rules.action, self.rules.label)

    def _metadata_requirements(self, inflight: Instant) -> tuple[CommitRequirement, ...]:
        """``MetadataTableKept`` on table versions 6, 8 and 9 (checked last, once the action's own
        requirements held): a Java writer or an indexer may change the metadata table's
        partitions between ``Table.open`` and this commit.  It costs one read of
        ``hoodie.properties`` and the timeline's load under the lock."""
        action = self.rules.table_action
        if action is None or self.table.config.version < 6:
            return ()
        return (MetadataTableKept(action, inflight.timestamp),)

    def _beat(self, timestamp: str) -> Heartbeat:
        if self._interval_ms is None:
            raise ValueError(f"the {self.rules.label} lifecycle beats a heartbeat: give its interval")
        return Heartbeat(self.table.storage, self.table.base_path, timestamp, self.table.clock,
                         interval_ms=self._interval_ms).start()

    def _after_commit(self, tidy: Callable[[], None]) -> None:
        """Tidying once the instant completed (its markers): a storage failure there leaves files
        that name a completed instant, which no reader needs and the leftovers sweep of a later
        rollback removes, so it is a warning and the command succeeds (exit 1 would send the user
        to redo what is on the table).  The files are left either way; on v6, where the time is
        shared with a Java writer's pending instant, Java's marker-based rollback of that instant
        would read them too, which is why the warning names the instant."""
        try:
            tidy()
        except StorageError as e:
            print(f"tablesvc: warning: {e} ({self.inflight.timestamp} completed; its markers are left "
                  "behind for `tablesvc rollback` to sweep)", file=sys.stderr)

    def _abort_after_failure(self) -> None:
        """Undo a failed run at once.  If the undo itself fails (the store is still failing), the
        instant stays pending as a killed writer's does, for ``tablesvc rollback`` once its heartbeat
        expired; the error to report is still the run's own (the caller re-raises it), with one
        warning line saying the undo is left over."""
        try:
            self.abort()
        except StorageError as e:
            print(f"tablesvc: warning: {self.inflight.timestamp} is left pending, its undo failed ({e}); "
                  "`tablesvc rollback` undoes it once its heartbeat expired", file=sys.stderr)

    def _end_heartbeat(self, delete: bool, failed: bool) -> None:
        """Stop the run's heartbeat as it leaves.  A heartbeat file that cannot be deleted decides
        nothing: after a failure it expires as a killed writer's does, and the run's own error is
        the one to report; after a commit (or an abort of an empty run) it names an instant that is
        no longer pending, which no reader needs and the leftovers sweep of a later rollback
        removes, so the command still succeeds, with a warning (exit 1 there would send the user
        to redo a write that is on the table)."""
        try:
            self._stop_heartbeat(delete=delete)
        except StorageError as e:
            if not failed:
                ts = self.inflight.timestamp
                print(f"tablesvc: warning: {e} ({ts} is no longer pending; the heartbeat file is left behind "
                      "for `tablesvc rollback` to sweep)", file=sys.stderr)

    def _stop_heartbeat(self, delete: bool = True) -> None:
        if self._heartbeat is not None:
            heartbeat, self._heartbeat = self._heartbeat, None
            heartbeat.stop(delete=delete)

    def _state_now(self, timestamp: str) -> State | None:
        return family_state(self.table.timeline(), timestamp, self.rules.action)


__all__ = ["InstantLifecycle", "StartedInstant"]
