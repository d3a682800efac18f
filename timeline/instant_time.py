"""Instant-time generation: ``yyyyMMddHHmmssSSS`` in the table's timezone, strictly increasing.

Hudi compares instants as strings, so every instant we write has 17 digits and is
greater than every instant (and, in layout 2, every completion time) already on
the timeline.  Two instants asked for within the same millisecond get consecutive
milliseconds rather than the same value.

``parse_as_of`` reads a time-travel bound in the forms Hudi's ``as.of.instant`` takes.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone, tzinfo

from timeline.clock import Clock, SystemClock
from timeline.errors import InvalidInputError, InvalidInstantError
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
    """Epoch milliseconds of an instant time (14 or 17 digits; a version-6 metadata table's
    20-digit time, ``<17 digits><suffix>``, is its first 17 digits' millisecond, so that a time
    made one millisecond after it sorts after it)."""
    validate_instant_time(text)
    dt = datetime.strptime(text[:14], FORMAT).replace(tzinfo=tz)
    millis = int(text[14:17]) if len(text) >= 17 else 0
    return int(dt.timestamp()) * 1000 + millis


# Hudi's special instants (HoodieTimeline.INIT_INSTANT_TS, METADATA_BOOTSTRAP_INSTANT_TS,
# FULL_BOOTSTRAP_INSTANT_TS): formatQueryInstant takes them although they are no dates.
_SPECIAL_INSTANTS = frozenset({"00000000000000", "00000000000001", "00000000000002"})
# What a second-granularity time means: Hudi appends the last millisecond (DEFAULT_MILLIS_EXT),
# "as it mimics the behavior with second granularity when performing <= comparisons".
_END_OF_SECOND = "999"
AS_OF_FORMS = "yyyy-MM-dd, yyyy-MM-dd HH:mm:ss[.SSS], yyyyMMddHHmmss or yyyyMMddHHmmssSSS"


def parse_as_of(text: str, what: str = "as-of") -> str:
    """The 17-digit instant time a time-travel bound stands for (Hudi's three bootstrap
    instants, ``0000000000000[0-2]``, stay as they are), read as Hudi reads
    ``as.of.instant`` (``HoodieSqlCommonUtils.formatQueryInstant``), in the table's timezone (no
    conversion: every form is a local time of the timeline):

    * ``yyyy-MM-dd``: the start of that day, ``yyyyMMdd000000000`` (Hudi formats the parsed date);
    * ``yyyy-MM-dd HH:mm:ss.SSS``: that millisecond;
    * ``yyyy-MM-dd HH:mm:ss`` and ``yyyyMMddHHmmss``: the end of that second, ``...999``
      (``HoodieInstantTimeGenerator.getInstantForDateString`` and ``fixInstantTimeCompatibility``
      append ``999``; Hudi's datasource passes a bare 14-digit string on and compares it as text,
      which would leave out the commits of that very second, so both forms mean the same here);
    * ``yyyyMMddHHmmssSSS``: itself.

    Anything else, or a date that does not exist, raises ``InvalidInstantError`` naming it (``what``
    says where it was given)."""
    def refuse(why: str = "") -> InvalidInstantError:
        return InvalidInstantError(f"{what} {text!r}{why}: expected one of {AS_OF_FORMS}")

    if text.isascii() and text.isdigit() and len(text) in (14, 17):
        if text in _SPECIAL_INSTANTS:
            return text
        try:
            datetime.strptime(text[:14], FORMAT)
        except ValueError:
            raise refuse(" is not a date and time") from None
        return text if len(text) == 17 else text + _END_OF_SECOND
    patterns = {10: "%Y-%m-%d", 19: "%Y-%m-%d %H:%M:%S", 23: "%Y-%m-%d %H:%M:%S.%f"}
    pattern = patterns.get(len(text))
    # strptime alone would take one-digit fields and surrounding spaces: the shape is checked first
    shape = "dddd-dd-dd dd:dd:dd.ddd"[:len(text)]
    if pattern is None or not text.isascii() or "".join("d" if c.isdigit() else c for c in text) != shape:
        raise refuse()
    try:
        datetime.strptime(text, pattern)   # a real date and time (no 30 February)
    except ValueError:
        raise refuse(" is not a date and time") from None
    digits = "".join(c for c in text if c.isdigit())
    if len(text) == 10:
        return digits + "000000000"
    return digits if len(text) == 23 else digits + _END_OF_SECOND


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

    def next(self, after: str | None = None, ahead_ms: int = 0) -> str:
        """A new instant time greater than ``after`` and than any this generator gave before.

        ``after`` is the greatest time already on the timeline (the caller reads it,
        under the table lock where other writers may race).  ``ahead_ms``: the time is at least
        that far ahead of the clock (a table-version-6 compaction's instant, which must exist on
        the timeline before any Hudi 0.x writer takes a later time from its clock).
        """
        if ahead_ms < 0:
            raise ValueError(f"ahead_ms must not be negative, got {ahead_ms}")
        with self._lock:
            candidate = format_instant(self._clock.now_ms() + ahead_ms, self._tz)
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
