"""Table version 6 beside a Hudi 0.x writer (docs/interop.md, "Table version 6").

* A v6 compaction's instant is chosen ahead of the clock, once its plan is built, so that the plan
  file exists before any 0.x writer can take a later instant time from its clock.
* A write is in progress when its instant is pending, or when its heartbeat beats before its
  instant is requested (0.x's order): v6 plans wait for both, and a v6 log compaction completes
  only when neither is.
* A v6 compaction never completes over a log file outside its plan in a slice it replaces: refused
  for good when a committed write made it, retried later when a pending write later than the plan did.
* A requested v6 log-compaction plan that a write overtook (a newer log file in a planned slice) is
  dropped and planned afresh when run, but only while no write is in progress.

Tables: copies of a table Apache Hudi 0.x wrote (tests/data/hudi), with a Hudi-0.x-style v6 log
file or heartbeat added where a case needs one; times pinned with ``ManualClock``."""

from __future__ import annotations

import pytest
from fixture_tables import TABLES_DIR, copy_table
from oracles.hudi_rs import sorted_rows
from table_builders import busy_table, first_group_rows, tablesvc_rows, update_five_of_first_group

from tablesvc.api import Table
from tablesvc.errors import ConflictError, HiddenWriteError
from tablesvc.logformat import delete_block, encode_blocks, rollback_block
from tablesvc.services.compaction import schedule_compaction
from tablesvc.services.compaction.planner import V6_COMPACTION_LEAD_MS
from tablesvc.services.compaction.requirements import NoWriteIntoPlannedSlice
from tablesvc.services.lifecycle import NoWriteInProgress, writes_in_progress
from tablesvc.services.log_compaction import run_log_compaction, schedule_log_compaction
from tablesvc.services.log_compaction.requirements import slice_log_names
from tablesvc.services.result import Status
from timeline.clock import ManualClock
from timeline.heartbeat import HEARTBEAT_DIR
from timeline.instant import Action, Instant, State
from timeline.instant_time import InstantTimeGenerator, add_millis, format_instant
from timeline.payloads import CommitMetadata, encode_commit_metadata
from timeline.storage import join

V6_TABLE = "v6_trips_8i1u"        # Hudi 0.x wrote it: one file group with a log
WINDOW_MS = 120_000               # Hudi's default heartbeat interval x tolerable misses


def v6_table(tmp_path, clock: ManualClock | None = None) -> Table:
    table = Table.open(str(copy_table(TABLES_DIR / V6_TABLE, tmp_path)))
    if clock is not None:
        # the clock starts after every instant of the copied table, as a live writer's does
        clock.set(max(clock.now_ms(), table.clock.now_ms()))
        table = Table.open(table.base_path, clock=clock)
    return table


def beat(table: Table, instant: str, at_ms: int) -> None:
    """A heartbeat file of ``instant`` whose last beat is ``at_ms`` (tablesvc's form: the time in it)."""
    table.storage.makedirs(join(table.base_path, HEARTBEAT_DIR))
    table.storage.write_replace(join(table.base_path, HEARTBEAT_DIR, instant), str(at_ms).encode("ascii"))


def request_as_0x_does(table: Table, instant: str, action: Action = Action.DELTA_COMMIT) -> None:
    """``<instant>.deltacommit.requested`` created without the lock and whatever is on the timeline
    (Hudi 0.x's ``startCommit``): an instant time taken earlier may be older than the latest."""
    path = join(table.base_path, ".hoodie", Instant(instant, action, State.REQUESTED).file_name())
    table.storage.write_new(path, b"")


def plan_of(table: Table, instant: str):
    timeline = table.timeline()
    return timeline.plan_of(table.storage, timeline.require(instant))


# -- the compaction instant, ahead of the clock ----------------------------------------------------
def test_the_generator_gives_a_time_ahead_of_the_clock_and_still_after_the_timeline():
    clock = ManualClock(1_700_000_000_000)
    generator = InstantTimeGenerator(clock)
    assert generator.next(ahead_ms=300) == format_instant(1_700_000_000_300)
    # greater than the latest time on the timeline, and than what it gave before, whatever the lead
    assert generator.next(after=format_instant(1_700_000_009_000), ahead_ms=300) == format_instant(1_700_000_009_001)
    assert generator.next(ahead_ms=300) == format_instant(1_700_000_009_002)
    with pytest.raises(ValueError):
        generator.next(ahead_ms=-1)


