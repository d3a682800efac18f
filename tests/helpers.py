"""Small helpers shared by tests (no pytest fixtures here)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tablesvc.demo.process_tree import kill_tree  # noqa: F401 - re-exported for the tests
from timeline.instant import TimelineLayout

REPO = Path(__file__).resolve().parent.parent


def layout_of(table: Path) -> TimelineLayout:
    props = (table / ".hoodie" / "hoodie.properties").read_text()
    for line in props.splitlines():
        if line.startswith("hoodie.timeline.layout.version="):
            return TimelineLayout(int(line.split("=", 1)[1].strip()))
    return TimelineLayout.V1


def timeline_dirs(table: Path) -> list[tuple[Path, TimelineLayout]]:
    """The table's timeline folder and, if present, its metadata table's."""
    out = []
    for root in (table, table / ".hoodie" / "metadata"):
        if (root / ".hoodie" / "hoodie.properties").exists():
            layout = layout_of(root)
            out.append((root / layout.timeline_dir, layout))
    return out


def instant_file_names(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n[:1].isdigit() and (folder / n).is_file())


def wait_for(predicate, timeout: float = 180.0, what: str = "the process under test"):
    """Poll until ``predicate()`` returns something truthy; return it."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def data_files(base) -> set[str]:
    """Base and log files of a table (relative paths), outside .hoodie."""
    out = set()
    for root, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if not d.startswith(".hoodie")]
        for f in files:
            if f.endswith(".parquet") or ".log." in f:
                out.add(os.path.relpath(os.path.join(root, f), base))
    return out


class ListingCounter:
    """A LocalStorage that records every folder it lists (by name or in full)."""

    def __init__(self):
        from tablesvc.storage import LocalStorage

        self.inner = LocalStorage()
        self.listed: list[str] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def list_names(self, path):
        self.listed.append(path)
        return self.inner.list_names(path)

    def list_dir(self, path):
        self.listed.append(path)
        return self.inner.list_dir(path)


def dictionary_encoded_columns(parquet_bytes: bytes) -> set[str]:
    """The columns of a Parquet file (a base file's or a PARQUET_DATA block's content) whose first
    row group is dictionary-encoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    group = pq.ParquetFile(pa.BufferReader(parquet_bytes)).metadata.row_group(0)
    return {group.column(i).path_in_schema for i in range(group.num_columns)
            if "RLE_DICTIONARY" in group.column(i).encodings or "PLAIN_DICTIONARY" in group.column(i).encodings}


# Heartbeats that expire fast: a stopped executor is seen dead within 100 ms.
FAST_HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": "100", "hoodie.client.heartbeat.tolerable.misses": "1"}


def file_digests(base) -> dict[str, str]:
    """Every file under the table (timeline included) with a content hash; folders are not listed
    (``table_builders.tree`` lists them too)."""
    out = {}
    for root, _dirs, files in os.walk(base):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, base)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def files_named_with(table_path: Path, instant: str) -> list[Path]:
    """The data files (not the timeline's) whose names carry ``instant``."""
    return [p for p in table_path.rglob(f"*{instant}*") if ".hoodie" not in p.parts]


def tablesvc(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m tablesvc ARGS`` in a real process, this checkout first on its path."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "tablesvc", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The one line a failed command printed on stderr (and no traceback)."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]
