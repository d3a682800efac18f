"""How many Spark tasks a per-slice job gets, and which slices share one.

A Python task costs more than its work on small slices: a PySpark worker round trip of
30–60 ms per task on this project's machine (measured: 20 tasks that do nothing take 0.4–1 s
on 2 cores, 2 tasks 0.07–0.1 s; docs/performance.md), so one task per file group made a
20-group read or compaction spend most of a second on scheduling.  Slices are therefore
packed the way Spark packs small files into a scan's partitions:

* each slice weighs its bytes (base + logs, when the caller knows them) plus an open cost
  (``spark.sql.files.openCostInBytes``, 4 MiB by default), so many tiny slices still spread;
* a task holds up to ``min(maxPartitionBytes, max(openCost, total / parallelism))`` bytes
  (``spark.sql.files.maxPartitionBytes``, 128 MiB by default; parallelism is the session's
  ``defaultParallelism``, its cores): every core gets work, and no task gets a huge share;
* slices go largest first to the least loaded task (balanced, unlike Spark's next-fit).

Within a task the slices run one after the other, so a task's memory is still one slice's.
"""

from __future__ import annotations

import heapq
import math
from typing import Sequence

DEFAULT_OPEN_COST = 4 << 20
DEFAULT_MAX_TASK_BYTES = 128 << 20
MAX_TASKS = 2000        # beyond this, slices share tasks whatever their size (driver bookkeeping)


def pack(weights: Sequence[int | None], parallelism: int, *, open_cost: int = DEFAULT_OPEN_COST,
         max_task_bytes: int = DEFAULT_MAX_TASK_BYTES, max_tasks: int = MAX_TASKS) -> list[list[int]]:
    """Indices of ``weights`` grouped into tasks (each group in ascending index order; groups
    ordered by their first index).  An unknown weight (None) counts as the open cost alone."""
    n = len(weights)
    if n == 0:
        return []
    cost = [max(0, w or 0) + open_cost for w in weights]
    total = sum(cost)
    per_task = min(max_task_bytes, max(open_cost, total / max(1, parallelism)))
    tasks = max(1, min(n, max_tasks, max(math.ceil(total / per_task - 1e-9), min(parallelism, n))))
    if tasks == n:
        return [[i] for i in range(n)]
    heap = [(0, t) for t in range(tasks)]       # (load, task)
    groups: list[list[int]] = [[] for _ in range(tasks)]
    for i in sorted(range(n), key=lambda k: -cost[k]):
        load, t = heapq.heappop(heap)
        groups[t].append(i)
        heapq.heappush(heap, (load + cost[i], t))
    packed = [sorted(g) for g in groups if g]
    packed.sort(key=lambda g: g[0])
    return packed


def session_packing(spark) -> dict:
    """The session's parallelism and file-packing settings, as ``pack`` keywords."""
    conf = spark.conf

    def size(key: str, default: int) -> int:
        value = conf.get(key, None)
        if value is None:
            return default
        try:
            return _parse_bytes(value)
        except ValueError:
            return default

    return {"parallelism": max(1, spark.sparkContext.defaultParallelism),
            "open_cost": size("spark.sql.files.openCostInBytes", DEFAULT_OPEN_COST),
            "max_task_bytes": size("spark.sql.files.maxPartitionBytes", DEFAULT_MAX_TASK_BYTES)}


_UNITS = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}


def _parse_bytes(value: str) -> int:
    """Spark's byte strings: ``134217728``, ``128m``, ``128MB``, ``4194304b``."""
    text = str(value).strip().lower()
    digits = text.rstrip("bkmg")
    unit = text[len(digits):] or "b"
    if not digits.isdigit() or unit not in _UNITS:
        raise ValueError(value)
    return int(digits) * _UNITS[unit]


__all__ = ["DEFAULT_MAX_TASK_BYTES", "DEFAULT_OPEN_COST", "MAX_TASKS", "pack", "session_packing"]
