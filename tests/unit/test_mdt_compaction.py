"""The metadata table's own compaction (``tablesvc.metadata.mdt_compaction``), checked against the
three compactions Java wrote into the carried fixtures (Hudi 1.0 on v8, Hudi 1.1.1 on v9): with
Java's compaction taken out of a copy, tablesvc plans the same operations at the same instant and
writes base files holding the same cells (keys and value bytes) as Java's; every partition's
merged records are unchanged; a pending compaction is invisible and is finished by the next
attempt; the instant rule keeps a pending data instant's delta commit out of the base files."""

from __future__ import annotations

import pytest
from fixture_tables import copy_table

from tablesvc.api import Table
from tablesvc.hfile import read_hfile
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.listing import MetadataFileListing
from tablesvc.metadata.mdt_compaction import base_file_name, compact_if_due, execute, merge_for, schedule
from tablesvc.metadata.mdt_compaction_plan import (
    build_plan,
    compaction_instant_time,
    delta_commits_since_compaction,
    metadata_partitions,
)
from tablesvc.metadata.partition_reader import partition_records
from tablesvc.metadata.writer import MetadataTableWriter
from timeline.active import Timeline
from timeline.instant import Action, Instant, State
from timeline.instant_time import add_millis
from timeline.payloads import decode_commit_metadata, decode_compaction_plan, encode_compaction_plan

# (fixture, the instant of the compaction Java wrote on its metadata table)
JAVA_COMPACTIONS = [("v8_trips_8i3u1d", "20251220210130942"),
                    ("zips:mor_avro_v9_txns_simple_meta", "20260307162612567"),
                    ("zips:mor_avro_v9_txns_complex_meta", "20260307162643148")]
FILE_NAME = "_hoodie_file_name"


def _mdt(path):
    table = Table.open(str(path))
    return table, MetadataTable(table.storage, table.base_path, table.timeline())


def _records(path) -> dict:
    """Every partition's merged records, ``_hoodie_file_name`` aside (it names the base file)."""
    table, mdt = _mdt(path)
    out = {}
    for partition in metadata_partitions(table.storage, mdt.base_path):
        records = partition_records(mdt, partition, merge_for(partition))
        # a DELETE-block key (None) reads as absent; a compaction drops it
        out[partition] = {k: _comparable(v) for k, v in records.items() if v is not None}
    return out


def _comparable(record):
    """``_hoodie_file_name`` aside (it names the base file), and ``valueType`` null where the
    writer's schema (Hudi 1.0, v8 fixture) had no such field: tablesvc writes Hudi 1.1's schema."""
    if record is None:
        return None
    out = {**record, FILE_NAME: None}
    if out.get("ColumnStatsMetadata") is not None:
        out["ColumnStatsMetadata"] = {"valueType": None, **out["ColumnStatsMetadata"]}
    return out


def _take_out(path, instant):
    """Remove Java's compaction ``instant`` from the copy: its plan, commit metadata and base files."""
    mdt_root = path / ".hoodie" / "metadata"
    timeline = mdt_root / ".hoodie" / "timeline"
    plan = decode_compaction_plan((timeline / f"{instant}.compaction.requested").read_bytes(), "plan")
    (commit,) = timeline.glob(f"{instant}_*.commit")
    stats = decode_commit_metadata(commit.read_bytes(), Table.open(str(path)).config.layout, "commit")
    cells = {}
    for base in mdt_root.glob(f"*/*_{instant}.hfile"):
        reader = read_hfile(Table.open(str(path)).storage, str(base))
        cells[(base.parent.name, base.name.split("_")[0])] = [(c.key, c.value) for c in reader.cells()]
        base.unlink()
    for f in timeline.glob(f"{instant}*"):
        f.unlink()
    return plan, stats, cells


def _ops(plan):
    return sorted((op.partition_path, op.file_id, op.base_instant_time, op.data_file_path,
                   tuple(sorted(op.delta_file_paths or ()))) for op in plan.operations)


@pytest.mark.parametrize("name,instant", JAVA_COMPACTIONS)
def test_java_written_compactions_are_reproduced(fixture_root, tmp_path, name, instant):
    path = copy_table(fixture_root.path(name), tmp_path)
    with_java = _records(path)
    java_plan, java_commit, java_cells = _take_out(path, instant)

    table = Table.open(str(path))
    writer = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)
    ours = build_plan(table.storage, writer.base_path, writer.config, writer.timeline(), instant)
    assert _ops(ours) == _ops(java_plan)

    table.storage.write_new(writer.timeline().path_of(Instant(instant, Action.COMPACTION, State.REQUESTED)),
                            encode_compaction_plan(ours))
    done = execute(writer, table.base_path, table.timeline(), instant)
    assert done.state is State.COMPLETED and done.action is Action.COMMIT

    mdt_root = path / ".hoodie" / "metadata"
    written = {(b.parent.name, b.name.split("_")[0]): b for b in mdt_root.glob(f"*/*_{instant}.hfile")}
    v9 = "v9" in name
    # Hudi 1.1 (v9) writes a base file for every operation, Hudi 1.0 (v8) skipped groups whose
    # logs held no record; tablesvc does as 1.1
    assert set(written) == set(java_cells) if v9 else set(written) >= set(java_cells)
    for (partition, file_id), base in written.items():
        assert base.name == base_file_name(file_id, instant)
        reader = read_hfile(table.storage, str(base))
        ours_cells = [(c.key, c.value) for c in reader.cells()]
        java = java_cells.get((partition, file_id), [])
        assert [k for k, _ in ours_cells] == [k for k, _ in java], (partition, file_id)
    assert _records(path) == with_java

    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    commit = mdt.timeline.files_of(instant)
    (completed,) = [f for f in commit if f.is_completed]
    ours_commit = decode_commit_metadata(table.storage.read_bytes(mdt.timeline.path_of(completed)),
                                         mdt.config.layout, "ours")
    assert ours_commit.operation_type == java_commit.operation_type == "COMPACT"
    assert ours_commit.compacted and set(ours_commit.extra_metadata) == {"schema"}
    if v9:    # Hudi 1.0's record schema had no valueType
        assert ours_commit.extra_metadata == java_commit.extra_metadata
    counts = {(s.partition_path, s.file_id): (s.num_writes, s.num_deletes) for s in ours_commit.write_stats()}
    java_counts = {(s.partition_path, s.file_id): (s.num_writes, s.num_deletes) for s in java_commit.write_stats()}
    assert {k: v for k, v in counts.items() if v9 or k in java_counts} == java_counts


