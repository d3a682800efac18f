"""Progress lines on stderr while the CLI's Spark jobs run.

``progress_lines(True)`` (the CLI, without ``--quiet`` or ``--json``) starts a driver thread
that, every ``TABLESVC_PROGRESS_SECONDS`` (default 5), prints one line for the job phase under
way (``phase``), e.g.::

    tablesvc: progress: compaction 20250101093000123: 12/40 file groups, 1,204,000 rows, 3/8 tasks, 15.0 s

Nothing comes back from the tasks but two Spark accumulators (``TaskCounters``: file groups
finished, rows written or read), which Spark adds on the driver as each task ends; the task
counts are Spark's status tracker's for the stages running now.  No data passes through the
driver.  Without a reporter (the Python API, tests) ``task_counters`` is None and the tasks
count nothing.

As git prints its progress, the lines are on when stderr is a terminal; elsewhere (a log file,
a pipe, a test capturing stderr) only when ``TABLESVC_PROGRESS_SECONDS`` is set, so that a
script reading stderr still finds one line per error.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

INTERVAL_ENV = "TABLESVC_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 5.0
PREFIX = "tablesvc: progress: "


@dataclass(frozen=True)
class TaskCounters:
    """What tasks add to (inside a Spark task): file groups finished and rows; two accumulators."""

    file_groups: Any
    rows: Any

    def add(self, file_groups: int, rows: int) -> None:
        self.file_groups.add(file_groups)
        self.rows.add(rows)


@dataclass
class _Phase:
    label: str
    started: float
    base_groups: int
    base_rows: int
    total_groups: int | None = None


class _Reporter:
    """The thread and the state it reads; one per CLI command."""

    def __init__(self, interval: float):
        self.interval = interval
        self.counters: TaskCounters | None = None
        self.context = None            # the SparkContext the counters belong to
        self.phase: _Phase | None = None
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="tablesvc-progress", daemon=True)

    def counters_for(self, spark) -> TaskCounters:
        context = spark.sparkContext
        with self.lock:
            if self.counters is None or self.context is not context:
                self.counters = TaskCounters(context.accumulator(0), context.accumulator(0))
                self.context = context
            return self.counters

    def _values(self) -> tuple[int, int]:
        c = self.counters
        return (c.file_groups.value, c.rows.value) if c is not None else (0, 0)

    def start_phase(self, label: str, total_groups: int | None) -> _Phase:
        with self.lock:
            groups, rows = self._values()
            self.phase = _Phase(label, time.monotonic(), groups, rows, total_groups)
            return self.phase

    def end_phase(self, phase: _Phase, previous: _Phase | None) -> None:
        """Back to the phase ``phase`` was started in (phases nest)."""
        with self.lock:
            if self.phase is phase:
                self.phase = previous

    def _loop(self) -> None:
        while not self.stopped.wait(self.interval):
            line = self.line()
            if line:
                print(line, file=sys.stderr, flush=True)   # sys.stderr now: Spark may have moved it

    def line(self) -> str | None:
        with self.lock:
            phase, context = self.phase, self.context
            if phase is None:
                return None
            groups, rows = self._values()
        done = groups - phase.base_groups
        of = f"/{phase.total_groups}" if phase.total_groups is not None else ""
        tasks_done, tasks = _running_tasks(context)
        return (f"{PREFIX}{phase.label}: {done}{of} file groups, {rows - phase.base_rows:,} rows, "
                f"{tasks_done}/{tasks} tasks, {time.monotonic() - phase.started:.1f} s")


def _running_tasks(context) -> tuple[int, int]:
    """(tasks finished, tasks) of the stages running now, from Spark's status tracker."""
    if context is None:
        return 0, 0
    try:
        tracker = context.statusTracker()
        infos = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
    except Exception:  # the context is stopping: no line is worth an error
        return 0, 0
    infos = [i for i in infos if i is not None]
    return sum(i.numCompletedTasks for i in infos), sum(i.numTasks for i in infos)


_reporter: _Reporter | None = None


def interval_seconds() -> float:
    raw = os.environ.get(INTERVAL_ENV, "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_INTERVAL
    except ValueError:
        value = DEFAULT_INTERVAL
    return value if value > 0 else DEFAULT_INTERVAL


def wanted() -> bool:
    """Progress lines are for a terminal, or for whoever sets ``TABLESVC_PROGRESS_SECONDS``."""
    if os.environ.get(INTERVAL_ENV, "").strip():
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):   # no stderr, or a closed one
        return False


@contextmanager
def progress_lines(enabled: bool) -> Iterator[None]:
    """Progress lines on stderr while inside (``enabled`` and ``wanted()``), every
    ``interval_seconds()``."""
    global _reporter
    if not (enabled and wanted()):
        yield
        return
    reporter = _Reporter(interval_seconds())
    _reporter = reporter
    reporter.thread.start()
    try:
        yield
    finally:
        reporter.stopped.set()
        reporter.thread.join(timeout=reporter.interval + 1)
        _reporter = None


def task_counters(spark) -> TaskCounters | None:
    """The accumulators a job's tasks add to, or None when no progress lines are printed."""
    reporter = _reporter
    return reporter.counters_for(spark) if reporter is not None else None


@contextmanager
def phase(label: str, file_groups: int | None = None) -> Iterator[None]:
    """Progress lines name ``label`` (and count from zero) while inside; ``file_groups`` is
    the total when known."""
    reporter = _reporter
    if reporter is None:
        yield
        return
    previous = reporter.phase
    current = reporter.start_phase(label, file_groups)
    try:
        yield
    finally:
        reporter.end_phase(current, previous)


def expect_file_groups(total: int) -> None:
    """Set the current phase's total of file groups, once the job knows it."""
    reporter = _reporter
    if reporter is not None and reporter.phase is not None:
        reporter.phase.total_groups = total


__all__ = ["DEFAULT_INTERVAL", "INTERVAL_ENV", "TaskCounters", "expect_file_groups", "interval_seconds", "phase",
           "progress_lines", "task_counters", "wanted"]
