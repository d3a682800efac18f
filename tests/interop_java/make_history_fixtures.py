"""Makes the LSM-history fixtures of tests/data/hudi/history/ with Apache Hudi 1.2.0 (issue #26).

Run once by hand, with ``make interop``'s environment (the Java tier's driver), from the repo root::

    set -a; . .cache/hudi/bundle.env; set +a; TABLESVC_HUDI_PYTHON=.venv-hudi/bin/python \\
        .venv/bin/python tests/interop_java/make_history_fixtures.py [--out tests/data/hudi/history]

It writes, per table version 8 and 9, two merge-on-read tables whose old instants Java archived
into ``.hoodie/timeline/history/``, zipped (``<name>.zip``, ``<name>/`` at the top, Hadoop's
``.crc`` side files left out), and beside each ``<name>.json``, the expectations, all written
down from what Java did, never from tablesvc:

* ``completion_times``: instant -> [action, completion time] of every instant Java completed,
  read from the active timeline's file names (``<t>_<completion>.<action>``) after every Java
  step, before Java archived it (an instant is archived at the earliest in the step after the one
  that completed it; the script fails if the history holds an instant it did not see active);
* ``archived``: the instants the history holds (those not on the active timeline at the end);
* ``rows``: Java Hudi's snapshot read at the end, and ``model``: the rows of the event-time model.

``history_v{8,9}``: Java writes with inline compaction every two delta commits, automatic clean
and archival (keep.min 2, keep.max 3) and an LSM compaction batch of 2 (so the history has files
of layer 0 and 1 and manifests that replaced files); then writes on without compaction, so that
delta commits whose logs sit in the latest slices are archived.

``inflight_v{8,9}``: the placement case.  Java's upsert ``D`` of a file group is in flight while
tablesvc schedules a compaction ``C`` of that group (D requested before C, completed after it:
Java puts D's log into C's slice); Java runs C, then writes other partitions with archival on
until D is archived while C's slice is still the group's latest.  ``in_flight`` records D, C and
D's completion time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parents[1])]

from event_time_model import EventTimeModel  # noqa: E402
from java_hudi import JavaHudi, JavaHudiSetup, JavaTable  # noqa: E402
from scenario_rows import rows  # noqa: E402
from timeline_files import instant_files  # noqa: E402

ARCHIVAL = {
    "hoodie.archive.automatic": "true",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
    "hoodie.clean.automatic": "true",
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.timeline.compaction.batch.size": "2",
}
COMPACT_EVERY_2 = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"}
# compaction off; a trigger of one delta commit keeps only the latest delta commit from archival
# (TimelineArchiverV2 retains the delta commits the NUM_COMMITS trigger still counts)
NO_COMPACTION = {"hoodie.compact.inline": "false", "hoodie.compact.inline.max.delta.commits": "1"}


class Recorder:
    """Every completed instant's completion time, from the active timeline's file names."""

    def __init__(self, path: str):
        self.path = path
        self.seen: dict[str, tuple[str, str]] = {}

    def record(self) -> None:
        for f in instant_files(self.path):
            if f.state != "completed":
                continue
            known = self.seen.setdefault(f.requested, (f.action, f.completed))
            if known != (f.action, f.completed):
                raise SystemExit(f"{f.requested}: completion changed from {known} to {(f.action, f.completed)}")

    def active(self) -> set[str]:
        return {f.requested for f in instant_files(self.path)}


def history_instants(path: str) -> set[str]:
    """The instants of the history's latest manifest, read with pyarrow (a check of the script)."""
    import pyarrow.parquet as pq

    folder = Path(path) / ".hoodie" / "timeline" / "history"
    version = (folder / "_version_").read_text().strip()
    manifest = json.loads((folder / f"manifest_{version}").read_text())
    out: set[str] = set()
    for entry in manifest["files"]:
        out.update(pq.read_table(folder / entry["fileName"], columns=["instantTime"]).column(0).to_pylist())
    return out


class Writer:
    def __init__(self, java: JavaHudi, table: JavaTable):
        self.java, self.table = java, table
        self.model = EventTimeModel()
        self.recorder = Recorder(table.path)
        self.ts = iter(range(1000, 1_000_000, 1000))

    def request(self, operation: str, batch: list[tuple], services: dict) -> dict:
        req = JavaHudi.write_request(self.table, operation, rows=batch)
        req["options"].update(services)
        return req

    def write(self, operation: str, keys, tag: str, services: dict) -> None:
        batch = rows(sorted(set(keys)), next(self.ts), tag)
        self.java.step(self.request(operation, batch, services))
        self.model.apply(operation, batch)
        self.recorder.record()


