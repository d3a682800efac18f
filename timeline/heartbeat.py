"""Writer heartbeats: ``.hoodie/.heartbeat/<instant>`` says the instant's process is alive.

The writer rewrites the file every ``interval_ms``; the file holds the clock's time of
the last beat (Java Hudi reads the file's modification time; we write both, and read
the content so that an injected clock decides expiry in tests).  An instant whose
heartbeat is older than ``interval_ms * tolerable_misses`` — or missing — belongs to a
dead process and may be rolled back.
"""

from __future__ import annotations

import threading

from timeline.clock import Clock, SystemClock
from timeline.storage import Storage, join

HEARTBEAT_DIR = ".hoodie/.heartbeat"


def heartbeat_path(base_path: str, instant: str) -> str:
    return join(base_path, HEARTBEAT_DIR, instant)


def last_beat_ms(storage: Storage, base_path: str, instant: str) -> int | None:
    path = heartbeat_path(base_path, instant)
    try:
        text = storage.read_bytes(path).decode("ascii").strip()
        return int(text)
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError):
        return storage.stat(path).mtime_ms  # written by Java Hudi: an empty file, mtime is the beat


def judged_dead(beat_ms: int | None, now_ms: int, window_ms: int) -> bool:
    """The one expiry rule: no beat at all, or a last beat more than ``window_ms`` old
    (``interval_ms * tolerable_misses``)."""
    return beat_ms is None or now_ms - beat_ms > window_ms


def is_expired(storage: Storage, base_path: str, instant: str, clock: Clock, interval_ms: int,
               tolerable_misses: int) -> bool:
    return judged_dead(last_beat_ms(storage, base_path, instant), clock.now_ms(), interval_ms * tolerable_misses)


class Heartbeat:
    """Beats for one instant from a daemon thread until stopped."""

    def __init__(self, storage: Storage, base_path: str, instant: str, clock: Clock | None = None,
                 interval_ms: int = 60_000):
        self._storage = storage
        self._path = heartbeat_path(base_path, instant)
        self._clock = clock or SystemClock()
        self._interval_s = interval_ms / 1000
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        self._storage.write_replace(self._path, str(self._clock.now_ms()).encode("ascii"))

    def start(self) -> "Heartbeat":
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self._path}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.beat()
            except OSError:
                pass  # a missed beat is what expiry tolerates; the next one retries

    def stop(self, delete: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if delete:
            self._storage.delete(self._path)

    def __enter__(self) -> "Heartbeat":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
