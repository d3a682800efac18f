"""The file-system view of every shared fixture equals hudi-rs's file slices, latest and as of
every completed instant."""

from __future__ import annotations

import os
import shutil

import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from conftest import TABLES_DIR, all_fixture_names, copy_table, requires_fixtures
from tablesvc.fsview import BaseFileName, LogFileName, list_partitions
from tablesvc.errors import FileNameError
from tablesvc.storage import LocalStorage
from tablesvc.table import Table


def hudi_slices(path: str, as_of: str | None = None) -> list[tuple]:
    t = HudiTableBuilder.from_base_uri(path).build()
    opts = HudiReadOptions() if as_of is None else HudiReadOptions().with_as_of_timestamp(as_of)
    return sorted((s.partition_path, s.file_id, s.base_file_name or None, tuple(s.log_file_names))
                  for s in t.get_file_slices(opts))


def our_slices(table: Table, as_of: str | None = None) -> list[tuple]:
    return sorted((s.partition, s.file_id, s.base_file.file_name if s.base_file else None,
                   tuple(lf.file_name for lf in s.log_files)) for s in table.latest_file_slices(as_of))


@requires_fixtures
@pytest.mark.parametrize("name", all_fixture_names())
def test_view_equals_hudi_rs_latest_and_as_of_each_instant(fixture_root, name):
    path = str(fixture_root.path(name))
    table = Table.open(path)
    assert our_slices(table) == hudi_slices(path)
    completed = [i.timestamp for i in table.timeline().completed_writes()]
    for ts in completed:
        assert our_slices(table, ts) == hudi_slices(path, ts), f"as of {ts}"


@requires_fixtures
def test_view_hides_uncommitted_files_and_keeps_stray_folders_harmless(tmp_path):
    path = copy_table(TABLES_DIR / "v6_trips_8i1u", tmp_path)
    table = Table.open(str(path))
    before = our_slices(table)
    part = path / "city=chennai"
    fid = [n for n in os.listdir(part) if n.endswith(".parquet")][0].split("_")[0]
    # A failed write's base file (instant not on the timeline, newer than the timeline start).
    src = [n for n in os.listdir(part) if n.endswith(".parquet")][0]
    shutil.copy(part / src, part / f"{fid}_9-9-9_20300101000000000.parquet")
    # A stray hidden folder and a temp file inside a partition.
    (part / ".tmp").mkdir()
    (part / ".tmp" / "x").write_text("x")
    (part / ".junk.tmp").write_text("x")
    assert our_slices(Table.open(str(path))) == before


def test_file_names_round_trip_and_reject_bad_names():
    base = "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_0-13-60_20250331030642808.parquet"
    assert BaseFileName.parse(base).name == base
    log = ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85"
    ln = LogFileName.parse(log)
    assert (ln.file_id, ln.instant, ln.version, ln.write_token) == (
        "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0", "20250331030642808", 1, "0-26-85")
    assert ln.name == log
    for bad in ("part-0000.parquet", "a_b_c_d.parquet", "fid_0-1-2_2025.parquet", ".fid_2025.log.1"):
        with pytest.raises(FileNameError, match="is not a|instant"):
            BaseFileName.parse(bad) if bad.endswith("parquet") else LogFileName.parse(bad)


@requires_fixtures
def test_partitions_are_found_by_marker_file(fixture_root):
    storage = LocalStorage()
    assert list_partitions(storage, str(TABLES_DIR / "v6_complexkeygen_hivestyle"), True) == [
        "byteField=10/shortField=300", "byteField=20/shortField=100", "byteField=30/shortField=100"]
    assert list_partitions(storage, str(TABLES_DIR / "v6_nonpartitioned"), False) == [""]
