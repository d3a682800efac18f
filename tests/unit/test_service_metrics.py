"""Typed metrics per service (issue #25, item 5): each service's ``ServiceResult.metrics`` is its
own frozen dataclass, ``as_dict()`` gives the keys the CLI prints, and real runs report numbers
that agree with counts taken independently (the storage listing, the files' own contents, hudi-rs).
No Spark: the executors run their file groups in this process."""

from __future__ import annotations

import dataclasses
import os

import pyarrow.parquet as pq
import pytest
from helpers import data_files
from oracles.hudi_rs import file_slices, sorted_rows
from table_builders import busy_table, first_file_group, five_digit_key_rows, write_without_spark

from tablesvc.api import Table, TableSpec
from tablesvc.config import build_config
from tablesvc.logformat import BlockType, block_deletes, block_records, read_log_file
from tablesvc.services import ServiceResult, Status
from tablesvc.services.clean import run_clean, schedule_clean
from tablesvc.services.compaction import run_compaction, schedule_compaction
from tablesvc.services.log_compaction import run_log_compaction, schedule_log_compaction
from tablesvc.services.metrics import (
    CleanMetrics, CompactionMetrics, CompactionPlanMetrics, LogCompactionMetrics, LogCompactionPlanMetrics,
    PlanMetrics, RollbackMetrics, ServiceMetrics,
)
from tablesvc.services.rollback import rollback
from timeline.clock import ManualClock

DAY_MS = 24 * 3600 * 1000


def config(**values):
    return build_config(conf={k: str(v) for k, v in values.items()})


def field_names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


# -- the types ---------------------------------------------------------------------------------------

def test_each_service_has_its_own_frozen_metrics_type_with_the_printed_keys_in_order():
    assert field_names(ServiceMetrics) == []
    assert field_names(CompactionPlanMetrics) == ["file_groups", "log_files", "log_bytes",
                                                  "skipped_in_pending_plans", "left_for_later"]
    assert field_names(LogCompactionPlanMetrics) == ["file_groups", "log_files", "log_blocks", "threshold",
                                                     "skipped_in_pending_plans", "below_threshold"]
    assert field_names(CompactionMetrics) == ["file_groups", "log_files", "log_bytes", "log_records",
                                              "records_written", "bytes_written", "seconds", "completion_time"]
    assert field_names(LogCompactionMetrics) == ["file_groups", "log_files", "log_blocks", "log_records",
                                                 "records_written", "deletes_written", "bytes_written", "seconds",
                                                 "completion_time", "rolled_back"]
    assert field_names(CleanMetrics) == ["files_to_delete", "files", "files_deleted", "files_failed", "partitions",
                                         "policy", "earliest_commit_to_retain", "partitions_scanned"]
    assert field_names(RollbackMetrics) == ["target", "files_to_delete", "files_deleted", "command_blocks",
                                            "resumed", "completion_time"]
    for cls in (CompactionPlanMetrics, LogCompactionPlanMetrics, CompactionMetrics, LogCompactionMetrics,
                CleanMetrics, RollbackMetrics):
        assert issubclass(cls, ServiceMetrics) and cls.__dataclass_params__.frozen, cls
    assert issubclass(CompactionPlanMetrics, PlanMetrics) and issubclass(LogCompactionPlanMetrics, PlanMetrics)
    with pytest.raises(dataclasses.FrozenInstanceError):
        RollbackMetrics(target="1").target = "2"  # type: ignore[misc]


def test_as_dict_leaves_out_what_an_outcome_does_not_report():
    planned = CompactionPlanMetrics(file_groups=2, log_files=5, log_bytes=900)
    assert planned.as_dict() == {"file_groups": 2, "log_files": 5, "log_bytes": 900}
    assert list(CompactionPlanMetrics(2, 5, 900, left_for_later=1).as_dict()) == [
        "file_groups", "log_files", "log_bytes", "left_for_later"]
    # a dry-run clean's paths come out as a list (as JSON has them); the CLI text drops them
    dry = CleanMetrics(files_to_delete=2, files=("p/a.parquet", "p/b.parquet"))
    assert dry.as_dict() == {"files_to_delete": 2, "files": ["p/a.parquet", "p/b.parquet"]}
    assert dry.without_files().as_dict() == {"files_to_delete": 2}
    assert CleanMetrics(earliest_commit_to_retain="").as_dict() == {"earliest_commit_to_retain": ""}
    # a rollback that ran names its completion time even when the layout has none (v6: null)
    assert RollbackMetrics(target="t", resumed=True).as_dict() == {"target": "t", "resumed": True}
    assert RollbackMetrics("t", files_deleted=3, command_blocks=0, resumed=False).as_dict() == {
        "target": "t", "files_deleted": 3, "command_blocks": 0, "resumed": False, "completion_time": None}


