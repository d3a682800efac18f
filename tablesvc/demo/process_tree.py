"""Killing a process and everything below it, as a machine crash would (the demo's killed
write; the tests' real kill -9 runs).

``killpg`` is not enough: PySpark's worker daemon moves into a process group of its own, and
a Python worker that outlives its JVM goes on writing its task's files after the "crash".
"""

from __future__ import annotations

import os
import signal


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # field 4 is the parent pid; the command name (field 2) may hold spaces, so split after ')'
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        out.setdefault(ppid, []).append(int(entry))
    return out


def _descendants(pid: int) -> set[int]:
    children, found, stack = _children(), set(), [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it, as a machine crash would.

    ``killpg`` is not enough: PySpark's worker daemon moves into its own process group, and a
    Python worker that outlives its JVM goes on writing its task's files after the "crash".
    Everything is stopped first (so nothing forks in between), then killed.
    """
    below = _descendants(pid)
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        if sig == signal.SIGKILL:
            below |= _descendants(pid)      # anything forked before the stop landed
        for p in below:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
    os.kill(pid, signal.SIGKILL)            # last: ``pid`` may be this very process
