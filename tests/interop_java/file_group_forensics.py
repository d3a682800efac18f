"""Evidence for a lost update in scenario 3 (a Java writer beside ``tablesvc run``), kept while the test
runs and printed only when the readers differ from the model.

* ``JavaBatchLog``: every Java batch with its instant (the delta commit that appeared on the timeline
  while the batch ran, or none) and its outcome: committed, refused by OCC, refused at its start.
* ``FileArchive``: after every batch, a hard link to every file of the table not linked yet.  A clean
  deletes the name in the table, not the archive's link, so the files a clean removed are still there
  to read; a log file appended to later is the same inode, so the archive sees the appends.
* ``explain_lost_keys``: for each key whose tablesvc read differs from the model, every file of its
  file group (slice, base or log, size) with the ``_hoodie_commit_time`` and value the key carries in
  each base file (a merge copies the rows it read with their old commit time, so this tells which
  base a merge read) and the instants of the log blocks holding the key; then every instant on the
  timeline that names that file group (plans, cleans, commits; for a v6 delta commit its write stats:
  the file written and ``prevCommit``, the base instant the write started from).

Diagnostics only: nothing here decides a test's outcome.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
from timeline_files import instant_files, timeline_dir

from tablesvc.logformat.blocks import BlockType
from tablesvc.logformat.reader import block_deletes, block_records, parse_log_bytes

_BASE = re.compile(r"^(?P<fid>[0-9a-f-]+(?:-\d+)?)_(?P<token>[^_]+)_(?P<instant>\d{17})\.parquet$")
_LOG = re.compile(r"^\.(?P<fid>[0-9a-f-]+(?:-\d+)?)_(?P<instant>\d{17})\.log\.(?P<version>\d+)(?:_(?P<token>.+))?$")


@dataclass(frozen=True)
class JavaBatch:
    n: int
    operation: str
    instant: str | None       # the delta commit requested while the batch ran; None if it created none
    outcome: str              # committed, refused (OCC), refused at start
    started: float
    seconds: float

    def render(self) -> str:
        return f"batch {self.n:3d} {self.operation:6s} {self.instant or '-':17s} {self.outcome} ({self.seconds:.1f} s)"


def java_delta_commit_times(path: str) -> set[str]:
    """Delta commit instants (any state) that are not tablesvc's log compactions (none before the table is)."""
    if not timeline_dir(path).is_dir():
        return set()
    files = instant_files(path)
    log_compactions = {f.requested for f in files if f.action == "logcompaction"}
    return {f.requested for f in files if f.action == "deltacommit"} - log_compactions


@dataclass
class JavaBatchLog:
    path: str
    batches: list[JavaBatch] = field(default_factory=list)
    _before: set[str] = field(default_factory=set)
    _t0: float = 0.0

    def start(self) -> None:
        self._before, self._t0 = java_delta_commit_times(self.path), time.time()

    def done(self, n: int, operation: str, outcome: str) -> JavaBatch:
        new = sorted(java_delta_commit_times(self.path) - self._before)
        batch = JavaBatch(n, operation, ",".join(new) or None, outcome, self._t0, time.time() - self._t0)
        self.batches.append(batch)
        return batch

    def render(self) -> str:
        return "\n".join(b.render() for b in self.batches)


@dataclass
class FileArchive:
    """Hard links to every file the table had at any ``catch_up`` (``.hoodie`` included)."""

    table: Path
    archive: Path

    def catch_up(self) -> None:
        for root, dirs, files in os.walk(self.table):
            rel = Path(root).relative_to(self.table)
            target = self.archive / rel
            target.mkdir(parents=True, exist_ok=True)
            for name in files:
                dest = target / name
                if not dest.exists():
                    try:
                        os.link(Path(root) / name, dest)
                    except FileNotFoundError:
                        pass                 # deleted between the walk and the link


def _key_in_base(path: Path, key: str) -> list[tuple[str, str]]:
    try:
        t = pq.read_table(path, columns=["_hoodie_record_key", "_hoodie_commit_time", "val"])
    except Exception as exc:                                       # noqa: BLE001 - a failed write's partial file
        return [("unreadable", str(exc)[:120])]
    return [(c, v) for k, c, v in zip(t.column(0).to_pylist(), t.column(1).to_pylist(), t.column(2).to_pylist())
            if k == key]


