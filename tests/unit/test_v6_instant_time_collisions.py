"""Table version 6: a Hudi 0.15 writer takes tablesvc's own instant time (issue #26; docs/interop.md,
"Instant-time collisions").

Hudi 0.x takes an instant time from its clock outside the lock and never looks at storage for it.
Between the schedule and the commit of each tablesvc action, a "Java" write is put on the table
here exactly as Hudi 0.15 lays it out on a local file system (Hadoop's ``.crc`` beside each file it
writes): ``T.deltacommit.requested`` and ``.inflight``, the heartbeat ``.hoodie/.heartbeat/T``, the
timeline-server marker file ``.hoodie/.temp/T/MARKERS0`` and its log file.  tablesvc must give its
own instant up (exit 3), delete only what it wrote itself, leave the Java files byte for byte, and
succeed on retry with a new time; tablesvc's reader and hudi-rs must read the model, with the Java
write's change once it commits.

The injection points: a hook on the Spark-task step (right after tablesvc wrote its files), and a
``ManualClock`` whose first wait after the start runs the hook (the v6 commit waits until the clock
is ``V6_SETTLE_MS`` past its time: the moment right before it takes the lock to commit)."""

from __future__ import annotations

import pytest
from fixture_tables import TABLES_DIR, copy_table
from oracles.hudi_rs import sorted_rows
from table_builders import first_file_group, first_group_rows, tablesvc_rows, update_five_of_first_group

from tablesvc.api import Table
from tablesvc.cli.main import main as cli_main
from tablesvc.errors import ConflictError, HiddenWriteError
from tablesvc.logformat import delete_block, encode_blocks
from tablesvc.services.compaction import run_compaction, schedule_compaction
from tablesvc.services.lifecycle import writes_in_progress
from tablesvc.services.lifecycle.collisions import (
    V6_SETTLE_MS, InstantTimeCollision, NoForeignInstantAtOwnTime, foreign_files_at,
)
from tablesvc.services.log_compaction import run_log_compaction, schedule_log_compaction
from tablesvc.services.result import Status
from timeline.active import Timeline
from timeline.clock import ManualClock
from timeline.heartbeat import HEARTBEAT_DIR
from timeline.instant import Action, Instant, State, TimelineLayout
from timeline.payloads import CommitMetadata, encode_commit_metadata
from timeline.storage import join

V6_TABLE = "v6_trips_8i1u"        # Hudi 0.x wrote it: one file group with a log
HADOOP_EMPTY_CRC = b"crc\x00\x00\x00\x02\x00"   # Hadoop's checksum file of an empty file (512-byte chunks)
WINDOW_MS = 120_000


class HookClock(ManualClock):
    """A hand-moved clock whose first wait once ``armed()`` holds runs ``hook`` (then waits)."""

    def __init__(self) -> None:
        super().__init__()
        self.hook = None
        self.armed = lambda: True

    def sleep_ms(self, ms: int) -> None:
        hook = self.hook
        if hook is not None and self.armed():
            self.hook = None
            hook()
        super().sleep_ms(ms)


def v6_table(tmp_path, clock: ManualClock) -> Table:
    table = Table.open(str(copy_table(TABLES_DIR / V6_TABLE, tmp_path)))
    clock.set(max(clock.now_ms(), table.clock.now_ms()))
    return Table.open(table.base_path, clock=clock)


def _crc_name(name: str) -> str:
    return f".{name}.crc"


def _write_with_crc(table: Table, folder: str, name: str, data: bytes = b"", *, overwrite: bool = False) -> list[str]:
    """A file as Hadoop's local file system writes it: the file and its ``.<name>.crc``."""
    table.storage.makedirs(folder)
    paths = [join(folder, name), join(folder, _crc_name(name))]
    write = table.storage.write_replace if overwrite else table.storage.write_new
    write(paths[0], data)
    write(paths[1], HADOOP_EMPTY_CRC if not data else b"crc\x00\x00\x00\x02\x00" + b"\x00" * 4)
    return paths


