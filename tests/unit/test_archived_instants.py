"""Tables whose oldest instants were archived (issue #26, scenario 4), built without Java: a table's
instant files are moved out of the active timeline as Hudi's archiver does (v6 into
``.hoodie/archived/``, v8 under ``.hoodie/timeline/history/``; the archive's content does not
matter here, tablesvc never reads it).  tests/interop_java/test_archived_timeline.py has Java do it.

The rule (docs/file-system-view.md): a file or block named with an instant older than the first
write-action instant on the active timeline, and not on it, was archived and counts as committed.
Cleans and rollbacks do not mark the start: Hudi archives them on their own schedule.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from oracles.hudi_rs import sorted_rows
from table_builders import compact_by_hand, tablesvc_rows, update_five_records

from tablesvc.api import Table
from tablesvc.config import build_config
from tablesvc.demo.sample_table import CITIES, build_sample_table
from tablesvc.services.clean import run_clean
from tablesvc.services.result import Status
from timeline.errors import TimeTravelError
from timeline.instant import Action
from timeline.payloads import decode_cleaner_plan
from timeline.time_travel import check_as_of


def archive(table: Table, *instants: str) -> None:
    """Move every timeline file of ``instants`` to where Hudi's archiver keeps archived instants."""
    version = table.config.version
    timeline_dir = Path(table.base_path) / ".hoodie" / ("timeline" if version >= 8 else "")
    archived = Path(table.base_path) / ".hoodie" / ("timeline/history" if version >= 8 else "archived")
    archived.mkdir(parents=True, exist_ok=True)
    moved = 0
    for f in list(timeline_dir.iterdir()):
        if f.is_file() and f.name.split(".")[0].split("_")[0] in instants:
            shutil.move(str(f), archived / f.name)
            moved += 1
    assert moved >= len(instants), f"archived only {moved} files of {instants}"


def first_group_update(table: Table, fare: float) -> str:
    return update_five_records(table, sorted(table.latest_file_slices(), key=lambda s: s.partition)[0], fare)


def rolled_back_failed_write(table: Table) -> str:
    """A delta commit that failed before writing anything, rolled back by tablesvc: a rollback
    instant stays on the timeline.  Returns the rollback's instant."""
    w = table.timeline_writer
    failed = w.start(w.request(Action.DELTA_COMMIT))
    result = table.rollback(failed.timestamp)
    assert result.status is Status.DONE, result.render()
    return result.instant


@pytest.mark.parametrize("version", [6, 8])
def test_an_old_rollback_left_active_does_not_hide_archived_commits(tmp_path, version):
    # t1 insert, t2 update+delete, R (rollback of a failed write), C1 compaction of every group,
    # D3 update of one group; then t1, t2 and C1 go to the archive and R stays (Hudi 0.x counts
    # cleans and rollbacks apart from commits: seen in the Java tier on v6).
    table = build_sample_table(str(tmp_path / "t"), table_version=version).table
    t1, t2 = (i.timestamp for i in table.timeline().completed_writes())
    rollback = rolled_back_failed_write(table)
    c1 = compact_by_hand(table)
    d3 = first_group_update(table, 3.5)
    table = Table.open(table.base_path)
    before = tablesvc_rows(table)
    assert before == sorted_rows(table.base_path, ("uuid", "ts", "fare"))

    archive(table, t1, t2, c1)
    table = Table.open(table.base_path)
    # every group's C1 base file (and on v6 the logs D3 wrote, named after their base instant C1)
    # stays visible: the rows are the same as before the archival, and hudi-rs reads them too
    assert {s.base_instant for s in table.latest_file_slices()} == {c1}
    assert tablesvc_rows(table) == before
    assert sorted_rows(table.base_path, ("uuid", "ts", "fare")) == before
    timeline = table.timeline()
    assert [i.timestamp for i in timeline.instants][:2] == [rollback, d3]
    assert timeline.start == d3                      # the first write-action instant, not the rollback
    assert timeline.is_committed_or_archived(c1)


