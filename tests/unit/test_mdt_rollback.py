"""Rolling back the metadata table's (MDT) delta commit ``T`` with a rollback instant on the MDT's
timeline, as Java's MDT write client does (``tablesvc.metadata.mdt_rollback``; docs/metadata-table.md,
"Rolling back the metadata delta commit T").

Oracles: the Java-written fixtures (``v9_nonpartitioned_rollback`` holds an MDT rollback Java wrote:
its plan and metadata have the shape checked here), hudi-rs's rows (equal to its own time-travel
read as of the instant before ``T``), and the three listings agreeing (tablesvc through the MDT,
hudi-rs, storage)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from oracles.hudi_rs import read_rows

from fixture_tables import copy_table
from metadata_tables import keep_only_files_partition, metadata_listing, slices_agree, storage_listing
from tablesvc.api import Table
from tablesvc.metadata.mdt_rollback import (
    metadata_rollback_time, new_instant_time, roll_back_before_rewrite, rollback_delta_commit, rollback_failed_writes,
)
from tablesvc.metadata.writer import MetadataTableWriter
from tablesvc.services.rollback import rollback
from tablesvc.storage import LocalStorage
from timeline.clock import SystemClock
from timeline.heartbeat import heartbeat_path
from timeline.instant import Action, Instant, State
from timeline.payloads import decode_payload, decode_rollback_plan

MDT_FIXTURES = ["v9_nonpartitioned_rollback", "v8_trips_8i3u1d"]
# the heartbeat window of tablesvc's defaults (hoodie.client.heartbeat.interval_in_ms x tolerable.misses)
WINDOW_MS = 60_000 * 2
HEARTBEATS = {"clock": SystemClock(), "heartbeat_window_ms": WINDOW_MS}


@pytest.fixture
def copy_of(fixture_root, tmp_path):
    def make(name: str) -> Path:
        return copy_table(fixture_root.path(name), tmp_path / name.replace(":", "_"))
    return make


def _mdt(path: Path) -> MetadataTableWriter:
    table = Table.open(str(path))
    return MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)


def _rows(path: Path, as_of: str | None = None) -> list[str]:
    return sorted(str(sorted((k, str(v)) for k, v in r.items() if k != "_hoodie_commit_seqno"))
                  for r in read_rows(path, as_of=as_of))


def _logs_of(path: Path, ts: str) -> list[str]:
    return sorted(p.name for p in (path / ".hoodie" / "metadata").rglob(f".*_{ts}.log.*"))


def _latest_write(path: Path) -> tuple[Instant, Instant]:
    """The latest completed write of the data table and the completed instant before it."""
    completed = [i for i in Table.open(str(path)).timeline().instants if i.is_completed]
    latest = [i for i in completed if i.action in (Action.DELTA_COMMIT, Action.COMMIT)][-1]
    return latest, [i for i in completed if i.timestamp < latest.timestamp][-1]


def _mdt_rollbacks(path: Path) -> dict[str, tuple]:
    """MDT rollback time -> (its plan, its completed metadata or None)."""
    mdt = _mdt(path)
    timeline = mdt.timeline()
    out = {}
    for r in timeline.filter(actions=[Action.ROLLBACK]):
        files = timeline.files_of(r.timestamp)
        requested = next(f for f in files if f.state is State.REQUESTED)
        plan = decode_rollback_plan(mdt.storage.read_bytes(timeline.path_of(requested)), "plan")
        done = next((f for f in files if f.is_completed), None)
        metadata = None if done is None else decode_payload(
            done, mdt.storage.read_bytes(timeline.path_of(done)), mdt.config.layout, "metadata")
        out[r.timestamp] = (plan, metadata)
    return out


@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_a_data_rollback_rolls_back_the_mdt_delta_commit_at_its_own_time(copy_of, name):
    path = copy_of(name)
    target, before = _latest_write(path)
    expected = _rows(path, as_of=before.completion_time or before.timestamp)
    assert _rows(path) != expected
    logs = _logs_of(path, target.timestamp)
    assert logs
    known = set(_mdt_rollbacks(path))
    result = Table.open(str(path)).rollback(target.timestamp, allow_completed=True)
    assert result.status.value == "done"
    # the MDT's rollback is at the data rollback's time R, completed, naming T's every log file
    [(r, (plan, metadata))] = [(k, v) for k, v in _mdt_rollbacks(path).items() if k not in known]
    assert r == result.instant and metadata is not None
    assert (plan.instant_to_rollback.commit_time, plan.instant_to_rollback.action) == (target.timestamp, "deltacommit")
    planned = sorted(os.path.basename(f) for q in plan.rollback_requests for f in q.files_to_be_deleted)
    assert planned == logs and all(not q.log_blocks_to_be_deleted for q in plan.rollback_requests)
    assert metadata.commits_rollback == (target.timestamp,) and metadata.total_files_deleted == len(logs)
    assert sorted(os.path.basename(f) for m in metadata.partition_metadata.values()
                  for f in m.success_delete_files) == logs
    assert [(i.commit_time, i.action) for i in metadata.instants_rollback] == [(target.timestamp, "deltacommit")]
    # T left the MDT: timeline files and logs
    assert _mdt(path).timeline().files_of(target.timestamp) == ()
    assert _logs_of(path, target.timestamp) == []
    # readers: the rows before T, the three listings agree, the MDT lists what storage holds
    assert _rows(path) == expected
    slices_agree(path)
    assert metadata_listing(Table.open(str(path))) == storage_listing(path)


def test_tablesvc_writes_what_java_wrote(copy_of):
    """The fixture holds an MDT rollback Java 1.2 wrote for its data rollback: tablesvc's MDT
    rollback of the next write has the same shape: at the data rollback's time, the plan's target
    ``(T, deltacommit)``, delete-only requests of absolute paths under ``.hoodie/metadata/<partition>``
    whose partition is the request's, and metadata naming the same files."""
    path = copy_of("v9_nonpartitioned_rollback")
    java = _mdt_rollbacks(path)
    target, _ = _latest_write(path)
    result = Table.open(str(path)).rollback(target.timestamp, allow_completed=True)
    ours = {k: v for k, v in _mdt_rollbacks(path).items() if k not in java}
    data_rollbacks = {i.timestamp for i in Table.open(str(path)).timeline().completed(Action.ROLLBACK)}
    assert set(java) | {result.instant} == data_rollbacks and set(ours) == {result.instant}

    def shape(plan, metadata, base: str):
        requests = sorted((q.partition_path, q.file_id, q.latest_base_instant, bool(q.log_blocks_to_be_deleted))
                          for q in plan.rollback_requests)
        paths_ok = all(f.startswith(f"{base}/.hoodie/metadata/{q.partition_path}/.") for q in plan.rollback_requests
                       for f in q.files_to_be_deleted)
        planned = sorted(f for q in plan.rollback_requests for f in q.files_to_be_deleted)
        deleted = sorted(f for m in metadata.partition_metadata.values() for f in m.success_delete_files)
        return (plan.instant_to_rollback.action, plan.version, {r[1:] for r in requests}, paths_ok,
                planned == deleted, metadata.total_files_deleted == len(deleted), metadata.version,
                [i.action for i in metadata.instants_rollback], list(metadata.commits_rollback)
                == [plan.instant_to_rollback.commit_time])

    [(java_plan, java_md)] = java.values()
    java_base = java_plan.rollback_requests[0].files_to_be_deleted[0].split("/.hoodie/metadata/")[0]
    [(plan, metadata)] = ours.values()
    assert shape(plan, metadata, str(path)) == shape(java_plan, java_md, java_base)
    assert shape(plan, metadata, str(path))[3]


