"""Temporary copies left by a create killed before its link (issue #24, item 7).

``LocalStorage`` writes a new file as ``.tmp-<32 hex>-<name, dots escaped>`` and links it to
``<name>``; a process killed in between leaves the copy in the timeline folder
(``.hoodie/timeline``, or ``.hoodie/`` on v6), among the heartbeats, or in a partition.  No reader
takes such a name for a data file.  Copies named as tablesvc named them before
(``.<name>.<32 hex>.tmp``) are another matter: hudi-rs reads a partial copy of a log file, and
fails, and Hudi 0.x takes a copy of a base file for a base file.  The
leftover sweep (``clean run``, ``rollback``, the runner's clean jobs) deletes the copies older than
the heartbeat window, except a data file's copy named with a pending instant (its writer may
still be streaming it; that instant's rollback removes it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from oracles.hudi_rs import sorted_rows

from table_builders import tablesvc_rows, tree
from tablesvc.cli.main import main
from tablesvc.demo.sample_table import build_sample_table
from tablesvc.services.rollback import rollback_failed
from tablesvc.storage.local import temporary_copy_of, temporary_name_for
from tablesvc.api import Table
from timeline.clock import ManualClock
from timeline.heartbeat import HEARTBEAT_DIR
from timeline.instant import Action

REPO = Path(__file__).resolve().parents[2]
OLD_S = 3600         # an hour: far past the heartbeat window (2 minutes by default)


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("temporary-copies")
    for version in (6, 8):
        build_sample_table(str(root / f"v{version}"), rows=60, table_version=version)
    return {v: root / f"v{v}" for v in (6, 8)}


def our_rows(path: Path) -> list[tuple]:
    """tablesvc's own merge reader, slice by slice (no Spark)."""
    return tablesvc_rows(Table.open(str(path)))


def timeline_dir(path: Path) -> Path:
    return path / ".hoodie" / "timeline" if (path / ".hoodie" / "timeline").is_dir() else path / ".hoodie"


def plant(folder: Path, final_name: str, age_s: float, content: bytes = b"#HUDI#partial",
          legacy: bool = False) -> Path:
    """What a create killed between writing its copy and linking it leaves, ``age_s`` old;
    ``legacy``: named as tablesvc named its copies before (``.<name>.<32 hex>.tmp``)."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / (f".{final_name}.{uuid.uuid4().hex}.tmp" if legacy else temporary_name_for(final_name))
    copy.write_bytes(content)
    then = time.time() - age_s
    os.utime(copy, (then, then))
    return copy


def plant_everywhere(path: Path, running: bool = True) -> tuple[list[Path], list[Path]]:
    """(old copies the sweep must delete, copies it must keep); ``running``: with a pending write
    whose base file is being streamed into its copy."""
    table = Table.open(str(path))
    timeline = table.timeline()
    latest = timeline.completed_writes()[-1]
    part = path / "city=san_francisco"
    log = next(n for n in os.listdir(part) if ".log." in n)
    base = next(n for n in os.listdir(part) if n.endswith(".parquet"))
    old = [
        plant(timeline_dir(path), latest.file_name(), OLD_S),                     # a completion killed
        plant(timeline_dir(path), "20991231000000000.compaction.requested", OLD_S),   # a plan never created
        plant(path / ".hoodie", "hoodie.properties", OLD_S, b"hoodie.table.name=x"),
        plant(path / HEARTBEAT_DIR, latest.timestamp, OLD_S, b"1"),
        plant(part, log, OLD_S),
        plant(part, log, OLD_S, legacy=True),                                     # hudi-rs reads this one
        plant(part, base, OLD_S, b"PAR1partial"),
        plant(part, ".hoodie_partition_metadata", OLD_S, b"#partition metadata"),
    ]
    kept = [plant(timeline_dir(path), "20991231000000001.clean.requested", 1)]        # a create in progress
    if running:
        # a writer of a pending instant may be streaming a large base file: its copy stays, however old
        w = table.timeline_writer
        t = w.start(w.request(Action.DELTA_COMMIT)).timestamp
        file_id, token, _rest = base.split("_")
        kept.append(plant(part, f"{file_id}_{token}_{t}.parquet", OLD_S, b"PAR1streaming"))
    return old, kept


@pytest.mark.parametrize("version", [6, 8])
def test_the_timeline_and_the_view_never_read_temporary_copies(tables, tmp_path, version):
    path = tmp_path / "t"
    shutil.copytree(tables[version], path)
    table = Table.open(str(path))
    instants, rows = table.timeline().instants, our_rows(path)
    slices = [(s.partition, s.file_id, s.base_instant, s.file_names) for s in table.latest_file_slices()]
    theirs = sorted_rows(path, ("uuid", "ts", "fare"))
    old, _ = plant_everywhere(path)
    legacy = [p for p in old if p.name.endswith(".tmp")]
    for p in legacy:
        p.unlink()
    table = Table.open(str(path))
    assert [i for i in table.timeline().instants if i.action is not Action.DELTA_COMMIT or i.is_completed] \
        == list(instants)
    assert [(s.partition, s.file_id, s.base_instant, s.file_names) for s in table.latest_file_slices()] == slices
    assert our_rows(path) == rows
    # today's names look like no data file to hudi-rs (nor to Hudi 0.x, which takes any name
    # containing ".parquet" for a base file)
    assert sorted_rows(path, ("uuid", "ts", "fare")) == theirs
    # a copy named the old way: hudi-rs takes it for a log file, the reason to sweep such copies
    plant(legacy[0].parent, legacy[0].name[1:-37], OLD_S, legacy=True)
    assert our_rows(path) == rows
    with pytest.raises(Exception, match=r"\.tmp"):
        sorted_rows(path, ("uuid", "ts", "fare"))


@pytest.mark.parametrize("version", [6, 8])
@pytest.mark.parametrize("sweep", ["clean run {path}", "rollback {path}"])
def test_the_leftover_sweep_deletes_old_copies_and_keeps_young_and_pending_ones(tables, tmp_path, capsys,
                                                                              version, sweep):
    path = tmp_path / "t"
    shutil.copytree(tables[version], path)
    rows = sorted_rows(path, ("uuid", "ts", "fare"))
    before = tree(path)
    # (the recovery sweep would roll a running write without a heartbeat back: the clean only)
    running = sweep.startswith("clean")
    old, kept = plant_everywhere(path, running=running)
    pending = [i.timestamp for i in Table.open(str(path)).timeline().pending()]
    code = main(sweep.format(path=path).split())
    out, err = capsys.readouterr()
    assert code == 0, (out, err)
    assert [p for p in old if p.exists()] == []
    assert all(p.exists() for p in kept)
    for p in kept:
        p.unlink()
    # nothing else changed (but the running write's own timeline files, and the heartbeat folder
    # that planting a copy in it made)
    after = {k: v for k, v in tree(path).items() if not any(t in k for t in pending)}
    if ".hoodie/.heartbeat/" not in before:
        after.pop(".hoodie/.heartbeat/", None)
    assert after == before
    assert sorted_rows(path, ("uuid", "ts", "fare")) == rows == our_rows(path)


KILLED_COMPLETION = """
import os, sys
from tablesvc.api import Table
from timeline.instant import Action
from timeline.payloads import CommitMetadata, encode_commit_metadata

