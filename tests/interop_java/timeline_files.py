"""The timeline of a table as its file names tell it, read without tablesvc's or Hudi's code.

Table version 6 keeps instants in ``.hoodie/`` (``T.action`` when completed); 8 and 9 in
``.hoodie/timeline/`` (``T_C.action``, ``C`` the completion time).  Pending instants are
``T.action.requested`` / ``T.action.inflight`` in both.  Hadoop's ``.crc`` side files are skipped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"^(?P<t>\d{17})(?:_(?P<c>\d{17}))?\.(?P<action>[a-z]+)(?:\.(?P<state>requested|inflight))?$")


@dataclass(frozen=True, order=True)
class InstantFile:
    requested: str
    action: str
    state: str                     # requested, inflight, completed
    completed: str | None          # the completion time (v8/v9), None for v6 and pending ones


def timeline_dir(path: str | Path) -> Path:
    tl = Path(path) / ".hoodie" / "timeline"
    return tl if tl.is_dir() else Path(path) / ".hoodie"


def instant_files(path: str | Path) -> list[InstantFile]:
    out = []
    for name in os.listdir(timeline_dir(path)):
        m = _NAME.match(name)
        if m:
            out.append(InstantFile(m["t"], m["action"], m["state"] or "completed", m["c"]))
    return sorted(out)


def completed(path: str | Path, *actions: str) -> list[InstantFile]:
    return [f for f in instant_files(path) if f.state == "completed" and (not actions or f.action in actions)]


def pending_times(path: str | Path) -> set[str]:
    """Instants with a requested or inflight file and no completed one."""
    files = instant_files(path)
    done = {f.requested for f in files if f.state == "completed"}
    return {f.requested for f in files if f.state != "completed"} - done


def as_of_after(write: InstantFile) -> str:
    """A time-travel bound that shows ``write`` and nothing after it, however the reader compares:
    its completion time on v8/v9 (no later write was requested before it), its instant on v6."""
    return write.completed or write.requested


def data_files_of(path: str | Path, instant: str) -> list[Path]:
    """Files outside ``.hoodie`` whose name carries ``instant`` (base files, v8/v9 log files)."""
    found = []
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        found += [Path(root) / f for f in files if instant in f and not f.endswith(".crc")]
    return sorted(found)
