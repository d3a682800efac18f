"""The demo, on an embedded default with no arguments:

1. a sample MOR table (300,000 rows, five partitions) written through Spark with an
   insert, an upsert and a delete batch, then its timeline, file slices and a read,
   checked against hudi-rs;
2. every table in ``../shared/fixtures/hudi-rs/tables`` (tables Apache Hudi wrote):
   config, timeline and latest file slices.  Where that folder is absent, a small table
   built without Spark is shown instead.

``python -m tablesvc.demo PATH ...`` shows given tables only.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tablesvc.cli.cmd_timeline import describe_instant
from tablesvc.cli.output import print_table, say
from tablesvc.errors import TablesvcError
from tablesvc.table import Table

_DEFAULT_FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "hudi-rs"
FIXTURE_TABLES = Path(os.environ.get("TABLESVC_FIXTURES", _DEFAULT_FIXTURES)) / "tables"


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


def main(argv: list[str]) -> int:
    paths = argv
    if not paths:
        from tablesvc.demo.spark_story import run_story

        target = os.path.join(tempfile.mkdtemp(prefix="tablesvc-demo-"), "trips")
        say("== 1. A MOR table written and read through Spark")
        run_story(target)
        say("\n== 2. Tables Apache Hudi wrote, as tablesvc sees them")
        if FIXTURE_TABLES.is_dir():
            say(f"Tables written by Apache Hudi, from {FIXTURE_TABLES}")
            paths = [str(p) for p in sorted(FIXTURE_TABLES.iterdir()) if p.is_dir()]
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