def test_dict_style_reads_and_the_runner_sum_keep_working():
    done = LogCompactionMetrics(1, 6, 6, 20, 12, 3, 4096, 0.5, rolled_back="001")
    assert done["records_written"] == 12 and done["rolled_back"] == "001"
    assert "rolled_back" in done and "completion_time" not in done
    with pytest.raises(KeyError):
        done["completion_time"]
    assert not ServiceMetrics() and done
    results = [ServiceResult("logcompaction", Status.DONE, "2", "", done),
               ServiceResult("compaction", Status.DONE, "3", "", CompactionMetrics(1, 2, 3, 4, 7, 9, 0.1)),
               ServiceResult("clean", Status.DONE, "4", "", CleanMetrics(files_deleted=4)),
               ServiceResult("rollback", Status.NOTHING_TO_DO)]
    assert [r.metrics.rows_written for r in results] == [12, 7, 0, 0]
    # render() and as_dict() show exactly the reported keys, as when metrics were a dict
    assert results[2].render() == "clean: done (4); files_deleted=4"
    assert results[3].render() == "rollback: nothing to do" and results[3].as_dict()["metrics"] == {}


# -- real runs --------------------------------------------------------------------------------------

def log_contents(table: Table, paths) -> tuple[int, int, int]:
    """(blocks, data records, delete keys) in the log files at ``paths``, read from the files."""
    blocks = records = deletes = 0
    for path in paths:
        for b in read_log_file(table.storage, path).blocks:
            blocks += 1
            if b.block_type is BlockType.DELETE:
                deletes += len(block_deletes(b))
            elif b.block_type is not BlockType.COMMAND:
                records += len(block_records(b))
    return blocks, records, deletes


@pytest.mark.parametrize("version", [6, 8])
def test_log_compaction_reports_what_its_files_hold(tmp_path, version):
    table, _instants, _deleted = busy_table(tmp_path, version)
    s = first_file_group(table)
    (theirs,) = [h for h in file_slices(table.base_path) if h.file_id == s.file_id]
    logs = [os.path.join(table.base_path, p) for p in theirs.log_files_relative_paths()]
    blocks, records, deletes = log_contents(table, logs)
    before = data_files(table.base_path)

    scheduled = schedule_log_compaction(table, config())
    assert scheduled.status is Status.SCHEDULED and type(scheduled.metrics) is LogCompactionPlanMetrics
    planned = scheduled.metrics
    assert (planned.file_groups, planned.log_files, planned.log_blocks) == (1, len(logs), blocks)
    assert planned.threshold == scheduled.as_dict()["metrics"]["threshold"]

    (done,) = run_log_compaction(table, scheduled.instant, config=config())
    assert done.status is Status.DONE and type(done.metrics) is LogCompactionMetrics
    m = done.metrics
    assert (m.file_groups, m.log_files, m.log_blocks, m.log_records) == (1, len(logs), blocks, records + deletes)
    (new_log,) = data_files(table.base_path) - before
    new_blocks, new_records, new_deletes = log_contents(table, [os.path.join(table.base_path, new_log)])
    assert (m.records_written, m.deletes_written) == (new_records, new_deletes) and m.rows_written == new_records
    assert m.bytes_written == os.path.getsize(os.path.join(table.base_path, new_log))
    assert m.rolled_back is None and m.seconds >= 0
    completed = Table.open(table.base_path).timeline().require(scheduled.instant).completion_time
    assert m.completion_time == (completed or None)
    assert done.as_dict()["metrics"] == m.as_dict() and "rolled_back" not in m.as_dict()


