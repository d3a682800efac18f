"""The metadata table's own log compaction (``tablesvc.metadata.mdt_log_compaction``,
``mdt_log_compaction_plan``), on copies of the Java-written v9 fixtures whose metadata tables hold
seven delta commits after Java's compaction: with ``hoodie.metadata.log.compaction.enable`` and a
low threshold, a log compaction merges each slice's log blocks into one compacted log file; every
partition's merged records are unchanged, tablesvc (through the metadata table), hudi-rs and a
storage listing agree on the data table's slices, and the rows read are the same.  Through a
commit (a data-table clean) the log compaction runs inside the commit, before the clean's metadata
delta commit; a log compaction killed half-way is invisible and the next commit finishes it."""

from __future__ import annotations

import pytest
from fixture_tables import copy_table
from metadata_tables import Killed, kill_after_the_first_log_file, live_metadata_records, tablesvc_row_tuples, keep_only_files_partition, metadata_listing, slices_agree, storage_listing
from oracles.hudi_rs import sorted_rows as hudi_rs_rows

from tablesvc.api import Table
from tablesvc.config.registry import REGISTRY
from tablesvc.logformat import BlockType, HeaderKey, read_log_file
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.mdt_compaction import compact_if_due
from tablesvc.metadata.mdt_compaction_plan import delta_commits_since_compaction
from tablesvc.metadata.mdt_log_compaction import log_compact_if_due, log_file_name
from tablesvc.metadata.mdt_log_compaction_plan import (
    ENABLE_KEY, THRESHOLD_KEY, delta_commits_since_log_compaction, log_compaction_due,
)
from tablesvc.metadata.writer import MetadataTableWriter
from timeline.instant import Action, State
from timeline.instant_time import add_millis
from timeline.payloads import decode_commit_metadata, decode_compaction_plan
from timeline.payloads.compaction_plan import LOG_COMPACTION_EXECUTOR

V9_MDT = ["zips:mor_avro_v9_txns_simple_meta", "zips:mor_avro_v9_txns_complex_meta"]
ROW_COLUMNS = ("txn_id", "txn_ts", "currency", "merchant_name")
MDT = (".hoodie", "metadata")


def _open(path):
    table = Table.open(str(path))
    return table, MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)


def _records(path) -> dict:
    return live_metadata_records(path)


def _without_file_names(records: dict) -> dict:
    """``_hoodie_file_name`` aside (a compaction's base file names itself there)."""
    return {p: {k: {**v, "_hoodie_file_name": None} for k, v in r.items()} for p, r in records.items()}


def _tablesvc_rows(path) -> list[tuple]:
    return tablesvc_row_tuples(path, ROW_COLUMNS)


def _readers_agree(path, rows) -> None:
    slices_agree(path)
    assert _tablesvc_rows(path) == hudi_rs_rows(path, ROW_COLUMNS) == rows
    table = Table.open(str(path))
    assert metadata_listing(table) == storage_listing(path)


def test_the_keys_and_javas_defaults():
    assert REGISTRY[ENABLE_KEY].default is False and REGISTRY[THRESHOLD_KEY].default == 5


def test_the_trigger_is_the_smaller_count_since_a_compaction_or_log_compaction(fixture_root, tmp_path):
    path = copy_table(fixture_root.path(V9_MDT[0]), tmp_path)
    table, mdt = _open(path)
    timeline = mdt.timeline()
    # no log compaction yet: every delta commit counts; seven since Java's compaction
    assert delta_commits_since_compaction(timeline) == 7 < delta_commits_since_log_compaction(timeline)
    assert log_compaction_due(timeline, 7) and not log_compaction_due(timeline, 8)
    assert log_compact_if_due(table, mdt, enabled=True, threshold=8) == []
    assert log_compact_if_due(table, mdt, enabled=False, threshold=2) == []
    assert log_compact_if_due(table, mdt) == []           # the defaults: off
    [done] = log_compact_if_due(table, mdt, enabled=True, threshold=7)
    timeline = mdt.timeline()
    assert delta_commits_since_log_compaction(timeline) == 0 and not log_compaction_due(timeline, 1)
    assert log_compact_if_due(table, mdt, enabled=True, threshold=1) == []