def history_table(java: JavaHudi, table: JavaTable) -> dict:
    w = Writer(java, table)
    w.write("insert", range(8), "a", {**ARCHIVAL, **COMPACT_EVERY_2})
    for i in range(10):
        w.write("upsert", [(i * 3 + j) % 8 for j in range(3)], f"b{i}_", {**ARCHIVAL, **COMPACT_EVERY_2})
    for i in range(5):
        w.write("upsert", [(i + j) % 8 for j in range(2)], f"c{i}_", {**ARCHIVAL, **NO_COMPACTION})
    return finish(java, table, w, {})


def inflight_table(java: JavaHudi, table: JavaTable) -> dict:
    from tablesvc.api import Table
    from tablesvc.services.compaction.planner import schedule_compaction
    from tablesvc.services.result import Status

    w = Writer(java, table)
    w.write("insert", range(8), "a", {})
    w.write("upsert", [0, 2], "u", {})                        # a log in p0's file group
    before = w.recorder.active()
    d_rows = rows([0, 4, 6], next(w.ts), "d")
    java.send(w.request("upsert", d_rows, {}))               # D: in flight while C is scheduled
    deadline = time.monotonic() + 120
    while not any(f.requested not in before and f.action == "deltacommit" and f.state == "inflight"
                  for f in instant_files(table.path)):
        if time.monotonic() > deadline:
            raise SystemExit("Java's upsert D never showed an inflight delta commit")
        time.sleep(0.01)
    scheduled = schedule_compaction(Table.open(table.path), None, force=True)
    if scheduled.status is not Status.SCHEDULED:
        raise SystemExit(f"tablesvc did not schedule C: {scheduled.render()}")
    java.answer({"op": "write", "path": table.path})
    w.model.apply("upsert", d_rows)
    w.recorder.record()
    c = scheduled.instant
    d = next(t for t in w.recorder.seen if t not in before and w.recorder.seen[t][0] == "deltacommit")
    d_done = w.recorder.seen[d][1]
    if not d < c < d_done:
        raise SystemExit(f"the race was lost: D {d} completed at {d_done}, C {c}; run again")
    java.compaction(table, "run")                            # Java runs tablesvc's plan C
    w.recorder.record()
    if c not in w.recorder.seen:
        raise SystemExit(f"Java did not complete the compaction {c}")
    i = 0
    while d in w.recorder.active():                          # p1 only: C's slice stays p0's latest
        if i == 20:
            raise SystemExit(f"Java did not archive D {d} in 20 writes")
        w.write("upsert", [1 + 2 * (i % 4)], f"p{i}_", {**ARCHIVAL, **NO_COMPACTION})
        i += 1
    return finish(java, table, w, {"delta_commit": d, "delta_commit_completed": d_done, "compaction": c})


def finish(java: JavaHudi, table: JavaTable, w: Writer, in_flight: dict) -> dict:
    archived = history_instants(table.path)
    unseen = sorted(archived - set(w.recorder.seen))
    if unseen:
        raise SystemExit(f"the history holds instants never seen active: {unseen}")
    if not archived & {t for t, (a, _) in w.recorder.seen.items() if a == "deltacommit"}:
        raise SystemExit("no delta commit was archived")
    got = java.read(table)
    model = sorted(w.model.rows())
    if [list(r) for r in got] != [list(r) for r in model]:
        raise SystemExit(f"Java's read differs from the model:\n{got}\n{model}")
    return {"table_version": table.table_version, "hudi": java.bundle.version,
            "completion_times": {t: list(v) for t, v in sorted(w.recorder.seen.items())},
            "archived": sorted(archived), "in_flight": in_flight,
            "rows": [list(r) for r in got], "model": [list(r) for r in model]}


def zip_table(path: Path, name: str, out: Path) -> Path:
    target = out / f"{name}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for file in sorted(path.rglob("*")):
            if file.is_file() and not file.name.endswith(".crc"):
                z.write(file, f"{name}/{file.relative_to(path)}")
    return target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE.parents[1] / "tests" / "data" / "hudi" / "history"))
    ap.add_argument("--only", default="", help="comma-separated names (default: all)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    setup = JavaHudiSetup.from_env()
    work = Path(tempfile.mkdtemp(prefix="history-fixtures-"))
    java = JavaHudi(setup, setup.bundle, work / "java").start()
    try:
        for version in (8, 9):
            for kind, make in (("history", history_table), ("inflight", inflight_table)):
                name = f"{kind}_v{version}"
                if args.only and name not in args.only.split(","):
                    continue
                path = work / name
                expected = make(java, JavaTable(str(path), name, version, setup.bundle))
                zipped = zip_table(path, name, out)
                (out / f"{name}.json").write_text(json.dumps(expected, indent=1) + "\n")
                print(f"{name}: {zipped.stat().st_size} bytes, {len(expected['archived'])} archived instants")
    finally:
        java.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
