"""The demo, on an embedded default with no arguments:

1-6. the table-services story on a sample MOR table (300,000 rows, five partitions) written
   through Spark: writes with inline services (log compaction, compaction, clean), an
   explicit log compaction, compaction and clean, and a write killed halfway then
   ``tablesvc rollback``; the timeline after each step, and row counts read by tablesvc
   and by hudi-rs, which must agree with the expected count (``spark_story``);
7. every table Apache Hudi wrote that the project carries (``tests/data/hudi/tables``,
   unzipped into a temporary folder): config, timeline and latest file slices.  Where that
   folder is absent (tablesvc installed without its source tree), a small table built
   without Spark is shown instead.

``python -m tablesvc.demo --rows N`` runs the story on N rows (at least 200), ``--no-story``
skips it;
``python -m tablesvc.demo PATH ...`` shows given tables only.  Exit 1 when the story's
outcome is wrong.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from tablesvc.cli.cmd_timeline import describe_instant
from tablesvc.cli.output import print_table, say
from tablesvc.demo.hudi_tables import CARRIED, unzip_tables
from tablesvc.errors import TablesvcError
from tablesvc.api import Table

FIXTURE_TABLES = CARRIED / "tables"


def show(path: str) -> None:
    table = Table.open(path)
    cfg = table.config
    say(f"\n=== {cfg.name}  ({path})")
    say(f"version {cfg.version} (timeline layout {cfg.layout.value}), {cfg.table_type.value}, "
        f"key {','.join(cfg.record_key_fields) or '-'}, ordering {cfg.ordering_field or '-'}, "
        f"partitions {','.join(cfg.partition_fields) or '(none)'}, merge {cfg.merge_mode.value}"
        + (", metadata table present (tablesvc lists storage)" if cfg.has_metadata_table else ""))
    timeline = table.timeline()
    say(f"timeline: {len(timeline.instants)} instants")
    if timeline.instants:
        print_table([describe_instant(table, timeline, i) for i in timeline.instants],
                    ["instant", "action", "state", "completion_time", "operation"])
    slices = table.latest_file_slices()
    say(f"latest file slices: {len(slices)}")
    if slices:
        rows = [s.describe() | {"log_files": len(s.log_files)} for s in slices]
        print_table(rows, ["partition", "file_id", "base_instant", "base_file", "log_files"])


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tablesvc.demo", description="The tablesvc demo.")
    parser.add_argument("--rows", type=int, default=300_000, help="rows of the story's first insert (>= 200)")
    parser.add_argument("--no-story", action="store_true", help="skip the Spark story (steps 1-6): tables only")
    parser.add_argument("paths", nargs="*", help="show these tables only (no story)")
    args = parser.parse_args(argv)
    if args.rows < 200:
        parser.error("--rows: at least 200")
    return args


def story(rows: int) -> int:
    from tablesvc.demo.spark_story import run_story
    from tablesvc.demo.story_support import StoryFailed

    target = os.path.join(tempfile.mkdtemp(prefix="tablesvc-demo-"), "trips")
    started = time.monotonic()
    try:
        run_story(target, rows=rows)
    except StoryFailed as e:
        sys.stdout.flush()
        print(f"\ntablesvc demo: FAILED: {e}", file=sys.stderr)
        return 1
    say(f"\nthe story took {time.monotonic() - started:.0f}s; its table is at {target}")
    return 0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    paths = args.paths
    if not paths:
        if not args.no_story:
            code = story(args.rows)
            if code:
                return code
        say("\n== 7. Tables Apache Hudi wrote, as tablesvc sees them")
        if FIXTURE_TABLES.is_dir():
            target = Path(tempfile.mkdtemp(prefix="tablesvc-demo-hudi-"))
            say(f"Tables written by Apache Hudi, from {FIXTURE_TABLES} (unzipped into {target})")
            paths = [str(p) for p in unzip_tables(FIXTURE_TABLES, target)]
        else:
            from tablesvc.demo.sample_table import build_sample_table

            target = os.path.join(tempfile.mkdtemp(prefix="tablesvc-demo-"), "trips")
            say(f"No fixture tables found at {FIXTURE_TABLES}; building a sample table at {target}")
            build_sample_table(target)
            paths = [target]
    try:
        for p in paths:
            show(p)
    except TablesvcError as e:
        print(f"tablesvc demo: error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