def _key_in_log(path: Path, key: str) -> list[str]:
    out = []
    try:
        contents = parse_log_bytes(path.read_bytes(), str(path))
    except Exception as exc:                                       # noqa: BLE001 - diagnostics only
        return [f"unreadable: {exc}"]
    for block in contents.blocks:
        kind = block.block_type.name
        if block.block_type in (BlockType.AVRO_DATA, BlockType.DELETE):
            try:
                hits = ([r.get("val") for r in block_records(block, str(path)) if r.get("_hoodie_record_key") == key]
                        if block.block_type == BlockType.AVRO_DATA else
                        ["deleted" for d in block_deletes(block, str(path)) if d.record_key == key])
            except Exception as exc:                               # noqa: BLE001
                hits = [f"undecodable: {exc}"]
            out.append(f"{kind} @{block.instant_time} ({'key: ' + repr(hits) if hits else 'key absent'})")
        else:
            out.append(f"{kind} @{block.instant_time} target={block.target_instant_time}")
    return out


def _file_group_of(part_dir: Path, key: str) -> set[str]:
    fids = set()
    for f in part_dir.iterdir():
        m = _BASE.match(f.name)
        if m and any(c != "unreadable" for c, _ in _key_in_base(f, key)):
            fids.add(m["fid"])
    return fids


def _instants_naming(root: Path, fid: str) -> list[str]:
    """Every timeline file that names ``fid``; a v6 delta commit's JSON gives its write stats for it."""
    tl = timeline_dir(root)
    out = []
    for f in sorted(tl.iterdir(), key=lambda p: p.name):
        if not f.is_file() or f.name.endswith(".crc") or not f.name[:1].isdigit():
            continue
        data = f.read_bytes()
        if fid.encode() not in data:
            continue
        detail = ""
        try:
            md = json.loads(data)
            stats = [s for ss in md.get("partitionToWriteStats", {}).values() for s in ss if s.get("fileId") == fid]
            detail = "; ".join(f"wrote {s.get('path')} prevCommit={s.get('prevCommit')} writes={s.get('numWrites')} "
                               f"updates={s.get('numUpdateWrites')} inserts={s.get('numInserts')}" for s in stats)
        except (ValueError, UnicodeDecodeError, AttributeError):
            detail = "(Avro: names the file group)"
        out.append(f"  {f.name}: {detail}")
    return out


def _timeline_lines(root: Path) -> list[str]:
    files = instant_files(root)
    by_time: dict[str, list[str]] = {}
    for f in files:
        by_time.setdefault(f.requested, []).append(f"{f.action}.{f.state}")
    return [f"  {t}: {', '.join(sorted(v))}" for t, v in sorted(by_time.items())]


def explain_lost_keys(table: Path, archive: Path | None, lost: list[tuple[str, str, tuple | None, tuple | None]],
                      batches: JavaBatchLog, out_root: Path = Path("/tmp/v6race")) -> str:
    """``lost``: (key, partition, the model's row, tablesvc's row).  Copies the table (and the archive)
    under ``out_root`` and returns the report (also written there as ``report.txt``)."""
    dest = out_root / time.strftime("%Y%m%d-%H%M%S")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(table, dest / "table", symlinks=True)
    where = [dest / "table"]
    if archive is not None and archive.is_dir():
        shutil.copytree(archive, dest / "every-file", symlinks=True)
        where.append(dest / "every-file")
    lines = [f"copied to {dest}", "Java batches:", batches.render()]
    for key, part, want, got in lost[:3]:
        lines.append(f"key {key} (partition {part}): model {want}, tablesvc read {got}")
        for root in where:
            part_dir = root / part
            fids = _file_group_of(part_dir, key)
            lines.append(f" in {root.name}: file groups holding {key} in a base file: {sorted(fids)}")
            for fid in sorted(fids):
                for f in sorted(part_dir.iterdir(), key=lambda p: p.name):
                    b, lg = _BASE.match(f.name), _LOG.match(f.name)
                    if b and b["fid"] == fid:
                        lines.append(f"  base slice {b['instant']} {f.name} {f.stat().st_size} B: "
                                     f"{key} as (commit time, val) {_key_in_base(f, key)}")
                    elif lg and lg["fid"] == fid:
                        lines.append(f"  log  slice {lg['instant']} {f.name} {f.stat().st_size} B: "
                                     + "; ".join(_key_in_log(f, key)))
                lines.append(f" timeline files naming {fid} ({root.name}):")
                lines += _instants_naming(root, fid)
    lines.append("timeline (table as left):")
    lines += _timeline_lines(dest / "table")
    report = "\n".join(lines)
    (dest / "report.txt").write_text(report)
    return report
