"""Packing of per-slice work into Spark tasks (tablesvc/spark/task_packing.py), and that the
jobs built on it still run every slice exactly once."""

from __future__ import annotations

import pytest

from tablesvc.spark.task_packing import _parse_bytes, pack

MiB = 1 << 20


def flat(groups):
    return sorted(i for g in groups for i in g)


def test_every_item_lands_in_exactly_one_task():
    weights = [(i * 7919) % 50 * MiB for i in range(57)]
    groups = pack(weights, 4)
    assert flat(groups) == list(range(57))
    assert all(g == sorted(g) for g in groups)


def test_small_slices_share_tasks_one_per_core():
    # 20 file groups of ~4 MB on 2 cores: 2 tasks of 10, not 20 tasks
    groups = pack([4 * MiB] * 20, 2)
    assert [len(g) for g in groups] == [10, 10]


def test_large_slices_keep_a_task_each_and_no_task_exceeds_the_cap():
    groups = pack([200 * MiB] * 6, 2)
    assert groups == [[i] for i in range(6)]
    groups = pack([30 * MiB] * 40, 2)          # 1.36 GB in all: tasks of <= 128 MiB
    loads = [sum(30 * MiB + 4 * MiB for _ in g) for g in groups]
    assert max(loads) <= 128 * MiB + 34 * MiB   # LPT: within one item of the target
    assert len(groups) == 11


def test_balanced_by_bytes_not_by_count():
    weights = [100 * MiB] + [1 * MiB] * 20
    groups = pack(weights, 2)
    assert len(groups) == 2
    big = next(g for g in groups if 0 in g)
    assert big == [0] or len(big) < 5          # the big slice is not piled on top of the small ones


def test_unknown_sizes_count_as_the_open_cost_and_never_fewer_tasks_than_cores():
    assert len(pack([None] * 3, 8)) == 3
    assert len(pack([None] * 100, 4)) == 4
    assert pack([], 4) == []


def test_a_hard_cap_on_the_number_of_tasks():
    assert len(pack([500 * MiB] * 50, 2, max_tasks=7)) == 7


@pytest.mark.parametrize("text,value", [("134217728", 128 * MiB), ("128m", 128 * MiB), ("128MB", 128 * MiB),
                                        ("4194304b", 4 * MiB), ("1g", 1 << 30), ("64k", 64 << 10)])
def test_spark_byte_strings(text, value):
    assert _parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "12x", "m", "1.5g"])
def test_bad_byte_strings_are_refused(text):
    with pytest.raises(ValueError):
        _parse_bytes(text)


def test_compaction_tasks_weigh_what_the_plan_says_they_read(tmp_path):
    """Compaction tasks are packed by the plan's TOTAL_IO_READ_MB (base + logs), not by their
    logs alone: 3 groups with large bases and tiny logs must not share one task."""
    from tablesvc.services.compaction.executor import _tasks
    from tablesvc.spark.file_group_tasks import task_weight
    from tablesvc.api import Table, TableSpec
    from timeline.payloads import CompactionOperation, CompactionPlan

    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("id",), "ts", ()))
    ops = tuple(CompactionOperation(base_instant_time="20260101000000000", file_id=f"fg-{i}", partition_path="",
                                    data_file_path=f"fg-{i}_0-1-0_20260101000000000.parquet",
                                    delta_file_paths=(f".fg-{i}_20260101000000000.log.1_0-1-0",),
                                    metrics={"TOTAL_LOG_FILES_SIZE": 1000.0, "TOTAL_IO_READ_MB": 300.0})
                for i in range(3))
    tasks = _tasks(table, CompactionPlan(operations=ops), "20260102000000000", '{"type":"record","name":"r",'
                   '"fields":[{"name":"id","type":"string"},{"name":"ts","type":"long"}]}', ())
    weights = [task_weight(t) for t in tasks]
    assert weights == [300 << 20] * 3
    assert pack(weights, 1) == [[0], [1], [2]]          # 300 MiB each: over the 128 MiB cap
    assert len(pack([t.log_bytes for t in tasks], 1)) == 1   # by logs alone they would share a task


@pytest.mark.spark
def test_packed_tasks_hand_every_task_its_own_items_from_a_jvm_built_frame(spark):
    """``pack_tasks``: one partition per task, each task's items in order, every item once; the
    frame is a JVM ``Range`` (no Python step builds its rows: a Python-built frame would show
    an RDD scan in the plan)."""
    import pyarrow as pa

    from tablesvc.spark.read_job import pack_tasks, task_items
    from tablesvc.spark.task_packing import session_packing

    items = [f"item-{i}" for i in range(23)]
    tasks = pack_tasks(spark, items, [1 << 20] * len(items))
    groups = tasks.groups

    def echo(batches):
        got = list(task_items(batches, groups))
        yield pa.RecordBatch.from_pylist([{"items": got}])

    plan = tasks.frame._jdf.queryExecution().executedPlan().toString()
    assert "Range" in plan and "Scan ExistingRDD" not in plan, plan
    assert tasks.frame.rdd.getNumPartitions() == len(groups) > 1
    per_task = [r["items"] for r in tasks.frame.mapInArrow(echo, "items array<string>").collect()]
    expected = pack([1 << 20] * len(items), **session_packing(spark))
    assert sorted(per_task) == sorted([[items[i] for i in g] for g in expected])
    assert sorted(i for task in per_task for i in task) == sorted(items)
