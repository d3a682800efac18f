"""The metadata table's own clean inside a commit, killed (SIGKILL, a real process) after every
storage call (``tests/crash_harness.py --fork``): a data-table clean on a copy of a Java-written v9
table whose metadata table keeps ``files``, with one more metadata compaction (tablesvc's, planned
before the last four delta commits as Java's one-millisecond-before rule would) so that the slice
before Java's compaction is the third newest.  The table keeps 1 file version, so the metadata
policy keeps 2 and the commit's services clean that oldest slice before the metadata delta commit
of the data clean.  After each kill tablesvc (through the metadata table), hudi-rs and a storage
listing agree; the next clean finishes the pending data clean, whose commit finishes the pending
metadata clean from its plan, and leaves the metadata listing equal to storage's with the old
slice gone."""

from __future__ import annotations

import os
import re
from pathlib import Path

from fixture_tables import copy_table
from metadata_tables import (
    kill_a_clean_at_every_point, slices_agree,
    keep_only_files_partition, metadata_listing, storage_listing,
)
from tablesvc.api import Table
from tablesvc.config import load_config
from tablesvc.metadata import MetadataTable, mdt_compaction
from tablesvc.metadata.mdt_clean_plan import MetadataCleanPolicy, build_clean_plan, clean_due
from tablesvc.metadata.writer import MetadataTableWriter
from tablesvc.services.clean import run_clean
from tablesvc.storage import LocalStorage
from timeline.instant import Action

MDT_TIMELINE = ".hoodie/metadata/.hoodie/timeline/"
# between the fixture's metadata delta commits 20260307162616932 and 20260307162618152: four
# completed delta commits come after it, so the services' gate (3 after the latest compaction) is open
SECOND_COMPACTION = "20260307162618000"
TABLE_YAML = "hoodie.cleaner.policy: KEEP_LATEST_FILE_VERSIONS\nhoodie.cleaner.fileversions.retained: 1\n"


def _template(fixture_root, tmp_path: Path) -> tuple[Path, set[str]]:
    template = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path / "template")
    keep_only_files_partition(template)
    table = Table.open(str(template))
    mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)
    assert mdt_compaction.schedule(mdt, table.timeline(), lambda: SECOND_COMPACTION) == SECOND_COMPACTION
    mdt_compaction.execute(mdt, table.base_path, table.timeline(), SECOND_COMPACTION)
    (template / ".hoodie" / "tablesvc.yaml").write_text(TABLE_YAML)
    policy = MetadataCleanPolicy.derived_from(load_config(LocalStorage(), table_path=str(template)))
    assert policy.file_versions_retained == 2 and clean_due(mdt.timeline())
    plan = build_clean_plan(table.storage, mdt.base_path, mdt.config, mdt.timeline(), policy, 0)
    doomed = {p.rsplit("/", 1)[1] for paths in plan.files_to_delete().values() for p in paths}
    assert doomed
    return template, doomed




def _mdt_cleans(path: Path):
    table = Table.open(str(path))
    return MetadataTable(table.storage, table.base_path, table.timeline()).timeline.filter(actions=[Action.CLEAN])


def test_the_metadata_tables_clean_killed_at_every_storage_operation(fixture_root, tmp_path):
    template, doomed = _template(fixture_root, tmp_path)
    slices_agree(template)
    run = kill_a_clean_at_every_point(tmp_path, template)
    assert [r["status"] for r in run["results"]] == ["done"]
    ops, t = run["ops"], run["results"][0]["instant"]
    # Java's order inside the commit: the metadata clean (requested, inflight, its deletes,
    # completed), then the metadata delta commit at T, then the data clean's completed file
    requested = [i for i, op in enumerate(ops) if re.search(rf"{MDT_TIMELINE}\d{{17}}\.clean\.requested$", op)]
    completed = [i for i, op in enumerate(ops) if re.search(rf"{MDT_TIMELINE}\d{{17}}_\d{{17}}\.clean$", op)]
    deletes = [i for i, op in enumerate(ops) if op.startswith("delete ") and "/metadata/files/" in op]
    delta_commit = [i for i, op in enumerate(ops) if f"{MDT_TIMELINE}{t}" in op]
    data_done = [i for i, op in enumerate(ops) if re.search(rf"^\S+ \.hoodie/timeline/{t}_\d{{17}}\.clean$", op)]
    assert len(requested) == len(completed) == len(data_done) == 1 and len(deletes) == len(doomed), ops
    assert requested[0] < min(deletes) <= max(deletes) < completed[0] < min(delta_commit) < data_done[0], ops
    cfg = load_config(LocalStorage(), table_path=str(template))
    full = Path(run["full_path"])
    expected = storage_listing(full)
    files_folder = Path(".hoodie") / "metadata" / "files"
    pending_seen = 0
    for p in run["points"]:
        path = Path(p["path"])
        try:
            slices_agree(path)
            pending_seen += any(not i.is_completed for i in _mdt_cleans(path))
            run_clean(Table.open(str(path)), cfg)
            table = Table.open(str(path))
            assert table.timeline().pending() == ()
            cleans = _mdt_cleans(path)
            assert len(cleans) == 1 and cleans[0].is_completed, cleans
            assert not doomed & set(os.listdir(path / files_folder))
            assert metadata_listing(table) == storage_listing(path) == expected
            slices_agree(path)
        except Exception as e:
            raise AssertionError(f"point {p['point']} (killed after `{p['last_op']}`): {type(e).__name__}: {e}") from e
    # the points from the metadata clean's requested file up to its completion left it pending
    assert pending_seen == completed[0] - requested[0], (pending_seen, requested, completed)