@pytest.mark.parametrize("version", [6, 8])
def test_compaction_and_clean_report_what_hudi_rs_and_the_listing_see(tmp_path, version):
    table, _instants, _deleted = busy_table(tmp_path, version)
    with_logs = [h for h in file_slices(table.base_path) if h.has_log_files]
    rows = sorted_rows(table.base_path, ("uuid", "ts", "fare"))
    logs = [os.path.join(table.base_path, p) for h in with_logs for p in h.log_files_relative_paths()]

    scheduled = schedule_compaction(table, config(), force=True)
    assert scheduled.status is Status.SCHEDULED and type(scheduled.metrics) is CompactionPlanMetrics
    want = (len(with_logs), sum(len(h.log_file_names) for h in with_logs),
            sum(sum(h.log_file_sizes) for h in with_logs))
    p = scheduled.metrics
    assert (p.file_groups, p.log_files, p.log_bytes) == want
    assert p.skipped_in_pending_plans is None and p.left_for_later is None

    (done,) = run_compaction(table, scheduled.instant, config=config(), in_process=True)
    assert done.status is Status.DONE and type(done.metrics) is CompactionMetrics
    m = done.metrics
    assert (m.file_groups, m.log_files, m.log_bytes) == want
    new = [h for h in file_slices(table.base_path) if h.creation_instant_time == scheduled.instant]
    assert len(new) == m.file_groups
    # rows from the new base files' Parquet footers, bytes as hudi-rs lists them
    footers = [pq.read_metadata(os.path.join(table.base_path, h.base_file_relative_path())) for h in new]
    assert m.records_written == m.rows_written == sum(f.num_rows for f in footers)
    assert m.bytes_written == sum(h.base_file_size for h in new)
    assert m.log_records == sum(log_contents(table, logs)[1:]) > 0
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == rows

    # clean: keep one version per file group, so the compacted groups' old slices go
    cfg = config(**{"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": 1})
    before = data_files(table.base_path)
    (dry,) = run_clean(table, cfg, dry_run=True)
    assert dry.status is Status.DRY_RUN and type(dry.metrics) is CleanMetrics
    assert dry.metrics.files_to_delete == len(dry.metrics.files) > 0
    (cleaned,) = run_clean(table, cfg)
    assert cleaned.status is Status.DONE and type(cleaned.metrics) is CleanMetrics
    gone = before - data_files(table.base_path)
    c = cleaned.metrics
    assert c.files_deleted == len(gone) == dry.metrics.files_to_delete
    assert {os.path.relpath(f, table.base_path) for f in dry.metrics.files} == gone
    assert c.partitions == len({os.path.dirname(f) for f in gone})
    assert c.policy == "KEEP_LATEST_FILE_VERSIONS" and c.files_to_delete is None and c.files is None
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == rows

    # nothing left: the run says so, with the partitions its planner listed (at most the table's)
    (again,) = run_clean(table, cfg)
    assert again.status is Status.NOTHING_TO_DO and type(again.metrics) is CleanMetrics
    assert 0 <= again.metrics.partitions_scanned <= len({os.path.dirname(f) for f in before})
    assert list(again.metrics.as_dict()) == ["partitions_scanned"]
    # scheduling (the runner's path) reports the plan's size, or nothing when there is nothing to plan
    assert schedule_clean(table, cfg).metrics.as_dict() == {}


@pytest.mark.parametrize("version", [6, 8])
def test_rollback_reports_the_files_it_deleted(tmp_path, version):
    clock = ManualClock()
    path = tmp_path / "t"
    table = Table.create(str(path), TableSpec("trips", ("uuid",), "ts", ("city",), table_version=version,
                                              num_buckets=2), clock=clock)
    clock.advance(1000)
    write_without_spark(table, five_digit_key_rows(range(0, 60), 1), "upsert", stage=1)
    before = data_files(path)
    clock.advance(1000)
    failed, _ = write_without_spark(table, five_digit_key_rows(range(10, 40), 2), "upsert", stage=2,
                                    complete=False)
    created = data_files(path) - before
    assert created
    clock.advance(DAY_MS)   # the failed write's heartbeat has expired

    dry = rollback(table, failed, dry_run=True)
    assert dry.status is Status.DRY_RUN and type(dry.metrics) is RollbackMetrics
    assert (dry.metrics.target, dry.metrics.files_to_delete) == (failed, len(created))
    done = rollback(table, failed)
    assert done.status is Status.DONE and type(done.metrics) is RollbackMetrics
    m = done.metrics
    assert (m.target, m.files_deleted, m.resumed) == (failed, len(created), False)
    assert data_files(path) == before and m.command_blocks == 0 and m.rows_written == 0
    completed = Table.open(str(path)).timeline().require(done.instant).completion_time
    assert m.completion_time == completed
    assert list(done.as_dict()["metrics"]) == ["target", "files_deleted", "command_blocks", "resumed",
                                               "completion_time"]


def test_python_api_readers_of_metrics_by_key_still_work(tmp_path):
    table, _instants, _deleted = busy_table(tmp_path, 8)
    scheduled = schedule_log_compaction(table, config())
    assert scheduled.metrics["file_groups"] == scheduled.metrics.file_groups == 1
    assert scheduled.render().endswith("; " + ", ".join(f"{k}={v}" for k, v in scheduled.metrics.as_dict().items()))