def test_a_v6_compaction_instant_is_ahead_of_the_clock_and_a_v8_one_is_not(tmp_path):
    clock = ManualClock()
    table = v6_table(tmp_path / "v6", clock)
    before = clock.now_ms()
    scheduled = schedule_compaction(table, force=True)
    assert scheduled.status is Status.SCHEDULED
    assert scheduled.instant == format_instant(before + V6_COMPACTION_LEAD_MS)
    # the requested file exists, the clock still short of C: the reason does not say it came late
    assert "after the clock passed" not in scheduled.reason
    # scheduling returns once the clock has passed C, so a write sent right after it is later than C
    # (Hudi 0.x refuses a write earlier than a pending compaction)
    assert clock.now_ms() == before + V6_COMPACTION_LEAD_MS + 1

    v8 = busy_table(tmp_path / "v8", 8)[0]
    v8_clock = ManualClock(max(v8.clock.now_ms(), clock.now_ms()))
    v8 = Table.open(v8.base_path, clock=v8_clock)
    assert schedule_compaction(v8, force=True).instant == format_instant(v8_clock.now_ms())


def test_a_requested_file_written_after_the_clock_passed_its_time_is_reported(tmp_path, monkeypatch):
    """Not expected (the lead is many times a file write), but said when it happens."""
    from timeline import transitions

    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    real_write = transitions.TimelineWriter._write_new

    def slow_write(self, instant, payload):
        clock.advance(V6_COMPACTION_LEAD_MS + 5)
        real_write(self, instant, payload)

    monkeypatch.setattr(transitions.TimelineWriter, "_write_new", slow_write)
    scheduled = schedule_compaction(table, force=True)
    assert scheduled.status is Status.SCHEDULED
    assert scheduled.reason.endswith(f"its requested file appeared 5 ms after the clock passed its time, later than "
                                     f"the {V6_COMPACTION_LEAD_MS} ms lead allowed")


# -- writes in progress: a pending instant, or a heartbeat before the request -----------------------
def test_a_live_heartbeat_without_an_instant_holds_v6_plans_back(tmp_path):
    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    starting = format_instant(clock.now_ms() - 50)        # took its time, beats, has not requested yet
    beat(table, starting, clock.now_ms() - 10)

    compaction = schedule_compaction(table, force=True)
    assert compaction.status is Status.NOTHING_TO_DO
    assert f"write {starting} (heartbeat 10 ms old, its instant not yet requested) is pending" in compaction.reason
    log_compaction = schedule_log_compaction(table, force=True)
    assert log_compaction.status is Status.NOTHING_TO_DO and starting in log_compaction.reason

    # a heartbeat older than the window belongs to a writer that died before its request
    clock.advance(WINDOW_MS + 11)
    assert writes_in_progress(table, table.timeline(), heartbeat_window_ms=WINDOW_MS) == []
    assert schedule_compaction(table, force=True).status is Status.SCHEDULED


def test_a_heartbeat_of_an_instant_on_the_timeline_is_not_a_write_starting(tmp_path):
    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    completed = table.timeline().completed(Action.DELTA_COMMIT)[-1].timestamp
    beat(table, completed, clock.now_ms())                      # left behind by a finished write
    table.storage.write_new(join(table.base_path, HEARTBEAT_DIR, f".{completed}.crc"), b"crc")   # Hadoop's
    assert writes_in_progress(table, table.timeline(), heartbeat_window_ms=WINDOW_MS) == []
    assert schedule_compaction(table, force=True).status is Status.SCHEDULED


def test_a_v6_java_heartbeat_is_read_from_its_mtime(tmp_path):
    """Hudi 0.x's heartbeat is an empty file; its modification time is the beat."""
    table = v6_table(tmp_path)                                   # the system clock
    starting = format_instant(table.clock.now_ms())
    table.storage.makedirs(join(table.base_path, HEARTBEAT_DIR))
    table.storage.write_new(join(table.base_path, HEARTBEAT_DIR, starting), b"")
    (found,) = writes_in_progress(table, table.timeline(), heartbeat_window_ms=WINDOW_MS)
    assert found.timestamp == starting and "its instant not yet requested" in found.shown_by
    # without a window (v8/v9 callers) heartbeats are not looked at
    assert writes_in_progress(table, table.timeline(), heartbeat_window_ms=None) == []


