"""A write whose completed file's PUT failed without an answer (an object store's timeout,
``StorageError``) must not undo itself: the PUT may still be applied, and an abort would have
deleted the files of an instant that then shows completed.  The run is left as a process killed
at that point leaves it (pending, heartbeat file kept to expire), or completed when the PUT did
land; a failure that is known not to have written (``OSError`` here) still aborts.  Injected where
the data table's completed file is written, on a copy of a table Hudi wrote; hudi-rs reads the
result."""

from __future__ import annotations

import pytest
from oracles.hudi_rs import read_rows

from fixture_tables import TABLES_DIR, copy_table
from tablesvc.api import Table
from tablesvc.services.lifecycle import WRITE_LIFECYCLE, InstantLifecycle
from tablesvc.write.markers import create_marker
from timeline.errors import StorageError
from timeline.heartbeat import heartbeat_path
from timeline.instant import State
from timeline.payloads import CommitMetadata, encode_commit_metadata
from timeline.transitions import TimelineWriter

FIXTURE = "v9_txns_simple_nometa"


def _fail_completion(monkeypatch, ts: str, error: BaseException, lands: bool) -> None:
    real = TimelineWriter._write_new

    def write(writer, instant, payload):
        if instant.timestamp == ts and instant.state is State.COMPLETED and ".hoodie/metadata" not in writer.base_path:
            if lands:
                real(writer, instant, payload)
            raise error
        return real(writer, instant, payload)

    monkeypatch.setattr(TimelineWriter, "_write_new", write)


def _no_rows_like(base_file: str) -> bytes:
    """A Parquet file with ``base_file``'s schema and no row: a valid file readers read as empty."""
    import io

    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pq.read_table(base_file).slice(0, 0), out)
    return out.getvalue()


def _run(table: Table, monkeypatch, error: BaseException, lands: bool) -> tuple[str, str]:
    """A write of one data file (no rows) under a marker whose completion fails with ``error``."""
    life = InstantLifecycle(table, WRITE_LIFECYCLE, heartbeat_interval_ms=60_000)
    requested = life.request()
    ts = requested.timestamp
    some = table.latest_file_slices()[0]
    partition = some.partition
    empty_base_file = _no_rows_like(some.base_file.path)
    name = f"00000000-0000-0000-0000-000000000001-0_0-1-1_{ts}.parquet"
    data_file = f"{table.base_path}/{partition}/{name}"
    _fail_completion(monkeypatch, ts, error, lands)
    payload = encode_commit_metadata(CommitMetadata(partition_to_write_stats={}, extra_metadata={"schema": table.schema()},
                                                    operation_type="UPSERT"), table.config.layout)
    with pytest.raises(type(error)):
        with life.start(requested):
            create_marker(table.storage, table.base_path, ts, partition, name, "CREATE")
            table.storage.write_new(data_file, empty_base_file)
            life.commit(payload)
    return ts, data_file


@pytest.mark.parametrize("lands", [True, False], ids=["landed", "not-landed"])
def test_a_completion_without_answer_is_not_undone(tmp_path, monkeypatch, lands):
    path = copy_table(TABLES_DIR / FIXTURE, tmp_path)
    table = Table.open(str(path))
    before = sorted(r["_hoodie_record_key"] for r in read_rows(path))
    ts, data_file = _run(table, monkeypatch, StorageError(f"put {path}/x: timed out"), lands)
    state = table.timeline().get(ts)
    assert state is not None and state.state is (State.COMPLETED if lands else State.INFLIGHT), state
    assert table.storage.exists(data_file)                              # nothing undone
    assert table.storage.exists(heartbeat_path(table.base_path, ts))    # left to expire
    assert sorted(r["_hoodie_record_key"] for r in read_rows(path)) == before


def test_a_failure_after_the_completed_file_landed_never_undoes_the_completed_instant(tmp_path, monkeypatch):
    """The storage lock found lost when the hold ends (``LockHeldError``, raised after the
    completed file was written): the error reaches the caller, the completed instant keeps its files."""
    from timeline.errors import LockHeldError

    path = copy_table(TABLES_DIR / FIXTURE, tmp_path)
    table = Table.open(str(path))
    ts, data_file = _run(table, monkeypatch, LockHeldError("the table lock was lost while held"), lands=True)
    state = table.timeline().get(ts)
    assert state is not None and state.state is State.COMPLETED
    assert table.storage.exists(data_file)


def test_a_completion_known_not_to_have_written_is_still_aborted(tmp_path, monkeypatch):
    path = copy_table(TABLES_DIR / FIXTURE, tmp_path)
    table = Table.open(str(path))
    ts, data_file = _run(table, monkeypatch, OSError("injected: disk full"), lands=False)
    assert table.timeline().get(ts) is None
    assert not table.storage.exists(data_file)


@pytest.mark.parametrize("lands", [True, False], ids=["landed", "not-landed"])
def test_an_unknown_completion_with_a_metadata_table_is_recovered_by_rollback(tmp_path, monkeypatch, lands):
    """With a metadata table (its delta commit is written before the data table's completed file):
    once the heartbeat expired, ``rollback_failed`` leaves a table that keeps every invariant (both
    readers, the metadata table's files listing against storage) either way."""
    from invariants import check_invariants
    from table_builders import six_digit_key_rows, write_without_spark
    from tablesvc.api import TableSpec
    from tablesvc.services.rollback import rollback_failed
    from timeline.clock import ManualClock, SystemClock

    path = str(tmp_path / "t")
    table = Table.create(path, TableSpec("t", ("uuid",), "ts", ("city",), table_version=8, num_buckets=2,
                                         metadata_table=True))
    write_without_spark(table, six_digit_key_rows(range(50), 1), "upsert", stage=1)
    expected = {f"k{k:06d}": (1,) for k in range(50)}
    assert not check_invariants(path, expected, columns=("ts",))
    life = InstantLifecycle(table, WRITE_LIFECYCLE, heartbeat_interval_ms=60_000)
    requested = life.request()
    _fail_completion(monkeypatch, requested.timestamp, StorageError("create: timed out"), lands)
    payload = encode_commit_metadata(CommitMetadata(partition_to_write_stats={}, extra_metadata={"schema": table.schema()},
                                                    operation_type="UPSERT"), table.config.layout)
    with pytest.raises(StorageError, match="may still show completed"):
        with life.start(requested):
            life.commit(payload)
    monkeypatch.undo()
    assert table.timeline().get(requested.timestamp).state is (State.COMPLETED if lands else State.INFLIGHT)
    a_day_later = Table.open(path, clock=ManualClock(SystemClock().now_ms() + 86_400_000))
    rollback_failed(a_day_later)
    assert not check_invariants(path, expected, columns=("ts",))
    assert (table.timeline().get(requested.timestamp) is not None) is lands   # rolled back only if pending
