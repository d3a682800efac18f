"""A clean that finds nothing to delete writes no clean instant (issue #24, item 7).

Hudi's ``CleanPlanActionExecutor.requestClean`` persists a plan only when it lists files
("Nothing to clean here"): the earliest commit to retain moving on is no reason for an instant.
Here every file group has a single slice (delta commits only append log files), so retaining one
commit moves the earliest commit to retain to the latest write and still deletes nothing.
"""

from __future__ import annotations

from pathlib import Path

from oracles.hudi_rs import sorted_rows

from table_builders import compact_by_hand, tree, update_five_records
from tablesvc.cli.main import main
from tablesvc.config import build_config
from tablesvc.demo.sample_table import build_sample_table
from tablesvc.services.clean import plan_clean, run_clean
from tablesvc.services.result import Status
from tablesvc.api import Table
from tablesvc.write import delete_markers
from timeline.instant import Action


def single_slice_table(path: Path) -> Table:
    """Two delta commits of the sample table, then two more updating one file group: four
    completed writes, one slice per file group."""
    table = build_sample_table(str(path), rows=60, table_version=8).table
    for fare in (1.5, 2.5):
        t = update_five_records(table, sorted(table.latest_file_slices(), key=lambda s: s.partition)[0], fare)
        delete_markers(table.storage, table.base_path, t)   # as a finished write leaves it
    return Table.open(str(path))


RETAIN_ONE = {"hoodie.cleaner.commits.retained": "1"}


def test_nothing_to_delete_writes_no_clean_instant_and_says_so(tmp_path, capsys):
    path = tmp_path / "t"
    table = single_slice_table(path)
    rows, before = sorted_rows(path, ("uuid", "ts", "fare")), tree(path)
    latest = table.timeline().completed_writes()[-1].timestamp

    planned = plan_clean(table, build_config(conf=RETAIN_ONE))
    assert planned.plan is None and planned.files == 0
    assert planned.reason.startswith("nothing to clean: ")

    code = main(["clean", "run", str(path), "--conf", "hoodie.cleaner.commits.retained=1"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert "nothing to clean" in out and "no clean instant" in out and latest in out, out
    assert Table.open(str(path)).timeline().filter(actions=[Action.CLEAN]) == ()
    assert tree(path) == before and sorted_rows(path, ("uuid", "ts", "fare")) == rows


def test_after_an_unrecorded_clean_the_next_clean_still_finds_every_old_slice(tmp_path):
    """No clean instant means no incremental window: the next clean scans every partition."""
    path = tmp_path / "t"
    table = single_slice_table(path)
    config = build_config(conf=RETAIN_ONE | {"hoodie.cleaner.incremental.mode": "true"})
    assert [r.status for r in run_clean(table, config)] == [Status.NOTHING_TO_DO]
    compact_by_hand(table)
    update_five_records(table, sorted(table.latest_file_slices(), key=lambda s: s.partition)[-1], 3.5)
    rows = sorted_rows(path, ("uuid", "ts", "fare"))
    old = {s.base_file.file_name for s in Table.open(str(path)).latest_file_slices() if s.base_file}
    results = run_clean(Table.open(str(path)), config)
    assert results[-1].status is Status.DONE, results
    deleted = results[-1].metrics["files_deleted"]
    table = Table.open(str(path))
    every_partition = {s.partition for s in table.latest_file_slices()}
    assert deleted > 0 and results[-1].metrics["partitions"] == len(every_partition)
    assert {s.base_file.file_name for s in table.latest_file_slices() if s.base_file} == old
    assert sorted_rows(path, ("uuid", "ts", "fare")) == rows