@pytest.mark.parametrize("name", V9_MDT)
def test_a_log_compaction_merges_each_slices_blocks_and_readers_stay_equal(fixture_root, tmp_path, name):
    path = copy_table(fixture_root.path(name), tmp_path)
    rows = hudi_rs_rows(path, ROW_COLUMNS)
    assert rows and _tablesvc_rows(path) == rows
    before = _records(path)
    table, mdt = _open(path)
    [done] = log_compact_if_due(table, mdt, enabled=True, threshold=2)
    lc = done.timestamp
    assert done.action is Action.DELTA_COMMIT and done.is_completed
    files = {f.state: f for f in mdt.timeline().files_of(lc)}
    assert files[State.REQUESTED].action is files[State.INFLIGHT].action is Action.LOG_COMPACTION
    plan = decode_compaction_plan(table.storage.read_bytes(mdt.timeline().path_of(files[State.REQUESTED])), "plan")
    assert plan.strategy.compactor_class_name == LOG_COMPACTION_EXECUTOR and plan.preserve_hoodie_metadata
    metadata = decode_commit_metadata(table.storage.read_bytes(mdt.timeline().path_of(done)), mdt.config.layout, "c")
    assert metadata.operation_type == "LOG_COMPACT"
    assert {(p, s.file_id) for p, stats in metadata.partition_to_write_stats.items() for s in stats} == \
        {(op.partition_path, op.file_id) for op in plan.operations}
    reader = MetadataTable(table.storage, table.base_path, table.timeline())
    merged_instants = 0
    for op in plan.operations:
        assert len(op.delta_file_paths) >= 2
        log = path.joinpath(*MDT, op.partition_path, log_file_name(op.file_id, lc))
        blocks = read_log_file(table.storage, str(log)).blocks
        assert blocks[0].block_type is BlockType.HFILE_DATA
        for block in blocks:
            header = dict(block.header)
            assert header[HeaderKey.INSTANT_TIME] == lc
            times = header[HeaderKey.COMPACTED_BLOCK_TIMES].split(",")
            assert times == sorted(times) and set(times) <= reader.valid_instants
        merged_instants += len(times)
    assert merged_instants > len(plan.operations)
    # the same records, listings, slices and rows; the compacted blocks replace the originals
    assert _records(path) == before
    _readers_agree(path, rows)
    # and a metadata compaction over the log-compacted slices keeps them
    assert compact_if_due(table, mdt, max_delta_commits=1)
    assert _without_file_names(_records(path)) == _without_file_names(before)
    _readers_agree(path, rows)


def test_no_slice_is_taken_whose_blocks_are_newer_than_a_pending_data_instant(fixture_root, tmp_path):
    """Its delta commit comes later and would sort before the compacted block in Java's reader."""
    path = copy_table(fixture_root.path(V9_MDT[0]), tmp_path)
    table, mdt = _open(path)
    # the newest delta commit with a log in files (the fixture's very newest initialised an index)
    newest = max(p.name.split("_")[1].split(".")[0] for p in path.joinpath(*MDT, "files").glob(".files-*.log.*"))
    assert mdt.timeline().is_completed(newest)
    pending = path / ".hoodie" / "timeline" / f"{add_millis(newest, -1)}.deltacommit.requested"
    pending.write_bytes(b"")
    other = copy_table(path, tmp_path / "without")
    (other / pending.relative_to(path)).unlink()
    # with the pending instant: only slices without the newest delta commit's log; without it: those too
    with_pending = _planned_logs(path, *_open(path))
    without = _planned_logs(other, *_open(other))
    assert not any(f"_{newest}.log." in n for n in with_pending)
    assert any(f"_{newest}.log." in n for n in without) and with_pending < without


def _planned_logs(path, table, mdt) -> set[str]:
    done = log_compact_if_due(table, mdt, enabled=True, threshold=2)
    if not done:
        return set()
    timeline = mdt.timeline()
    requested = next(f for f in timeline.files_of(done[0].timestamp) if f.state is State.REQUESTED)
    plan = decode_compaction_plan(table.storage.read_bytes(timeline.path_of(requested)), "plan")
    return {n for op in plan.operations for n in op.delta_file_paths}


def _files_only_with_log_compaction(fixture_root, tmp_path, threshold: int):
    path = copy_table(fixture_root.path(V9_MDT[0]), tmp_path)
    keep_only_files_partition(path)
    (path / ".hoodie" / "tablesvc.yaml").write_text(f"{ENABLE_KEY}: true\n{THRESHOLD_KEY}: {threshold}\n")
    return path


