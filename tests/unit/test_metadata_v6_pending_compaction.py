"""A version-6 metadata delta commit written while a metadata compaction ``C`` is pending (the v6
rollback path writes its delta commit at ``R`` without running pending compactions first, as Java
0.15 does): the log goes to the slice Java's file-system view opens at ``C`` (a log named by ``C``,
``MetadataTableWriter._write_v6_log``), stays out of ``C``'s plan, and its records survive ``C``.
Without that, the log lands in the slice before ``C`` and ``C``'s base file hides it."""

from __future__ import annotations

from fixture_tables import v6_metadata_table
from tablesvc.api import Table
from tablesvc.fsview.names import LogFileName
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.files_changes import from_rollback
from tablesvc.metadata.mdt_compaction import execute, schedule_v6
from tablesvc.metadata.writer import MetadataTableWriter
from timeline.active import Timeline
from timeline.instant import Action, Instant, State
from timeline.payloads import encode_rollback_metadata
from timeline.payloads.rollback import RollbackMetadata, RollbackPartitionMetadata


def _files_records(table):
    timeline = Timeline.load(table.storage, table.base_path, table.config.layout)
    return MetadataTable(table.storage, table.base_path, timeline).files_records()


def test_a_v6_delta_commit_during_a_pending_compaction_goes_to_the_compactions_slice(tmp_path):
    path = v6_metadata_table("v6_mdt_files", tmp_path)
    table = Table.open(str(path))
    mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)
    data = table.timeline()
    c = schedule_v6(mdt, data)
    assert c is not None and len(c) == 20
    plan = mdt.timeline().plan_of(table.storage, Instant(c, Action.COMPACTION, State.REQUESTED))
    planned_logs = {n for op in plan.operations for n in op.delta_file_paths or ()}
    part = next(p.name for p in path.iterdir() if not p.name.startswith("."))
    fake_log = f".deadbeef-0000-0000-0000-000000000000-0_{data.max_time()}.log.9_1-0-1"
    r = table.instant_times.next(after=max(mdt.timeline().max_time(), data.max_time()))
    md = RollbackMetadata(start_rollback_time=r, time_taken_in_millis=1, total_files_deleted=0,
                          commits_rollback=("x",), partition_metadata={part: RollbackPartitionMetadata(
                              part, rollback_log_files={f"{part}/{fake_log}": 123})},
                          version=1, instants_rollback=())
    done = mdt.write_delta_commit(r, {"files": from_rollback(md)})
    stats = [s for ss in mdt.timeline().commit_metadata(table.storage, done).partition_to_write_stats.values()
             for s in ss]
    assert stats
    for s in stats:     # named by C, in C's (still base-less) slice, as Java's append handle names it
        name = LogFileName.parse(s.path.rpartition("/")[2])
        assert (name.instant, s.prev_commit, s.base_file) == (c, c, ""), s
        assert s.path.rpartition("/")[2] not in planned_logs
    # the data rollback R completes, so readers take R's block
    table.storage.write_new(str(path / ".hoodie" / f"{r}.rollback"), encode_rollback_metadata(md))
    assert any(fake_log in str(v) for v in _files_records(table).values()), "not visible before the compaction"
    compacted = execute(mdt, table.base_path, Timeline.load(table.storage, table.base_path, table.config.layout), c)
    # C compacted exactly its plan's logs, not R's
    compacted_md = mdt.timeline().commit_metadata(table.storage, compacted)
    assert sum(s.total_log_files_compacted for ss in compacted_md.partition_to_write_stats.values()
               for s in ss) == len(planned_logs)
    assert any(fake_log in str(v) for v in _files_records(table).values()), "R's records lost by the compaction"


def test_a_second_v6_delta_commit_during_the_pending_compaction_takes_the_next_log_version(tmp_path):
    path = v6_metadata_table("v6_mdt_files", tmp_path)
    table = Table.open(str(path))
    mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)
    c = schedule_v6(mdt, table.timeline())
    assert c is not None
    part = next(p.name for p in path.iterdir() if not p.name.startswith("."))
    names = []
    for n in range(2):
        r = table.instant_times.next(after=max(mdt.timeline().max_time(), table.timeline().max_time()))
        log = f".deadbeef-0000-0000-0000-00000000000{n}-0_{table.timeline().max_time()}.log.9_1-0-1"
        md = RollbackMetadata(start_rollback_time=r, time_taken_in_millis=1, total_files_deleted=0,
                              commits_rollback=("x",), partition_metadata={part: RollbackPartitionMetadata(
                                  part, rollback_log_files={f"{part}/{log}": 123})},
                              version=1, instants_rollback=())
        done = mdt.write_delta_commit(r, {"files": from_rollback(md)})
        names += [LogFileName.parse(s.path.rpartition("/")[2])
                  for ss in mdt.timeline().commit_metadata(table.storage, done).partition_to_write_stats.values()
                  for s in ss]
    assert len(names) == 2 and {n.instant for n in names} == {c}
    assert [n.version for n in names] == [1, 2]
