"""Listing files through the metadata table (``tablesvc.metadata``) on every carried table that
has one, against hudi-rs (which lists v8+ tables through it too) and against a storage listing of
the same table; Hudi's merge rules of the ``files`` partition; the reader switch."""

from __future__ import annotations

import shutil

import pytest
from oracles.hudi_rs import file_slices as hudi_rs_slices

from fixture_tables import all_fixture_names, copy_table
from tablesvc.api import Table
from tablesvc.metadata import MetadataFileListing, MetadataTable
from tablesvc.metadata.files_records import FileInfo, FilesRecord, merge_in_order
from timeline.instant import State

# The Apache-Hudi-written tables with a metadata table; the test below checks the list is whole.
MDT_FIXTURES = ["v8_trips_8i3u1d", "v9_nonpartitioned_rollback", "zips:mor_avro_v9_txns_complex_meta",
                "zips:mor_avro_v9_txns_nonpart_meta", "zips:mor_avro_v9_txns_simple_meta",
                "zips:mor_avro_v9_txns_simple_overwrite"]


def _ours(slices) -> list[tuple]:
    return sorted((s.partition, s.file_id, s.base_file.file_name if s.base_file else None,
                   tuple(lf.file_name for lf in s.log_files),
                   s.base_file.size if s.base_file else None, tuple(lf.size for lf in s.log_files))
                  for s in slices)


def _hudi_rs(path) -> list[tuple]:
    return sorted((s.partition_path, s.file_id, s.base_file_name or None, tuple(s.log_file_names),
                   s.base_file_size if s.base_file_name else None, tuple(s.log_file_sizes))
                  for s in hudi_rs_slices(path))


def _storage_view(table: Table):
    table.metadata_enabled = False
    try:
        return table.file_system_view().latest_file_slices(table.storage)
    finally:
        table.metadata_enabled = True


def test_every_fixture_with_a_metadata_table_is_covered(fixture_root):
    have = [n for n in all_fixture_names() if (fixture_root.path(n) / ".hoodie" / "metadata" / "files").is_dir()]
    assert sorted(have) == sorted(MDT_FIXTURES)


@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_listing_through_the_metadata_table_equals_hudi_rs_and_storage(fixture_root, name):
    table = Table.open(str(fixture_root.path(name)))
    assert table.uses_metadata_table
    listing = MetadataFileListing(table.storage, table.base_path, table.timeline())
    assert listing.partitions() and all(listing.files(p) for p in listing.partitions())
    through_mdt = _ours(table.file_system_view().latest_file_slices(table.storage))
    assert through_mdt == _hudi_rs(table.base_path)
    assert through_mdt == _ours(_storage_view(table))


@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_metadata_listing_names_exactly_the_files_storage_holds(fixture_root, name):
    """Every partition and file (with its size) of the files partition, against storage: the
    metadata table also names files of older slices, which storage holds until a clean."""
    table = Table.open(str(fixture_root.path(name)))
    listing = MetadataFileListing(table.storage, table.base_path, table.timeline())
    root = fixture_root.path(name)
    for partition in listing.partitions():
        folder = root / partition if partition else root
        for file_name, size in listing.files(partition).items():
            assert (folder / file_name).stat().st_size == size, (partition, file_name)


def test_a_base_file_removed_from_storage_is_still_listed_as_hudi_rs_does(fixture_root, tmp_path):
    path = copy_table(fixture_root.path("v8_trips_8i3u1d"), tmp_path)
    table = Table.open(str(path))
    victim = next(s for s in table.file_system_view().latest_file_slices(table.storage) if s.base_file)
    (path / victim.partition / victim.base_file.file_name).unlink()
    (path / victim.partition / "stray_0-0-0_20251220210108078.parquet").write_bytes(b"x" * 10)
    listed = _ours(Table.open(str(path)).file_system_view().latest_file_slices(table.storage))
    assert listed == _hudi_rs(path)
    assert victim.base_file.file_name in {row[2] for row in listed}
    assert "stray_0-0-0_20251220210108078.parquet" not in {row[2] for row in listed}
    # switched off, the reader lists storage: the removed file is gone, the stray file shows
    from_storage = {row[2] for row in _ours(_storage_view(Table.open(str(path))))}
    assert victim.base_file.file_name not in from_storage
    assert "stray_0-0-0_20251220210108078.parquet" in from_storage


def test_the_switch_comes_from_the_tables_config_file(fixture_root, tmp_path):
    path = copy_table(fixture_root.path("v9_nonpartitioned_rollback"), tmp_path)
    assert Table.open(str(path)).uses_metadata_table
    (path / ".hoodie" / "tablesvc.yaml").write_text("hoodie.metadata.enable: false\n")
    assert not Table.open(str(path)).uses_metadata_table


