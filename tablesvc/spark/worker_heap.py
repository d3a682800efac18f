"""Keep a reused Python worker's garbage collections cheap.

PySpark's daemon runs a full ``gc.collect()`` in a reused Python worker after every task.  A
full collection walks every object the garbage collector tracks, and a worker that imported
pyarrow, pandas, PySpark's worker and tablesvc holds about 80k of them: 35-40 ms of CPU per
collection on this project's machine, for each task, while that worker takes no next task.  The
same walk happens in the oldest-generation collections Python starts by itself while a task
allocates.

``settle_worker_heap()``, called at the start of every tablesvc task function, collects and then
freezes what the worker holds (``gc.freeze``) once that has grown by ``REFREEZE_OBJECTS``
since the last freeze: on a worker's first task, and again after a task imported much more
(PySpark's worker imports pandas only after its first Arrow task, about 29k objects).  What is
frozen is mostly modules, classes and functions that live as long as the process.  Later
collections walk only the rest, and a frozen object is still freed as soon as nothing refers to
it; only a reference cycle among frozen objects is never collected.  The collection just before
each freeze keeps that to cycles alive at that moment (the running task's own objects), and the
threshold keeps freezes to a handful per process.  It checks once per task, and only inside a
Spark task: a driver or a test process keeps its usual collector.
"""

from __future__ import annotations

import gc

# Freeze again once this many tracked objects were added since the last freeze (a full
# collection of 10k objects costs about 1.5 ms here; counting them, under 0.5 ms).
REFREEZE_OBJECTS = 10_000

_last_task: int | None = None


def _task_attempt() -> int | None:
    """The running Spark task's attempt id, or None outside a Spark task."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return None
    ctx = TaskContext.get()
    return None if ctx is None else ctx.taskAttemptId()


def settle_worker_heap() -> bool:
    """Inside a Spark task, once per task: collect and freeze the worker's heap if
    ``REFREEZE_OBJECTS`` or more tracked objects are not frozen yet.  Returns whether it froze."""
    global _last_task
    task = _task_attempt()
    if task is None or task == _last_task:
        return False
    _last_task = task
    if len(gc.get_objects()) < REFREEZE_OBJECTS:
        return False
    gc.collect()
    gc.freeze()
    return True


__all__ = ["REFREEZE_OBJECTS", "settle_worker_heap"]
