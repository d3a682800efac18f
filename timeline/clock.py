"""Injectable time: every component asks a ``Clock`` instead of the system."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep_ms(self, ms: int) -> None:
        time.sleep(ms / 1000)


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, now_ms: int = 1_700_000_000_000):
        self._now = now_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: int) -> None:
        with self._lock:
            self._now += ms

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = now_ms

    def sleep_ms(self, ms: int) -> None:
        """Waiting on a hand-moved clock moves it: nothing else would."""
        self.advance(ms)


def wait_past(clock: Clock, epoch_ms: int) -> None:
    """Return once ``clock`` reads later than ``epoch_ms`` (a clock without ``sleep_ms`` is
    waited on with the process's own sleep)."""
    sleep = getattr(clock, "sleep_ms", None) or (lambda ms: time.sleep(ms / 1000))
    while (left := epoch_ms - clock.now_ms()) >= 0:
        sleep(left + 1)