class JavaWrite:
    """A Hudi 0.15 write of instant ``t``: a delete of one key of the first file group, as it lays
    its files out (heartbeat, requested, inflight, its marker file, its log file)."""

    def __init__(self, table: Table, t: str, slice_base: str | None = None):
        self.table, self.t = table, t
        s = first_file_group(table)
        self.partition, self.file_id = s.partition, s.file_id
        # the slice its log goes into: the latest one of its file-system view (a pending
        # compaction it saw starts a new slice, whose first log is version 1)
        self.base = slice_base or s.base_instant
        self.key = first_group_rows(table).column("_hoodie_record_key")[-1].as_py()
        self.log_name = f".{self.file_id}_{self.base}.log.{1 if slice_base else 90}_1-0-1"
        self.files: list[str] = []

    def start(self) -> "JavaWrite":
        t, table, base = self.t, self.table, self.table.base_path
        hoodie = join(base, ".hoodie")
        # the heartbeat first; Hudi's heartbeat client overwrites the file (tablesvc's may be there)
        self.files += _write_with_crc(table, join(base, HEARTBEAT_DIR), t, overwrite=True)
        self.files += _write_with_crc(table, hoodie, f"{t}.deltacommit.requested")
        self.files += _write_with_crc(table, hoodie, f"{t}.deltacommit.inflight")
        markers = join(hoodie, ".temp", t)
        self.files += _write_with_crc(table, markers, "MARKERS.type", b"TIMELINE_SERVER_BASED")
        self.files += _write_with_crc(table, markers, "MARKERS0",
                                      f"{self.partition}/{self.log_name}.marker.APPEND\n".encode())
        self.files += _write_with_crc(table, join(base, self.partition), self.log_name, encode_blocks(
            [delete_block(t, None, [(self.key, self.partition)])]))
        self.as_written = self.snapshot()
        return self

    def snapshot(self) -> dict[str, bytes]:
        return {p: self.table.storage.read_bytes(p) for p in self.files}

    def commit(self) -> None:
        """Java's completed file (its heartbeat and markers go, as Hudi's post-commit does)."""
        md = CommitMetadata({self.partition: ()}, False, {"schema": self.table.schema()}, "DELETE")
        _write_with_crc(self.table, join(self.table.base_path, ".hoodie"), f"{self.t}.deltacommit",
                        encode_commit_metadata(md, TimelineLayout.V1))
        self.table.storage.delete_tree(join(self.table.base_path, ".hoodie", ".temp", self.t))
        self.table.storage.delete(join(self.table.base_path, HEARTBEAT_DIR, self.t))


def _timeline_names(table: Table, t: str) -> set[str]:
    return {f.file_name() for f in Table.open(table.base_path).timeline().files_of(t)}


def _two_log_blocks(table: Table) -> None:
    for fare in (10.0, 11.0):
        update_five_of_first_group(table, 0, fare)


def _rows_agree(table: Table, expected: list[tuple]) -> None:
    fresh = Table.open(table.base_path)
    assert tablesvc_rows(fresh) == expected
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == expected