def test_a_pending_mdt_delta_commit_is_rolled_back_from_a_listing(copy_of):
    """A run killed before its MDT delta commit completed: the data instant and the MDT's ``T``
    pending, its log files written.  The data rollback of ``T`` takes them from a listing of the
    MDT's partitions (no write stats to go by)."""
    path = copy_of("v9_nonpartitioned_rollback")
    target, before = _latest_write(path)
    expected = _rows(path, as_of=before.completion_time or before.timestamp)
    table = Table.open(str(path))
    table.storage.delete(table.timeline().path_of(target))               # data T pending
    mdt = _mdt(path)
    done = next(f for f in mdt.timeline().files_of(target.timestamp) if f.is_completed)
    mdt.storage.delete(mdt.timeline().path_of(done))                      # MDT T pending, its logs there
    logs = _logs_of(path, target.timestamp)
    assert logs
    result = rollback(Table.open(str(path)), target.timestamp)
    assert result.status.value == "done"
    plan, metadata = _mdt_rollbacks(path)[result.instant]
    assert sorted(os.path.basename(f) for q in plan.rollback_requests for f in q.files_to_be_deleted) == logs
    assert metadata is not None and _logs_of(path, target.timestamp) == []
    assert _mdt(path).timeline().files_of(target.timestamp) == ()
    assert _rows(path) == expected
    slices_agree(path)


