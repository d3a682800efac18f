"""Instant-time generation through an injectable clock."""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest

from timeline.clock import ManualClock
from timeline.errors import InvalidInputError
from timeline.instant_time import (InstantTimeGenerator, format_instant, next_after, parse_instant,
                                   resolve_timezone)


def test_format_and_parse_are_inverse():
    ms = 1_743_390_402_808  # 2025-03-31T03:06:42.808Z
    assert format_instant(ms) == "20250331030642808"
    assert parse_instant("20250331030642808") == ms
    assert parse_instant("20250331030642") == ms - 808


def test_generator_is_strictly_increasing_within_one_millisecond():
    clock = ManualClock(1_743_390_402_808)
    gen = InstantTimeGenerator(clock)
    times = [gen.next() for _ in range(5)]
    assert times == ["20250331030642808", "20250331030642809", "20250331030642810",
                     "20250331030642811", "20250331030642812"]


def test_generator_stays_after_the_latest_time_on_the_timeline():
    clock = ManualClock(1_743_390_402_808)
    gen = InstantTimeGenerator(clock)
    assert gen.next(after="20300101000000000") == "20300101000000001"
    clock.advance(10_000)
    assert gen.next() == "20300101000000002"  # never goes back even though the clock is earlier


def test_generator_uses_table_timezone():
    tz = timezone(timedelta(hours=2))
    gen = InstantTimeGenerator(ManualClock(1_743_390_402_808), tz)
    assert gen.next() == "20250331050642808"


def test_next_after_rolls_over_seconds():
    assert next_after("20251231235959999") == "20260101000000000"


def test_timezone_setting_is_validated():
    assert resolve_timezone("utc") is timezone.utc
    resolve_timezone("LOCAL")
    with pytest.raises(InvalidInputError, match="hoodie.table.timeline.timezone"):
        resolve_timezone("Mars/Olympus")


def test_a_suffixed_metadata_time_is_its_millisecond_and_the_next_time_sorts_after_it():
    # version-6 metadata tables suffix times (compaction 001, clean 002, rollback 006); a new
    # time generated after one must not fall back to the start of its second
    assert parse_instant("20250331030642808002") == parse_instant("20250331030642808")
    assert next_after("20250331030642808002") == "20250331030642809"
    assert next_after("20250331030642808002") > "20250331030642808002"
    clock = ManualClock(1_743_390_402_000)          # a clock behind the suffixed time
    assert InstantTimeGenerator(clock).next(after="20250331030642808006") > "20250331030642808006"
