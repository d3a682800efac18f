"""The file-group task runner that compaction and log compaction share: one piece of work per
plan operation, run in a Spark job (file groups packed into Spark tasks by the bytes they read,
``task_packing.py``) or in this process one after the other.  Tasks write their files after a
marker and return write stats only, never data.

The work is a module-level function ``work(storage, ctx, task, write_token) -> WriteStat``
(pickled to the tasks); ``task.partition`` names the partition its stat belongs to.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

import pyarrow as pa

from timeline.payloads import WriteStat
from timeline.storage import Storage

# work(storage, ctx, task, write_token) -> WriteStat; must be a module-level function (pickled to tasks)
FileGroupWork = Callable[[Storage, Any, Any, str], WriteStat]
StatsByPartition = dict[str, list[WriteStat]]


def spark_session(spark, object_store: bool = False):
    """``spark`` may be a SparkSession, a function returning one (started lazily) or None; the
    session comes back with its executors checked (``executor_env.prepare_executors``; with
    ``object_store``, for tasks on an object-store table: obstore too)."""
    from tablesvc.spark.executor_env import prepare_executors

    if spark is None:
        from tablesvc.spark.session import get_spark

        spark = get_spark()
    elif callable(spark) and not hasattr(spark, "sparkContext"):
        spark = spark()
    return prepare_executors(spark, object_store=object_store)


def _task_runner(ctx, work: FileGroupWork, groups: Sequence[bytes], counters=None):
    """``counters``: the progress lines' accumulators (``spark.progress``), or None."""
    def run(batches):
        from tablesvc.fsview.names import write_token
        from tablesvc.spark.read_job import task_items
        from tablesvc.spark.session import task_identity
        from tablesvc.storage import task_storage

        storage = task_storage(ctx.base_path, ctx.storage)
        token = write_token(*task_identity())
        for task in task_items(batches, groups):
            stat = work(storage, ctx, task, token)
            if counters is not None:
                counters.add(1, stat.num_writes or 0)
            yield pa.RecordBatch.from_arrays([pa.array([task.partition]), pa.array([json.dumps(stat.to_avro())])],
                                             names=["partition", "stat"])
    return run


def task_weight(task: Any) -> int | None:
    """Bytes a task reads, for packing tasks (``task_packing.py``): the compaction plan's
    TOTAL_IO_READ_MB (base + logs), else the task's log bytes, else unknown (None)."""
    return getattr(task, "read_bytes", 0) or getattr(task, "log_bytes", None)


def run_file_group_tasks(table, ctx, tasks: Sequence[Any], work: FileGroupWork, spark, *,
                         in_process: bool = False, label: str = "file group tasks") -> StatsByPartition:
    """Run ``work`` once per task: in a Spark job (file groups packed into Spark tasks,
    ``task_packing.py``; only write stats come back to the driver) or, with ``in_process``,
    here one after the other through ``table.storage``.  ``label`` names the job in the CLI's
    progress lines."""
    stats: StatsByPartition = {}
    if not tasks:
        return stats
    if in_process:
        from tablesvc.fsview.names import write_token

        for i, task in enumerate(tasks):
            stats.setdefault(task.partition, []).append(work(table.storage, ctx, task, write_token(i, 0, 0)))
        return stats
    from tablesvc.spark.errors import translate_task_error
    from tablesvc.spark.read_job import pack_tasks

    from tablesvc.spark.progress import phase, task_counters

    session = spark_session(spark, object_store=ctx.storage is not None)
    try:
        packed = pack_tasks(session, list(tasks), [task_weight(t) for t in tasks])
        runner = _task_runner(ctx, work, packed.groups, task_counters(session))
        with phase(label, file_groups=len(tasks)):
            rows = packed.frame.mapInArrow(runner, "partition string, stat string").collect()
    except Exception as e:
        raise translate_task_error(e) from None
    for row in rows:
        stats.setdefault(row["partition"], []).append(WriteStat.from_avro(json.loads(row["stat"])))
    return stats


__all__ = ["FileGroupWork", "StatsByPartition", "run_file_group_tasks", "spark_session", "task_weight"]
