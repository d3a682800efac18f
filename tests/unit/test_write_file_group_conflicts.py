"""``NoConcurrentFileGroupWrite`` (``services/write_requirements.py``) on the Java-written timeline
of ``mor_avro_v9_txns_simple_meta``: a write requested before another write completed conflicts
exactly when the other's commit metadata names one of its (partition, file id) pairs; a write
requested after every completion, or touching other file groups, does not; a compaction's commit
never does.  The real interleaving of two writes is tests/spark/test_concurrent_write_file_group_conflict.py."""

from __future__ import annotations

import pytest

from fixture_tables import copy_table
from tablesvc.api import Table
from tablesvc.errors import ConflictError
from tablesvc.services.write_requirements import NoConcurrentFileGroupWrite, touched_file_groups
from timeline.instant import Action


def _before(time: str) -> str:
    """An instant time just before ``time`` (same width)."""
    return str(int(time) - 1).zfill(len(time))


def test_a_write_touching_a_file_group_written_meanwhile_conflicts(fixture_root, tmp_path):
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    table = Table.open(str(path))
    timeline = table.timeline()
    writes, compactions = [], []
    for instant in timeline.completed_writes():
        metadata = timeline.commit_metadata(table.storage, instant)
        groups = touched_file_groups(metadata.partition_to_write_stats or {}) | set(metadata.replaced_file_ids())
        if groups:
            (compactions if metadata.operation_type == "COMPACT" else writes).append((instant, groups))
    assert writes, "the fixture has completed writes"
    last, groups = writes[-1]
    assert last.action is Action.DELTA_COMMIT and last.completion_time

    # requested before the last write completed, one of its file groups: a conflict naming it
    partition, file_id = sorted(groups)[0]
    mine = NoConcurrentFileGroupWrite(_before(last.completion_time), frozenset({(partition, file_id)}))
    with pytest.raises(ConflictError) as raised:
        mine.check(table, timeline)
    message = str(raised.value)
    assert raised.value.exit_code == 3 and "\n" not in message
    assert last.timestamp in message and file_id in message and repr(partition) in message, message

    # requested after every completion: nothing completed meanwhile
    latest = max(i.completion_time for i in timeline.completed_writes())
    NoConcurrentFileGroupWrite(latest, frozenset(groups)).check(table, timeline)
    # a file group nobody else wrote
    NoConcurrentFileGroupWrite(_before(last.completion_time), frozenset({(partition, "no-such-file-id-0")})) \
        .check(table, timeline)
    # a compaction (the timeline as of its instant: later clusterings replaced its file groups)
    # rewrote the write's file groups meanwhile: not a conflict for a write
    assert compactions, "the fixture has a compaction"
    for compaction, compacted in compactions:
        NoConcurrentFileGroupWrite(_before(compaction.timestamp), frozenset(compacted)) \
            .check(table, timeline.as_of(compaction.timestamp))
    assert mine.describe().startswith("no write completed after")
