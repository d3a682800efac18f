"""Steps 3-5 of the demo's story: log compaction, compaction and clean, each run explicitly
(schedule, then run) as ``tablesvc logcompaction|compaction|clean`` would, then the timeline
and the row counts."""

from __future__ import annotations

from tablesvc.cli.output import say
from tablesvc.config import build_config
from tablesvc.demo.story_support import (
    Story, check_rows, require, show_services, show_slices, show_timeline, trips, write,
)
from tablesvc.services.result import Status
from tablesvc.api import Table

# Writes that leave every service to the explicit runs below.
NO_SERVICES = {"hoodie.compact.inline": "false", "hoodie.log.compaction.inline": "false",
               "hoodie.clean.automatic": "false"}
SERVICES = build_config(conf={"hoodie.log.compaction.blocks.threshold": "2", "hoodie.cleaner.commits.retained": "1"})


def log_compaction(story: Story) -> None:
    from tablesvc.services.log_compaction import run_log_compaction, schedule_log_compaction

    spark, rows = story.spark, story.rows
    say("two writes with services off leave two log blocks in every file slice:")
    write(story, "upsert", trips(spark, 0, rows // 50, 4_000_000), NO_SERVICES)
    write(story, "delete", trips(spark, rows // 4, rows // 200, 0).select("uuid", "city"), NO_SERVICES)
    story.expected -= rows // 200
    table = Table.open(story.path)
    scheduled = schedule_log_compaction(table, SERVICES)
    show_services([scheduled])
    require([scheduled], "log_compaction", Status.SCHEDULED, "log compaction schedule")
    ran = run_log_compaction(table, scheduled.instant, spark=spark, config=SERVICES)
    show_services(ran)
    require(ran, "log_compaction", Status.DONE, "log compaction run")
    show_timeline(story)
    show_slices(story)
    check_rows(story)


def compaction(story: Story) -> None:
    from tablesvc.services.compaction import run_compaction, schedule_compaction

    table = Table.open(story.path)
    scheduled = schedule_compaction(table, SERVICES, force=True)
    show_services([scheduled])
    require([scheduled], "compaction", Status.SCHEDULED, "compaction schedule")
    ran = run_compaction(table, scheduled.instant, spark=story.spark, config=SERVICES)
    show_services(ran)
    require(ran, "compaction", Status.DONE, "compaction run")
    show_timeline(story)
    show_slices(story)
    check_rows(story)


def clean(story: Story) -> None:
    from tablesvc.services.clean import run_clean

    say("keep the latest commit (hoodie.cleaner.commits.retained=1): the slices before the compaction go")
    ran = run_clean(Table.open(story.path), SERVICES)
    show_services(ran)
    require(ran, "clean", Status.DONE, "clean")
    show_timeline(story)
    show_slices(story)
    check_rows(story)
