"""The soak's writer process (tests/soak.py): seeded batches of upserts, inserts and deletes,
and the model of what the table holds after them.

    python tests/soak_writer.py TABLE --seed S [--pause SECONDS] [--conf KEY=VALUE ...]

The writer resumes after the last batch the table committed (its completed delta commits:
one batch is one commit), so after a kill -9 it is simply started again; the killed batch is
written again under a new instant.  SIGTERM finishes the batch in progress, then exits 0.
Each batch picks how the writer's inline services are set (``MODES``), so some compactions,
log compactions and cleans run inline in the writer and others in the runners.

Batches (``Workload``), deterministic from the seed:

* batch 0 inserts ``INITIAL_KEYS`` keys;
* an upsert updates live keys, inserts new keys, re-inserts deleted ones, sends *stale* rows
  (``ts`` lower than the stored one: they must lose, event-time merge) and in-batch duplicates
  (two rows of one key with different ``ts``: the greater wins);
* an insert writes new keys only; a delete removes live keys (a natural delete).

Every batch's fresh ``ts`` values lie in its own range ``[(i+1)·TS_STEP, (i+2)·TS_STEP)``, above
every earlier batch, so a re-inserted key always carries a higher ``ts`` than any earlier row of
it (docs/merge-semantics.md: a lower re-insert would bring the old base row back).  The row's
``batch`` column names the batch that wrote it.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

INITIAL_KEYS = 20_000
TS_STEP = 1_000_000
CITIES = ("amsterdam", "berlin", "chennai", "dakar")
OPERATIONS = (("upsert", 6), ("insert", 2), ("delete", 2))

# The writer's inline services per batch (with weights): "async" leaves everything to the
# runners.  Inline triggers fire earlier than the table's (which the runners use: tests/soak.py),
# or the runners, polling every half second, would always plan first.
_OFF = {"hoodie.compact.inline": "false", "hoodie.compact.schedule.inline": "false",
        "hoodie.log.compaction.inline": "false", "hoodie.clean.automatic": "false"}
_EARLIER = {"hoodie.compact.inline.max.delta.commits": "6", "hoodie.log.compaction.blocks.threshold": "2"}
MODES = {
    "async": (_OFF, 5),
    "inline": (_OFF | _EARLIER | {"hoodie.compact.inline": "true", "hoodie.log.compaction.inline": "true",
                                  "hoodie.clean.automatic": "true"}, 2),
    "schedule": (_OFF | _EARLIER | {"hoodie.compact.schedule.inline": "true", "hoodie.clean.automatic": "true"}, 2),
}

Row = tuple[int, float, str, int]   # (ts, fare, city, batch): what a key holds


def city_of(key: str) -> str:
    """A key's partition never changes (a key moving partitions is another story)."""
    return CITIES[int(key[1:]) % len(CITIES)]


@dataclass(frozen=True)
class Batch:
    index: int
    operation: str          # upsert | insert | delete
    mode: str               # key of MODES
    rows: pa.Table          # uuid, ts, fare, city, batch (delete: uuid, city)