# -- the requirement and the timeline ------------------------------------------------------------------
def test_two_instants_of_one_time_load_and_each_action_sees_the_other_as_foreign(tmp_path):
    t = "20261127070516462"
    names = [f"{t}.logcompaction.requested", f"{t}.deltacommit.requested", f"{t}.logcompaction.inflight",
             f"{t}.clean.requested", f"{t}.deltacommit"]
    timeline = Timeline.from_names(str(tmp_path), TimelineLayout.V1, names)
    assert len(timeline.files_of(t)) == 5
    assert {f.file_name() for f in foreign_files_at(timeline, t, Action.LOG_COMPACTION)} == {
        f"{t}.deltacommit.requested", f"{t}.clean.requested", f"{t}.deltacommit"}
    assert {f.file_name() for f in foreign_files_at(timeline, t, Action.CLEAN)} == {
        f"{t}.logcompaction.requested", f"{t}.deltacommit.requested", f"{t}.logcompaction.inflight",
        f"{t}.deltacommit"}
    # a log compaction that completed (no delta commit requested at its time) is its own ...
    done = Timeline.from_names(str(tmp_path / "c"), TimelineLayout.V1,
                               [f"{t}.logcompaction.requested", f"{t}.logcompaction.inflight", f"{t}.deltacommit"])
    assert foreign_files_at(done, t, Action.LOG_COMPACTION) == ()
    # ... and a 0.x write's completed file, with its requested and inflight ones, is not
    java = Timeline.from_names(str(tmp_path / "d"), TimelineLayout.V1,
                               [f"{t}.logcompaction.requested", f"{t}.logcompaction.inflight",
                                f"{t}.deltacommit.requested", f"{t}.deltacommit.inflight", f"{t}.deltacommit"])
    assert len(foreign_files_at(java, t, Action.LOG_COMPACTION)) == 3
    # only its own files: no collision (a compaction's completed commit is its own)
    own = Timeline.from_names(str(tmp_path / "b"), TimelineLayout.V1,
                              [f"{t}.compaction.requested", f"{t}.compaction.inflight", f"{t}.commit"])
    assert foreign_files_at(own, t, Action.COMPACTION) == ()


def _java_untouched_then_commits(table, java, before: list) -> list:
    """After tablesvc gave its instant up: the 0.x write's files are as it wrote them; it then
    commits (deleting its key) and the readers agree on the rows left.  Returns those rows."""
    assert _timeline_names(table, java.t) == {f"{java.t}.deltacommit.requested", f"{java.t}.deltacommit.inflight"}
    assert java.snapshot() == java.as_written
    java.commit()
    expected = [r for r in before if r[0] != java.key]
    _rows_agree(table, expected)
    return expected


def test_a_foreign_write_at_the_callers_own_time_counts_as_a_write_in_progress(tmp_path):
    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    _two_log_blocks(table)
    t = schedule_log_compaction(table, force=True).instant
    assert writes_in_progress(table, table.timeline(), heartbeat_window_ms=WINDOW_MS, exclude=t) == []
    java = JavaWrite(table, t).start()
    (found,) = writes_in_progress(table, table.timeline(), heartbeat_window_ms=WINDOW_MS, exclude=t)
    assert found.timestamp == t and "another writer at this very time" in found.shown_by
    requirement = NoForeignInstantAtOwnTime(t, Action.LOG_COMPACTION, "log compaction")
    with pytest.raises(InstantTimeCollision, match=f"{t}.deltacommit.requested"):
        requirement.check(table, table.timeline())
    # once that write completed it is no write in progress, but still a collision
    java.commit()
    assert writes_in_progress(table, table.timeline(), heartbeat_window_ms=WINDOW_MS, exclude=t) == []
    with pytest.raises(InstantTimeCollision, match=f"{t}.deltacommit"):
        requirement.check(table, table.timeline())