def test_a_commit_runs_the_log_compaction_before_its_metadata_delta_commit(fixture_root, tmp_path):
    path = _files_only_with_log_compaction(fixture_root, tmp_path, 2)
    rows = hudi_rs_rows(path, ROW_COLUMNS)
    table = Table.open(str(path))
    [result] = table.clean(options={"hoodie.cleaner.commits.retained": 1})
    t = result.instant
    table, mdt = _open(path)
    timeline = mdt.timeline()
    [lc] = [i for i in timeline.completed(Action.DELTA_COMMIT)
            if any(f.action is Action.LOG_COMPACTION for f in timeline.files_of(i.timestamp))]
    delta = next(i for i in timeline.completed(Action.DELTA_COMMIT) if i.timestamp == t)
    # a new instant after T, completed before T's delta commit (which lands after it)
    assert t < lc.timestamp and lc.completion_time < delta.completion_time
    assert table.timeline().is_completed(t) and not timeline.pending()
    _readers_agree(path, rows)


def test_a_log_compaction_killed_half_way_is_invisible_and_the_next_commit_finishes_it(fixture_root, tmp_path,
                                                                                      monkeypatch):
    path = _files_only_with_log_compaction(fixture_root, tmp_path, 2)
    rows = hudi_rs_rows(path, ROW_COLUMNS)
    before = _records(path)
    table, mdt = _open(path)
    revive = kill_after_the_first_log_file(monkeypatch, table.storage)
    with pytest.raises(Killed):
        log_compact_if_due(table, mdt)
    revive()
    [pending] = mdt.timeline().pending_log_compactions()
    assert pending.state is State.INFLIGHT
    assert list(path.joinpath(*MDT, "files").glob(f".files-0000-0_{pending.timestamp}.log.*"))
    assert _records(path) == before
    _readers_agree(path, rows)
    # the next commit's services finish it from its plan, whether log compaction is still on or not
    (path / ".hoodie" / "tablesvc.yaml").unlink()
    table = Table.open(str(path))
    [result] = table.clean(options={"hoodie.cleaner.commits.retained": 1})
    table, mdt = _open(path)
    assert not mdt.timeline().pending() and mdt.timeline().is_completed(pending.timestamp)
    assert mdt.timeline().is_completed(result.instant)
    _readers_agree(path, rows)


def _log_compactions(path) -> list[str]:
    _table, mdt = _open(path)
    timeline = mdt.timeline()
    return [i.timestamp for i in timeline.completed(Action.DELTA_COMMIT)
            if any(f.action is Action.LOG_COMPACTION for f in timeline.files_of(i.timestamp))]


def _files_only(fixture_root, tmp_path):
    path = copy_table(fixture_root.path(V9_MDT[0]), tmp_path)
    keep_only_files_partition(path)
    assert not (path / ".hoodie" / "tablesvc.yaml").exists()
    return path


@pytest.mark.parametrize("conf", [True, False], ids=["with-conf", "without"])
def test_the_command_lines_conf_reaches_the_metadata_tables_log_compaction(fixture_root, tmp_path, conf):
    """``--conf hoodie.metadata.log.compaction.enable=true`` (no .hoodie/tablesvc.yaml): the
    commit of ``tablesvc clean run`` log-compacts the metadata table; without it nothing does."""
    from tablesvc.cli.main import main

    path = _files_only(fixture_root, tmp_path)
    rows = hudi_rs_rows(path, ROW_COLUMNS)
    extra = ["--conf", f"{ENABLE_KEY}=true", "--conf", f"{THRESHOLD_KEY}=2"] if conf else []
    assert main(["clean", "run", str(path), "--conf", "hoodie.cleaner.commits.retained=1", *extra]) == 0
    [clean] = Table.open(str(path)).timeline().completed(Action.CLEAN)
    done = _log_compactions(path)
    assert len(done) == (1 if conf else 0)
    assert all(clean.timestamp < t for t in done)
    _readers_agree(path, rows)


@pytest.mark.parametrize("conf", [True, False], ids=["with-options", "without"])
def test_the_apis_options_reach_the_metadata_tables_log_compaction(fixture_root, tmp_path, conf):
    """``Table.clean(options=...)`` as ``--conf``; the options also win over the table's
    .hoodie/tablesvc.yaml (``--conf`` precedence), here turning it off."""
    path = _files_only(fixture_root, tmp_path)
    rows = hudi_rs_rows(path, ROW_COLUMNS)
    (path / ".hoodie" / "tablesvc.yaml").write_text(f"{ENABLE_KEY}: {'false' if conf else 'true'}\n")
    options = {"hoodie.cleaner.commits.retained": 1, THRESHOLD_KEY: 2, ENABLE_KEY: conf}
    Table.open(str(path)).clean(options=options)
    assert len(_log_compactions(path)) == (1 if conf else 0)
    _readers_agree(path, rows)