class Workload:
    """The seeded batches, generated in order, and the model of the table after them."""

    def __init__(self, seed: int):
        self.seed = seed
        self.done = 0                          # batches generated (and applied to the model)
        self.rows: dict[str, Row] = {}         # live keys
        self._live: list[str] = []             # live keys, for sampling (swap-remove keeps it O(1))
        self._at: dict[str, int] = {}
        self._deleted: list[str] = []
        self._next_key = 0

    # -- the model ------------------------------------------------------------------------------
    def advance(self, n: int) -> "Workload":
        while self.done < n:
            self.next_batch()
        return self

    def next_batch(self) -> Batch:
        i = self.done
        rng = random.Random(f"{self.seed}:{i}")
        if i == 0:
            operation, mode = "insert", "async"
        else:
            operation = rng.choices([o for o, _ in OPERATIONS], [w for _, w in OPERATIONS])[0]
            mode = rng.choices(list(MODES), [w for _, w in MODES.values()])[0]
        rows = getattr(self, f"_{operation}")(rng, i)
        self.done += 1
        if operation == "delete":
            return Batch(i, operation, mode, pa.table({"uuid": [r[0] for r in rows], "city": [r[1] for r in rows]}))
        return Batch(i, operation, mode, pa.table({
            "uuid": [r[0] for r in rows], "ts": pa.array([r[1] for r in rows], pa.int64()),
            "fare": pa.array([r[2] for r in rows], pa.float64()), "city": [city_of(r[0]) for r in rows],
            "batch": pa.array([i] * len(rows), pa.int64())}))

    def _fresh_ts(self, rng: random.Random, i: int) -> int:
        return (i + 1) * TS_STEP + rng.randrange(TS_STEP)

    def _new_keys(self, n: int) -> list[str]:
        keys = [f"k{self._next_key + j:07d}" for j in range(n)]
        self._next_key += n
        return keys

    def _insert(self, rng: random.Random, i: int) -> list[tuple]:
        n = INITIAL_KEYS if i == 0 else rng.randint(200, 1000)
        rows = [(k, self._fresh_ts(rng, i), round(rng.uniform(1, 100), 2)) for k in self._new_keys(n)]
        self._apply(rows, i)
        return rows

    def _upsert(self, rng: random.Random, i: int) -> list[tuple]:
        touched = rng.sample(self._live, min(len(self._live), rng.randint(1000, 3000)))
        n_stale = rng.randint(50, 200)
        stale, updated = touched[:n_stale], touched[n_stale:]
        reinserted = rng.sample(self._deleted, min(len(self._deleted), rng.randint(0, 50)))
        rows = [(k, self._fresh_ts(rng, i), round(rng.uniform(1, 100), 2))
                for k in updated + reinserted + self._new_keys(rng.randint(0, 300))]
        # stale rows: lower than the stored ts (the stored one must stay)
        rows += [(k, self.rows[k][0] - rng.randint(1, TS_STEP // 2), round(rng.uniform(1, 100), 2)) for k in stale]
        # in-batch duplicates with another ts, before or after the first row (the greater ts wins)
        dups = [(k, self._fresh_ts(rng, i), round(rng.uniform(1, 100), 2))
                for k, ts, _ in rng.sample(rows, min(len(rows), rng.randint(20, 100)))]
        rows += [d for d in dups if d[1] != next(r[1] for r in rows if r[0] == d[0])]
        rng.shuffle(rows)
        self._apply(rows, i)
        return rows

    def _delete(self, rng: random.Random, i: int) -> list[tuple]:
        keys = rng.sample(self._live, min(len(self._live) - 1, rng.randint(100, 500)))
        for k in keys:
            self._remove_live(k)
            del self.rows[k]
            self._deleted.append(k)
        return [(k, city_of(k)) for k in keys]

    def _apply(self, rows: list[tuple], i: int) -> None:
        """Event-time merge: per key the greatest ts of the batch, then it wins when >= the stored ts."""
        best: dict[str, tuple[int, float]] = {}
        for k, ts, fare in rows:
            if k not in best or ts >= best[k][0]:
                best[k] = (ts, fare)
        for k, (ts, fare) in best.items():
            stored = self.rows.get(k)
            if stored is not None and ts < stored[0]:
                continue
            if stored is None:
                self._add_live(k)
            self.rows[k] = (ts, fare, city_of(k), i)

    def _add_live(self, k: str) -> None:
        if k in self._at:
            return
        self._at[k] = len(self._live)
        self._live.append(k)
        if k in self._deleted:   # a re-insert
            self._deleted.remove(k)

    def _remove_live(self, k: str) -> None:
        at, last = self._at.pop(k), self._live.pop()
        if last != k:
            self._live[at] = last
            self._at[last] = at


def model(seed: int, batches: int) -> dict[str, Row]:
    """uuid -> (ts, fare, city, batch) after the first ``batches`` batches of ``seed``."""
    return dict(Workload(seed).advance(batches).rows)


def committed_batches(table) -> int:
    """Batches the table committed: its completed delta commits that were writes (not log
    compactions, which complete as delta commits too).  Failed writes are never completed."""
    from timeline.instant import Action

    timeline = table.timeline()
    return sum(1 for i in timeline.completed(Action.DELTA_COMMIT) if timeline.origin_action(i) is Action.DELTA_COMMIT)


# -- the process ----------------------------------------------------------------------------------
def _write(table, spark, batch: Batch, config):
    df = spark.createDataFrame(batch.rows.to_pandas())
    return table.write(df, batch.operation, config=config)


def main(argv: list[str]) -> int:
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))  # first: SIGTERM may come during start-up
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("table")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--pause", type=float, default=0.5, help="seconds between batches")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tablesvc.config import load_config
    from tablesvc.spark.session import get_spark
    from tablesvc.api import Table

    conf = dict(kv.split("=", 1) for kv in args.conf)
    spark = get_spark(overrides={k: v for k, v in conf.items() if k.startswith("spark.")}, quiet=True)
    first = committed_batches(Table.open(args.table))
    workload = Workload(args.seed).advance(first)
    print(f"writer: resuming at batch {first}", flush=True)
    while not stopping:
        batch = workload.next_batch()
        print(f"writer: batch {batch.index} {batch.operation} of {batch.rows.num_rows} rows, services {batch.mode}",
              flush=True)
        table = Table.open(args.table)
        try:
            # The table's own settings (.hoodie/tablesvc.yaml: the heartbeat above all, which the
            # runners judge this writer by) under the batch's inline-service switches.
            pairs = [f"{k}={v}" for k, v in (conf | MODES[batch.mode][0]).items()]
            config = load_config(table.storage, conf_pairs=pairs, table_path=table.base_path)
            result = _write(table, spark, batch, config)
        except Exception as e:  # noqa: BLE001 - did the commit land before the error? The timeline says.
            traceback.print_exc()
            if committed_batches(Table.open(args.table)) == batch.index + 1:
                print(f"writer: batch {batch.index} committed, then failed: {type(e).__name__}: {e}", flush=True)
                continue
            print(f"writer: batch {batch.index} failed: {type(e).__name__}: {e}", flush=True)
            os._exit(1)  # after a failed Spark job the interpreter may hang at exit; the soak restarts us
        for s in result.services:
            print(f"writer: inline {s.render()}", flush=True)
        print(f"writer: batch {batch.index} committed {result.instant}", flush=True)
        time.sleep(args.pause)
    spark.stop()
    print("writer: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