@pytest.mark.parametrize("version", [6, 8])
def test_time_travel_to_an_archived_instant_is_refused_naming_it(tmp_path, version):
    table = build_sample_table(str(tmp_path / "t"), table_version=version).table
    t1, t2 = (i.timestamp for i in table.timeline().completed_writes())
    c1 = compact_by_hand(table)
    d3 = first_group_update(table, 3.5)
    archive(table, t1, t2)
    table = Table.open(table.base_path)
    with pytest.raises(TimeTravelError, match=rf"as-of {t2} is older than {c1}.*first completed commit"):
        check_as_of(table.storage, table.timeline(), t2)
    check_as_of(table.storage, table.timeline(), d3)     # on the active timeline: readable


@pytest.mark.parametrize("version", [6, 8])
def test_incremental_clean_scans_every_partition_when_the_last_ectr_was_archived(tmp_path, version):
    # t1, t2, C1, D3, C2 (every group), D4; clean K1 keeps 3 commits: ECTR D3.  Then D5, D6, D7
    # update one group only, and t1..C2 are archived (K1, newer, stays).  The next clean's
    # incremental window [D3, D6) would hold D4 and D5, one partition; but the archived C2 wrote
    # every partition and made the C1 slices of the other groups cleanable.  As Hudi's CleanPlanner
    # does when the last ECTR is before the timeline starts, tablesvc scans every partition.
    table = build_sample_table(str(tmp_path / "t"), table_version=version).table
    t1, t2 = (i.timestamp for i in table.timeline().completed_writes())
    c1 = compact_by_hand(table)
    d3 = first_group_update(table, 1.5)
    c2 = compact_by_hand(table)
    first_group_update(table, 2.5)
    k1 = run_clean(table, build_config(conf={"hoodie.cleaner.commits.retained": "3"}))
    assert k1[-1].status is Status.DONE and k1[-1].metrics["earliest_commit_to_retain"] == d3
    for fare in (4.5, 5.5, 6.5):
        first_group_update(table, fare)
    archive(table, t1, t2, c1, d3, c2)
    table = Table.open(table.base_path)
    assert table.timeline().start > d3
    before = tablesvc_rows(table)
    c1_files = sorted(p.name for p in Path(table.base_path).rglob(f"*{c1}*.parquet"))
    assert len(c1_files) == len(CITIES)

    results = run_clean(table, build_config(conf={"hoodie.cleaner.commits.retained": "2"}))
    assert results[-1].status is Status.DONE, results[-1].render()
    assert results[-1].metrics["partitions"] == len(CITIES)     # files deleted in every partition
    assert sorted(p.name for p in Path(table.base_path).rglob(f"*{c1}*.parquet")) == [], \
        "the C1 slices, superseded by the archived C2, were not cleaned"
    assert tablesvc_rows(table) == before == sorted_rows(table.base_path, ("uuid", "ts", "fare"))


@pytest.mark.parametrize("version", [6, 8])
def test_a_v6_clean_writes_its_plan_into_the_inflight_file_as_hudi_0x_does(tmp_path, version):
    # Hudi 0.x's archiver reads a clean's inflight file as a cleaner plan: an empty one made Java's
    # archival fail ("Not an Avro data file") in the Java tier.  1.x (v8+) writes it empty.
    table = build_sample_table(str(tmp_path / "t"), table_version=version).table
    compact_by_hand(table)
    first_group_update(table, 1.5)
    compact_by_hand(table)
    done = run_clean(table, build_config(conf={"hoodie.cleaner.commits.retained": "1"}))[-1]
    assert done.status is Status.DONE, done.render()
    folder = Path(table.base_path) / ".hoodie" / ("timeline" if version >= 8 else "")
    requested = (folder / f"{done.instant}.clean.requested").read_bytes()
    inflight = (folder / f"{done.instant}.clean.inflight").read_bytes()
    if version == 6:
        assert decode_cleaner_plan(inflight, "inflight") == decode_cleaner_plan(requested, "requested")
        assert decode_cleaner_plan(inflight, "inflight").earliest_instant_to_retain is not None
    else:
        assert inflight == b""
