"""The metadata table's own log compaction inside a commit, killed (SIGKILL, a real process) after
every storage call (``tests/crash_harness.py --fork``): a data-table clean on a copy of a
Java-written v9 table whose metadata table keeps ``files`` and has seven delta commits since Java's
compaction, with ``hoodie.metadata.log.compaction.enable`` and a threshold of 2 in the table's
``.hoodie/tablesvc.yaml``, so the clean's commit log-compacts the metadata table before the clean's
metadata delta commit.  After each kill tablesvc (through the metadata table), hudi-rs and a storage
listing agree; the next clean finishes the pending data clean, whose commit first finishes the
pending metadata log compaction from its plan, and leaves the metadata listing equal to storage's."""

from __future__ import annotations

import re
from pathlib import Path

from fixture_tables import copy_table
from metadata_tables import keep_only_files_partition, kill_a_clean_at_every_point, metadata_listing, \
    slices_agree, storage_listing

from tablesvc.api import Table
from tablesvc.config import load_config
from tablesvc.metadata.mdt_log_compaction_plan import ENABLE_KEY, THRESHOLD_KEY
from tablesvc.metadata.writer import MetadataTableWriter
from tablesvc.services.clean import run_clean
from tablesvc.storage import LocalStorage
from timeline.instant import Action

MDT_TIMELINE = ".hoodie/metadata/.hoodie/timeline/"
TABLE_YAML = (f"hoodie.cleaner.policy: KEEP_LATEST_FILE_VERSIONS\nhoodie.cleaner.fileversions.retained: 1\n"
              f"{ENABLE_KEY}: true\n{THRESHOLD_KEY}: 2\n")


def _log_compactions(path: Path) -> list:
    table = Table.open(str(path))
    timeline = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times).timeline()
    return [i for i in timeline.instants
            if any(f.action is Action.LOG_COMPACTION for f in timeline.files_of(i.timestamp))]


def test_the_metadata_tables_log_compaction_killed_at_every_storage_operation(fixture_root, tmp_path):
    template = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path / "template")
    keep_only_files_partition(template)
    (template / ".hoodie" / "tablesvc.yaml").write_text(TABLE_YAML)
    slices_agree(template)
    run = kill_a_clean_at_every_point(tmp_path, template)
    assert [r["status"] for r in run["results"]] == ["done"]
    ops, t = run["ops"], run["results"][0]["instant"]
    # the order inside the commit: the log compaction's plan, inflight, its log file, its completed
    # delta commit; then the metadata delta commit at T; then the data clean's completed file
    requested = [i for i, op in enumerate(ops) if re.search(rf"{MDT_TIMELINE}\d{{17}}\.logcompaction\.requested$", op)]
    inflight = [i for i, op in enumerate(ops) if re.search(rf"{MDT_TIMELINE}\d{{17}}\.logcompaction\.inflight$", op)]
    lc = re.search(r"(\d{17})\.logcompaction", ops[requested[0]]).group(1) if requested else None
    logs = [i for i, op in enumerate(ops) if lc and re.search(rf"/metadata/files/\.files-\S+_{lc}\.log\.1_", op)]
    completed = [i for i, op in enumerate(ops) if lc and f"{MDT_TIMELINE}{lc}_" in op and op.endswith(".deltacommit")]
    delta_commit = [i for i, op in enumerate(ops) if f"{MDT_TIMELINE}{t}" in op]
    data_done = [i for i, op in enumerate(ops) if re.search(rf"^\S+ \.hoodie/timeline/{t}_\d{{17}}\.clean$", op)]
    assert len(requested) == len(inflight) == len(completed) == len(data_done) == 1 and logs, ops
    assert requested[0] < inflight[0] < min(logs) <= max(logs) < completed[0] < min(delta_commit) < data_done[0], ops
    cfg = load_config(LocalStorage(), table_path=str(template))
    expected = storage_listing(Path(run["full_path"]))
    pending_seen = 0
    for p in run["points"]:
        path = Path(p["path"])
        try:
            slices_agree(path)
            pending_seen += any(not i.is_completed for i in _log_compactions(path))
            run_clean(Table.open(str(path)), cfg)
            table = Table.open(str(path))
            assert table.timeline().pending() == ()
            mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times).timeline()
            assert mdt.pending() == ()
            done = _log_compactions(path)
            assert done and all(i.is_completed for i in done), done
            assert metadata_listing(table) == storage_listing(path) == expected
            slices_agree(path)
        except Exception as e:
            raise AssertionError(f"point {p['point']} (killed after `{p['last_op']}`): {type(e).__name__}: {e}") from e
    # the points from the log compaction's requested file up to its completion left it pending
    assert pending_seen == completed[0] - requested[0], (pending_seen, requested, completed)
