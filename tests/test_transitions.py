"""Atomic, durable state transitions, the table lock, and timeline queries."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tablesvc.storage import LocalStorage
from timeline.active import Timeline
from timeline.clock import ManualClock
from timeline.errors import IllegalTransitionError, InstantExistsError, InvalidInstantError, LockHeldError
from timeline.instant import Action, Instant, State, TimelineLayout
from timeline.instant_time import InstantTimeGenerator
from timeline.lock import TableLock
from timeline.transitions import TimelineWriter

REPO = Path(__file__).resolve().parent.parent


def make_writer(tmp_path: Path, layout: TimelineLayout, clock: ManualClock | None = None) -> TimelineWriter:
    storage = LocalStorage()
    clock = clock or ManualClock(1_743_390_402_808)
    base = str(tmp_path)
    os.makedirs(tmp_path / layout.timeline_dir, exist_ok=True)
    return TimelineWriter(storage, base, layout, InstantTimeGenerator(clock),
                          lambda: TableLock(storage, base, clock, wait_ms=0))


@pytest.mark.parametrize("layout", list(TimelineLayout))
def test_deltacommit_lifecycle_writes_expected_files(tmp_path, layout):
    w = make_writer(tmp_path, layout)
    req = w.request(Action.DELTA_COMMIT)
    inflight = w.start(req, b"")
    done = w.complete(inflight, b"{}")
    folder = tmp_path / layout.timeline_dir
    names = sorted(n for n in os.listdir(folder) if n[0].isdigit())
    t = req.timestamp
    if layout is TimelineLayout.V1:
        assert names == [f"{t}.deltacommit", f"{t}.deltacommit.inflight", f"{t}.deltacommit.requested"]
        assert done.completion_time is None
    else:
        assert done.completion_time is not None and done.completion_time > t
        assert names == [f"{t}.deltacommit.inflight", f"{t}.deltacommit.requested",
                         f"{t}_{done.completion_time}.deltacommit"]
    assert (folder / done.file_name()).read_bytes() == b"{}"
    tl = w.load()
    assert tl.completed_writes() == (done,)
    assert tl.pending() == ()


@pytest.mark.parametrize("layout", list(TimelineLayout))
def test_compaction_completes_as_commit_and_keeps_its_origin(tmp_path, layout):
    w = make_writer(tmp_path, layout)
    req = w.request(Action.COMPACTION, b"plan")
    assert w.load().pending_compactions() == (req,)
    done = w.complete(w.start(req), b"{}")
    tl = w.load()
    assert done.action is Action.COMMIT
    assert tl.origin_action(tl.require(req.timestamp)) is Action.COMPACTION
    assert tl.pending_compactions() == ()
    assert (tmp_path / layout.timeline_dir / req.file_name()).read_bytes() == b"plan"


def test_illegal_transitions_are_refused_and_change_nothing(tmp_path):
    w = make_writer(tmp_path, TimelineLayout.V2)
    req = w.request(Action.DELTA_COMMIT)
    before = sorted(os.listdir(tmp_path / ".hoodie/timeline"))
    with pytest.raises(IllegalTransitionError, match=f"instant {req.timestamp}.*requested -> completed"):
        w.complete(req, b"")
    assert sorted(os.listdir(tmp_path / ".hoodie/timeline")) == before
    inflight = w.start(req)
    with pytest.raises(IllegalTransitionError):
        w.start(inflight)
    w.complete(inflight, b"x")
    with pytest.raises(IllegalTransitionError, match="completed -> completed"):
        w.complete(inflight, b"y")


def test_creating_an_existing_instant_fails(tmp_path):
    w = make_writer(tmp_path, TimelineLayout.V1)
    req = w.request(Action.DELTA_COMMIT)
    with pytest.raises(InstantExistsError, match=req.timestamp):
        w.request(Action.DELTA_COMMIT, timestamp=req.timestamp)
    with pytest.raises(InvalidInstantError, match="not after the latest"):
        w.request(Action.CLEAN, timestamp="20000101000000000")



def test_request_built_plans_under_the_lock_and_writes_nothing_for_no_plan(tmp_path):
    w = make_writer(tmp_path, TimelineLayout.V2)
    first = w.request(Action.DELTA_COMMIT)
    seen = []

    def build(timeline):
        seen.append([i.timestamp for i in timeline.instants])
        lock_file = tmp_path / ".hoodie" / ".aux" / ".tablesvc.lock"
        assert lock_file.exists(), "the payload must be built while the table lock is held"
        return None if len(seen) == 1 else b"plan"

    assert w.request_built(Action.COMPACTION, build) is None
    assert [i.timestamp for i in w.load().instants] == [first.timestamp]  # nothing was created
    made = w.request_built(Action.COMPACTION, build)
    assert made is not None and made.state is State.REQUESTED and made.timestamp > first.timestamp
    assert seen == [[first.timestamp], [first.timestamp]]
    assert (tmp_path / TimelineLayout.V2.timeline_dir / made.file_name()).read_bytes() == b"plan"

def test_revert_and_remove_pending(tmp_path):
    w = make_writer(tmp_path, TimelineLayout.V2)
    req = w.request(Action.COMPACTION, b"plan")
    w.start(req)
    back = w.revert_to_requested(req)
    assert back.state is State.REQUESTED and w.load().require(req.timestamp).state is State.REQUESTED
    d = w.request(Action.DELTA_COMMIT)
    w.start(d)
    w.remove_pending(d)
    assert w.load().get(d.timestamp) is None
    done = w.complete(w.start(w.request(Action.DELTA_COMMIT)), b"")
    inflight = w.revert_to_inflight(done)
    assert w.load().require(done.timestamp) == inflight


def test_times_are_strictly_increasing_across_writers(tmp_path):
    """Two writers with clocks that disagree still produce increasing times and completion times."""
    clock_a, clock_b = ManualClock(1_743_390_402_808), ManualClock(1_743_390_400_000)
    a = make_writer(tmp_path, TimelineLayout.V2, clock_a)
    b = make_writer(tmp_path, TimelineLayout.V2, clock_b)
    t1 = a.complete(a.start(a.request(Action.DELTA_COMMIT)), b"")
    t2 = b.complete(b.start(b.request(Action.DELTA_COMMIT)), b"")
    assert t2.timestamp > t1.completion_time
    assert t2.completion_time > t2.timestamp


def test_lock_is_exclusive_and_expires(tmp_path):
    storage, clock = LocalStorage(), ManualClock()
    os.makedirs(tmp_path / ".hoodie", exist_ok=True)
    first = TableLock(storage, str(tmp_path), clock, ttl_ms=1000, wait_ms=0, owner="first")
    second = TableLock(storage, str(tmp_path), clock, ttl_ms=1000, wait_ms=0, owner="second",
                       sleep=lambda s: None)
    first.acquire()
    with pytest.raises(LockHeldError, match="held by first"):
        second.acquire()
    clock.advance(5000)  # the first holder died: its lock expires
    assert not second.try_acquire()  # removes the stale lock
    assert second.try_acquire()
    first.release()  # not the owner any more: leaves the lock alone
    assert storage.exists(second.path)
    second.release()
    assert not storage.exists(second.path)


def test_timeline_queries(tmp_path):
    w = make_writer(tmp_path, TimelineLayout.V2)
    d1 = w.complete(w.start(w.request(Action.DELTA_COMMIT)), b"")
    c = w.request(Action.COMPACTION, b"plan")
    d2 = w.start(w.request(Action.DELTA_COMMIT))
    tl = w.load()
    assert tl.completed_writes() == (d1,)
    assert [i.timestamp for i in tl.pending()] == [c.timestamp, d2.timestamp]
    assert tl.latest_completed() == d1
    assert tl.as_of(d1.timestamp).instants == (d1,)
    assert tl.is_committed_or_archived("20000101000000000")  # older than the timeline: archived
    assert not tl.is_committed_or_archived(d2.timestamp)
    assert tl.max_time() == max(d2.timestamp, d1.completion_time)


CRASH_WRITER = textwrap.dedent("""
    import hashlib, os, sys
    sys.path.insert(0, {repo!r})
    from tablesvc.storage import LocalStorage
    s = LocalStorage()
    i = 0
    while True:
        body = os.urandom(4 << 20)
        data = hashlib.sha256(body).hexdigest().encode() + body
        s.write_new(os.path.join({folder!r}, f"{{i:06d}}.deltacommit"), data)
        i += 1
""")


def test_kill_9_during_writes_never_leaves_a_partial_instant_file(tmp_path):
    """A real process killed with SIGKILL mid-write: every file under its final name is whole."""
    folder = tmp_path / "timeline"
    folder.mkdir()
    for attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", CRASH_WRITER.format(repo=str(REPO), folder=str(folder))])
        time.sleep(0.6 + 0.3 * attempt)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finals = [n for n in os.listdir(folder) if n.endswith(".deltacommit") and not n.startswith(".")]
    assert finals, "the writer should have completed some files before being killed"
    for n in finals:
        data = (folder / n).read_bytes()
        assert hashlib.sha256(data[64:]).hexdigest().encode() == data[:64], f"{n} is partial"
    # The loader ignores leftover hidden temp files.
    Timeline.load(LocalStorage(), str(tmp_path), TimelineLayout.V1)
