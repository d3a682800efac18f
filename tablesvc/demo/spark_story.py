"""The demo's main story: a MOR table written through Spark, its table services, a crash.

Rows are generated inside Spark (``spark.range``), never on the driver.  Steps, each
followed by the timeline and the row count read by tablesvc and by hudi-rs (which must
agree with the count the story expects, or the demo fails):

1. writes with inline services: an insert of ``rows`` trips over five cities, an upsert
   of 10% (some with newer, some with older ordering values) and a delete batch; the
   delete leaves two log blocks per file slice, so an inline log compaction runs;
2. one more upsert: four delta commits, so an inline compaction runs, then the inline
   clean deletes the slices it replaced;
3. log compaction, scheduled and run explicitly (after two writes with services off);
4. a major compaction, scheduled and run explicitly;
5. a clean (keep the latest commit);
6. a ``tablesvc write`` killed halfway, and ``tablesvc rollback`` (see ``crash_story``).
"""

from __future__ import annotations

from tablesvc.cli.output import print_table, say
from tablesvc.demo.crash_story import killed_write_and_rollback
from tablesvc.demo.services_story import clean, compaction, log_compaction
from tablesvc.demo.story_support import (
    Story, check_rows, heading, hudi_rs_count, require, show_slices, show_timeline, step_times, trips, write,
)
from tablesvc.services.result import Status
from tablesvc.api import Table, TableSpec
from tablesvc.table.meta_fields import COMMIT_TIME

__all__ = ["run_story", "trips", "hudi_rs_count"]

# Services inline after each write (docs/services.md): a compaction every 4 delta commits,
# a log compaction of any slice holding 2 log blocks, a clean keeping the latest commit.
INLINE = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "4",
          "hoodie.log.compaction.inline": "true", "hoodie.log.compaction.blocks.threshold": "2",
          "hoodie.clean.automatic": "true", "hoodie.cleaner.commits.retained": "1"}


def run_story(path: str, rows: int = 300_000, table_version: int = 8, killed_rows: int = 100_000) -> Story:
    """Run steps 1-6 on a new table at ``path``; raises ``StoryFailed`` if an outcome is wrong."""
    from tablesvc.spark.session import get_spark

    if rows < 200:
        raise ValueError("the story needs at least 200 rows (its smallest batch is rows // 200)")
    spark = get_spark(quiet=True)
    table = Table.create(path, TableSpec("trips", ("uuid",), "ts", ("city",), table_version=table_version,
                                         num_buckets=2))
    story = Story(table, spark, rows)
    heading(story, "1. Writes through Spark, with inline services")
    say(f"created table trips (version {table_version}, 5 city partitions x 2 buckets) at {path}")
    say("inline services: " + ", ".join(f"{k}={v}" for k, v in INLINE.items()))
    writes_with_inline_services(story)
    heading(story, "2. One more write: inline compaction, then inline clean")
    write_that_compacts(story)
    heading(story, "3. Log compaction (schedule + run)")
    log_compaction(story)
    heading(story, "4. Compaction (schedule + run)")
    compaction(story)
    heading(story, "5. Clean")
    clean(story)
    heading(story, "6. A write killed halfway, and tablesvc rollback")
    killed_write_and_rollback(story, killed_rows)
    say(f"\nsteps took {step_times(story)}")
    return story


def writes_with_inline_services(story: Story) -> None:
    spark, rows = story.spark, story.rows
    write(story, "insert", trips(spark, 0, rows, 1_000_000), INLINE)
    write(story, "upsert", trips(spark, 0, rows // 10, 2_000_000, fare_scale=2.0)          # newer ts: applied
          .unionByName(trips(spark, rows // 10, rows // 20, 0))                         # older ts: ignored
          .unionByName(trips(spark, rows, rows // 50, 2_000_000)), INLINE)              # new keys
    deleted = write(story, "delete", trips(spark, rows // 2, rows // 100, 0).select("uuid", "city"), INLINE)
    require(deleted.services, "log_compaction", Status.DONE, "inline services after the delete")
    story.expected = rows + rows // 50 - rows // 100
    show_timeline(story)
    show_slices(story, full=True)
    say("read (first rows, by key):")
    df = Table.open(story.path).read(spark=spark)
    print_table([r.asDict() for r in df.orderBy("uuid").limit(5).collect()],
                ["uuid", "ts", "rider", "fare", "city", COMMIT_TIME])
    check_rows(story)
    first = Table.open(story.path).timeline().completed_writes()[0].timestamp
    check_rows(story, as_of=first, expected=rows)   # time travel, before the clean removes that slice


def write_that_compacts(story: Story) -> None:
    spark, rows = story.spark, story.rows
    result = write(story, "upsert", trips(spark, rows // 5, rows // 20, 3_000_000)           # updates
                   .unionByName(trips(spark, rows + rows // 50, rows // 100, 3_000_000)), INLINE)  # new keys
    for action in ("compaction", "clean"):
        require(result.services, action, Status.DONE, "inline services after the fourth write")
    story.expected += rows // 100
    show_timeline(story)
    show_slices(story)
    check_rows(story)