@pytest.mark.parametrize("name,instant", JAVA_COMPACTIONS)
def test_cell_values_equal_javas_but_for_the_file_name(fixture_root, tmp_path, name, instant):
    """Decoded with the schema, every cell equals Java's, ``_hoodie_file_name`` aside (Java's names
    its own file); that field names the new base file in every record."""
    from tablesvc.metadata.partition_reader import decode_named
    path = copy_table(fixture_root.path(name), tmp_path)
    table = Table.open(str(path))
    java = {}
    for base in (path / ".hoodie" / "metadata").glob(f"*/*_{instant}.hfile"):
        r = read_hfile(table.storage, str(base))
        java[(base.parent.name, base.name.split("_")[0])] = dict(decode_named(r, r.schema))
    _take_out(path, instant)
    writer = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)
    assert schedule(writer, table.timeline(), lambda: instant) == instant
    execute(writer, table.base_path, table.timeline(), instant)
    for base in (path / ".hoodie" / "metadata").glob(f"*/*_{instant}.hfile"):
        r = read_hfile(table.storage, str(base))
        ours = dict(decode_named(r, r.schema))
        assert {v[FILE_NAME] for v in ours.values()} <= {base.name}
        theirs = java.get((base.parent.name, base.name.split("_")[0]), {})    # v8: Hudi 1.0 wrote none
        assert {k: _comparable(v) for k, v in ours.items()} == {k: _comparable(v) for k, v in theirs.items()}


def test_a_pending_compaction_is_invisible_and_the_next_attempt_finishes_it(fixture_root, tmp_path):
    name, instant = JAVA_COMPACTIONS[1]
    path = copy_table(fixture_root.path(name), tmp_path)
    with_java = _records(path)
    _take_out(path, instant)
    before, listing_before = _records(path), _listing(path)
    table = Table.open(str(path))
    writer = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)
    assert schedule(writer, table.timeline(), lambda: instant) == instant
    assert _records(path) == before and _listing(path) == listing_before          # requested only
    writer.timeline_writer.start(writer.timeline().files_of(instant)[0])
    # an attempt killed after one base file: the file is there, the instant is inflight
    stale = path / ".hoodie" / "metadata" / "files" / base_file_name("files-0000-0", instant)
    stale.write_bytes(b"partial")
    assert _records(path) == before and _listing(path) == listing_before
    done = compact_if_due(table, writer)
    assert [d.timestamp for d in done] == [instant]
    assert not writer.timeline().pending_compactions()
    assert _records(path) == with_java and _listing(path) == listing_before
    assert read_hfile(table.storage, str(stale)).schema is not None    # rewritten whole


def _listing(path):
    table = Table.open(str(path))
    listing = MetadataFileListing(table.storage, table.base_path, table.timeline())
    return {p: listing.files(p) for p in listing.partitions()}


def test_a_pending_data_instant_stays_out_of_the_base_files(fixture_root, tmp_path):
    """Java's rule: a data instant pending while its metadata delta commit is completed puts the
    compaction 1 ms before it, and the plan takes only logs completed before the compaction."""
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    table = Table.open(str(path))
    data = table.timeline()
    latest = data.completed(Action.DELTA_COMMIT)[-1]
    (path / ".hoodie" / "timeline" / latest.file_name()).unlink()        # completed file gone: pending
    data = Timeline.load(table.storage, table.base_path, table.config.layout)
    writer = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)
    mdt = writer.timeline()
    assert latest.timestamp in {i.timestamp for i in mdt.completed(Action.DELTA_COMMIT)}
    instant = compaction_instant_time(data, mdt, "29991231235959999")
    assert instant == add_millis(latest.timestamp, -1)
    before = _records(path)
    assert schedule(writer, data, lambda: "29991231235959999") == instant
    plan = decode_compaction_plan(table.storage.read_bytes(
        writer.timeline().path_of(writer.timeline().files_of(instant)[0])), "plan")
    assert all(latest.timestamp not in n for op in plan.operations for n in op.delta_file_paths)
    execute(writer, table.base_path, data, instant)
    assert _records(path) == before
    # the pending instant's delta commit is still only in its log: rolling it back is allowed
    from tablesvc.metadata.mdt_rollback import new_instant_time, rollback_delta_commit
    assert rollback_delta_commit(writer, latest.timestamp, new_instant_time(writer)) is not None


def test_the_trigger_counts_delta_commits_since_the_last_compaction(fixture_root):
    table, mdt = _mdt(fixture_root.path("v8_trips_8i3u1d"))
    # after …130942 (Java's compaction): none later by instant time (…130911 completed after it)
    assert delta_commits_since_compaction(mdt.timeline) == 0
