"""Makes version-6 tables WITH a metadata table, written by Apache Hudi 0.15.0 (issue #27): the
fixtures ``tests/data/hudi/v6_metadata/<name>.zip`` and their ``<name>.json``.

Run once by hand, with ``make interop``'s environment (the Java tier's driver), from the repo root::

    set -a; . .cache/hudi/bundle.env; set +a; TABLESVC_HUDI_PYTHON=.venv-hudi/bin/python \\
        .venv/bin/python tests/interop_java/make_v6_metadata_fixtures.py [--out tests/data/hudi/v6_metadata]

Each table is partitioned (``p0``, ``p1``), MERGE_ON_READ, written by Java 0.15.0's Spark
datasource with 0.15's metadata defaults (``hoodie.metadata.enable=true``: the ``files``
partition) and ``hoodie.metadata.compact.max.delta.commits=3`` (so the metadata table compacts
once within a few writes): an insert of 8 keys, three upserts, a delete of two keys and one more
upsert (six delta commits, so the metadata table's ``files`` log holds several blocks and
versions, and one metadata compaction ``<t>001``).  No data-table compaction, clean or archival.

* ``v6_mdt_files``: the ``files`` partition only (0.15's default);
* ``v6_mdt_colstats``: also ``hoodie.metadata.index.column.stats.enable=true``.

``<name>.json`` holds what Java did, written down from Java's own files: the metadata table's
instants (``mdt_instants``: timeline file names), Java's snapshot read at the end (``rows``) and
the rows of the event-time model (``model``).  Hadoop's ``.crc`` side files are left out of the zips.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parents[1])]

from event_time_model import EventTimeModel  # noqa: E402
from java_hudi import JavaHudi, JavaHudiSetup, JavaTable  # noqa: E402
from scenario_rows import rows  # noqa: E402

MDT_COMPACT_EVERY_3 = {"hoodie.metadata.compact.max.delta.commits": "3"}
TABLES = {
    "v6_mdt_files": {},
    "v6_mdt_colstats": {"hoodie.metadata.index.column.stats.enable": "true"},
}


def make_table(java: JavaHudi, table: JavaTable, extra: dict[str, str]) -> dict:
    model = EventTimeModel()
    ts = iter(range(1000, 1_000_000, 1000))

    def write(operation: str, keys, tag: str) -> None:
        batch = rows(sorted(set(keys)), next(ts), tag)
        req = JavaHudi.write_request(table, operation, rows=batch)
        req["options"].update({**MDT_COMPACT_EVERY_3, **extra})
        java.step(req)
        model.apply(operation, batch)

    write("insert", range(8), "a")
    write("upsert", [0, 1, 2], "b")
    write("upsert", [2, 5, 8], "c")        # k008: a new key
    write("upsert", [3, 4], "d")
    write("delete", [1, 6], "x")
    write("upsert", [0, 7, 9], "e")        # k009: a new key
    got = java.read(table)
    expected = sorted(model.rows())
    if [list(r) for r in got] != [list(r) for r in expected]:
        raise SystemExit(f"Java's read differs from the model:\n{got}\n{expected}")
    mdt_timeline = Path(table.path) / ".hoodie" / "metadata" / ".hoodie"
    mdt_instants = sorted(p.name for p in mdt_timeline.iterdir()
                          if p.is_file() and p.name[:1].isdigit() and not p.name.endswith(".crc"))
    if not any(n.endswith(".commit") for n in mdt_instants):
        raise SystemExit(f"the metadata table did not compact: {mdt_instants}")
    return {"table_version": table.table_version, "hudi": java.bundle.version, "options": {**MDT_COMPACT_EVERY_3,
                                                                                           **extra},
            "mdt_instants": mdt_instants, "rows": [list(r) for r in got], "model": [list(r) for r in expected]}


def zip_table(path: Path, name: str, out: Path) -> Path:
    target = out / f"{name}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for file in sorted(path.rglob("*")):
            if file.is_file() and not file.name.endswith(".crc"):
                z.write(file, f"{name}/{file.relative_to(path)}")
    return target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE.parents[1] / "tests" / "data" / "hudi" / "v6_metadata"))
    ap.add_argument("--only", default="", help="comma-separated names (default: all)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    setup = JavaHudiSetup.from_env()
    bundle = setup.bundle_for(6)
    work = Path(tempfile.mkdtemp(prefix="v6-mdt-fixtures-"))
    java = JavaHudi(setup, bundle, work / "java").start()
    try:
        for name, extra in TABLES.items():
            if args.only and name not in args.only.split(","):
                continue
            path = work / name
            expected = make_table(java, JavaTable(str(path), name, 6, bundle, default_metadata=True), extra)
            zipped = zip_table(path, name, out)
            (out / f"{name}.json").write_text(json.dumps(expected, indent=1) + "\n")
            print(f"{name}: {zipped.stat().st_size} bytes, metadata instants {expected['mdt_instants']}")
    finally:
        java.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
