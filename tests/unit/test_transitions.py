"""Atomic, durable state transitions, the table lock, and timeline queries."""

from __future__ import annotations

import hashlib
import re
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
from timeline.lock import LOCK_FILE, TableLock
from timeline.transitions import TimelineWriter
from helpers import ListingCounter

REPO = Path(__file__).resolve().parents[2]


def make_writer(tmp_path: Path, layout: TimelineLayout, clock: ManualClock | None = None) -> TimelineWriter:
    storage = LocalStorage()
    clock = clock or ManualClock(1_743_390_402_808)
    base = str(tmp_path)
    os.makedirs(tmp_path / layout.timeline_dir, exist_ok=True)
    return TimelineWriter(storage, base, layout, InstantTimeGenerator(clock),
                          lambda: TableLock(storage, base, clock, wait_ms=0))


@pytest.mark.parametrize("layout", list(TimelineLayout))
def test_before_create_runs_under_the_lock_before_the_instant_exists(tmp_path, layout):
    """Where a writer starts its heartbeat: nobody can see its instant without one."""
    w = make_writer(tmp_path, layout)
    seen = []

    def before_create(timestamp: str) -> None:
        seen.append((timestamp, w.load().files_of(timestamp), (tmp_path / LOCK_FILE).exists()))

    req = w.request(Action.DELTA_COMMIT, before_create=before_create)
    assert seen == [(req.timestamp, (), True)]
    assert w.load().get(req.timestamp).state is State.REQUESTED

    def refuse(timestamp: str) -> None:
        raise OSError("no heartbeat")

    with pytest.raises(OSError):
        w.request(Action.DELTA_COMMIT, before_create=refuse)
    assert [i.timestamp for i in w.load().instants] == [req.timestamp]   # nothing was created


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
        lock_file = tmp_path / LOCK_FILE
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


# -- cost on a long timeline (issue #6): what each step reads, and the snapshot it keeps --------------
def counting_writer(tmp_path: Path, layout: TimelineLayout) -> tuple[TimelineWriter, ListingCounter]:
    storage, clock, base = ListingCounter(), ManualClock(1_743_390_402_808), str(tmp_path)
    os.makedirs(tmp_path / layout.timeline_dir, exist_ok=True)
    return TimelineWriter(storage, base, layout, InstantTimeGenerator(clock),
                          lambda: TableLock(storage, base, clock, wait_ms=0)), storage


@pytest.mark.parametrize("layout", list(TimelineLayout))
def test_start_and_a_layout_1_completion_read_names_not_the_folder(tmp_path, layout):
    """start() asks for the few names of its timestamp; so does complete() in layout 1.  Layout 2's
    complete() lists once on a storage it cannot watch (this counting wrapper): another process's
    completion file has an unknown name (its completion time) and the new completion time must
    exceed every time on the timeline (plain local storage: the next tests)."""
    w, storage = counting_writer(tmp_path, layout)
    for action in (Action.DELTA_COMMIT, Action.COMPACTION, Action.CLEAN, Action.COMMIT):
        requested = w.request(action)
        storage.listed.clear()
        inflight = w.start(requested)
        assert storage.listed == []
        done = w.complete(inflight, b"{}")
        assert len(storage.listed) == (0 if layout is TimelineLayout.V1 else 1)
        assert w.load().require(requested.timestamp) == done


@pytest.mark.parametrize("layout", list(TimelineLayout))
def test_a_completion_by_another_writer_is_seen_under_the_lock(tmp_path, layout):
    """Two processes finishing the same instant (two clean runs finishing one pending clean): the
    second is refused, though its own writer never saw the first one's completion file."""
    mine, _ = counting_writer(tmp_path, layout)
    theirs = make_writer(tmp_path, layout, ManualClock(1_743_390_500_000))   # a clock ahead of mine
    inflight = mine.start(mine.request(Action.CLEAN))
    done = theirs.complete(inflight, b"theirs")
    with pytest.raises(IllegalTransitionError, match="completed -> completed"):
        mine.complete(inflight, b"mine")
    later = mine.complete(mine.start(mine.request(Action.DELTA_COMMIT)), b"")
    if layout is TimelineLayout.V2:   # times stay above every time the other writer made
        assert later.timestamp > done.completion_time and later.completion_time > later.timestamp


