"""Step 6 of the demo's story: a ``tablesvc write`` killed halfway, then ``tablesvc rollback``.

The write runs as a subprocess in its own process group, with a short heartbeat (a beat every
second, judged dead after 10 missed beats: 10 s after its last beat instead of 2 minutes).
Once its first data file is on storage, the process and everything below it (Spark's JVM and
Python workers) get SIGKILL, as in a machine crash.  ``tablesvc rollback`` right away finds the
heartbeat still fresh: it leaves the instant alone, names it and exits 3 (retry later).  Readers
still see the previous rows.  ``tablesvc rollback --wait`` then waits until the heartbeat
expires and rolls the write back: it deletes the files the write left (partial temporary copies
included) and its pending instant.  Both rollbacks get the writer's heartbeat setting, so they
agree on when it is dead.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import tablesvc
from tablesvc.cli.output import say
from tablesvc.demo.process_tree import kill_tree
from tablesvc.demo.story_support import CITIES, Story, StoryFailed, check_rows, show_slices, show_timeline
from tablesvc.api import Table

INTERVAL_MS, MISSES = 1000, 10
HEARTBEAT = ["--conf", f"hoodie.client.heartbeat.interval_in_ms={INTERVAL_MS}",
             "--conf", f"hoodie.client.heartbeat.tolerable.misses={MISSES}"]
TIMEOUT_S = 180.0


def killed_write_and_rollback(story: Story, killed_rows: int) -> None:
    batch = write_batch(story, killed_rows)
    before = data_files(story.path)
    instant = kill_write_halfway(story, batch, before)
    rollback_at_once(story, instant)
    show_timeline(story)
    say("readers still see the rows of the last completed commit:")
    check_rows(story)
    rollback(story, "--wait", "--timeout", str(int(TIMEOUT_S)))
    table = Table.open(story.path)
    timeline = table.timeline()
    if timeline.pending() or timeline.get(instant) is not None:
        raise StoryFailed(f"after the rollback: pending {[i.timestamp for i in timeline.pending()]}, "
                          f"instant {instant} {'still on' if timeline.get(instant) else 'gone from'} the timeline")
    left = data_files(story.path) - before
    if left:
        raise StoryFailed(f"after the rollback, files of the killed write remain: {sorted(left)}")
    say(f"instant {instant} and its files are gone; nothing is pending")
    show_timeline(story)
    show_slices(story)
    check_rows(story)


def write_batch(story: Story, count: int) -> Path:
    """A Parquet file of ``count`` trips (updates of the first keys, newer ordering values)."""
    ids = range(count)
    batch = pa.table({"uuid": [f"trip-{i:07d}" for i in ids], "ts": pa.array([5_000_000 + i % 1000 for i in ids],
                                                                            pa.int64()),
                      "rider": [f"rider-{i % 997:03d}" for i in ids], "fare": [1.0] * count,
                      "city": [CITIES[i % len(CITIES)] for i in ids]})
    path = Path(story.path).parent / "killed-write.parquet"
    pq.write_table(batch, path)
    return path


def data_files(base: str) -> set[str]:
    """Base and log files of the table (relative paths), outside .hoodie."""
    out = set()
    for root, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if not d.startswith(".hoodie")]
        out.update(os.path.relpath(os.path.join(root, f), base) for f in files
                   if f.endswith(".parquet") or ".log." in f)
    return out


def _tablesvc(*args: str) -> list[str]:
    return [sys.executable, "-m", "tablesvc", *args]


def _env(story: Story) -> dict[str, str]:
    package_root = str(Path(tablesvc.__file__).resolve().parents[1])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p),
                TABLESVC_SPARK_LOG=str(Path(story.path).parent / "spark-subprocess.log"))


def _wait(predicate, proc: subprocess.Popen, what: str, out_path: Path, every: float):
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        if proc.poll() is not None:
            raise StoryFailed(f"the write exited (code {proc.returncode}) before {what}: "
                              f"{out_path.read_text(errors='replace').strip()[-2000:]}")
        time.sleep(every)
    raise StoryFailed(f"timed out after {TIMEOUT_S:.0f}s waiting for {what}")


def kill_write_halfway(story: Story, batch: Path, before: set[str]) -> str:
    """Start the write, wait for its first data file, SIGKILL its process tree; the instant."""
    cmd = ["write", story.path, "--input", str(batch), *HEARTBEAT]
    say(f"$ tablesvc {shlex.join(cmd)}    ({pq.read_metadata(batch).num_rows} rows; own process group)")
    out_path = Path(story.path).parent / "killed-write.out"
    started = time.monotonic()
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(_tablesvc(*cmd), env=_env(story), start_new_session=True, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        instant = _wait(lambda: next((i.timestamp for i in Table.open(story.path).timeline().pending()), None),
                        proc, "its instant", out_path, every=0.2)      # Spark starts: seconds
        first = _wait(lambda: sorted(data_files(story.path) - before), proc, "its first data file", out_path,
                      every=0.05)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)   # the JVM and its Python workers too, as a machine crash would
        proc.wait()
    say(f"instant {instant} pending; first data file after {elapsed:.1f}s ({first[0]}): "
        f"SIGKILL to process {proc.pid} and everything below it")
    pending = [i.timestamp for i in Table.open(story.path).timeline().pending()]
    if pending != [instant]:
        raise StoryFailed(f"the write was not caught halfway (pending now: {pending}); "
                          "it finished before the kill — give it a larger batch")
    left = len(data_files(story.path) - before)
    say(f"the killed write left {left} data file{'s' if left != 1 else ''} behind")
    return instant


def rollback_at_once(story: Story, instant: str) -> None:
    """Right after the kill the writer's heartbeat is fresh: rollback cannot tell a crash from a
    slow writer, so it leaves the instant, names it and exits 3 (retry later)."""
    code, output = _rollback(story)
    if code == 3:
        if instant not in output:
            raise StoryFailed(f"tablesvc rollback exited 3 without naming instant {instant}")
        say(f"exit 3: instant {instant} is left pending until its heartbeat expires "
            f"({MISSES} x {INTERVAL_MS} ms after its last beat)")
    elif code == 0:   # a machine slow enough that the heartbeat had already expired
        say(f"exit 0: the heartbeat of {instant} had already expired, so it was rolled back at once")
    else:
        raise StoryFailed(f"tablesvc rollback exited with {code}")


def rollback(story: Story, *options: str) -> None:
    code, _ = _rollback(story, *options)
    if code != 0:
        raise StoryFailed(f"tablesvc rollback {' '.join(options)} exited with {code}")


def _rollback(story: Story, *options: str) -> tuple[int, str]:
    cmd = ["rollback", story.path, *options, *HEARTBEAT]
    say(f"$ tablesvc {shlex.join(cmd)}")
    proc = subprocess.run(_tablesvc(*cmd), env=_env(story), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=TIMEOUT_S + 60)   # one stream: progress lines stay in order
    for line in proc.stdout.splitlines():
        say(f"  {line}")
    return proc.returncode, proc.stdout
