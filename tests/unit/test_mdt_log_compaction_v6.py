"""The metadata table's log compaction on version-6 tables, as Hudi 0.15 runs it
(``mdt_log_compaction.schedule_v6``), on copies of Java 0.15's ``v6_mdt_colstats`` fixture (its
metadata table holds two delta commits after Java's compaction at ``<t>001``, in ``files`` and
both ``column_stats`` groups): with ``hoodie.metadata.log.compaction.enable`` and threshold 2 a
log compaction at ``<latest delta commit>005`` writes, per slice, one new log file named by the
slice's base instant at the next log version; the v6 action files are
``L.logcompaction.requested``, ``L.logcompaction.inflight`` and ``L.deltacommit``.  The merged
records stay the same, the metadata listing is storage's, tablesvc's slices are hudi-rs's (which
lists v6 from storage) and the rows are Java's.  Through a commit the log compaction runs before
the commit's metadata delta commit (the next log version); killed half-way, the next commit
finishes it."""

from __future__ import annotations

import json

import pytest
from fixture_tables import V6_METADATA_FIXTURES_DIR, v6_metadata_table
from metadata_tables import Killed, kill_after_the_first_log_file, live_metadata_records, tablesvc_row_tuples, hudi_rs_slice_rows, metadata_listing, storage_listing, storage_slices, tablesvc_slices
from oracles.hudi_rs import sorted_rows as hudi_rs_rows

from tablesvc.api import Table
from tablesvc.fsview.names import LogFileName
from tablesvc.logformat import BlockType, HeaderKey, read_log_file
from tablesvc.metadata.mdt_log_compaction import finish_pending_log_compactions, log_compact_v6_if_due
from tablesvc.metadata.mdt_log_compaction_plan import ENABLE_KEY, THRESHOLD_KEY
from tablesvc.metadata.writer import MetadataTableWriter
from timeline.instant import Action, State
from timeline.instant_time import add_millis
from timeline.payloads import decode_commit_metadata, decode_compaction_plan

NAME = "v6_mdt_colstats"
COLUMNS = ("id", "ts", "part", "val")
MDT = (".hoodie", "metadata")
ON = {ENABLE_KEY: True, THRESHOLD_KEY: 2}


def _expected() -> list[tuple]:
    return sorted(tuple(r) for r in json.loads((V6_METADATA_FIXTURES_DIR / f"{NAME}.json").read_text())["rows"])


def _open(path):
    table = Table.open(str(path))
    return table, MetadataTableWriter.of(table.storage, table.base_path, table.instant_times,
                                         ("files", "column_stats"))


def _records(path) -> dict:
    return live_metadata_records(path)


def _tablesvc_rows(path) -> list[tuple]:
    return tablesvc_row_tuples(path, COLUMNS)


def _agree(path, rows) -> None:
    table = Table.open(str(path))
    assert table.uses_metadata_table
    assert metadata_listing(table) == storage_listing(path)
    assert tablesvc_slices(table) == hudi_rs_slice_rows(path) == storage_slices(table)
    assert hudi_rs_rows(path, COLUMNS) == _tablesvc_rows(path) == rows


def _log_compactions(mdt) -> list[str]:
    timeline = mdt.timeline()
    return [i.timestamp for i in timeline.instants
            if any(f.action is Action.LOG_COMPACTION for f in timeline.files_of(i.timestamp))]