# -- log compaction ------------------------------------------------------------------------------------
@pytest.mark.parametrize("when", ["after-its-files", "before-its-commit", "before-its-start"])
def test_a_log_compaction_gives_up_its_time_to_a_0x_write_and_retries_with_a_new_one(tmp_path, monkeypatch, when):
    clock = HookClock()
    table = v6_table(tmp_path, clock)
    _two_log_blocks(table)
    before = tablesvc_rows(table)
    t = schedule_log_compaction(table, force=True).instant
    java = JavaWrite(table, t)
    written: list[str] = []
    import tablesvc.services.log_compaction.executor as executor
    real_tasks = executor.run_file_group_tasks

    def tasks_then_java(*args, **kwargs):
        stats = real_tasks(*args, **kwargs)
        written.extend(s.path for v in stats.values() for s in v)
        if when == "after-its-files" and not java.files:          # once: not in the retry
            java.start()
        return stats

    monkeypatch.setattr(executor, "run_file_group_tasks", tasks_then_java)
    if when == "before-its-commit":
        clock.hook = java.start
        clock.armed = lambda: table.storage.exists(join(table.base_path, ".hoodie", f"{t}.logcompaction.inflight"))
    if when == "before-its-start":
        java.start()

    with pytest.raises(InstantTimeCollision) as refused:
        run_log_compaction(table, t)
    assert isinstance(refused.value, ConflictError)                 # exit 3: retry later
    assert f"log compaction {t}: another writer's instant has the same time" in str(refused.value)
    # its own files are gone, by name; Java's are there byte for byte
    assert _timeline_names(table, t) == {f"{t}.deltacommit.requested", f"{t}.deltacommit.inflight"}
    assert java.snapshot() == java.as_written
    for rel in written:
        assert not table.storage.exists(join(table.base_path, rel)), rel
    assert written or when == "before-its-start"
    assert table.storage.list_names(join(table.base_path, ".hoodie", ".temp", t)) == [
        ".MARKERS.type.crc", ".MARKERS0.crc", "MARKERS.type", "MARKERS0"]
    # the Java write commits: its delete is read, and nothing of the abandoned log compaction
    java.commit()
    expected = [r for r in before if r[0] != java.key]
    assert len(expected) == len(before) - 1
    _rows_agree(table, expected)

    # the retry: a new time, done, and the readers read the same rows
    clock.advance(1_000)
    (done,) = run_log_compaction(Table.open(table.base_path, clock=clock))
    assert done.status is Status.DONE and done.instant != t, done.render()
    _rows_agree(table, expected)


def test_the_cli_exits_3_on_a_collision(tmp_path, capsys):
    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    _two_log_blocks(table)
    t = schedule_log_compaction(table, force=True).instant
    JavaWrite(table, t).start()
    code = cli_main(["logcompaction", "run", table.base_path, "--instant", t])
    assert code == 3
    assert "another writer's instant has the same time" in capsys.readouterr().err


# -- compaction: the plan stays -----------------------------------------------------------------------
@pytest.mark.parametrize("java_saw_the_plan", [True, False])
def test_a_compaction_keeps_its_plan_while_a_0x_write_of_its_time_is_pending(tmp_path, java_saw_the_plan):
    """Hudi 0.15 refuses a write whose time is not later than a pending compaction at its start
    (``BaseHoodieWriteClient.startCommit``), so a write with the compaction's own time C goes on
    only if it listed the timeline before the plan file existed.  If its file-system view (loaded
    again later) holds the plan, its log goes into the new slice C and the compaction completes
    once the write did; if not, its log went into the slice the compaction replaces, and the
    compaction is refused for good (``HiddenWriteError``, exit 1): the user rolls that write back."""
    clock = HookClock()
    table = v6_table(tmp_path, clock)
    _two_log_blocks(table)
    before = tablesvc_rows(table)
    c = schedule_compaction(table, force=True).instant
    java = JavaWrite(table, c, c if java_saw_the_plan else None)
    clock.hook = java.start
    clock.armed = lambda: table.storage.exists(join(table.base_path, ".hoodie", f"{c}.compaction.inflight"))
    with pytest.raises(InstantTimeCollision):
        run_compaction(table, c, in_process=True)
    assert clock.hook is None                                       # the Java write came in before the commit
    assert java.snapshot() == java.as_written
    # back to its plan: requested, its base files gone
    assert _timeline_names(table, c) == {f"{c}.compaction.requested", f"{c}.deltacommit.requested",
                                         f"{c}.deltacommit.inflight"}
    assert not [n for n in table.storage.list_names(join(table.base_path, java.partition)) if c in n and
                n.endswith(".parquet")]
    # while Java's instant is pending, a retry is refused again, and changes nothing of Java's
    with pytest.raises(InstantTimeCollision):
        run_compaction(Table.open(table.base_path, clock=clock), c, in_process=True)
    assert java.snapshot() == java.as_written
    # Java completes; the compaction may now complete (its plan holds the slice Java did not write into)
    java.commit()
    expected = [r for r in before if r[0] != java.key]
    if not java_saw_the_plan:
        _rows_agree(table, expected)
        with pytest.raises(HiddenWriteError, match=c):
            run_compaction(Table.open(table.base_path, clock=clock), c, in_process=True)
        _rows_agree(table, expected)
        return
    (done,) = run_compaction(Table.open(table.base_path, clock=clock), c, in_process=True)
    assert done.status is Status.DONE, done.render()
    assert f"{c}.commit" in _timeline_names(table, c)
    _rows_agree(table, expected)