class _FailsOnMetadataLogDelete(LocalStorage):
    """A crash in the middle of the MDT rollback: the first delete of an MDT log file fails."""

    def __init__(self):
        super().__init__()
        self.failed = False

    def delete(self, path: str) -> bool:
        if not self.failed and "/.hoodie/metadata/" in path and ".log." in path:
            self.failed = True
            raise OSError("killed")
        return super().delete(path)


def test_an_interrupted_mdt_rollback_is_resumed_at_its_own_time(copy_of):
    """The abort of a commit rolls back its MDT ``T`` at a new time; interrupted after ``T`` was
    reverted, the MDT rollback stays pending with its plan.  The data rollback of ``T`` at ``R``
    then finishes that one (Java's ``getPendingRollbackInfo``), no second rollback of ``T``."""
    path = copy_of("v9_nonpartitioned_rollback")
    target, before = _latest_write(path)
    expected = _rows(path, as_of=before.completion_time or before.timestamp)
    table = Table.open(str(path))
    table.storage.delete(table.timeline().path_of(target))               # data T pending, MDT T completed
    table = Table.open(str(path), storage=_FailsOnMetadataLogDelete())
    mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)
    first = new_instant_time(mdt)
    with pytest.raises(Exception, match="could not delete"):
        rollback_delta_commit(mdt, target.timestamp, first)
    pending = _mdt(path).timeline().files_of(first)
    assert {f.state for f in pending} == {State.REQUESTED, State.INFLIGHT}
    assert {f.state for f in _mdt(path).timeline().files_of(target.timestamp)} == {State.REQUESTED, State.INFLIGHT}
    slices_agree(path)                                                    # T's records read by no one
    result = rollback(Table.open(str(path)), target.timestamp)
    assert result.status.value == "done" and result.instant != first
    rollbacks = _mdt_rollbacks(path)
    assert [k for k, (plan, _) in rollbacks.items() if plan.instant_to_rollback.commit_time == target.timestamp] \
        == [first]
    assert rollbacks[first][1] is not None and _logs_of(path, target.timestamp) == []
    assert _rows(path) == expected
    slices_agree(path)


def test_a_rewrite_rolls_back_pending_delta_commits_and_an_earlier_attempt_at_new_times(copy_of):
    """Before the MDT delta commit ``T`` is written again: the EAGER pass rolls back every pending
    MDT delta commit, then the completed earlier attempt at ``T``, each at a new instant time
    later than everything on both timelines (Java's ``commitInternal``)."""
    path = copy_of("v9_nonpartitioned_rollback")
    target, _ = _latest_write(path)
    table = Table.open(str(path))
    table.storage.delete(table.timeline().path_of(target))               # data T pending, MDT T completed
    mdt = _mdt(path)
    # a pending MDT delta commit a killed run left (requested only, one log file)
    stray = "20260403184300000"
    mdt.storage.write_new(mdt.timeline().path_of(Instant(stray, Action.DELTA_COMMIT, State.REQUESTED)), b"")
    [one_log] = [p for p in (path / ".hoodie" / "metadata" / "files").glob(f".files-*_{target.timestamp}.log.*")]
    stray_log = one_log.with_name(one_log.name.replace(target.timestamp, stray))
    stray_log.write_bytes(one_log.read_bytes())
    highest = max(mdt.timeline().max_time(), Table.open(str(path)).timeline().max_time())
    eager = rollback_failed_writes(mdt, lambda: new_instant_time(mdt), **HEARTBEATS)
    assert [d.target for d in eager] == [stray]                           # the completed T is no failed write
    again = roll_back_before_rewrite(mdt, target.timestamp)
    assert again is not None and again.target == target.timestamp
    done = [*eager, again]
    assert all(d.instant.timestamp > highest and d.instant.is_completed for d in done)
    assert done[0].instant.timestamp < done[1].instant.timestamp
    assert mdt.timeline().files_of(stray) == () and mdt.timeline().files_of(target.timestamp) == ()
    assert not stray_log.exists() and _logs_of(path, target.timestamp) == []
    assert roll_back_before_rewrite(mdt, target.timestamp) is None        # nothing left to roll back
    assert rollback_failed_writes(mdt, lambda: new_instant_time(mdt), **HEARTBEATS) == []


