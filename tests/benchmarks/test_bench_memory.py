"""Peak memory of reading and compacting one file group larger than a memory budget.

Issue #6's target: reading or compacting a file group stays within a configured memory budget
even when the file group is larger than the budget (stream by row group / log block).  tablesvc
has no such setting yet; the budget here is ``BUDGET_MIB`` = 256 MiB of resident memory added by
the operation, and at scale 1 the file group is larger than that (about 250 MiB of Parquet base
file plus 30 MiB of log files; below scale ~0.95 it is smaller than the budget: met is then left
empty and the case only shows the ratios).

The table (version 8) has one file group: a base file of ``bench.rows(5_500_000)`` rows (Parquet,
the writer's 1M-row row groups), then 3 delta commits that each update 1% of its rows (Avro log
blocks).  It is built outside the timings with ``write_file_group``.

Every measurement runs in a fresh child process, so its peak belongs to that one operation: the
child imports everything and opens the table, notes its resident memory (``idle``), runs the
operation once, and reports ``VmHWM`` (the peak RSS of its process image; ``ru_maxrss`` would
include the parent's RSS at fork).  Reported: peak RSS, peak minus idle (what the operation
added), peak / base file size.  met = (peak - idle) <= budget.

* read: ``iter_file_slice`` over the slice, batches consumed and dropped (what a Spark read task
  does: the log blocks are folded first, then the base file is merged a batch at a time);
* compact: ``compact_file_group`` of the slice (what a compaction task does: the merged batches go
  into the new base file a row group at a time);
* baselines, same child harness: pyarrow reading the base file row group by row group
  (``iter_batches``, no pre-buffering), and rewriting it batch by batch with a ``ParquetWriter``.
  They merge no log records: they show what streaming by row group costs, the floor a streaming
  merge would approach.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tablesvc.api import Table, TableSpec


def _harness():
    """The benchmark harness module (tests/benchmarks/bench_harness.py)."""
    import bench_harness

    return bench_harness


Measurement = _harness().Measurement

pytestmark = [pytest.mark.benchmark]

REPO = Path(__file__).resolve().parents[2]
BUDGET_MIB = 256
UPDATE_COMMITS = 3
UPDATE_FRACTION = 0.01
def _rows(ids: np.ndarray, version: int, rng: np.random.Generator) -> pa.Table:
    """Rows for record ids ``ids`` (vectorised: millions of rows in seconds)."""
    n = len(ids)
    ids_a = pa.array(ids, pa.int64())
    return pa.table({
        "uuid": pc.binary_join_element_wise("trip", pc.cast(ids_a, pa.string()), "-"),
        "ts": pa.array(1_700_000_000_000 + ids * 7 + version, pa.int64()),
        "part": pa.array(np.full(n, "p0", dtype=object), pa.string()),
        "rider": pc.binary_join_element_wise("rider", pc.cast(pc.bit_wise_and(ids_a, 8191), pa.string()), "-"),
        "fare": pa.array(np.round(rng.uniform(5, 90, n), 2), pa.float64()),
        "distance_km": pa.array(rng.uniform(0.5, 40, n), pa.float64()),
        "begin_lat": pa.array(rng.uniform(-90, 90, n), pa.float64()),
        "begin_lon": pa.array(rng.uniform(-180, 180, n), pa.float64()),
    })


def _commit(table: Table, batch: pa.Table, operation: str, stage: int) -> None:
    from table_builders import write_without_spark

    write_without_spark(table, batch, operation, stage=stage)


def build_table(path: Path, rows: int) -> Table:
    table = Table.create(str(path), TableSpec("mem_bench", ("uuid",), "ts", ("part",), table_version=8,
                                              num_buckets=1))
    rng = np.random.default_rng(6)
    _commit(table, _rows(np.arange(rows), 0, rng), "insert", 1)
    for c in range(UPDATE_COMMITS):
        ids = np.sort(rng.choice(rows, max(1, int(rows * UPDATE_FRACTION)), replace=False))
        _commit(table, _rows(ids, c + 1, rng), "upsert", c + 2)
    return Table.open(table.base_path)


# -- one operation per child process -----------------------------------------------------------------
_CHILD = r"""
import gc, json, sys, time
import pyarrow as pa
import pyarrow.parquet as pq
from tablesvc.merge import ReadContext, SliceSpec, iter_file_slice
from tablesvc.services.compaction import CompactionTask, compact_file_group
from tablesvc.api import Table

op, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
table = Table.open(path)
timeline = table.timeline()
(s,) = table.latest_file_slices()
spec = SliceSpec.from_file_slice(s)

def status_mb(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key + ":")) / 1024

def read():
    ctx = ReadContext.for_table(table, timeline)
    return sum(b.num_rows for b in iter_file_slice(table.storage, spec, ctx))

def read_base_only():
    ctx = ReadContext.for_table(table, timeline)
    return sum(b.num_rows for b in iter_file_slice(table.storage, SliceSpec(s.partition, s.file_id, spec.base_file),
                                                   ctx))