def test_without_files_in_the_table_properties_storage_is_listed(fixture_root, tmp_path):
    from tablesvc.table.properties import read_properties, write_properties

    path = copy_table(fixture_root.path("v9_nonpartitioned_rollback"), tmp_path)
    table = Table.open(str(path))
    props = read_properties(table.storage, table.base_path)
    props["hoodie.table.metadata.partitions"] = "column_stats,record_index"
    write_properties(table.storage, table.base_path, props)
    shutil.rmtree(path / ".hoodie" / "metadata" / "files")
    assert not Table.open(str(path)).uses_metadata_table
    assert _ours(Table.open(str(path)).file_system_view().latest_file_slices(table.storage)) == _hudi_rs(path)


def test_a_data_instant_pending_on_the_data_table_is_not_read_from_the_metadata_table(fixture_root, tmp_path):
    """Java commits the metadata table first: until the data instant completes (or if it never
    does) its metadata delta commit does not count (``getValidInstantTimestamps``)."""
    path = copy_table(fixture_root.path("v9_nonpartitioned_rollback"), tmp_path)
    table = Table.open(str(path))
    timeline = table.timeline()
    last = timeline.completed_writes()[-1]
    before = MetadataFileListing(table.storage, table.base_path, timeline).files("")
    written = {n for n in before if last.timestamp in n}
    assert written, "the last write's files are in the metadata table"
    mdt = MetadataTable(table.storage, table.base_path, timeline)
    assert any(i.timestamp == last.timestamp and i.is_completed for i in mdt.timeline.instants)
    # the data instant back to inflight: its completed file goes, as if it had never completed
    (path / ".hoodie" / "timeline" / last.file_name()).unlink()
    reopened = Table.open(str(path))
    pending = reopened.timeline()
    assert any(i.timestamp == last.timestamp and i.state is not State.COMPLETED for i in pending.instants)
    after = MetadataFileListing(reopened.storage, reopened.base_path, pending).files("")
    assert written.isdisjoint(after) and set(after) == set(before) - written


# -- the merge rules of HoodieMetadataPayload ------------------------------------------------

def _rec(key: str, **files) -> FilesRecord:
    return FilesRecord(key, 2, {n: FileInfo(s, s < 0) if s >= 0 else FileInfo(0, True) for n, s in files.items()})


def test_newer_entries_win_sizes_grow_and_deletions_remove():
    merged = merge_in_order([_rec("p", a=10, b=20), _rec("p", a=5, c=30), _rec("p", b=-1)])["p"]
    assert merged.live() == {"a": 10, "c": 30}
    assert "b" not in merged.entries     # the tombstone went with the entry it removed


def test_a_deletion_of_an_unknown_file_stays_a_tombstone_for_the_base_record():
    logs = merge_in_order([_rec("p", x=-1), _rec("p", y=7)])["p"]
    assert logs.entries["x"].deleted and logs.live() == {"y": 7}
    assert logs.over(_rec("p", x=3, z=4)).live() == {"y": 7, "z": 4}


def test_a_deleted_record_wins_and_a_later_record_starts_afresh():
    gone = merge_in_order([_rec("p", a=1), FilesRecord.deleted_record("p")])["p"]
    assert gone.is_deleted and gone.live() == {}
    again = merge_in_order([_rec("p", a=1), FilesRecord.deleted_record("p"), _rec("p", b=2)])["p"]
    assert again.live() == {"b": 2}


@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_reading_through_the_metadata_table_equals_hudi_rs(fixture_root, name):
    """Rows and values of every slice the metadata table lists, merged by tablesvc's reader,
    against hudi-rs's read (which lists through the metadata table too)."""
    import pyarrow as pa
    from oracles.hudi_rs import read_table

    from tablesvc.merge import ReadContext, SliceSpec, read_file_slice

    table = Table.open(str(fixture_root.path(name)))
    assert table.uses_metadata_table
    timeline = table.timeline()
    ctx = ReadContext.for_table(table, timeline)
    slices = table.file_system_view(timeline).latest_file_slices(table.storage)
    ours = pa.concat_tables([read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx) for s in slices])
    theirs = read_table(table.base_path)
    columns = [c for c in theirs.column_names if not c.startswith("_hoodie_") or c == "_hoodie_record_key"]
    def rows(t):
        return sorted(tuple(repr(r[c]) for c in columns) for r in t.select(columns).to_pylist())
    assert rows(ours) == rows(theirs) and ours.num_rows > 0