def test_nothing_to_roll_back_writes_nothing(copy_of):
    path = copy_of("v9_nonpartitioned_rollback")
    mdt = _mdt(path)
    before = sorted(os.listdir(path / ".hoodie" / "metadata" / ".hoodie" / "timeline"))
    assert rollback_delta_commit(mdt, "20200101000000000", new_instant_time(mdt)) is None
    assert sorted(os.listdir(path / ".hoodie" / "metadata" / ".hoodie" / "timeline")) == before


def test_the_metadata_rollback_time():
    class Config:
        def __init__(self, version):
            self.version = version
    assert metadata_rollback_time(Config(9), "20260403184259077") == "20260403184259077"
    assert metadata_rollback_time(Config(8), "20260403184259077") == "20260403184259077"
    assert metadata_rollback_time(Config(6), "20260403184259077") == "20260403184259077006"


@pytest.mark.parametrize("policy", ["EAGER", "LAZY"])
def test_a_commit_rolls_back_a_killed_runs_pending_mdt_delta_commit_when_eager(copy_of, policy):
    """Each commit's MDT delta commit runs the MDT write client's failed-writes pass first when the
    data table's ``hoodie.cleaner.policy.failed.writes`` is EAGER (Java derives the MDT's policy from
    it): a pending MDT delta commit a killed run left is rolled back at a new time; LAZY leaves it."""
    from metadata_tables import keep_only_files_partition

    path = copy_of("zips:mor_avro_v9_txns_simple_meta")
    keep_only_files_partition(path)
    (path / ".hoodie" / "tablesvc.yaml").write_text(f"hoodie.cleaner.policy.failed.writes: {policy}\n")
    mdt = _mdt(path)
    stray = "20000101000000000"            # older than everything: a compaction could not hold it
    mdt.storage.write_new(mdt.timeline().path_of(Instant(stray, Action.DELTA_COMMIT, State.REQUESTED)), b"")
    [clean] = Table.open(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})
    assert clean.status.value == "done"
    timeline = _mdt(path).timeline()
    assert timeline.is_completed(clean.instant)
    rolled_back = [k for k, (plan, _) in _mdt_rollbacks(path).items() if plan.instant_to_rollback.commit_time == stray]
    if policy == "EAGER":
        assert timeline.files_of(stray) == () and len(rolled_back) == 1 and rolled_back[0] > clean.instant
    else:
        assert [f.state for f in timeline.files_of(stray)] == [State.REQUESTED] and rolled_back == []
    slices_agree(path)


def test_an_aborted_commit_rolls_back_its_completed_mdt_delta_commit_at_a_new_time(copy_of):
    """A commit that completed its MDT ``T`` and then failed to complete the data ``T`` aborts:
    the MDT ``T`` is rolled back with a rollback instant at a new time (``remove_aborted_delta_commit``,
    called by ``InstantLifecycle.abort`` under the lock); nothing when the data ``T`` completed."""
    from tablesvc.metadata.maintain import remove_aborted_delta_commit

    path = copy_of("v9_nonpartitioned_rollback")
    target, _ = _latest_write(path)
    table = Table.open(str(path))
    before = sorted(os.listdir(path / ".hoodie" / "metadata" / ".hoodie" / "timeline"))
    assert not remove_aborted_delta_commit(table, target.timestamp)       # data T completed: not this abort's
    assert sorted(os.listdir(path / ".hoodie" / "metadata" / ".hoodie" / "timeline")) == before
    table.storage.delete(table.timeline().path_of(target))               # data T pending, MDT T completed
    highest = max(_mdt(path).timeline().max_time(), Table.open(str(path)).timeline().max_time())
    assert remove_aborted_delta_commit(Table.open(str(path)), target.timestamp)
    [(r, (plan, metadata))] = [(k, v) for k, v in _mdt_rollbacks(path).items()
                               if v[0].instant_to_rollback.commit_time == target.timestamp]
    assert r > highest and metadata is not None and metadata.commits_rollback == (target.timestamp,)
    assert _mdt(path).timeline().files_of(target.timestamp) == () and _logs_of(path, target.timestamp) == []


# -- the EAGER pass and live writers (mdt_rollback.writer_alive) -------------------------------------