table = Table.open(sys.argv[1])
w = table.timeline_writer
inflight = w.start(w.request(Action.DELTA_COMMIT))
print(inflight.timestamp, flush=True)
folder = os.path.abspath(os.path.join(table.base_path, table.config.layout.timeline_dir))
link = os.link

def dying_link(src, dst, *a, **k):
    # the completed instant's link only: on v6 the table lock (.hoodie/lock) is made in the same folder
    if os.path.dirname(os.path.abspath(dst)) == folder and os.path.basename(dst) != "lock":
        os.kill(os.getpid(), 9)        # the copy is written and fsynced; the link never happens
    return link(src, dst, *a, **k)

os.link = dying_link
md = CommitMetadata(partition_to_write_stats={}, extra_metadata={"schema": table.schema()}, operation_type="UPSERT")
w.complete(inflight, encode_commit_metadata(md, table.config.layout))
"""


@pytest.mark.parametrize("version", [6, 8])
def test_a_completion_killed_before_its_link_is_recovered_and_its_copy_swept(tables, tmp_path, version):
    path = tmp_path / "t"
    shutil.copytree(tables[version], path)
    rows = sorted_rows(path, ("uuid", "ts", "fare"))
    proc = subprocess.run([sys.executable, "-c", KILLED_COMPLETION, str(path)], cwd=str(REPO), text=True,
                          capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    instant = proc.stdout.strip()
    copies = [n for n in os.listdir(timeline_dir(path)) if (temporary_copy_of(n) or "").startswith(instant)]
    assert len(copies) == 1, os.listdir(timeline_dir(path))
    table = Table.open(str(path))
    assert table.timeline().get(instant).is_pending          # the copy is not read as a completion
    assert our_rows(path) == rows == sorted_rows(path, ("uuid", "ts", "fare"))
    # later: the write's heartbeat window and the table lock of the killed process have expired
    then = time.time() - OLD_S
    os.utime(timeline_dir(path) / copies[0], (then, then))
    clock = ManualClock(int(time.time() * 1000) + OLD_S * 1000)
    results = rollback_failed(Table.open(str(path), clock=clock))
    assert [r.metrics["target"] for r in results] == [instant]
    assert not (timeline_dir(path) / copies[0]).exists()
    assert Table.open(str(path)).timeline().get(instant) is None
    assert sorted_rows(path, ("uuid", "ts", "fare")) == rows == our_rows(path)