def test_no_write_in_progress_refuses_a_pending_write_or_a_starting_one_and_not_its_own_instant(tmp_path):
    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    mine = format_instant(clock.now_ms())
    requirement = NoWriteInProgress(mine, "log compaction", WINDOW_MS)
    assert requirement.name == "v6-no-write-in-progress"
    beat(table, mine, clock.now_ms())                            # its own heartbeat
    requirement.check(table, table.timeline())

    pending = add_millis(mine, 7)
    request_as_0x_does(table, pending)
    with pytest.raises(ConflictError) as refused:
        requirement.check(table, table.timeline())
    assert str(refused.value).startswith(f"log compaction {mine}: write {pending} (deltacommit, requested) is in "
                                         "progress; on table version 6 a log compaction completes only while no "
                                         "write is")
    table.storage.delete(join(table.base_path, ".hoodie", f"{pending}.deltacommit.requested"))
    starting = add_millis(mine, 9)
    beat(table, starting, clock.now_ms())
    with pytest.raises(ConflictError, match=f"write {starting} \\(heartbeat 0 ms old"):
        requirement.check(table, table.timeline())


# -- the compaction's commit: no log outside the plan in a replaced slice --------------------------
def _log_in_planned_slice(table: Table, c: str, instant: str, version: int = 50, *, command: bool = False) -> str:
    """A v6 log file (Hudi 0.x's name) in the slice compaction ``c`` replaces, that the plan does not
    list, holding one block of ``instant``: a delete block, or a rollback command block."""
    (op,) = plan_of(table, c).operations
    name = f".{op.file_id}_{op.base_instant_time}.log.{version}_0-9-9"
    block = (rollback_block(instant, "20000101000000000") if command
             else delete_block(instant, None, [("k-lost", op.partition_path or "")]))
    table.storage.write_new(join(table.base_path, op.partition_path or "", name), encode_blocks([block]))
    return name


def _requirement(table: Table, c: str) -> NoWriteIntoPlannedSlice:
    return NoWriteIntoPlannedSlice.of(plan_of(table, c), c)


def test_a_committed_log_outside_the_plan_refuses_the_compaction_for_good_whatever_its_time(tmp_path):
    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    c = schedule_compaction(table, force=True).instant
    requirement = _requirement(table, c)
    requirement.check(table, table.timeline())              # the plan lists every log of its slice

    # a write EARLIER than C that committed with a log in the old slice (what 0.x's conflict check
    # would have aborted; the old requirement looked only at writes later than C)
    earlier = add_millis(c, -100)
    request_as_0x_does(table, earlier)
    name = _log_in_planned_slice(table, c, earlier)
    writer = table.timeline_writer
    writer.complete(writer.start(Instant(earlier, Action.DELTA_COMMIT, State.REQUESTED)), b"{}")
    (op,) = plan_of(table, c).operations
    with pytest.raises(HiddenWriteError) as refused:
        requirement.check(table, table.timeline())
    assert str(refused.value) == (
        f"compaction {c}: the committed write {earlier} put {name} into file group {op.file_id} (partition "
        f"{op.partition_path!r}), slice {op.base_instant_time}, which the plan replaces without listing it: "
        f"completing would hide that write.  Roll the write back (`tablesvc rollback --instant {earlier}`, then "
        "write its records again), then `tablesvc retry` the job or run the compaction again")
    assert not isinstance(refused.value, ConflictError)      # exit 1: the runner sets the job aside


def test_a_pending_later_write_in_a_planned_slice_is_a_conflict_and_an_earlier_one_is_left_to_0x(tmp_path):
    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    c = schedule_compaction(table, force=True).instant
    requirement = _requirement(table, c)

    earlier = add_millis(c, -100)               # 0.15's conflict check aborts it: C is later and overlaps
    request_as_0x_does(table, earlier)
    _log_in_planned_slice(table, c, earlier, 50)
    requirement.check(table, table.timeline())

    later = add_millis(c, 100)                  # 0.15 lets it commit (C is earlier): it would be hidden
    request_as_0x_does(table, later)
    name = _log_in_planned_slice(table, c, later, 51)
    with pytest.raises(ConflictError) as refused:
        requirement.check(table, table.timeline())
    assert f"the pending write {later} put {name} into file group" in str(refused.value)
    assert str(refused.value).endswith("retry once it is rolled back (if it commits, the compaction is refused for "
                                       "good, naming it)")


