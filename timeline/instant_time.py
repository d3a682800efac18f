"""Instant-time generation: ``yyyyMMddHHmmssSSS`` in the table's timezone, strictly increasing.

Hudi compares instants as strings, so every instant we write has 17 digits and is
greater than every instant (and, in layout 2, every completion time) already on
the timeline.  Two instants asked for within the same millisecond get consecutive
milliseconds rather than the same value.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone, tzinfo

from timeline.clock import Clock, SystemClock
from timeline.errors import InvalidInputError
from timeline.instant import validate_instant_time

FORMAT = "%Y%m%d%H%M%S"


def resolve_timezone(name: str | None) -> tzinfo:
    """``hoodie.table.timeline.timezone``: ``UTC`` or ``LOCAL`` (Java's default)."""
    value = (name or "UTC").strip().upper()
    if value == "UTC":
        return timezone.utc
    if value == "LOCAL":
        local = datetime.now().astimezone().tzinfo
        assert local is not None
        return local
    raise InvalidInputError(f"hoodie.table.timeline.timezone: expected UTC or LOCAL, got {name!r}")


def format_instant(epoch_ms: int, tz: tzinfo = timezone.utc) -> str:
    dt = datetime.fromtimestamp(epoch_ms / 1000, tz)
    return dt.strftime(FORMAT) + f"{epoch_ms % 1000:03d}"


def parse_instant(text: str, tz: tzinfo = timezone.utc) -> int:
    """Epoch milliseconds of an instant time (14 or 17 digits)."""
    validate_instant_time(text)
    dt = datetime.strptime(text[:14], FORMAT).replace(tzinfo=tz)
    millis = int(text[14:]) if len(text) == 17 else 0
    return int(dt.timestamp()) * 1000 + millis


def next_after(text: str, tz: tzinfo = timezone.utc) -> str:
    """The instant one millisecond after ``text``."""
    return format_instant(parse_instant(text, tz) + 1, tz)


class InstantTimeGenerator:
    """Hands out strictly increasing instant times for one table."""

    def __init__(self, clock: Clock | None = None, tz: tzinfo = timezone.utc):
        self._clock = clock or SystemClock()
        self._tz = tz
        self._last: str | None = None
        self._lock = threading.Lock()

    def next(self, after: str | None = None) -> str:
        """A new instant time greater than ``after`` and than any this generator gave before.

        ``after`` is the greatest time already on the timeline (the caller reads it,
        under the table lock where other writers may race).
        """
        with self._lock:
            candidate = format_instant(self._clock.now_ms(), self._tz)
            for floor in (after, self._last):
                if floor is not None and candidate <= floor:
                    candidate = next_after(floor, self._tz)
            self._last = candidate
            return candidate

    @property
    def timezone(self) -> tzinfo:
        return self._tz


def zero_time() -> str:
    return format_instant(0)


def add_millis(text: str, ms: int, tz: tzinfo = timezone.utc) -> str:
    return format_instant(parse_instant(text, tz) + ms, tz)


def hours_before(epoch_ms: int, hours: float, tz: tzinfo = timezone.utc) -> str:
    return format_instant(epoch_ms - int(timedelta(hours=hours).total_seconds() * 1000), tz)