@pytest.mark.parametrize("layout", list(TimelineLayout))
def test_start_refuses_exactly_what_a_full_check_refuses(tmp_path, layout):
    w = make_writer(tmp_path, layout)
    inflight = w.start(w.request(Action.DELTA_COMMIT))
    with pytest.raises(IllegalTransitionError, match="inflight -> inflight"):
        w.start(inflight)
    done = w.complete(inflight, b"")
    with pytest.raises(InstantExistsError):   # completed -> inflight is legal (a rollback's first step)
        w.start(Instant(done.timestamp, Action.DELTA_COMMIT, State.REQUESTED))
    with pytest.raises(IllegalTransitionError, match="absent -> inflight"):
        w.start(Instant("20990101000000000", Action.DELTA_COMMIT, State.REQUESTED))
    # a log compaction's inflight file makes its deltacommit family inflight
    lc = w.start(w.request(Action.LOG_COMPACTION))
    with pytest.raises(IllegalTransitionError, match="inflight -> inflight"):
        w.start(Instant(lc.timestamp, Action.LOG_COMPACTION, State.REQUESTED))
    with pytest.raises(InstantExistsError):   # two starts racing: the exclusive create decides
        w._write_new(lc, b"")


def full_parse(tmp_path: Path, layout: TimelineLayout) -> Timeline:
    """The timeline built the way the loader always built it: every name parsed, files sorted by
    (time, state) then action, through the public constructor."""
    folder = tmp_path / layout.timeline_dir
    files = [Instant.parse(n, layout) for n in sorted(os.listdir(folder)) if n[0].isdigit()]
    return Timeline(str(tmp_path), layout, tuple(sorted(files, key=lambda i: (i.sort_key, i.action.value))))


@pytest.mark.parametrize("layout", list(TimelineLayout))
def test_loading_again_follows_every_change_made_by_others(tmp_path, layout):
    """Timeline.load keeps the last snapshot and derives the next one from the files that changed:
    after requests, starts, completions, reverts and removals by another writer, a load equals a
    timeline built from scratch, in every query."""
    import random

    rng = random.Random(7)
    mine = make_writer(tmp_path, layout)
    other = make_writer(tmp_path, layout, ManualClock(1_743_390_402_808))
    for _ in range(30):
        mine.request(Action.DELTA_COMMIT)
    live: list[Instant] = []
    for step in range(60):
        before = mine.load()
        move = rng.randrange(6)
        pending = [i for i in before.instants if i.is_pending]
        completed = [i for i in before.instants if i.is_completed and i.action is not Action.ROLLBACK]
        if move == 0 or not pending:
            live.append(other.request(rng.choice([Action.DELTA_COMMIT, Action.COMPACTION, Action.CLEAN])))
        elif move == 1:
            i = rng.choice(pending)
            (other.start(i) if i.state is State.REQUESTED else other.complete(i, b"{}"))
        elif move == 2:
            i = rng.choice(pending)
            if i.state is State.INFLIGHT:
                other.revert_to_requested(i)
        elif move == 3:
            other.remove_pending(rng.choice(pending))
        elif move == 4 and completed:
            other.revert_to_inflight(rng.choice(completed))
        else:
            i = rng.choice(pending)
            if i.state is State.REQUESTED:
                other.complete(other.start(i), b"{}")
        got, want = mine.load(), full_parse(tmp_path, layout)
        assert got == want and got.instants == want.instants
        assert got.max_time() == want.max_time() and got.completion_times() == want.completion_times()
        assert got.pending() == want.pending() and got.completed_writes() == want.completed_writes()
        for i in want.files:
            assert got.get(i.timestamp) == want.get(i.timestamp)
            assert got.origin_action(i) == want.origin_action(i)
            assert got.is_committed_or_archived(i.timestamp) == want.is_committed_or_archived(i.timestamp)
    assert mine.load() is mine.load()   # an unchanged folder: the same snapshot


@pytest.mark.parametrize("layout", list(TimelineLayout))
def test_start_by_name_goes_ahead_exactly_where_the_full_check_does(tmp_path, layout):
    """With the requested file there and no inflight one, the full check goes ahead whether the
    instant is requested or (inflight file deleted by hand) completed: completed -> inflight is
    legal.  The by-name check, which cannot see a layout-2 completion file, agrees in both."""
    w = make_writer(tmp_path, layout)
    done = w.complete(w.start(w.request(Action.DELTA_COMMIT)), b"")
    inflight = Instant(done.timestamp, Action.DELTA_COMMIT, State.INFLIGHT)
    os.remove(tmp_path / layout.timeline_dir / inflight.file_name())
    assert w.start(Instant(done.timestamp, Action.DELTA_COMMIT, State.REQUESTED)) == inflight
    assert (tmp_path / layout.timeline_dir / inflight.file_name()).exists()
    assert w.load().require(done.timestamp) == done


# -- layout 2 completion from change events (timeline.watch) ----------------------------------------
def watched_writer(tmp_path: Path, monkeypatch, clock: ManualClock | None = None):
    """A layout-2 writer on plain local storage, and the list of folders LocalStorage listed (the
    class is patched, so the storage stays watchable); skipped where the folder cannot be watched."""
    from timeline.watch import watch_folder

    w = make_writer(tmp_path, TimelineLayout.V2, clock)
    if watch_folder(str(tmp_path / TimelineLayout.V2.timeline_dir)) is None:
        pytest.skip("no change events for this folder (not Linux, or not a local file system)")
    listed: list[str] = []
    real = LocalStorage.list_names
    monkeypatch.setattr(LocalStorage, "list_names", lambda self, path: listed.append(path) or real(self, path))
    return w, listed


