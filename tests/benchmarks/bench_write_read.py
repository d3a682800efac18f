"""Write and read throughput of tablesvc next to its baselines: ``make bench-io``.

A thin wrapper over the pytest benchmark suite (``make bench``), so every case is defined once:
it runs the write cases (``test_bench_write.py``: insert vs Spark Parquet, 10% upsert vs delta-rs
MERGE and vs a Spark rewrite) and, where present, the read cases (``test_bench_read.py``), then
prints the Markdown report.  ``TABLESVC_BENCH_ROWS`` sets the base size (default 2,000,000; it
becomes ``TABLESVC_BENCH_SCALE`` = rows / 2,000,000); the report goes to ``bench-out/write_read/``
(``TABLESVC_BENCH_OUT`` to change it).  Extra arguments are passed to pytest.

    python tests/benchmarks/bench_write_read.py [-k upsert] [-x]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CASES = ("test_bench_write.py", "test_bench_read.py")


def main(argv: list[str]) -> int:
    env = dict(os.environ)
    if "TABLESVC_BENCH_SCALE" not in env:
        env["TABLESVC_BENCH_SCALE"] = repr(int(env.get("TABLESVC_BENCH_ROWS", "2000000")) / 2_000_000)
    out = Path(env.setdefault("TABLESVC_BENCH_OUT", str(REPO / "bench-out" / "write_read")))
    report = out / "report.md"
    report.unlink(missing_ok=True)   # never print a report an earlier run left
    files = [str(HERE / f) for f in CASES if (HERE / f).exists()]
    rc = subprocess.call([sys.executable, "-m", "pytest", "-m", "benchmark", "-q", *files, *argv], cwd=REPO, env=env)
    if report.exists():
        print(report.read_text())
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