def _writer_in_its_write_phase(path: Path, *, data_instant: bool = True, data_beat_ms_ago: int | None = None,
                               mdt_beat_ms_ago: int | None = None) -> str:
    """A writer at a new time T between its metadata delta commit's start and its commit: data T
    inflight (unless ``data_instant`` is False), MDT T requested with one log file (Hudi 1.2's
    streaming metadata writes, done before the data table's lock), heartbeats (data table's and
    the MDT's) last beating the given ms ago, or none."""
    keep_only_files_partition(path)
    table = Table.open(str(path))
    live = table.instant_times.next(after=table.timeline().max_time())
    now = SystemClock().now_ms()
    if data_instant:
        for state in (State.REQUESTED, State.INFLIGHT):
            table.storage.write_new(table.timeline().path_of(Instant(live, Action.DELTA_COMMIT, state)), b"")
    mdt = _mdt(path)
    for base, ago in ((table.base_path, data_beat_ms_ago), (mdt.base_path, mdt_beat_ms_ago)):
        if ago is not None:
            table.storage.write_new(heartbeat_path(base, live), str(now - ago).encode("ascii"))
    mdt.storage.write_new(mdt.timeline().path_of(Instant(live, Action.DELTA_COMMIT, State.REQUESTED)), b"")
    one_log = sorted((path / ".hoodie" / "metadata" / "files").glob(".files-*.log.*"))[-1]
    log = one_log.with_name(f"{one_log.name.split('_')[0]}_{live}.log.1_0-1-0")
    log.write_bytes(one_log.read_bytes())
    return live


def _clean_and_mdt_rollbacks_of(path: Path, ts: str) -> list[str]:
    """Clean the table (a metadata delta commit, so the EAGER pass runs); the MDT rollbacks of ``ts``."""
    [clean] = Table.open(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})
    assert clean.status.value == "done", clean
    return [r for r, (plan, _) in _mdt_rollbacks(path).items() if plan.instant_to_rollback.commit_time == ts]


def test_the_eager_pass_leaves_a_live_writers_pending_mdt_delta_commit(copy_of):
    """A LAZY writer (or tablesvc itself) with data T inflight and its heartbeat beating: its MDT
    T, started before the data table's lock, stays for it to complete."""
    path = copy_of("zips:mor_avro_v9_txns_simple_meta")
    live = _writer_in_its_write_phase(path, data_beat_ms_ago=0)
    assert _clean_and_mdt_rollbacks_of(path, live) == []
    assert {f.state for f in _mdt(path).timeline().files_of(live)} == {State.REQUESTED}
    assert _logs_of(path, live) != []


def test_the_eager_pass_leaves_a_java_streaming_write_beating_on_the_metadata_table(copy_of):
    """Java with the data table EAGER beats no data heartbeat; its streaming metadata write client
    is LAZY and beats for MDT T on the metadata table."""
    path = copy_of("zips:mor_avro_v9_txns_simple_meta")
    live = _writer_in_its_write_phase(path, mdt_beat_ms_ago=1_000)
    assert _clean_and_mdt_rollbacks_of(path, live) == []
    assert _mdt(path).timeline().files_of(live) != () and _logs_of(path, live) != []


@pytest.mark.parametrize("beats", [{"data_beat_ms_ago": WINDOW_MS + 60_000},
                                   {"data_beat_ms_ago": WINDOW_MS + 60_000, "mdt_beat_ms_ago": WINDOW_MS + 60_000},
                                   {}], ids=["data-expired", "both-expired", "no-heartbeat"])
def test_the_eager_pass_rolls_back_a_dead_writers_mdt_delta_commit(copy_of, beats):
    path = copy_of("zips:mor_avro_v9_txns_simple_meta")
    live = _writer_in_its_write_phase(path, **beats)
    assert len(_clean_and_mdt_rollbacks_of(path, live)) == 1
    assert _mdt(path).timeline().files_of(live) == () and _logs_of(path, live) == []
    slices_agree(path)


def test_the_eager_pass_rolls_back_an_mdt_delta_commit_whose_data_instant_is_absent(copy_of):
    """No data T (rolled back, or never requested): nobody completes MDT T, even with a data
    heartbeat file left beating."""
    path = copy_of("zips:mor_avro_v9_txns_simple_meta")
    live = _writer_in_its_write_phase(path, data_instant=False, data_beat_ms_ago=0)
    assert len(_clean_and_mdt_rollbacks_of(path, live)) == 1
    assert _mdt(path).timeline().files_of(live) == () and _logs_of(path, live) == []
    slices_agree(path)