def test_rollback_blocks_gone_writes_and_logs_of_the_new_slice_hide_nothing(tmp_path):
    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    c = schedule_compaction(table, force=True).instant
    # a rollback's command block (its instant completed) in the old slice
    rollback = add_millis(c, 5)
    _log_in_planned_slice(table, c, rollback, 50, command=True)
    request_as_0x_does(table, rollback, Action.ROLLBACK)
    writer = table.timeline_writer
    writer.complete(writer.start(Instant(rollback, Action.ROLLBACK, State.REQUESTED)), b"{}")
    # records of a write that is gone (rolled back, its instant removed)
    _log_in_planned_slice(table, c, add_millis(c, 6), 51)
    # a committed write's log in slice C: read after C's base file, nothing hidden
    (op,) = plan_of(table, c).operations
    later = add_millis(c, 7)
    request_as_0x_does(table, later)
    block = delete_block(later, None, [("k", op.partition_path or "")])
    table.storage.write_new(join(table.base_path, op.partition_path or "", f".{op.file_id}_{c}.log.1_0-9-9"),
                            encode_blocks([block]))
    writer.complete(writer.start(Instant(later, Action.DELTA_COMMIT, State.REQUESTED)), b"{}")
    _requirement(table, c).check(table, table.timeline())


# -- a requested log-compaction plan that a write overtook ----------------------------------------
def test_a_stale_v6_log_compaction_plan_is_dropped_and_planned_afresh_only_while_no_write_is_in_progress(tmp_path):
    """A v6 plan waits, requested, while 0.x writes go on (``v6-no-write-in-progress``); a write
    that adds a log file to a planned slice meanwhile makes it stale (its compacted log would sort
    after the newer one, and its commit would be refused).  Running it drops it and plans afresh,
    but only while no write is in progress: a 0.x write may read the plan file it listed."""
    clock = ManualClock()
    table = v6_table(tmp_path, clock)
    for fare in (10.0, 11.0):                                   # two log blocks: the plan's slice
        update_five_of_first_group(table, 0, fare)
    stale = schedule_log_compaction(table, force=True).instant
    (planned,) = plan_of(table, stale).operations
    planned_logs = {p.rsplit("/", 1)[-1] for p in planned.delta_file_paths}
    before = tablesvc_rows(table)
    # a committed 0.x write deletes a key of that file group in a log file of its own, the next version
    # (0.15 on a local file system never appends to a log file: it writes the next version)
    clock.advance(1_000)
    overtaking = format_instant(clock.now_ms())
    request_as_0x_does(table, overtaking)
    key = first_group_rows(table).column("_hoodie_record_key")[0].as_py()
    name = f".{planned.file_id}_{planned.base_instant_time}.log.3_0-9-9"
    table.storage.write_new(join(table.base_path, planned.partition_path or "", name),
                            encode_blocks([delete_block(overtaking, None, [(key, planned.partition_path or "")])]))
    writer = table.timeline_writer
    metadata = CommitMetadata({planned.partition_path or "": ()}, False, {"schema": table.schema()}, "DELETE")
    writer.complete(writer.start(Instant(overtaking, Action.DELTA_COMMIT, State.REQUESTED)),
                    encode_commit_metadata(metadata, table.config.layout))
    assert {ln.name for ln in slice_log_names(table, planned.partition_path or "", planned.file_id,
                                              planned.base_instant_time)} - planned_logs == {name}
    expected = [r for r in before if r[0] != key]
    assert len(expected) == len(before) - 1
    assert tablesvc_rows(table) == expected == sorted_rows(table.base_path, ("uuid", "ts", "fare"))

    # a write in progress: the stale plan stays as it is, and the run is told to retry later
    clock.advance(1_000)
    pending = format_instant(clock.now_ms())
    request_as_0x_does(table, pending)
    with pytest.raises(ConflictError, match=f"write {pending} \\(deltacommit, requested\\) is in progress"):
        run_log_compaction(table, stale)
    assert table.timeline().require(stale).state is State.REQUESTED
    assert plan_of(table, stale).operations == (planned,)

    # no write in progress: dropped, planned afresh (the overtaking log included) and run
    table.storage.delete(join(table.base_path, ".hoodie", f"{pending}.deltacommit.requested"))
    (result,) = run_log_compaction(table, stale)
    assert result.status is Status.DONE and result.instant != stale, result.render()
    assert result.metrics["rolled_back"] == stale
    timeline = Table.open(table.base_path).timeline()
    assert timeline.get(stale) is None                          # the plan is mutable (Hudi): gone
    assert timeline.require(result.instant).state is State.COMPLETED
    (fresh,) = plan_of(table, result.instant).operations
    assert name in {p.rsplit("/", 1)[-1] for p in fresh.delta_file_paths}
    # hudi-rs and tablesvc read the same rows as before the run: the deleted key stays deleted
    assert tablesvc_rows(Table.open(table.base_path)) == expected
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == expected
