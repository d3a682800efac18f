"""What every step of the demo's Spark story shares: the sample rows, the story's state,
the timeline after each step, and the row-count check against hudi-rs (loud on a mismatch)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tablesvc.cli.cmd_timeline import describe_instant
from tablesvc.cli.output import print_table, say
from tablesvc.config import build_config
from tablesvc.api import Table

CITIES = ("chennai", "london", "new_york", "san_francisco", "sao_paulo")
TIMELINE_COLUMNS = ["instant", "action", "state", "completion_time", "operation", "new"]


class StoryFailed(Exception):
    """The story's outcome is not what it should be (row counts differ, a service did not run)."""


@dataclass
class Story:
    table: Table
    spark: object
    rows: int                 # rows of the first insert
    expected: int = 0         # rows a reader should see now
    shown: set = field(default_factory=set)   # (instant, state) pairs printed so far
    steps: list = field(default_factory=list)  # (heading, monotonic start) of each step

    @property
    def path(self) -> str:
        return self.table.base_path


def heading(story: Story, text: str) -> None:
    say(f"\n== {text}")
    story.steps.append((text.split(".")[0], time.monotonic()))


def step_times(story: Story) -> str:
    """``1: 12s, 2: 4s, ...``: how long each step took, up to now."""
    ends = [t for _, t in story.steps[1:]] + [time.monotonic()]
    return ", ".join(f"{n}: {end - t:.0f}s" for (n, t), end in zip(story.steps, ends))


def trips(spark, start: int, count: int, ts_base: int, fare_scale: float = 1.0):
    """Trips ``start .. start+count-1``, generated inside Spark: key ``trip-%07d``, ordering
    value ``ts_base + id % 1000``, city ``CITIES[id % 5]``."""
    from pyspark.sql import functions as F

    cities = F.array(*[F.lit(c) for c in CITIES])
    return (spark.range(start, start + count)
            .select(F.format_string("trip-%07d", F.col("id")).alias("uuid"),
                    (F.lit(ts_base) + F.col("id") % 1000).alias("ts"),
                    F.format_string("rider-%03d", F.col("id") % 997).alias("rider"),
                    F.round(F.rand(seed=start) * 80 * fare_scale + 5, 2).alias("fare"),
                    F.element_at(cities, (F.col("id") % len(CITIES) + 1).cast("int")).alias("city")))


def hudi_rs_count(path: str, as_of: str | None = None) -> int:
    from hudi import HudiReadOptions, HudiTableBuilder

    opts = HudiReadOptions() if as_of is None else HudiReadOptions().with_as_of_timestamp(as_of)
    return sum(b.num_rows for b in HudiTableBuilder.from_base_uri(path).build().read(opts))


def show_timeline(story: Story) -> None:
    """The whole timeline; instants new (or in a new state) since the last print are marked."""
    table = Table.open(story.path)
    timeline = table.timeline()
    rows = []
    for i in timeline.instants:
        row = describe_instant(table, timeline, i)
        row["new"] = "" if (i.timestamp, i.state.value) in story.shown else "*"
        rows.append(row)
    story.shown = {(i.timestamp, i.state.value) for i in timeline.instants}
    say(f"timeline ({len(rows)} instants, * = new since the last look):")
    print_table(rows, TIMELINE_COLUMNS)


def show_slices(story: Story, full: bool = False) -> None:
    slices = Table.open(story.path).latest_file_slices()
    say(f"latest file slices: {len(slices)}, holding {sum(len(s.log_files) for s in slices)} log files")
    if full:
        print_table([s.describe() | {"log_files": len(s.log_files)} for s in slices],
                    ["partition", "file_id", "base_instant", "base_file", "log_files"])


def check_rows(story: Story, as_of: str | None = None, expected: int | None = None) -> int:
    """Count the rows with tablesvc (Spark) and with hudi-rs; both must equal the expected count."""
    expected = story.expected if expected is None else expected
    table = Table.open(story.path)
    ours = table.read(as_of=as_of, spark=story.spark).count()
    theirs = hudi_rs_count(story.path, as_of)
    ok = ours == theirs == expected
    say(f"rows{' as of ' + as_of if as_of else ''}: tablesvc {ours}, hudi-rs {theirs}, expected {expected}: "
        + ("OK" if ok else "MISMATCH"))
    if not ok:
        raise StoryFailed(f"{story.path}{' as of ' + as_of if as_of else ''}: tablesvc reads {ours} rows, "
                          f"hudi-rs {theirs}, expected {expected}")
    return ours


def show_services(results, indent: str = "  ") -> None:
    """One line per service result: what ran (or why nothing did), without the metrics."""
    for r in results:
        line = f"{indent}{r.action}: {r.status.value.replace('_', ' ')}"
        if r.instant:
            line += f" ({r.instant})"
        if r.reason:
            line += f": {r.reason}"
        say(line)


def require(results, action: str, status, what: str):
    """The result of ``action`` with ``status``; StoryFailed when the service did not do it."""
    for r in results:
        if r.action.replace("_", "") == action.replace("_", "") and r.status is status:
            return r
    raise StoryFailed(f"{what}: expected {action} {status.value}, got "
                      + (", ".join(f"{r.action} {r.status.value} ({r.reason})" for r in results) or "nothing"))


def write(story: Story, operation: str, df, conf: dict):
    """Write ``df`` with the services ``conf`` sets; print the result and each inline service."""
    started = time.monotonic()
    result = story.table.write(df, operation, config=build_config(conf=conf))
    if result is None:
        raise StoryFailed(f"{operation}: the batch was empty")
    say(f"{operation:>6}: instant {result.instant}, {result.records_written} records "
        f"({result.inserts} inserts, {result.updates} updates, {result.deletes} deletes) in "
        f"{result.files_written} files, {time.monotonic() - started:.1f}s")
    show_services(result.services, indent="        inline ")
    return result
