"""A writer process for the runner tests: upserts deterministic batches into a table while
runners service it.  ``batch(i)`` is also the tests' model of what was written.

    python tests/runner_writer.py TABLE FIRST LAST PAUSE_SECONDS [KEY=VALUE ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pyarrow as pa

ROWS = 40_000          # keys of the table; batch 0 inserts them all
UPDATE_EVERY = 10      # batch i > 0 updates every 10th key from offset i % 10


def batch(i: int) -> pa.Table:
    keys = range(ROWS) if i == 0 else range(i % UPDATE_EVERY, ROWS, UPDATE_EVERY)
    return pa.table({"uuid": [f"k{k:06d}" for k in keys], "ts": pa.array([i] * len(keys), pa.int64()),
                     "fare": [float(k) + i / 100 for k in keys],
                     "city": [("amsterdam", "berlin", "chennai", "dakar")[k % 4] for k in keys]})


def model(last: int) -> dict[str, tuple[int, float]]:
    """uuid -> (ts, fare) after batches 0..last (each batch's ts is larger: the last update wins)."""
    out: dict[str, tuple[int, float]] = {}
    for i in range(last + 1):
        for r in batch(i).to_pylist():
            out[r["uuid"]] = (r["ts"], r["fare"])
    return out


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tablesvc.config import build_config
    from tablesvc.spark.session import get_spark
    from tablesvc.api import Table

    path, first, last, pause = argv[0], int(argv[1]), int(argv[2]), float(argv[3])
    conf = dict(kv.split("=", 1) for kv in argv[4:])
    spark = get_spark(quiet=True)
    for i in range(first, last + 1):
        table = Table.open(path)
        table.upsert(spark.createDataFrame(batch(i).to_pandas()), config=build_config(conf=conf))
        print(f"writer: batch {i} committed", flush=True)
        time.sleep(pause)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
