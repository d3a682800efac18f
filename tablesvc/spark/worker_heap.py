"""Keep a reused Python worker's garbage collections cheap.

PySpark's daemon runs a full ``gc.collect()`` in a reused Python worker after every task.  A
full collection walks every object the garbage collector tracks, and a worker that imported
pyarrow, pandas, PySpark's worker and tablesvc holds about 80k of them: 35-40 ms of CPU per
collection (measured in one process with the same imports), for each task, before that worker
can take the next one.  The same walk happens in the oldest-generation collections Python
starts by itself while a task allocates.

``freeze_worker_heap()``, called at the start of every tablesvc task function, checks once
per task: when ``REFREEZE_OBJECTS`` or more tracked objects are not frozen yet, it collects
and then freezes them all (``gc.freeze``).  In practice that is a worker's first task, and its
second, because PySpark imports pandas (about 29k objects) only after its first Arrow task.
What is frozen is mostly modules, classes and functions that live as long as the process;
later collections walk only the rest.  A frozen object is still freed as soon as nothing
refers to it; only a reference cycle among frozen objects is never collected.  The collection
just before each freeze leaves only cycles that are alive at that moment (the running task's
own objects), and ``MAX_FREEZES`` bounds how often that can happen in one process: a task
whose own state is large (a write's file-group targets on a table with thousands of groups)
would otherwise pass the threshold every time.  Outside a Spark task (a driver, a test
process) it does nothing.
"""

from __future__ import annotations

import gc

from tablesvc.spark.session import task_attempt_id

# Freeze when this many tracked objects are not frozen (a full collection of 10k objects
# costs about 1.5 ms here; counting them, under 0.5 ms).
REFREEZE_OBJECTS = 10_000
# At most this many freezes per process (each may keep the running task's cycles for good).
MAX_FREEZES = 4

_last_task_attempt: int | None = None
_freezes = 0


def freeze_worker_heap() -> bool:
    """Inside a Spark task, once per task: collect and freeze the worker's heap if
    ``REFREEZE_OBJECTS`` or more tracked objects are not frozen and this process has frozen
    fewer than ``MAX_FREEZES`` times.  Returns whether it froze."""
    global _last_task_attempt, _freezes
    if _freezes >= MAX_FREEZES:
        return False
    attempt = task_attempt_id()
    if attempt is None or attempt == _last_task_attempt:
        return False
    _last_task_attempt = attempt
    if len(gc.get_objects()) < REFREEZE_OBJECTS:
        return False
    gc.collect()
    gc.freeze()
    _freezes += 1
    return True


__all__ = ["MAX_FREEZES", "REFREEZE_OBJECTS", "freeze_worker_heap"]