def test_a_layout_2_completion_lists_nothing_after_a_load(tmp_path, monkeypatch):
    """After any load (request() loads under the lock), complete() decides from that timeline plus
    the names created and deleted since: no listing, same files and times as the full check."""
    w, listed = watched_writer(tmp_path, monkeypatch)
    for action in (Action.DELTA_COMMIT, Action.COMPACTION, Action.CLEAN, Action.COMMIT, Action.LOG_COMPACTION):
        requested = w.request(action)
        inflight = w.start(requested)
        listed.clear()
        done = w.complete(inflight, b"{}")
        assert listed == []
        tl = w.load()
        assert tl.require(requested.timestamp) == done and done.completion_time == tl.max_time()


def test_a_layout_2_completion_sees_what_another_process_did_since_the_load(tmp_path, monkeypatch):
    """Another process (a Java writer: plain files, no lock, a clock far ahead) completes our instant
    or another one after our last load: the change events tell, so the double completion is refused
    and the new completion time exceeds the other writer's times, still without listing."""
    w, listed = watched_writer(tmp_path, monkeypatch)
    folder = tmp_path / TimelineLayout.V2.timeline_dir
    mine = w.start(w.request(Action.CLEAN))
    other = w.start(w.request(Action.DELTA_COMMIT))
    subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        open({str(folder / f"{mine.timestamp}_20990101000000000.clean")!r}, "wb").close()
        open({str(folder / f"{other.timestamp}_20990101000000001.deltacommit")!r}, "wb").close()
    """)], check=True)
    with pytest.raises(IllegalTransitionError, match="completed -> completed"):
        w.complete(mine, b"mine")      # the fast path stepped aside; the full check refused
    later = w.start(w.request(Action.DELTA_COMMIT))
    listed.clear()
    done = w.complete(later, b"")
    assert listed == [] and done.completion_time > "20990101000000001"
    # a file deleted by another process counts too: the instant is inflight again
    (folder / done.file_name()).unlink()
    listed.clear()
    again = w.complete(later, b"")
    assert listed == [] and again.completion_time > done.completion_time


def test_a_layout_2_completion_lists_when_changes_cannot_be_known(tmp_path, monkeypatch):
    """Lost events (queue overflow), a forked child (the queue is the parent's) or no load yet in
    this process: complete() lists, as before."""
    import timeline.active as active

    w, listed = watched_writer(tmp_path, monkeypatch)
    inflight = w.start(w.request(Action.DELTA_COMMIT))
    folder = str(tmp_path / TimelineLayout.V2.timeline_dir)
    active._WATCHES[folder]._valid = False          # what an overflow event does
    listed.clear()
    w.complete(inflight, b"")
    assert len(listed) == 1
    inflight = w.start(w.request(Action.DELTA_COMMIT))   # the request's load watches again
    pid = os.fork()
    if pid == 0:   # the child: one listing, and a refusal of nothing it should not refuse
        try:
            listed.clear()
            w.complete(inflight, b"")
            os._exit(0 if len(listed) == 1 else 1)
        except BaseException:
            os._exit(2)
    assert os.waitpid(pid, 0)[1] == 0
    with pytest.raises(IllegalTransitionError, match="completed -> completed"):
        w.complete(inflight, b"")   # the parent learns of the child's completion from the events


@pytest.mark.parametrize("layout", [None, *TimelineLayout])
def test_names_cut_by_position_parse_as_the_pattern_parses_them(layout):
    """The loader cuts names with a 17-digit time by position (a cold load of 30k names, issue #6);
    every other shape, and every refusal, is the pattern parser's."""
    import timeline.active as active

    t, c = "20250101000000123", "20250101000000456"
    names = []
    for action in Action:
        for suffix in (f".{action.value}", f".{action.value}.requested", f".{action.value}.inflight", ".inflight"):
            for head in (t, f"{t}_{c}", t[:14], f"{t[:14]}_{c[:14]}", f"{t}_{c[:14]}", f"{t}_x{c[1:]}", f"{t}0",
                         f"{t}_{c}_{c}", f"{t}__{c}"):
                names += [head + suffix, head + suffix + "x", head + suffix + ".requested"]
    names += [t, f"{t}.", f"{t}_", f"{t}_{c}", f"{t}.inflight.inflight", "٠" * 17 + ".commit"]
    for name in sorted(set(names)):
        try:
            expected = active._sort_entry(name, layout)
        except InvalidInstantError as e:
            with pytest.raises(InvalidInstantError, match=re.escape(str(e))):
                active._listed_entries([name], layout)
            continue
        assert active._listed_entries([name], layout) == [expected], name
