"""A write whose commit completed the metadata table's delta commit ``T`` and then failed to write
the data table's completed ``T``: the abort must take the metadata delta commit out too (with its
log files), or Java's readers would trust metadata of an instant the data table never completed.
The failure is injected where the data table's completed file is written, on a copy of the
Java-written ``mor_avro_v9_txns_simple_meta`` (files, record_index and two secondary indexes)."""

from __future__ import annotations

import os

import pytest

from fixture_tables import copy_table
from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.secondary_index import SecondaryIndexChanges, listed_secondary_partitions
from tablesvc.metadata.write_key_changes import WriteKeyChanges
from tablesvc.services.lifecycle import WRITE_LIFECYCLE, InstantLifecycle
from timeline.instant import Action, State
from timeline.payloads import CommitMetadata, decode_rollback_plan, encode_commit_metadata
from timeline.transitions import TimelineWriter


def _mdt_files_of(table: Table, ts: str) -> tuple[list, list]:
    """The metadata table's timeline files and log files of instant ``ts``."""
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    logs = [os.path.join(root, n) for root, _dirs, names in os.walk(mdt.base_path) for n in names
            if f"_{ts}.log." in n]
    return list(mdt.timeline.files_of(ts)), logs


def test_an_abort_after_the_metadata_delta_commit_takes_it_out(fixture_root, tmp_path, monkeypatch):
    path = copy_table(fixture_root.path("zips:mor_avro_v9_txns_simple_meta"), tmp_path)
    table = Table.open(str(path))
    data_timeline = sorted(p.name for p in (path / ".hoodie" / "timeline").iterdir())
    mdt_timeline = sorted(p.name for p in (path / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir())
    listed = listed_secondary_partitions(table.config.props)
    assert listed

    life = InstantLifecycle(table, WRITE_LIFECYCLE, heartbeat_interval_ms=60_000)
    requested = life.request()
    ts = requested.timestamp
    seen_at_failure = []
    real = TimelineWriter._write_new

    def fail_on_data_completion(writer, instant, payload):
        if writer.base_path.rstrip("/") == table.base_path.rstrip("/") and instant.timestamp == ts \
                and instant.state is State.COMPLETED:
            seen_at_failure.append(_mdt_files_of(Table.open(str(path)), ts))
            raise OSError(f"injected: cannot write {instant.file_name()}")
        return real(writer, instant, payload)

    monkeypatch.setattr(TimelineWriter, "_write_new", fail_on_data_completion)
    payload = encode_commit_metadata(CommitMetadata(partition_to_write_stats={}, extra_metadata={},
                                                    operation_type="UPSERT"), table.config.layout)
    with pytest.raises(OSError, match="injected"):
        with life.start(requested):
            life.commit(payload, key_changes=WriteKeyChanges(),
                        secondary_index={p: SecondaryIndexChanges(p) for p in listed})
    monkeypatch.setattr(TimelineWriter, "_write_new", real)

    # the failure came after the metadata table's delta commit T completed (the case at issue)
    [(files_then, logs_then)] = seen_at_failure
    assert any(f.is_completed and f.action is Action.DELTA_COMMIT for f in files_then), files_then
    assert logs_then
    # and the abort took both T's out: the data timeline as before, no metadata log file of T; the
    # metadata table rolled T back as Java does, with a rollback instant at a new time naming T
    fresh = Table.open(str(path))
    assert sorted(p.name for p in (path / ".hoodie" / "timeline").iterdir()) == data_timeline
    added = sorted(set(p.name for p in (path / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir())
                   - set(mdt_timeline))
    r = added[0][:17]
    assert r > ts and [n.replace(r, "R", 1) for n in added] == ["R.rollback.inflight", "R.rollback.requested",
                                                               f"R_{added[-1][18:35]}.rollback"]
    plan = decode_rollback_plan((path / ".hoodie" / "metadata" / ".hoodie" / "timeline" / added[1]).read_bytes(), "plan")
    assert plan.instant_to_rollback.commit_time == ts
    assert set(mdt_timeline) <= {p.name for p in (path / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir()}
    files_now, logs_now = _mdt_files_of(fresh, ts)
    assert files_now == [] and logs_now == []
