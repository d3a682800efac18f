"""Rollback (tablesvc.services.rollback): failed writes, v6 command blocks, completed instants,
half-done rollbacks, pending compactions, dry runs, the CLI, payloads; hudi-rs is the oracle."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fixture_tables import TABLES_DIR
from helpers import data_files, file_digests, kill_tree, wait_for
from table_builders import apply_to_model, five_digit_key_rows, write_without_spark
from oracles.hudi_rs import rows_by_key

from tablesvc.cli import cmd_rollback
from tablesvc.cli.main import common_options
from tablesvc.errors import ConflictError, InvalidInputError, TablesvcError, UnknownInstantError
from tablesvc.fsview.names import BaseFileName, LogFileName
from tablesvc.logformat import avro_data_block, block_records, encode_block, read_log_file
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.services import Status
from tablesvc.services.rollback import eager_rollback, plan_rollback, rollback, rollback_failed
from tablesvc.services.rollback import executor as rb_executor
from tablesvc.api import Table, TableSpec
from tablesvc.write import create_marker, delete_markers
from timeline.clock import ManualClock, SystemClock
from timeline.heartbeat import Heartbeat, heartbeat_path
from timeline.instant import Action, State
from timeline.payloads import (
    CompactionOperation, CompactionPlan, RollbackMetadata, RollbackPlan, decode_rollback_metadata,
    decode_rollback_plan, encode_compaction_plan,
)

REPO = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([("uuid", pa.string()), ("ts", pa.int64()), ("city", pa.string())])
DAY_MS = 86_400_000


# =============================================================================================
# Helpers
# =============================================================================================

def our_snapshot(path) -> dict[str, int]:
    table = Table.open(str(path))
    ctx = ReadContext.for_table(table)
    parts = [read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx) for s in table.latest_file_slices()]
    if not parts:
        return {}
    got = pa.concat_tables(parts)
    return dict(zip(got.column("uuid").to_pylist(), got.column("ts").to_pylist()))


def timeline_names(table: Table) -> list[str]:
    return sorted(f.file_name() for f in table.timeline().files)


class Writer:
    """Delta commits through the write pieces (no Spark); ``complete=False`` leaves a failed write."""

    def __init__(self, path: Path, version: int, clock: ManualClock):
        self.clock = clock
        self.table = Table.create(str(path), TableSpec("trips", ("uuid",), "ts", ("city",), table_version=version,
                                                       num_buckets=2), clock=clock)
        self.path = path
        self.model: dict[str, int] = {}
        self.stage = 0

    def write(self, batch: pa.Table, operation: str = "upsert", *, complete: bool = True) -> str:
        self.clock.advance(1000)
        self.stage += 1
        t, _stats = write_without_spark(self.table, batch, operation, stage=self.stage, complete=complete)
        if complete:
            apply_to_model(self.model, batch, operation)
        return t

    def expire(self) -> None:
        self.clock.advance(DAY_MS)

    def check(self, expected: dict[str, int] | None = None) -> None:
        want = self.model if expected is None else expected
        assert rows_by_key(self.path, "uuid", "ts") == want
        assert our_snapshot(self.path) == want


def append_block(writer: Writer, instant: str, log_rel: str, ts: int) -> str:
    """Append (as Java does in v6) a data block of ``instant`` to an existing log file, with a marker."""
    path = writer.path / log_rel
    first = read_log_file(writer.table.storage, str(path)).blocks[0]
    records = [dict(r, ts=ts, _hoodie_commit_time=instant) for r in block_records(first)]
    with open(path, "ab") as f:
        f.write(encode_block(avro_data_block(instant, first.schema, records)))
    partition, _, name = log_rel.rpartition("/")
    create_marker(writer.table.storage, writer.table.base_path, instant, partition, name, "APPEND")
    return str(path)


def slice_logs(base: Path) -> list[str]:
    return sorted(p for p in data_files(base) if ".log." in p)


# =============================================================================================
# Failed writes (synthetic, both layouts)
# =============================================================================================

@pytest.mark.parametrize("version", [6, 8])
def test_failed_write_is_rolled_back(tmp_path, version):
    w = Writer(tmp_path / "t", version, ManualClock())
    w.write(five_digit_key_rows(range(0, 60), 1))
    w.write(five_digit_key_rows(range(0, 30), 2))
    before_files, before_tree = data_files(w.path), file_digests(w.path)
    # failed: updates (logs), inserts into a new partition (base files + partition metafile)
    failed = w.write(pa.concat_tables([five_digit_key_rows(range(10, 40), 3),
                                       five_digit_key_rows(range(100, 110), 3, "d")]), complete=False)
    created = data_files(w.path) - before_files
    assert created and any(".parquet" in f for f in created) and any(".log." in f for f in created)
    w.check()  # readers ignore the failed write already

    plan = plan_rollback(w.table, failed)
    assert plan.instant_to_rollback.commit_time == failed
    assert plan.instant_to_rollback.action == "deltacommit"
    planned = {os.path.relpath(p, w.path) for r in plan.rollback_requests for p in r.files_to_be_deleted}
    assert planned == created
    assert not any(r.log_blocks_to_be_deleted for r in plan.rollback_requests)

    # a live heartbeat protects the write: nothing is failed yet, and --instant is a conflict (exit 3)
    hb = Heartbeat(w.table.storage, w.table.base_path, failed, w.clock)
    hb.beat()
    assert rollback_failed(w.table) == []
    with pytest.raises(ConflictError) as e:
        rollback(w.table, failed)
    assert e.value.exit_code == 3 and failed in str(e.value)

    w.expire()
    results = rollback_failed(w.table)
    assert [r.status for r in results] == [Status.DONE]
    assert results[0].metrics["target"] == failed and results[0].metrics["files_deleted"] == len(created)
    assert data_files(w.path) == before_files
    assert not (w.path / ".hoodie" / ".temp" / failed).exists()
    assert not Path(heartbeat_path(w.table.base_path, failed)).exists()
    tl = w.table.timeline()
    assert tl.pending() == ()
    assert tl.get(failed) is None
    [rb] = tl.completed(Action.ROLLBACK)
    assert rb.timestamp == results[0].instant > failed
    md = tl.payload(w.table.storage, rb)
    assert isinstance(md, RollbackMetadata) and md.commits_rollback == (failed,)
    assert md.total_files_deleted == len(created)
    assert {os.path.relpath(p, w.path) for m in md.partition_metadata.values() for p in m.success_delete_files} \
        == created
    # everything but the new partition's metafile and the timeline is back as before
    after = file_digests(w.path)
    assert {k: v for k, v in after.items() if not k.startswith(".hoodie")} == \
        {k: v for k, v in before_tree.items() if not k.startswith(".hoodie")} | \
        {"city=d/.hoodie_partition_metadata": after["city=d/.hoodie_partition_metadata"]}
    w.check()
    assert rollback_failed(w.table) == []
    # the next write works
    w.write(five_digit_key_rows(range(20, 50), 4))
    w.check()


@pytest.mark.parametrize("version", [6, 8])
def test_partial_temp_copy_of_a_killed_create_is_removed(tmp_path, version):
    """A task killed between writing its temporary copy and linking it leaves ``.<name>.<hex>.tmp``
    next to where its marked file would be: the rollback deletes it with the marked files, and
    leaves alone temporary-looking names of files the plan does not delete."""
    w = Writer(tmp_path / "t", version, ManualClock())
    w.write(five_digit_key_rows(range(0, 40), 1))
    before_files, before_tree = data_files(w.path), file_digests(w.path)
    w.write(five_digit_key_rows(range(0, 20), 2), complete=False)
    created = sorted(data_files(w.path) - before_files)
    partition, _, name = created[0].rpartition("/")
    folder = w.path / partition
    os.unlink(folder / name)                                     # the link never happened...
    partial = folder / f".{name}.{'ab' * 16}.tmp"
    partial.write_bytes(b"half a file")                          # ...but the temporary copy did
    foreign = folder / f".someone-elses.parquet.{'cd' * 16}.tmp"
    foreign.write_bytes(b"not ours")
    w.expire()
    assert [r.status for r in rollback_failed(w.table)] == [Status.DONE]
    assert not partial.exists() and foreign.exists()
    foreign.unlink()
    assert data_files(w.path) == before_files
    assert {k: v for k, v in file_digests(w.path).items() if not k.startswith(".hoodie")} == \
        {k: v for k, v in before_tree.items() if not k.startswith(".hoodie")}
    w.check()


def test_requested_only_write_and_missing_heartbeat(tmp_path):
    w = Writer(tmp_path / "t", 8, ManualClock())
    w.write(five_digit_key_rows(range(0, 20), 1))
    requested = w.table.timeline_writer.request(Action.DELTA_COMMIT)
    # a missing heartbeat counts as expired
    [res] = rollback_failed(w.table)
    assert res.status is Status.DONE and res.metrics["files_deleted"] == 0
    assert w.table.timeline().get(requested.timestamp) is None
    w.check()


# =============================================================================================
# v6: command blocks for log files holding committed blocks
# =============================================================================================

def _v6_with_appended_block(tmp_path, *, complete: bool):
    w = Writer(tmp_path / "t", 6, ManualClock())
    w.write(five_digit_key_rows(range(0, 30), 1))
    w.write(five_digit_key_rows(range(0, 30), 2))           # v6: .log.1 files holding instant 2's blocks
    logs = slice_logs(w.path)
    assert logs
    target = logs[0]
    committed = dict(w.model)
    writer = w.table.timeline_writer
    w.clock.advance(1000)
    inst = writer.request(Action.DELTA_COMMIT)
    inflight = writer.start(inst)
    t = inst.timestamp
    path = append_block(w, t, target, ts=99)
    if complete:
        from timeline.payloads import CommitMetadata, WriteStat, encode_commit_metadata
        partition, _, name = target.rpartition("/")
        stat = WriteStat(file_id=LogFileName.parse(name).file_id, path=target, prev_commit="x",
                         partition_path=partition, num_writes=1)
        md = CommitMetadata(partition_to_write_stats={partition: (stat,)},
                            extra_metadata={"schema": w.table.schema()}, operation_type="UPSERT")
        writer.complete(inflight, encode_commit_metadata(md, w.table.config.layout))
        delete_markers(w.table.storage, w.table.base_path, t)
    return w, t, target, path, committed


def test_v6_failed_append_gets_a_command_block(tmp_path):
    w, t, target, path, committed = _v6_with_appended_block(tmp_path, complete=False)
    size = os.path.getsize(path)
    plan = plan_rollback(w.table, t)
    [req] = plan.rollback_requests
    ln = LogFileName.parse(Path(path).name)
    assert req.file_id == ln.file_id and req.latest_base_instant == ln.instant
    assert req.files_to_be_deleted == () and dict(req.log_blocks_to_be_deleted) == {path: size}
    w.check(committed)

    w.expire()
    [res] = rollback_failed(w.table)
    assert res.status is Status.DONE and res.metrics["command_blocks"] == 1
    r = res.instant
    cmd = w.path / Path(target).parent / LogFileName(ln.file_id, ln.instant, ln.version + 1, "1-0-1").name
    [block] = read_log_file(w.table.storage, str(cmd)).blocks
    assert block.is_rollback and block.instant_time == r and block.target_instant_time == t
    assert os.path.getsize(path) == size          # the appended file itself is kept
    md = w.table.timeline().payload(w.table.storage, w.table.timeline().completed(Action.ROLLBACK)[0])
    [pm] = md.partition_metadata.values()
    assert dict(pm.rollback_log_files) == {str(cmd): os.path.getsize(cmd)}
    assert dict(pm.log_files_from_failed_commit) == {path: size}
    w.check(committed)
    # idempotent: re-running finds nothing; the command block is not written twice
    assert rollback(w.table, t).status is Status.NOTHING_TO_DO
    assert sum(1 for f in slice_logs(w.path) if f.endswith("_1-0-1")) == 1
    w.write(five_digit_key_rows(range(0, 5), 5))
    w.check()


def test_v6_completed_append_rolled_back_with_allow_completed(tmp_path):
    w, t, target, path, committed = _v6_with_appended_block(tmp_path, complete=True)
    assert rows_by_key(w.path, "uuid", "ts") != committed and our_snapshot(w.path) != committed  # the append is visible
    with pytest.raises(InvalidInputError) as e:
        rollback(w.table, t)
    assert "--allow-completed" in str(e.value) and e.value.exit_code == 2
    res = rollback(w.table, t, allow_completed=True)
    assert res.status is Status.DONE and res.metrics["command_blocks"] == 1
    assert w.table.timeline().get(t) is None
    w.check(committed)


# =============================================================================================
# Completed instants
# =============================================================================================

@pytest.mark.parametrize("version", [6, 8])
def test_latest_completed_deltacommit_rolls_back(tmp_path, version):
    w = Writer(tmp_path / "t", version, ManualClock())
    w.write(five_digit_key_rows(range(0, 40), 1))
    w.write(five_digit_key_rows(range(0, 20), 2))
    before, model = data_files(w.path), dict(w.model)
    last = w.write(pa.concat_tables([five_digit_key_rows(range(10, 30), 3),
                                     five_digit_key_rows(range(200, 210), 3, "e")]))
    assert rows_by_key(w.path, "uuid", "ts") != model

    dry = rollback(w.table, last, allow_completed=True, dry_run=True)
    assert dry.status is Status.DRY_RUN and dry.metrics["files_to_delete"] == len(data_files(w.path) - before)
    res = rollback(w.table, last, allow_completed=True)
    assert res.status is Status.DONE
    assert data_files(w.path) == before
    tl = w.table.timeline()
    assert tl.get(last) is None and tl.pending() == ()
    md = tl.payload(w.table.storage, tl.completed(Action.ROLLBACK)[0])
    assert md.commits_rollback == (last,) and md.instants_rollback[0].action == "deltacommit"
    w.check(model)
    w.model = model
    w.write(five_digit_key_rows(range(0, 5), 7))
    w.check()


def test_completed_rollback_refused_when_later_instants_exist(tmp_path):
    w = Writer(tmp_path / "t", 8, ManualClock())
    first = w.write(five_digit_key_rows(range(0, 20), 1))
    second = w.write(five_digit_key_rows(range(0, 10), 2))
    third = w.write(five_digit_key_rows(range(0, 10), 3))
    tree_before = file_digests(w.path)
    with pytest.raises(InvalidInputError) as e:
        rollback(w.table, second, allow_completed=True)
    assert third in str(e.value) and e.value.exit_code == 2
    # a pending compaction scheduled after the latest write depends on it too
    w.clock.advance(1000)
    plan = CompactionPlan(operations=(), version=2)
    comp = w.table.timeline_writer.request(Action.COMPACTION, encode_compaction_plan(plan))
    with pytest.raises(InvalidInputError) as e:
        rollback(w.table, third, allow_completed=True)
    assert comp.timestamp in str(e.value)
    assert first < second
    w.table.storage.delete(w.table.timeline().path_of(comp))
    assert file_digests(w.path) == tree_before


# =============================================================================================
# Half-done rollbacks are finished, never duplicated
# =============================================================================================

class Crash(BaseException):
    """Stands in for kill -9 at a chosen step."""


def test_half_done_rollback_is_finished_by_rerunning(tmp_path, monkeypatch):
    w = Writer(tmp_path / "t", 8, ManualClock())
    w.write(five_digit_key_rows(range(0, 60), 1))
    w.write(five_digit_key_rows(range(0, 30), 2))
    before = data_files(w.path)
    failed = w.write(pa.concat_tables([five_digit_key_rows(range(0, 60), 3),
                                       five_digit_key_rows(range(300, 310), 3, "z")]), complete=False)
    created = data_files(w.path) - before
    assert len(created) >= 3
    w.expire()

    # crash after the first file deletion
    storage = w.table.storage
    real_delete = storage.delete
    calls = {"n": 0}

    def crashing_delete(path):
        if "/.hoodie/" not in path:
            calls["n"] += 1
            if calls["n"] == 2:
                raise Crash()
        return real_delete(path)

    monkeypatch.setattr(storage, "delete", crashing_delete)
    with pytest.raises(Crash):
        rollback_failed(w.table)
    monkeypatch.setattr(storage, "delete", real_delete)
    tl = w.table.timeline()
    [pending_rb] = tl.pending(Action.ROLLBACK)
    assert pending_rb.state is State.INFLIGHT
    assert len(data_files(w.path) - before) == len(created) - 1
    # another file deleted by hand: a missing file counts as deleted
    storage.delete(str(w.path / sorted(data_files(w.path) - before)[0]))

    results = rollback_failed(Table.open(str(w.path), clock=w.clock))
    assert [(r.status, r.instant, r.metrics["resumed"]) for r in results] == [(Status.DONE, pending_rb.timestamp,
                                                                               True)]
    tl = w.table.timeline()
    assert [i.timestamp for i in tl.filter(actions=[Action.ROLLBACK])] == [pending_rb.timestamp]
    assert tl.pending() == () and tl.get(failed) is None
    assert data_files(w.path) == before
    md = tl.payload(w.table.storage, tl.completed(Action.ROLLBACK)[0])
    assert {os.path.relpath(p, w.path) for m in md.partition_metadata.values() for p in m.success_delete_files} \
        == created
    w.check()


def test_crash_after_rollback_completed_before_target_removed(tmp_path, monkeypatch):
    w = Writer(tmp_path / "t", 6, ManualClock())
    w.write(five_digit_key_rows(range(0, 30), 1))
    failed = w.write(five_digit_key_rows(range(0, 30), 2), complete=False)
    w.expire()

    def crash(*a, **k):
        raise Crash()

    monkeypatch.setattr(rb_executor, "_finish_target", crash)
    with pytest.raises(Crash):
        rollback(w.table, failed)
    monkeypatch.undo()
    tl = w.table.timeline()
    [done] = tl.completed(Action.ROLLBACK)
    assert tl.get(failed).state is State.INFLIGHT
    w.check()  # the data files are gone already; readers never saw them

    res = rollback(w.table, failed)
    assert res.status is Status.DONE and res.instant == done.timestamp and res.metrics["resumed"]
    tl = w.table.timeline()
    assert tl.get(failed) is None and [i.timestamp for i in tl.filter(actions=[Action.ROLLBACK])] == [done.timestamp]
    again = rollback(w.table, failed)
    assert again.status is Status.NOTHING_TO_DO and done.timestamp in again.reason


def test_requested_rollback_crash_before_inflight_resumes(tmp_path):
    """Crash right after R.rollback.requested: the next run starts R from its plan."""
    w = Writer(tmp_path / "t", 8, ManualClock())
    w.write(five_digit_key_rows(range(0, 30), 1))
    before = data_files(w.path)
    failed = w.write(five_digit_key_rows(range(0, 30), 2), complete=False)
    w.expire()
    tl = w.table.timeline()
    plan = plan_rollback(w.table, failed)
    settings = rb_executor._Settings.of(w.table, None)
    r = rb_executor._request(w.table, failed, plan, tl.files_of(failed), tl.get(failed), settings, failed_only=False)
    assert r.state is State.REQUESTED
    assert rollback_failed(w.table) == []      # R beat before it existed: alive until that beat expires
    w.expire()
    [res] = rollback_failed(w.table)
    assert res.instant == r.timestamp and res.status is Status.DONE
    assert data_files(w.path) == before and w.table.timeline().pending() == ()


# =============================================================================================
# Pending compaction: back to requested, plan intact
# =============================================================================================

@pytest.mark.parametrize("version", [6, 8])
def test_pending_compaction_goes_back_to_requested(tmp_path, version):
    w = Writer(tmp_path / "t", version, ManualClock())
    w.write(five_digit_key_rows(range(0, 30), 1))
    w.write(five_digit_key_rows(range(0, 30), 2))
    before = data_files(w.path)
    slices = w.table.latest_file_slices()
    ops = tuple(CompactionOperation(base_instant_time=s.base_instant, file_id=s.file_id, partition_path=s.partition,
                                    data_file_path=s.base_file.file_name if s.base_file else None,
                                    delta_file_paths=tuple(lf.file_name for lf in s.log_files),
                                    metrics={"TOTAL_LOG_FILES_SIZE": 1.0}) for s in slices)
    plan_bytes = encode_compaction_plan(CompactionPlan(operations=ops, version=2))
    writer = w.table.timeline_writer
    w.clock.advance(1000)
    comp = writer.request(Action.COMPACTION, plan_bytes)
    requested_path = Path(w.table.timeline().path_of(comp))
    # a requested-only compaction is not failed: it wrote nothing
    assert rollback_failed(w.table) == []
    assert rollback(w.table, comp.timestamp).status is Status.NOTHING_TO_DO
    writer.start(comp)
    # the compactor wrote one new base file (marker first), then died
    s = slices[0]
    name = BaseFileName(s.file_id, "0-1-0", comp.timestamp).name
    create_marker(w.table.storage, w.table.base_path, comp.timestamp, s.partition, name, "CREATE")
    (w.path / s.partition / name).write_bytes(b"PAR1 partial")
    # v6: a log file named with the compaction instant that holds another write's blocks is kept
    keep = None
    if version == 6:
        src = w.path / slice_logs(w.path)[0]
        keep = src.parent / LogFileName(LogFileName.parse(src.name).file_id, comp.timestamp, 1, "0-9-0").name
        keep.write_bytes(src.read_bytes())
        listed = rb_executor.build_plan(w.table, w.table.timeline(), w.table.timeline().get(comp.timestamp))
        assert str(w.path / s.partition / name) in [p for r in listed.rollback_requests for p in r.files_to_be_deleted]
    w.expire()
    [res] = rollback_failed(w.table)
    assert res.status is Status.DONE
    tl = w.table.timeline()
    current = tl.get(comp.timestamp)
    assert current.action is Action.COMPACTION and current.state is State.REQUESTED
    assert requested_path.read_bytes() == plan_bytes
    assert tl.plan_of(w.table.storage, current).operations == CompactionPlan.from_avro(
        fastavro.reader(io.BytesIO(plan_bytes)).__next__()).operations
    md = tl.payload(w.table.storage, tl.completed(Action.ROLLBACK)[0])
    assert md.instants_rollback[0].action == "compaction"
    files = data_files(w.path)
    if keep is not None:
        assert str(keep.relative_to(w.path)) in files
        files.discard(str(keep.relative_to(w.path)))
    assert files == before
    # a requested compaction is not failed: nothing more to do
    assert rollback_failed(w.table) == []
    # the eager (writer) pass never touches compactions
    writer.start(tl.get(comp.timestamp))
    assert eager_rollback(w.table) == []
    assert w.table.timeline().get(comp.timestamp).state is State.INFLIGHT


# =============================================================================================
# Dry runs, errors, CLI
# =============================================================================================

def _cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tablesvc")
    sub = parser.add_subparsers(dest="command")
    cmd_rollback.add_parser(sub, common_options())
    return parser.parse_args(argv)


def _run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    args = _cli(argv)
    try:
        code = int(args.run(args) or 0)
    except TablesvcError as e:
        return e.exit_code, "", str(e)
    out = capsys.readouterr().out
    return code, out, ""


def test_dry_run_changes_nothing(tmp_path, capsys):
    w = Writer(tmp_path / "t", 6, ManualClock())
    w.write(five_digit_key_rows(range(0, 30), 1))
    w.write(five_digit_key_rows(range(0, 30), 2))
    failed = w.write(five_digit_key_rows(range(0, 40), 3), complete=False)
    w.expire()
    before = file_digests(w.path)
    [dry] = rollback_failed(w.table, dry_run=True)
    assert dry.status is Status.DRY_RUN and dry.metrics["target"] == failed and dry.metrics["files_to_delete"] > 0
    assert rollback(w.table, failed, dry_run=True).status is Status.DRY_RUN
    assert file_digests(w.path) == before
    # with the heartbeat expired only because of the clock, the CLI (system clock) sees the same
    # missing heartbeat: expired
    code, out, _ = _run_cli(["rollback", str(w.path), "--dry-run"], capsys)
    assert code == 0 and "dry run" in out and failed in out
    code, out, _ = _run_cli(["rollback", str(w.path), "--dry-run", "--json"], capsys)
    assert code == 0 and json.loads(out)[0]["status"] == "dry_run"
    assert file_digests(w.path) == before


def test_cli(tmp_path, capsys):
    w = Writer(tmp_path / "t", 8, ManualClock(SystemClock().now_ms() - 10 * DAY_MS))
    w.write(five_digit_key_rows(range(0, 30), 1))
    code, out, _ = _run_cli(["rollback", str(w.path)], capsys)
    assert (code, out) == (0, "nothing to roll back\n")
    code, out, _ = _run_cli(["rollback", str(w.path), "--json"], capsys)
    assert (code, json.loads(out)) == (0, [])
    code, _, err = _run_cli(["rollback", str(w.path), "--instant", "20990101000000000"], capsys)
    assert code == 2 and "20990101000000000" in err
    code, _, err = _run_cli(["rollback", str(w.path), "--instant", "bogus"], capsys)
    assert code == 2 and "bogus" in err
    code, _, err = _run_cli(["rollback", str(w.path), "--allow-completed"], capsys)
    assert code == 2
    failed = w.write(five_digit_key_rows(range(0, 30), 2), complete=False)
    code, out, _ = _run_cli(["rollback", str(w.path), "--instant", failed, "--json"], capsys)
    [res] = json.loads(out)
    assert code == 0 and res["status"] == "done" and res["metrics"]["target"] == failed
    latest = w.table.timeline().latest_completed(Action.DELTA_COMMIT).timestamp
    code, _, err = _run_cli(["rollback", str(w.path), "--instant", latest], capsys)
    assert code == 2 and "--allow-completed" in err
    code, out, _ = _run_cli(["rollback", str(w.path), "--instant", latest, "--allow-completed"], capsys)
    assert code == 0 and out.startswith("rollback: done") and latest in out
    assert rows_by_key(w.path, "uuid", "ts") == {}
    # a rollback instant is not itself a target
    rb = w.table.timeline().completed(Action.ROLLBACK)[0].timestamp
    code, _, err = _run_cli(["rollback", str(w.path), "--instant", rb], capsys)
    assert code == 2 and "rollback" in err


def test_conflicting_heartbeat_of_pending_rollback(tmp_path):
    w = Writer(tmp_path / "t", 8, ManualClock())
    w.write(five_digit_key_rows(range(0, 10), 1))
    failed = w.write(five_digit_key_rows(range(0, 10), 2), complete=False)
    w.expire()
    tl = w.table.timeline()
    settings = rb_executor._Settings.of(w.table, None)
    r = rb_executor._request(w.table, failed, plan_rollback(w.table, failed), tl.files_of(failed), tl.get(failed),
                             settings, failed_only=False)
    Heartbeat(w.table.storage, w.table.base_path, r.timestamp, w.clock).beat()   # another process runs it
    assert rollback_failed(w.table) == []
    with pytest.raises(ConflictError):
        rollback(w.table, failed)
    w.expire()
    [res] = rollback_failed(w.table)
    assert res.instant == r.timestamp and res.status is Status.DONE


def test_unknown_instant(tmp_path):
    w = Writer(tmp_path / "t", 8, ManualClock())
    with pytest.raises(UnknownInstantError) as e:
        rollback(w.table, "20200101000000000")
    assert "20200101000000000" in str(e.value) and e.value.exit_code == 2
    with pytest.raises(UnknownInstantError):
        plan_rollback(w.table, "20200101000000000")


# =============================================================================================
# Payload compatibility: our plan/metadata decode with timeline.payloads, fastavro and Java's schemas
# =============================================================================================

def _java_schema(name: str):
    for table in ("v6_nonpartitioned_rollback",):
        for f in (TABLES_DIR / table / ".hoodie").iterdir():
            if f.name.endswith(name):
                with open(f, "rb") as fh:
                    return fastavro.reader(fh).writer_schema
    raise AssertionError(f"no {name} in the rollback fixture")


def test_payloads_decode_with_java_schemas(tmp_path):
    w, t, _target, _path, committed = _v6_with_appended_block(tmp_path, complete=False)
    (w.path / "city=a").mkdir(exist_ok=True)
    w.expire()
    [res] = rollback_failed(w.table)
    tl = w.table.timeline()
    files = [f for f in tl.files if f.action is Action.ROLLBACK]
    requested = next(f for f in files if f.state is State.REQUESTED)
    completed = next(f for f in files if f.state is State.COMPLETED)
    inflight = next(f for f in files if f.state is State.INFLIGHT)
    storage = w.table.storage
    assert storage.read_bytes(tl.path_of(inflight)) == b""
    plan_bytes, md_bytes = storage.read_bytes(tl.path_of(requested)), storage.read_bytes(tl.path_of(completed))
    plan = tl.payload(storage, requested)
    assert isinstance(plan, RollbackPlan) and plan == decode_rollback_plan(plan_bytes, "x")
    md = decode_rollback_metadata(md_bytes, "x")
    assert md == tl.payload(storage, completed) and md.start_rollback_time == res.instant
    # plain fastavro, then Java's own writer schemas (0.15 fixture) as reader schemas
    raw_plan = next(fastavro.reader(io.BytesIO(plan_bytes)))
    assert raw_plan["instantToRollback"] == {"commitTime": t, "action": "deltacommit"}
    assert raw_plan["RollbackRequests"][0]["logBlocksToBeDeleted"]
    java_plan = next(fastavro.reader(io.BytesIO(plan_bytes), reader_schema=_java_schema(".rollback.requested")))
    assert java_plan["RollbackRequests"] == raw_plan["RollbackRequests"]
    java_md = next(fastavro.reader(io.BytesIO(md_bytes), reader_schema=_java_schema(".rollback")))
    assert java_md["commitsRollback"] == [t]
    [pm] = java_md["partitionMetadata"].values()
    assert pm["rollbackLogFiles"]
    # and the Java fixture's own plan decodes with our codec
    for f in (TABLES_DIR / "v6_nonpartitioned_rollback" / ".hoodie").iterdir():
        if f.name.endswith(".rollback.requested"):
            jp = decode_rollback_plan(f.read_bytes(), str(f))
            assert any(r.log_blocks_to_be_deleted for r in jp.rollback_requests)
    w.check(committed)


# =============================================================================================
# Real failed writes: a `tablesvc write` killed with SIGKILL, then rollback; hudi-rs as oracle
# =============================================================================================

def _batch(keys, ts) -> pa.Table:
    return pa.table({"uuid": [f"k{k:06d}" for k in keys], "ts": [ts] * len(keys),
                     "city": [("a", "b", "c")[k % 3] for k in keys]})


def _kill_write_mid_way(table_path: Path, input_path: Path, before: set[str]) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), TABLESVC_SPARK_LOG=str(table_path.parent / "spark.log"))
    proc = subprocess.Popen([sys.executable, "-m", "tablesvc", "write", str(table_path), "--input", str(input_path)],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        instant = wait_for(lambda: next((i.timestamp for i in Table.open(str(table_path)).timeline().pending()),
                                         None))
        wait_for(lambda: data_files(table_path) - before)
    finally:
        kill_tree(proc.pid)
        proc.wait()
    return instant


@pytest.mark.spark
@pytest.mark.parametrize("version", [6, 8])
def test_killed_write_is_rolled_back(tmp_path, spark, version):
    path = tmp_path / "t"
    table = Table.create(str(path), TableSpec("t", ("uuid",), "ts", ("city",), table_version=version, num_buckets=2))
    ddl = "uuid string, ts long, city string"
    table.upsert(spark.createDataFrame(_batch(range(0, 3000), 1).to_pylist(), ddl))
    table.upsert(spark.createDataFrame(_batch(range(0, 1000), 2).to_pylist(), ddl))  # logs in every group
    model = rows_by_key(path, "uuid", "ts")
    assert len(model) == 3000
    before_files = data_files(path)
    before_tree = {k: v for k, v in file_digests(path).items() if not k.startswith(".hoodie")}

    pq.write_table(_batch(range(0, 100_000), 3), tmp_path / "big.parquet")
    failed = _kill_write_mid_way(path, tmp_path / "big.parquet", before_files)
    assert data_files(path) - before_files
    assert [i.timestamp for i in Table.open(str(path)).timeline().pending()] == [failed]

    clock = ManualClock(SystemClock().now_ms() + DAY_MS)   # the killed writer's heartbeat has expired
    reopened = Table.open(str(path), clock=clock)
    if version == 6:
        results = rollback_failed(reopened)
    else:
        results = eager_rollback(reopened)   # what the next writer runs first
    assert [(r.status, r.metrics["target"]) for r in results] == [(Status.DONE, failed)]
    assert data_files(path) == before_files
    assert {k: v for k, v in file_digests(path).items() if not k.startswith(".hoodie")} == before_tree
    assert not (path / ".hoodie" / ".temp" / failed).exists()
    tl = reopened.timeline()
    assert tl.pending() == () and tl.get(failed) is None
    assert rows_by_key(path, "uuid", "ts") == model
    table = Table.open(str(path))
    assert {r["uuid"]: r["ts"] for r in table.read(spark=spark).collect()} == model

    table.upsert(spark.createDataFrame(_batch(range(2990, 3010), 4).to_pylist(), ddl))
    expected = dict(model) | {f"k{k:06d}": 4 for k in range(2990, 3010)}
    assert rows_by_key(path, "uuid", "ts") == expected
    assert {r["uuid"]: r["ts"] for r in table.read(spark=spark).collect()} == expected


def test_eager_rollback_follows_the_failed_writes_policy(tmp_path):
    w = Writer(tmp_path / "t", 8, ManualClock())
    w.write(five_digit_key_rows(range(0, 10), 1))
    failed = w.write(five_digit_key_rows(range(0, 10), 2), complete=False)
    w.expire()
    (w.path / ".hoodie" / "tablesvc.yaml").write_text("hoodie.cleaner.policy.failed.writes: LAZY\n")
    assert eager_rollback(w.table) == []
    assert w.table.timeline().get(failed) is not None
    (w.path / ".hoodie" / "tablesvc.yaml").write_text("hoodie.cleaner.policy.failed.writes: EAGER\n")
    [res] = eager_rollback(w.table)
    assert res.status is Status.DONE and w.table.timeline().get(failed) is None
    w.check()


def test_rollback_refuses_a_metadata_table_turned_off_in_tablesvc_yaml(tmp_path):
    from fixture_tables import TABLES_DIR, copy_table
    from tablesvc.errors import UnsupportedTableError
    from tablesvc.services.rollback import rollback_failed

    path = copy_table(TABLES_DIR / "v8_trips_8i3u1d", tmp_path)
    (path / ".hoodie" / "tablesvc.yaml").write_text("hoodie.metadata.enable: false\n")
    with pytest.raises(UnsupportedTableError, match="metadata table"):
        rollback_failed(Table.open(str(path)))


class _RequestWatcher:
    """LocalStorage that records, whenever a requested delta commit or rollback is created,
    whether its heartbeat file was already there."""

    def __init__(self, base_path: str):
        from tablesvc.storage import LocalStorage

        self._inner = LocalStorage()
        self._base = base_path
        self.seen: list[tuple[str, bool]] = []

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def write_new(self, path: str, data: bytes) -> None:
        name = path.rsplit("/", 1)[-1]
        if name.endswith((".deltacommit.requested", ".rollback.requested")):
            ts = name.split(".", 1)[0]
            self.seen.append((name, self._inner.exists(heartbeat_path(self._base, ts))))
        return self._inner.write_new(path, data)


@pytest.mark.spark
def test_a_live_write_and_a_rollback_never_appear_without_a_heartbeat(tmp_path, spark):
    """Found by the soak: a sweep that saw a write's requested instant before its first beat took
    it for a failed write and rolled the live write back.  The beat now comes first."""
    path = tmp_path / "t"
    Table.create(str(path), TableSpec("t", ("uuid",), "ts", ("city",), table_version=8, num_buckets=2))
    ddl = "uuid string, ts long, city string"
    watcher = _RequestWatcher(str(path))
    table = Table.open(str(path), storage=watcher)
    table.upsert(spark.createDataFrame(_batch(range(0, 50), 1).to_pylist(), ddl))
    failed = write_without_spark(table, _batch(range(0, 5), 2), "upsert", stage=2, complete=False)[0]
    rollback(Table.open(str(path), storage=watcher, clock=ManualClock(SystemClock().now_ms() + DAY_MS)), failed)
    kinds = [(name.split(".")[1], had_beat) for name, had_beat in watcher.seen]
    assert kinds == [("deltacommit", True), ("deltacommit", False), ("rollback", True)], watcher.seen