def test_a_v6_log_compaction_is_at_the_latest_delta_commit_005_with_v6_names(tmp_path):
    path = v6_metadata_table(NAME, tmp_path)
    rows = _expected()
    before = _records(path)
    table, mdt = _open(path)
    latest = mdt.timeline().latest_completed(Action.DELTA_COMMIT).timestamp
    [done] = log_compact_v6_if_due(table, mdt, config=ON)
    lc = done.timestamp
    assert lc == latest + "005" and done.action is Action.DELTA_COMMIT and done.is_completed
    timeline = mdt.timeline()
    names = sorted(table.storage.list_names(str(path.joinpath(*MDT, ".hoodie"))))
    assert [n for n in names if n.startswith(lc)] == \
        sorted([f"{lc}.deltacommit", f"{lc}.logcompaction.inflight", f"{lc}.logcompaction.requested"])
    requested = next(f for f in timeline.files_of(lc) if f.state is State.REQUESTED)
    plan = decode_compaction_plan(table.storage.read_bytes(timeline.path_of(requested)), "plan")
    metadata = decode_commit_metadata(table.storage.read_bytes(timeline.path_of(done)), mdt.config.layout, "c")
    assert metadata.operation_type == "LOG_COMPACT"
    stats = {(p, s.file_id): s for p, ss in metadata.partition_to_write_stats.items() for s in ss}
    assert set(stats) == {(op.partition_path, op.file_id) for op in plan.operations}
    assert {p for p, _ in stats} == {"files", "column_stats"}
    for op in plan.operations:
        planned = [LogFileName.parse(p.rpartition("/")[2]) for p in op.delta_file_paths]
        assert len(planned) == 2 and {n.instant for n in planned} == {op.base_instant_time}
        stat = stats[(op.partition_path, op.file_id)]
        name = LogFileName.parse(stat.path.rpartition("/")[2])
        # the slice's base instant and the version after its highest, as 0.15's append handle
        assert name.instant == op.base_instant_time == stat.prev_commit
        assert name.version == max(n.version for n in planned) + 1 == stat.log_version
        [block] = read_log_file(table.storage, str(path.joinpath(*MDT, stat.path))).blocks
        header = dict(block.header)
        assert block.block_type is BlockType.HFILE_DATA and header[HeaderKey.INSTANT_TIME] == lc
        assert header[HeaderKey.COMPACTED_BLOCK_TIMES].split(",") == sorted(
            read_log_file(table.storage, str(path.joinpath(*MDT, op.partition_path, n.name))).blocks[0].instant_time
            for n in planned)
    assert _records(path) == before
    _agree(path, rows)
    # not again at the same time, nor while nothing new was written
    assert log_compact_v6_if_due(table, mdt, config=ON) == []


def test_none_when_off_not_due_or_gated(tmp_path):
    path = v6_metadata_table(NAME, tmp_path)
    table, mdt = _open(path)
    assert log_compact_v6_if_due(table, mdt) == []                                  # the default: off
    assert log_compact_v6_if_due(table, mdt, config={**ON, THRESHOLD_KEY: 3}) == []  # two blocks a slice
    # 0.15's gate: a data instant at or before the latest metadata delta commit is pending
    latest = mdt.timeline().latest_completed(Action.DELTA_COMMIT).timestamp
    pending = path / ".hoodie" / f"{add_millis(latest, -1)}.deltacommit.requested"
    assert not pending.exists()
    pending.write_bytes(b"")
    assert log_compact_v6_if_due(table, mdt, config=ON) == []
    pending.unlink()
    assert not _log_compactions(mdt)
    assert len(log_compact_v6_if_due(table, mdt, config=ON)) == 1


def test_a_commit_log_compacts_the_v6_metadata_table_before_its_delta_commit(tmp_path):
    """Through ``Table.compact(options=...)``: the data compaction T's commit log-compacts at
    <latest>005 (the metadata compaction is not due), then writes T's delta commit one log version
    later in each slice."""
    path = v6_metadata_table(NAME, tmp_path)
    rows = _expected()
    [c] = Table.open(str(path)).compact(options=ON)
    table, mdt = _open(path)
    [lc] = _log_compactions(mdt)
    assert mdt.timeline().is_completed(lc) and mdt.timeline().is_completed(c.instant) and lc < c.instant
    assert not mdt.timeline().pending()
    logs = [LogFileName.parse(p.name) for p in path.joinpath(*MDT, "files").glob(".files-0000-0_*.log.*")]
    newest = max(logs, key=lambda n: (n.instant, n.version))
    [block] = read_log_file(table.storage, str(path.joinpath(*MDT, "files", newest.name))).blocks
    assert block.instant_time == c.instant
    previous = next(n for n in logs if n.instant == newest.instant and n.version == newest.version - 1)
    assert read_log_file(table.storage, str(path.joinpath(*MDT, "files", previous.name))).blocks[0].instant_time == lc
    _agree(path, rows)


