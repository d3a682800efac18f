"""A large synthetic MOR timeline, made directly with the timeline's own pieces (no Spark, no data).

Shared by the planning and the clean/rollback benchmarks and by the file-system view's unit test
(``tests/unit/test_fsview.py``), so that none of them imports another test file.  Shape of
``build_timeline(root, n)`` (a table version 8 table):

* ``n // 100`` partitions (at least one) of 10 file groups; delta commit ``k < partitions`` inserts
  partition ``k`` (10 empty base files), every later one adds one log file to each of the 10 file
  groups of partition ``k % partitions``: about ``10 * n`` data files;
* compaction A, after delta commit ``n // 2``, compacted the first half of the file groups;
* compaction B, after delta commit ``n - 3``, compacted 1% of the file groups (2 delta commits since:
  Hudi's default trigger says "not due").

Every timeline file is real (requested, inflight, completed with Avro commit metadata, compaction
plans) and the data files are empty with real names: what reads these tables is metadata work.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from tablesvc.api import Table, TableSpec
from tablesvc.fsview.names import PARTITION_METAFILE, BaseFileName, LogFileName
from timeline.instant import Action, TimelineLayout
from timeline.instant_time import format_instant, resolve_timezone
from timeline.payloads import (
    CommitMetadata, CompactionOperation, CompactionPlan, WriteStat, decode_commit_metadata, encode_commit_metadata,
    encode_compaction_plan,
)

GROUPS_PER_PARTITION = 10
START_MS = 1_735_689_600_000            # 2025-01-01T00:00:00Z; instants one second apart
SCHEMA = json.dumps({"type": "record", "name": "bench_record", "namespace": "hoodie.bench", "fields": [
    {"name": "uuid", "type": ["string", "null"]}, {"name": "ts", "type": ["long", "null"]},
    {"name": "part", "type": ["string", "null"]}, {"name": "fare", "type": ["double", "null"]}]})
# Placeholders of the same byte length as the values they stand for (the Avro container is codec
# null, so equal-length substitution keeps it valid; the builder decodes a sample to check).
_T = "29991231235959001"
_P = "PPPPP"


@dataclass(frozen=True)
class Synthetic:
    table: Table
    delta_commits: int
    partitions: int
    file_groups: int
    data_files: int
    timeline_files: int
    timeline_bytes: int
    build_s: float

    @property
    def label(self) -> str:
        return f"{self.delta_commits:,} delta commits / {self.data_files:,} files"


def _partition(p: int) -> str:
    return f"part={p:05d}"


def _file_id(p: int | str, g: int) -> str:
    return f"{p if isinstance(p, str) else f'{p:05d}'}000-0000-4000-8000-{g:012d}-0"


def _touch(path: str) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _stat_template(base: bool) -> bytes:
    """Commit metadata of one write into the 10 file groups of partition ``_P`` at instant ``_T``."""
    partition = f"part={_P}"
    stats = []
    for g in range(GROUPS_PER_PARTITION):
        fid = _file_id(_P, g)
        if base:
            name = BaseFileName(fid, "0-1-0", _T).name
            stats.append(WriteStat(file_id=fid, path=f"{partition}/{name}", prev_commit="null",
                                   partition_path=partition, num_writes=0, num_inserts=0))
        else:
            name = LogFileName(fid, _T, 1, "0-1-0").name
            stats.append(WriteStat(file_id=fid, path=f"{partition}/{name}", prev_commit=_T, partition_path=partition,
                                   log_version=1, log_offset=0, base_file="", log_files=(name,), total_log_blocks=1))
    md = CommitMetadata({partition: tuple(stats)}, False, {"schema": SCHEMA}, "INSERT" if base else "UPSERT")
    return encode_commit_metadata(md, TimelineLayout.V2)


def build_timeline(root: Path, delta_commits: int) -> Synthetic:
    """A v8 table with ``delta_commits`` completed delta commits and two compactions (see module doc)."""
    started = time.perf_counter()
    table = Table.create(str(root), TableSpec("bench", ("uuid",), "ts", ("part",), table_version=8,
                                              num_buckets=GROUPS_PER_PARTITION))
    tl_dir = os.path.join(table.base_path, table.config.layout.timeline_dir)
    n_parts = max(1, delta_commits // 100)
    n_groups = n_parts * GROUPS_PER_PARTITION
    for p in range(n_parts):
        os.makedirs(os.path.join(table.base_path, _partition(p)))
        _write(os.path.join(table.base_path, _partition(p), PARTITION_METAFILE),
               "#partition metadata\ncommitTime=0\npartitionDepth=1\n".encode())
    insert_md, log_md = _stat_template(True), _stat_template(False)
    tz = resolve_timezone(table.config.timezone)
    slot = [0]

    def times() -> tuple[str, str]:
        ms = START_MS + slot[0] * 1000
        slot[0] += 1
        return format_instant(ms, tz), format_instant(ms + 500, tz)

    def compaction(groups: list[int]) -> None:
        t, c = times()
        ops, stats, listed = [], {}, {}
        for gi in groups:
            p, g = divmod(gi, GROUPS_PER_PARTITION)
            fid, part = _file_id(p, g), _partition(p)
            if part not in listed:
                listed[part] = sorted(os.listdir(os.path.join(table.base_path, part)))
            logs = [n for n in listed[part] if n.startswith(f".{fid}_")]
            ops.append(CompactionOperation(inserted[p], fid, part, BaseFileName(fid, "0-1-0", inserted[p]).name,
                                           tuple(logs), {"TOTAL_LOG_FILES": float(len(logs))}))
            name = BaseFileName(fid, "0-2-0", t).name
            _touch(os.path.join(table.base_path, part, name))
            stats.setdefault(part, []).append(WriteStat(file_id=fid, path=f"{part}/{name}", prev_commit="null",
                                                        partition_path=part))
        _write(os.path.join(tl_dir, f"{t}.compaction.requested"),
               encode_compaction_plan(CompactionPlan(operations=tuple(ops), version=2)))
        _touch(os.path.join(tl_dir, f"{t}.compaction.inflight"))
        md = CommitMetadata({p: tuple(v) for p, v in stats.items()}, True, {"schema": SCHEMA}, "COMPACT")
        _write(os.path.join(tl_dir, f"{t}_{c}.commit"), encode_commit_metadata(md, table.config.layout))

    data_files, inserted = 0, {}
    for k in range(delta_commits):
        t, c = times()
        p = k % n_parts
        part = _partition(p)
        folder = os.path.join(table.base_path, part)
        base = k < n_parts
        if base:
            inserted[p] = t
        for g in range(GROUPS_PER_PARTITION):
            fid = _file_id(p, g)
            _touch(os.path.join(folder, BaseFileName(fid, "0-1-0", t).name if base
                                else LogFileName(fid, t, 1, "0-1-0").name))
        data_files += GROUPS_PER_PARTITION
        _touch(os.path.join(tl_dir, f"{t}.deltacommit.requested"))
        _touch(os.path.join(tl_dir, f"{t}.deltacommit.inflight"))
        md = (insert_md if base else log_md).replace(_T.encode(), t.encode()).replace(_P.encode(), f"{p:05d}".encode())
        _write(os.path.join(tl_dir, f"{t}_{c}.deltacommit"), md)
        if k == delta_commits // 2:
            compaction(list(range(n_groups // 2)))
        if k == delta_commits - 3:
            compaction(list(range(n_groups - max(1, n_groups // 100), n_groups)))
    # check one substituted payload and the table's view of the timeline
    sample = decode_commit_metadata(md, table.config.layout, "sample")
    assert sample.partitions() == (part,) and len(tuple(sample.write_stats())) == GROUPS_PER_PARTITION
    timeline = table.timeline()
    assert len(timeline.completed(Action.DELTA_COMMIT)) == delta_commits
    assert len([i for i in timeline.completed(Action.COMMIT)]) == 2
    data_files += n_groups // 2 + max(1, n_groups // 100)
    tl_bytes = sum(e.stat().st_size for e in os.scandir(tl_dir) if e.is_file())
    return Synthetic(table, delta_commits, n_parts, n_groups, data_files, len(timeline.files), tl_bytes,
                     round(time.perf_counter() - started, 2))