def test_the_settle_wait_puts_a_v6_commit_past_its_time(tmp_path):
    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    _two_log_blocks(table)
    t = schedule_log_compaction(table, force=True).instant
    from timeline.instant_time import parse_instant
    (done,) = run_log_compaction(table, t)
    assert done.status is Status.DONE
    assert clock.now_ms() > parse_instant(t) + V6_SETTLE_MS
    assert _timeline_names(table, t) == {f"{t}.logcompaction.requested", f"{t}.logcompaction.inflight",
                                         f"{t}.deltacommit"}
    assert Instant(t, Action.DELTA_COMMIT, State.COMPLETED).file_name() == f"{t}.deltacommit"


# -- clean and rollback: abandoned at the commit --------------------------------------------------------
def _java_at_own_inflight(table: Table, clock: HookClock, action: Action) -> list[JavaWrite]:
    """Arm ``clock``: the first wait once an instant of ``action`` is inflight starts a Java write
    with that instant's time (the v6 commit's settle wait)."""
    started: list[JavaWrite] = []
    suffix = f".{action.value}.inflight"

    def own_inflight() -> list[str]:
        return [n[:-len(suffix)] for n in table.storage.list_names(join(table.base_path, ".hoodie"))
                if n.endswith(suffix) and n[0].isdigit()]

    clock.armed = lambda: bool(own_inflight())
    clock.hook = lambda: started.append(JavaWrite(table, own_inflight()[0]).start())
    return started


def test_a_clean_gives_up_its_time_to_a_0x_write_and_a_retry_succeeds(tmp_path):
    from table_builders import compact_by_hand

    from tablesvc.config import build_config
    from tablesvc.services.clean import run_clean

    clock = HookClock()
    table = v6_table(tmp_path, clock)
    for fare in (10.0, 11.0):
        update_five_of_first_group(table, 0, fare)
        compact_by_hand(table, clock)
    before = tablesvc_rows(table)
    config = build_config(conf={"hoodie.cleaner.commits.retained": "1"})
    started = _java_at_own_inflight(table, clock, Action.CLEAN)
    with pytest.raises(InstantTimeCollision, match="clean"):
        run_clean(Table.open(table.base_path, clock=clock), config)
    (java,) = started
    expected = _java_untouched_then_commits(table, java, before)
    clock.advance(1_000)
    results = run_clean(Table.open(table.base_path, clock=clock), config)
    assert results and all(r.status in (Status.DONE, Status.NOTHING_TO_DO) for r in results), results
    assert Table.open(table.base_path).timeline().pending() == ()
    _rows_agree(table, expected)