def compact():
    instant = table.instant_times.next(after=timeline.max_time())
    ctx = ReadContext.for_table(table, timeline, as_of=instant)
    task = CompactionTask(instant=instant, partition=s.partition, file_id=s.file_id, base_instant=s.base_instant,
                          base_file=s.base_file.file_name, log_files=tuple(lf.file_name for lf in s.log_files),
                          log_bytes=sum(lf.size for lf in s.log_files), schema_json=table.schema(timeline),
                          table_version=table.config.version)
    return compact_file_group(table.storage, ctx, task, "0-0-0").num_writes

def stream_read():
    pf = pq.ParquetFile(spec.base_file, pre_buffer=False, buffer_size=1 << 20)
    return sum(b.num_rows for b in pf.iter_batches(batch_size=65536))

def stream_rewrite():
    pf = pq.ParquetFile(spec.base_file, pre_buffer=False, buffer_size=1 << 20)
    n = 0
    with pq.ParquetWriter(out, pf.schema_arrow, compression="snappy") as w:
        for b in pf.iter_batches(batch_size=65536):
            w.write_batch(b)
            n += b.num_rows
    return n

fn = {"read": read, "read_base_only": read_base_only, "compact": compact, "stream_read": stream_read,
      "stream_rewrite": stream_rewrite}[op]
gc.collect()
idle = status_mb("VmRSS")
started = time.perf_counter()
rows = fn()
seconds = time.perf_counter() - started
# VmHWM: the peak RSS of this process image (ru_maxrss would carry the parent's RSS at fork over exec)
print(json.dumps({"seconds": seconds, "rows": rows, "idle_mb": idle, "peak_mb": status_mb("VmHWM")}))
"""


def run_child(op: str, table: Table, scratch: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, op, table.base_path, str(scratch / f"{op}.parquet")],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["added_mb"] = out["peak_mb"] - out["idle_mb"]
    return out


@pytest.fixture(scope="module")
def big_group(bench, tmp_path_factory):
    root = tmp_path_factory.mktemp("memory")
    table = build_table(root / "t", bench.rows(5_500_000, minimum=20_000))
    (s,) = table.latest_file_slices()
    return table, s, root


def _m(r: dict) -> Measurement:
    return Measurement(r["seconds"], round(r["peak_mb"], 1))


def _record(bench, case: str, s, ours: dict, theirs: dict, baseline: str, how: str, **extra) -> None:
    base_mb = s.base_file.size / 2**20
    log_mb = sum(lf.size for lf in s.log_files) / 2**20
    larger = base_mb + log_mb > BUDGET_MIB
    ratio = round(ours["peak_mb"] / base_mb, 2)
    bench.record(
        case, rows=ours["rows"], bytes=s.base_file.size + sum(lf.size for lf in s.log_files), ours=_m(ours),
        baseline=baseline, theirs=_m(theirs), target=f"added RSS <= {BUDGET_MIB} MiB budget",
        met=(ours["added_mb"] <= BUDGET_MIB) if larger else None,  # the target is about larger file groups
        notes=(f"one file group: base file {base_mb:.0f} MiB, {len(s.log_files)} log files {log_mb:.1f} MiB "
               f"({'larger' if larger else 'SMALLER'} than the {BUDGET_MIB} MiB budget); {how}. "
               f"Peak RSS {ours['peak_mb']:.0f} MiB = {ratio}x the base file; the operation added "
               f"{ours['added_mb']:.0f} MiB over the idle child ({ours['added_mb'] / base_mb:.1f}x the base file); "
               f"the streaming baseline added {theirs['added_mb']:.0f} MiB"),
        base_file_mib=round(base_mb, 1), log_mib=round(log_mb, 2), budget_mib=BUDGET_MIB,
        file_group_larger_than_budget=larger, idle_mib=round(ours["idle_mb"], 1), added_mib=round(ours["added_mb"], 1),
        peak_over_base_file=ratio, added_over_base_file=round(ours["added_mb"] / base_mb, 2),
        baseline_added_mib=round(theirs["added_mb"], 1),
        baseline_peak_over_base_file=round(theirs["peak_mb"] / base_mb, 2), **extra)


def test_read_one_large_file_group(bench, big_group):
    table, s, root = big_group
    ours = run_child("read", table, root)
    theirs = run_child("stream_read", table, root)
    base_only = run_child("read_base_only", table, root)
    _record(bench, "memory: read one file group (iter_file_slice)", s, ours, theirs,
            "pyarrow iter_batches of the base file (no merge)",
            "iter_file_slice consumed batch by batch, as a Spark read task does (the same call on the base file "
            f"alone, no log files, streams by row group: {base_only['added_mb']:.0f} MiB added)",
            base_only_peak_mib=round(base_only["peak_mb"], 1), base_only_added_mib=round(base_only["added_mb"], 1),
            base_only_s=round(base_only["seconds"], 2))


def test_compact_one_large_file_group(bench, big_group):
    table, s, root = big_group
    ours = run_child("compact", table, root)
    theirs = run_child("stream_rewrite", table, root)
    _record(bench, "memory: compact one file group (compact_file_group)", s, ours, theirs,
            "pyarrow iter_batches -> ParquetWriter rewrite of the base file (no merge)",
            "compact_file_group writing the new base file, as a compaction task does")
