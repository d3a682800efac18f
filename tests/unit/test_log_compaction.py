"""Log compaction (RFC-48): schedule, run, recovery, exclusions; hudi-rs reads the same rows."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from helpers import dictionary_encoded_columns
from table_builders import busy_table, first_file_group, tablesvc_rows, update_five_of_first_group
from oracles.hudi_rs import sorted_rows

from tablesvc.config import build_config
from tablesvc.demo.sample_table import build_sample_table
from tablesvc.logformat import BlockType, HeaderKey, read_log_file
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice_with_metrics
from tablesvc.services.log_compaction import (
    list_log_compactions, log_compact_file_group, run_log_compaction, schedule_log_compaction,
)
from tablesvc.services.log_compaction.executor import _tasks
from tablesvc.services.result import Status
from tablesvc.api import Table
from timeline.instant import Action, State
from timeline.payloads import CommitMetadata, encode_commit_metadata
from timeline.payloads.compaction_plan import LOG_COMPACTION_EXECUTOR
from timeline.storage import join


def config(**values):
    return build_config(conf={k: str(v) for k, v in values.items()})


def valid_instants(table: Table, s) -> list[str]:
    from tablesvc.merge import select_blocks

    sel = select_blocks(table.storage, tuple(lf.path for lf in s.log_files), ReadContext.for_table(table))
    return sorted({sb.block.instant_time for sb in sel.blocks}, reverse=True)


@pytest.mark.parametrize("version,block_format", [(6, "avro"), (8, "avro"), (6, "parquet"), (8, "parquet")])
def test_schedule_and_run_keep_the_snapshot_and_supersede_the_blocks(tmp_path, version, block_format):
    """Log compaction on v6 and v8, its data block in the format hoodie.logfile.data.block.format
    names (as a write's): hudi-rs and tablesvc read the same snapshot after it."""
    table, instants, deleted = busy_table(tmp_path, version)
    before_hudi, before_ours = sorted_rows(table.base_path, ("uuid", "ts", "fare")), tablesvc_rows(table)
    assert before_hudi == before_ours and not any(r[0] in deleted for r in before_ours)
    s = first_file_group(table)
    merged_instants = valid_instants(table, s)
    assert set(instants) <= set(merged_instants) and len(merged_instants) >= 5
    _, m_before = read_file_slice_with_metrics(table.storage, SliceSpec.from_file_slice(s), ReadContext.for_table(table))

    scheduled = schedule_log_compaction(table, config())
    assert scheduled.status is Status.SCHEDULED and scheduled.metrics["file_groups"] == 1
    lc = scheduled.instant
    plan = table.timeline().plan_of(table.storage, table.timeline().require(lc))
    assert plan.strategy.compactor_class_name == LOG_COMPACTION_EXECUTOR and plan.preserve_hoodie_metadata
    assert plan.version == 2 and plan.operations[0].file_id == s.file_id
    assert [r["state"] for r in list_log_compactions(table)] == ["requested"]

    results = run_log_compaction(table, config=config(**{"hoodie.logfile.data.block.format": block_format}))
    assert [r.status for r in results] == [Status.DONE] and results[0].instant == lc
    table = Table.open(table.base_path)
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before_hudi
    assert tablesvc_rows(table) == before_ours and len(tablesvc_rows(table)) == len(before_ours)

    tl = table.timeline()
    done = tl.require(lc)
    assert done.state is State.COMPLETED and done.action is Action.DELTA_COMMIT
    assert tl.origin_action(done) is Action.LOG_COMPACTION
    md = tl.commit_metadata(table.storage, done)
    assert md.operation_type == "LOG_COMPACT" and md.extra_metadata["schema"]
    (stat,) = md.write_stats()
    new_log = join(table.base_path, stat.path)
    name = stat.path.rsplit("/", 1)[-1]
    if version >= 8:
        assert name.startswith(f".{s.file_id}_{lc}.log.1_")
    else:
        top = max(lf.name.version for lf in s.log_files)
        assert name.startswith(f".{s.file_id}_{s.base_instant}.log.{top + 1}_")
    blocks = read_log_file(table.storage, new_log).blocks
    data_block = BlockType.PARQUET_DATA if block_format == "parquet" else BlockType.AVRO_DATA
    assert [b.block_type for b in blocks] == [data_block, BlockType.DELETE]
    for b in blocks:
        assert b.instant_time == lc
        assert b.get(HeaderKey.COMPACTED_BLOCK_TIMES) == ",".join(merged_instants)
    assert list(blocks[0].compacted_block_times) == merged_instants
    if block_format == "parquet":   # a dictionary for repeated columns only, as for base files
        encoded = dictionary_encoded_columns(blocks[0].content)
        assert {"_hoodie_commit_time", "_hoodie_partition_path"} <= encoded
        assert not {"_hoodie_record_key", "_hoodie_commit_seqno"} & encoded

    s2 = first_file_group(table)
    assert any(lf.file_name == name for lf in s2.log_files)
    _, m = read_file_slice_with_metrics(table.storage, SliceSpec.from_file_slice(s2), ReadContext.for_table(table))
    assert m.log_blocks_read == 2 and m.log_blocks_superseded == m_before.log_blocks_read
    assert m.output_rows == m_before.output_rows
    assert [r["state"] for r in list_log_compactions(table)] == ["completed"]

    # Everything is compacted into one block now: below the threshold, and says so.
    again = schedule_log_compaction(table, config())
    assert again.status is Status.NOTHING_TO_DO and "below the threshold" in again.reason


def test_a_malformed_block_format_fails_before_the_plan_moves(tmp_path):
    from tablesvc.errors import ConfigError

    table, _, _ = busy_table(tmp_path, 8)
    lc = schedule_log_compaction(table, config()).instant
    with pytest.raises(ConfigError, match="hoodie.logfile.data.block.format"):
        run_log_compaction(table, config={"hoodie.logfile.data.block.format": "orc"})
    assert table.timeline().require(lc).state is State.REQUESTED


def test_a_major_compaction_on_top_reads_the_same(tmp_path):
    from tablesvc.services.compaction import compact_file_group, schedule_compaction
    from tablesvc.services.compaction.executor import _tasks as compaction_tasks

    table, _instants, _deleted = busy_table(tmp_path, 8)
    before = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    assert run_log_compaction(table, config=config())[0].status is Status.DONE
    table = Table.open(table.base_path)
    sched = schedule_compaction(table, config(), force=True)
    assert sched.status is Status.SCHEDULED
    c = sched.instant
    w = table.timeline_writer
    plan = table.timeline().plan_of(table.storage, table.timeline().require(c))
    inflight = w.start(table.timeline().require(c))
    ctx = ReadContext.for_table(table, as_of=c)
    stats = {}
    for i, task in enumerate(compaction_tasks(table, plan, c, table.schema(), ())):
        stats.setdefault(task.partition, []).append(compact_file_group(table.storage, ctx, task, f"{i}-0-0"))
    md = CommitMetadata({p: tuple(v) for p, v in stats.items()}, True, {"schema": table.schema()}, "COMPACT")
    w.complete(inflight, encode_commit_metadata(md, table.config.layout))
    table = Table.open(table.base_path)
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before and tablesvc_rows(table) == before


@pytest.mark.parametrize("version", [6, 8])
def test_dead_inflight_log_compaction_is_rolled_back_and_rescheduled(tmp_path, version):
    table, _instants, _deleted = busy_table(tmp_path, version)
    before = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    old = schedule_log_compaction(table, config()).instant
    # a process starts it, writes its output file (marker first) and dies: no heartbeat, no completion
    w = table.timeline_writer
    w.start(table.timeline().require(old))
    timeline = table.timeline()
    plan = timeline.plan_of(table.storage, timeline.require(old))
    ctx = ReadContext.for_table(table, timeline, as_of=old)
    (task,) = _tasks(table, plan, old, table.schema())
    partial = log_compact_file_group(table.storage, ctx, task, "0-0-0")
    partial_path = join(table.base_path, partial.path)
    assert table.storage.exists(partial_path)
    # readers never see the uncommitted compacted block
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before
    assert tablesvc_rows(Table.open(table.base_path)) == before

    results = run_log_compaction(table, config=config())
    assert [r.status for r in results] == [Status.DONE]
    fresh = results[0].instant
    assert fresh != old and fresh > old and results[0].metrics["rolled_back"] == old
    table = Table.open(table.base_path)
    tl = table.timeline()
    assert tl.get(old) is None                               # the old plan is gone (mutable plans)
    assert tl.require(fresh).state is State.COMPLETED
    assert any(i.action is Action.ROLLBACK and i.is_completed for i in tl.instants)
    # the marked output of the dead attempt is gone (v6 may reuse its name for the fresh output)
    assert not table.storage.exists(partial_path) or \
        {b.instant_time for b in read_log_file(table.storage, partial_path).blocks} == {fresh}
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before and tablesvc_rows(table) == before
    md = tl.commit_metadata(table.storage, tl.require(fresh))
    assert md.operation_type == "LOG_COMPACT"


def test_threshold_not_met_says_why_and_force_lowers_it(tmp_path):
    table = build_sample_table(str(tmp_path / "t"), table_version=8, rows=30).table
    update_five_of_first_group(table, 0, 9.5)
    update_five_of_first_group(table, 2, 8.5)                    # two valid blocks in the first file group
    result = schedule_log_compaction(table, config())
    assert result.status is Status.NOTHING_TO_DO
    assert "below the threshold" in result.reason and "hoodie.log.compaction.blocks.threshold" in result.reason
    assert schedule_log_compaction(table, config(**{"hoodie.log.compaction.blocks.threshold": 3})).status \
        is Status.NOTHING_TO_DO
    assert "at most 2 valid log blocks < 5" in result.reason
    forced = schedule_log_compaction(table, config(), force=True)
    assert forced.status is Status.SCHEDULED and forced.metrics["file_groups"] == 1


def test_a_group_in_a_pending_compaction_is_left_out(tmp_path):
    from tablesvc.services.compaction import schedule_compaction

    table, _instants, _deleted = busy_table(tmp_path, 8)
    c = schedule_compaction(table, config(), force=True)
    assert c.status is Status.SCHEDULED
    result = schedule_log_compaction(table, config(), force=True)
    assert result.status is Status.NOTHING_TO_DO
    assert "already in a pending compaction" in result.reason
    # and the other way round: a compaction plan never takes a group of a pending log compaction
    table2, _i, _d = busy_table(tmp_path / "b", 8)
    assert schedule_log_compaction(table2, config()).status is Status.SCHEDULED
    again = schedule_log_compaction(table2, config(), force=True)
    assert again.status is Status.NOTHING_TO_DO and "pending" in again.reason


def test_pending_write_blocks_scheduling(tmp_path):
    table, _instants, _deleted = busy_table(tmp_path, 8)
    w = table.timeline_writer
    d = w.start(w.request(Action.DELTA_COMMIT))
    result = schedule_log_compaction(table, config())
    assert result.status is Status.NOTHING_TO_DO and d.timestamp in result.reason


# -- the compacted blocks merge exactly like the originals (event time, real-valued deletes) -------
def _rec(key, ts, fare, instant):
    return {"_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_{key}", "_hoodie_record_key": key,
            "_hoodie_partition_path": "p", "_hoodie_file_name": "f", "ts": ts, "uuid": key, "rider": "r",
            "fare": fare, "city": "p"}


@pytest.mark.parametrize("mode", ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"])
def test_compacted_blocks_merge_like_the_originals(tmp_path, mode):
    from tablesvc.demo.sample_table import DATA_SCHEMA
    from tablesvc.logformat import DeleteRecord, avro_data_block, encode_delete_records, write_log_file
    from tablesvc.logformat import LogBlock, new_header
    from tablesvc.merge import merge_records, select_blocks
    from tablesvc.merge import log_inputs
    from tablesvc.merge.schema import work_schema
    from tablesvc.services.log_compaction import compacted_blocks, merge_log_blocks
    from tablesvc.storage import storage_for
    from tablesvc.write.schema_evolution import with_meta_fields

    schema = json.dumps(DATA_SCHEMA)
    full = with_meta_fields(schema)
    storage = storage_for(str(tmp_path))
    ctx = ReadContext(base_path=str(tmp_path), table_version=8, ordering_field="ts", merge_mode=mode,
                      completed_instants=frozenset({"100", "200", "300", "400", "500"}), timeline_start=None,
                      table_schema_json=schema)

    def deletes(instant, recs):
        return LogBlock(BlockType.DELETE, new_header([(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, full)]),
                        encode_delete_records([DeleteRecord(k, "p", 2, v) for k, v in recs]))

    blocks = [
        avro_data_block("100", full, [_rec("a", 5, 1.0, "100"), _rec("b", 5, 1.0, "100"), _rec("c", 5, 1.0, "100")]),
        deletes("200", [("a", 0), ("b", 7), ("d", 9)]),          # natural; real beats b; real on a base-only key
        avro_data_block("300", full, [_rec("a", 2, 2.0, "300"), _rec("e", 1, 2.0, "300"), _rec("c", 4, 2.0, "300")]),
        deletes("400", [("e", 0), ("c", 3), ("f", 0)]),          # natural on a log key; real that loses; natural
        avro_data_block("500", full, [_rec("b", 6, 3.0, "500"), _rec("g", 1, 3.0, "500")]),
    ]
    paths = []
    for i, b in enumerate(blocks):
        paths.append(str(tmp_path / f".fid_{i}.log.1_0-0-0"))
        write_log_file(storage, paths[-1], [b])
    base = pa.Table.from_pylist([_rec(k, ts, 0.5, "050") for k, ts in
                                 [("a", 3), ("b", 8), ("c", 9), ("d", 8), ("e", 0), ("f", 1), ("h", 1)]],
                                schema=work_schema(ctx))
    merged = merge_log_blocks(storage, ctx, tuple(paths))
    assert merged.instants == ("500", "400", "300", "200", "100")
    compacted_path = str(tmp_path / ".fid_9.log.1_0-0-0")
    ctx2 = ReadContext(**{**ctx.__dict__, "completed_instants": ctx.completed_instants | {"600"}})
    write_log_file(storage, compacted_path, compacted_blocks("600", schema, merged))

    def merge(paths_, c):
        inputs, _, _ = log_inputs(select_blocks(storage, tuple(paths_), c), work_schema(c))
        out = merge_records(base, inputs, merge_mode=c.effective_merge_mode, ordering_field="ts",
                            schema=work_schema(c))
        return sorted((r["_hoodie_record_key"], r["ts"], r["fare"]) for r in out.to_pylist())

    sel = select_blocks(storage, tuple(paths) + (compacted_path,), ctx2)
    assert sel.superseded == len(blocks) and len(sel.blocks) == 2
    assert merge(paths + [compacted_path], ctx2) == merge(paths, ctx)


def test_cli_schedule_and_list(tmp_path, capsys):
    import argparse

    from tablesvc.cli import cmd_logcompaction

    table, _instants, _deleted = busy_table(tmp_path, 8)
    parser = argparse.ArgumentParser()
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--conf", action="append", default=[])
    common.add_argument("--config")
    common.add_argument("--debug", action="store_true")
    cmd_logcompaction.add_parser(parser.add_subparsers(dest="cmd"), common)
    args = parser.parse_args(["logcompaction", "schedule", table.base_path, "--json"])
    assert args.run(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "scheduled" and out["action"] == "logcompaction"
    args = parser.parse_args(["logcompaction", "list", table.base_path, "--json"])
    assert args.run(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["instant"], r["state"], r["file_groups"]) for r in rows] == [(out["instant"], "requested", 1)]