def test_a_rollback_gives_up_its_time_to_a_0x_write_and_a_retry_succeeds(tmp_path):
    from tablesvc.services.rollback import rollback

    clock = HookClock()
    table = v6_table(tmp_path, clock)
    _two_log_blocks(table)
    before = tablesvc_rows(table)
    w = table.timeline_writer
    failed = w.start(w.request(Action.DELTA_COMMIT)).timestamp     # a write that died (no heartbeat)
    clock.advance(1_000)
    started = _java_at_own_inflight(table, clock, Action.ROLLBACK)
    with pytest.raises(InstantTimeCollision, match="rollback"):
        rollback(Table.open(table.base_path, clock=clock), failed)
    (java,) = started
    expected = _java_untouched_then_commits(table, java, before)
    clock.advance(1_000)
    done = rollback(Table.open(table.base_path, clock=clock), failed)
    assert done.status is Status.DONE and done.instant != java.t, done.render()
    timeline = Table.open(table.base_path).timeline()
    assert timeline.pending() == () and not timeline.files_of(failed)
    _rows_agree(table, expected)


def test_a_plan_the_timeline_shows_as_the_0x_write_is_still_a_runner_job_and_is_given_up(tmp_path):
    """``T.logcompaction.requested`` beside ``T.deltacommit.requested``: the timeline keeps one instant
    per family and time (the delta commit), so the runner's job list and ``run_log_compaction``
    without an instant find the plan from the files, and give it up."""
    from tablesvc.runner.jobs import JobKind, pending_jobs

    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    _two_log_blocks(table)
    t = schedule_log_compaction(table, force=True).instant
    java = JavaWrite(table, t).start()
    timeline = Table.open(table.base_path).timeline()
    assert Action.LOG_COMPACTION not in {i.action for i in timeline.pending()}       # hidden by the write
    jobs = [j for j in pending_jobs(table, timeline, 60_000, 2) if j.instant == t]
    assert [j.kind for j in jobs] == [JobKind.LOG_COMPACTION]
    # run without an instant: the plan is given up; nothing new is planned while the write is pending
    clock.advance(1_000)
    (waiting,) = run_log_compaction(Table.open(table.base_path, clock=clock))
    assert waiting.status is Status.NOTHING_TO_DO and f"write {t}" in waiting.reason, waiting.render()
    assert _timeline_names(table, t) == {f"{t}.deltacommit.requested", f"{t}.deltacommit.inflight"}
    assert java.snapshot() == java.as_written
    before = tablesvc_rows(table)
    java.commit()
    expected = [r for r in before if r[0] != java.key]
    (done,) = run_log_compaction(Table.open(table.base_path, clock=clock))
    assert done.status is Status.DONE and done.instant != t, done.render()
    _rows_agree(table, expected)


def test_a_v6_compaction_whose_completion_is_unknown_keeps_its_files_beside_a_foreign_instant(tmp_path, monkeypatch):
    """A v6 compaction at a time a completed Hudi 0.x instant also has, whose completed file landed
    but whose answer did not come (``StorageError``): its base files are not abandoned."""
    from timeline.errors import StorageError
    from timeline.instant import State
    from timeline.transitions import TimelineWriter

    clock = HookClock()
    table = v6_table(tmp_path, clock)
    _two_log_blocks(table)
    c = schedule_compaction(table, force=True).instant
    java = JavaWrite(table, c, c)
    clock.hook = java.start
    clock.armed = lambda: table.storage.exists(join(table.base_path, ".hoodie", f"{c}.compaction.inflight"))
    with pytest.raises(InstantTimeCollision):
        run_compaction(table, c, in_process=True)
    java.commit()
    real = TimelineWriter._write_new

    def landed_without_answer(writer, instant, payload):
        real(writer, instant, payload)
        if instant.timestamp == c and instant.state is State.COMPLETED and ".hoodie/metadata" not in writer.base_path:
            raise StorageError(f"create {instant.file_name()}: timed out")

    monkeypatch.setattr(TimelineWriter, "_write_new", landed_without_answer)
    with pytest.raises(StorageError):
        run_compaction(Table.open(table.base_path, clock=clock), c, in_process=True)
    assert f"{c}.commit" in _timeline_names(table, c)
    assert [n for n in table.storage.list_names(join(table.base_path, java.partition))
            if c in n and n.endswith(".parquet")], "the completed compaction's base files were abandoned"