def test_a_v6_log_compaction_killed_half_way_is_invisible_and_finished_next(tmp_path, monkeypatch):
    path = v6_metadata_table(NAME, tmp_path)
    rows = _expected()
    before = _records(path)
    table, mdt = _open(path)
    revive = kill_after_the_first_log_file(monkeypatch, table.storage)
    with pytest.raises(Killed):
        log_compact_v6_if_due(table, mdt, config=ON)
    revive()
    [pending] = mdt.timeline().pending_log_compactions()
    assert pending.state is State.INFLIGHT
    logs_before = {p.name for p in path.joinpath(*MDT).rglob(".*.log.*")}
    assert _records(path) == before
    _agree(path, rows)
    # the next commit's services finish it: the leftover goes, one compacted file per slice
    [done] = finish_pending_log_compactions(table, mdt)
    assert done.timestamp == pending.timestamp and done.is_completed
    logs_after = {p.name for p in path.joinpath(*MDT).rglob(".*.log.*")}
    new = logs_after - logs_before
    assert len(new) == 2 and len(logs_after) == len(logs_before) + 2       # three slices, one leftover kept name
    for name in logs_after:
        p = next(path.joinpath(*MDT).rglob(name))
        blocks = read_log_file(table.storage, str(p)).blocks
        assert sum(b.instant_time == done.timestamp for b in blocks) <= 1
    assert _records(path) == before
    _agree(path, rows)


MUTATING = ("write_new", "write_new_from", "write_replace", "delete", "delete_tree")


def test_a_v6_log_compaction_killed_after_every_storage_call(tmp_path, monkeypatch):
    """In process: the log compaction killed after its k-th storage change, for every k; each
    leaves the records, listing, slices and rows unchanged, and the next commit's services finish
    it into the same files as an unkilled run."""
    full = v6_metadata_table(NAME, tmp_path / "full")
    rows = _expected()
    before = _records(full)
    table, mdt = _open(full)
    storage_type = type(table.storage)
    real = {m: getattr(storage_type, m) for m in MUTATING}
    calls: list[str] = []
    state = {"kill_at": None}

    def wrap(method):
        def call(storage, p, *a, **k):
            out = real[method](storage, p, *a, **k)
            calls.append(f"{method} {p}")
            if state["kill_at"] is not None and len(calls) == state["kill_at"]:
                raise Killed()
            return out
        return call

    for m in MUTATING:
        monkeypatch.setattr(storage_type, m, wrap(m))
    [done] = log_compact_v6_if_due(table, mdt, config=ON)
    n = len(calls)
    assert n >= 6, calls          # requested, inflight, three log files, completed
    expected_logs = {p.name for p in full.joinpath(*MDT).rglob(".*.log.*")}
    for k in range(1, n):
        path = v6_metadata_table(NAME, tmp_path / f"k{k}")
        table, mdt = _open(path)
        calls.clear()
        state["kill_at"] = k
        with pytest.raises(Killed):
            log_compact_v6_if_due(table, mdt, config=ON)
        state["kill_at"] = None
        try:
            assert _records(path) == before
            _agree(path, rows)
            [finished] = finish_pending_log_compactions(table, mdt)
            assert finished.timestamp == done.timestamp and not mdt.timeline().pending()
            assert {p.name for p in path.joinpath(*MDT).rglob(".*.log.*")} == expected_logs
            assert _records(path) == before
            _agree(path, rows)
        except AssertionError as e:
            raise AssertionError(f"killed after {calls[-1]!r} (call {k} of {n}): {e}") from e
