"""The writes in progress on a table, as a table-version-6 service must count them.

Hudi 0.x (the writer of table version 6) starts a write outside any lock, in this order
(``BaseHoodieWriteClient.startCommit``): it takes its instant time, checks that no pending
compaction is later, starts its heartbeat (``.hoodie/.heartbeat/<instant>``, LAZY failed-writes
policy, which OCC requires), and only then creates ``<instant>.deltacommit.requested``.  So a write
is in progress when a write instant is pending on the timeline, or when a heartbeat beats for an
instant that has no file on the timeline yet (the writer is between its heartbeat and its request).

A v6 service counts both: compaction and log compaction schedule nothing while a write is in
progress, and a log compaction completes only when none is (``NoWriteInProgress``), because Hudi
0.15's conflict check cannot read the operation type of a log compaction that completed while a
0.x write was in flight (docs/interop.md, "Table version 6").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tablesvc.errors import ConflictError
from tablesvc.services.lifecycle.collisions import still_pending
from tablesvc.services.lifecycle.requirements import CommitRequirement
from timeline.active import Timeline
from timeline.heartbeat import HEARTBEAT_DIR, judged_dead, last_beat_ms
from timeline.instant import Action, State
from timeline.instant_time import parse_instant
from timeline.storage import join

# Pending files at a v6 service's own time that can only be another writer's (see writes_in_progress).
_FOREIGN_AT_OWN_TIME = (Action.DELTA_COMMIT, Action.COMMIT, Action.REPLACE_COMMIT)

# Pending actions that are writes: they add files to file slices.
WRITE_ACTIONS = (Action.DELTA_COMMIT, Action.COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING,
                 Action.LOG_COMPACTION)


@dataclass(frozen=True)
class WriteInProgress:
    """One write in progress: its instant and what shows it."""

    timestamp: str
    shown_by: str      # "deltacommit, requested", or the heartbeat's age when only a heartbeat shows it

    def describe(self) -> str:
        return f"{self.timestamp} ({self.shown_by})"


def _is_instant_name(name: str) -> bool:
    if not name.isdigit() or len(name) not in (14, 17):
        return False
    try:
        parse_instant(name)
    except Exception:
        return False
    return True


def writes_in_progress(table: Any, timeline: Timeline, *, heartbeat_window_ms: int | None,
                       exclude: str | None = None, requested_log_compactions: bool = True) -> list[WriteInProgress]:
    """Pending write instants of ``timeline`` (oldest first), then, when ``heartbeat_window_ms`` is
    given, the instants without any file on the timeline whose heartbeat beat within that window
    (an expired one belongs to a writer that died before its request: it never writes).
    ``exclude``: the caller's own instant.  Its time is skipped only for the caller's files: a
    pending write file at that very time is another writer's (a Hudi 0.x writer takes its time
    outside the lock and may take the caller's, ``collisions.py``; tablesvc's v6 services, the
    callers, never write ``deltacommit``/``commit``/``replacecommit`` requested or inflight files), and is
    counted; and the heartbeat of that time is then not taken for the caller's own.
    ``requested_log_compactions=False`` leaves out log
    compaction plans not yet started: they have written nothing, and their file groups are pinned
    (the compaction planner's choice: on v6 such a plan may wait long beside a busy 0.x writer)."""
    out = [WriteInProgress(i.timestamp, f"{i.action.value}, {i.state.value}") for i in timeline.pending()
           if i.action in WRITE_ACTIONS and i.timestamp != exclude
           and (requested_log_compactions or not (i.action is Action.LOG_COMPACTION and i.state is State.REQUESTED))]
    # a 0.x write that completed leaves its requested and inflight files: only a still pending one counts
    foreign = [f for f in still_pending(timeline.files_of(exclude)) if f.action in _FOREIGN_AT_OWN_TIME] \
        if exclude is not None else []
    if foreign:
        f = max(foreign, key=lambda f: f.state.rank)     # its highest state (requested, then inflight)
        out.append(WriteInProgress(f.timestamp, f"{f.action.value}, {f.state.value}, of another writer at this "
                                                "very time"))
    if heartbeat_window_ms is None:
        return out
    now = table.clock.now_ms()
    for name in table.storage.list_names(join(table.base_path, HEARTBEAT_DIR)):
        # Java's Hadoop file system writes a ``.<name>.crc`` beside each heartbeat: not an instant
        if name == exclude or not _is_instant_name(name) or timeline.files_of(name):
            continue
        beat = last_beat_ms(table.storage, table.base_path, name)
        if not judged_dead(beat, now, heartbeat_window_ms):
            out.append(WriteInProgress(name, f"heartbeat {now - beat} ms old, its instant not yet requested"))
    return out


@dataclass(frozen=True)
class NoWriteInProgress(CommitRequirement):
    """v6: no write is in progress (``writes_in_progress``).  A log compaction needs it at its
    commit: Hudi 0.15 checks every commit that completed while its write was in flight and fails on
    a log compaction's operation type (``WriteOperationType.fromValue`` has no ``log_compact``), so
    a log compaction completing beside a 0.x write breaks that write."""

    name: ClassVar[str] = "v6-no-write-in-progress"

    instant: str
    label: str
    heartbeat_window_ms: int

    def describe(self) -> str:
        return (f"no write is in progress when {self.label} {self.instant} completes (no pending write instant, "
                f"no heartbeat younger than {self.heartbeat_window_ms} ms of an instant not yet requested)")

    def check(self, table: Any, timeline: Timeline | None) -> None:
        assert timeline is not None
        writes = writes_in_progress(table, timeline, heartbeat_window_ms=self.heartbeat_window_ms,
                                    exclude=self.instant)
        if writes:
            raise ConflictError(
                f"{self.label} {self.instant}: write {writes[0].describe()} is in progress; on table version 6 a "
                f"{self.label} completes only while no write is (Hudi 0.x's conflict check fails a write beside "
                "which one completed); retry later")


__all__ = ["NoWriteInProgress", "WRITE_ACTIONS", "WriteInProgress", "writes_in_progress"]
