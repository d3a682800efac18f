"""Building test tables without Spark, through tablesvc's write pieces (no pytest fixtures here).

* ``write_without_spark``: a delta commit as the writer makes it (keys, in-batch combine, bucket
  ids, one ``write_file_group`` per file group), optionally left uncompleted (a failed write);
* ``update_five_records``: a delta commit updating five records of one file slice;
* ``compact_by_hand``: what a compaction commits, done directly (not through the service);
* ``tree``: every file and folder under a table, with a digest of each file, to show that
  something changed nothing;
* ``busy_table``: the sample table plus six delta commits on its first file group (the
  ``*_first_group`` helpers), and ``tablesvc_rows``, what tablesvc's merge reads of it;
* ``five_digit_key_rows`` / ``six_digit_key_rows``: small (uuid, ts, city) batches.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablesvc.demo.sample_table import build_sample_table
from tablesvc.fsview.names import BaseFileName
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.metadata.maintain import update_metadata_table, writes_metadata_table
from tablesvc.services.compaction.planner import v6_pending_compaction_targets
from tablesvc.api import Table
from tablesvc.write import (
    BucketSpec, FileGroupTarget, KeySpec, WriteContext, add_key_columns, bucket_file_id, bucket_of_file_id,
    combine_in_batch, delete_markers, reconcile_schema, write_file_group,
)
from tablesvc.write.keys import PARTITION_PATH_COLUMN, RECORD_KEY_COLUMN
from timeline.clock import ManualClock
from timeline.instant import Action
from timeline.payloads import (
    CommitMetadata, CompactionOperation, CompactionPlan, WriteStat, encode_commit_metadata, encode_compaction_plan,
)
from timeline.storage import join


def write_without_spark(table: Table, batch: pa.Table, operation: str, *, stage: int,
                        complete: bool = True) -> tuple[str, dict[str, list[WriteStat]]]:
    """A delta commit of ``batch`` (``operation``: upsert, insert, delete...) with Spark's stage id
    ``stage``; returns its instant and its write stats by partition (``""`` and none for a delete
    on a table nothing was written to).  ``complete=False`` leaves the
    instant inflight with its files and markers: a failed write."""
    cfg = table.config
    old = table.schema()
    if operation == "delete" and old is None:
        return "", {}     # nothing was ever written: nothing to delete (as the Spark writer decides)
    writer = table.timeline_writer
    inflight = writer.start(writer.request(Action.DELTA_COMMIT))
    t = inflight.timestamp
    schema = old if operation == "delete" else reconcile_schema(
        old, batch.schema, cfg.record_key_fields, cfg.ordering_field, cfg.partition_fields, table_name=cfg.name)
    keyed = combine_in_batch(add_key_columns(batch, KeySpec.from_config(cfg)),
                             None if operation == "delete" else cfg.ordering_field)
    ids = BucketSpec.from_props(cfg.props).bucket_ids(keyed.column(RECORD_KEY_COLUMN), cfg.record_key_fields)
    keyed = keyed.append_column("__bucket", ids)
    targets = {(s.partition, bucket_of_file_id(s.file_id)): FileGroupTarget.from_slice(s)
               for s in table.latest_file_slices()}
    if cfg.version < 8:      # v6: a group in a pending compaction plan C writes into slice C, as the writer does
        targets = v6_pending_compaction_targets(table, targets)
    ctx = WriteContext(table.base_path, cfg.name, cfg.version, t, schema, cfg.ordering_field,
                       operation=operation, stage_id=stage)
    stats: dict[str, list[WriteStat]] = {}
    groups = sorted(set(zip(keyed.column(PARTITION_PATH_COLUMN).to_pylist(), ids.to_pylist())))
    for task, (partition, bucket) in enumerate(groups):
        mask = pc.and_(pc.equal(keyed.column(PARTITION_PATH_COLUMN), partition),
                       pc.equal(keyed.column("__bucket"), bucket))
        target = targets.get((partition, bucket)) or FileGroupTarget.new(partition, bucket_file_id(bucket))
        for st in write_file_group(table.storage, ctx, target, keyed.filter(mask).drop_columns(["__bucket"]),
                                   task_partition=task, attempt=0):
            stats.setdefault(partition, []).append(st)
    if complete:
        md = CommitMetadata(partition_to_write_stats={p: tuple(v) for p, v in stats.items()},
                            extra_metadata={"schema": schema}, operation_type=operation.upper())
        payload = encode_commit_metadata(md, cfg.layout)
        # a table with a metadata table: its delta commit T first, under the same lock hold, as
        # the writer's commit point (InstantLifecycle.commit) does
        keep_metadata = (lambda _timeline: update_metadata_table(table, inflight, payload)) \
            if writes_metadata_table(cfg) else None
        writer.complete(inflight, payload, keep_metadata)
        delete_markers(table.storage, table.base_path, t)
    return t, stats


def apply_to_model(model: dict, batch: pa.Table, operation: str, value=lambda r: r["ts"],
                   ts_of=lambda v: v) -> None:
    """What a completed write does to an independent model of the table: deletes drop keys,
    other rows win when their ``ts`` is not lower than the stored one (event-time ordering)."""
    for r in batch.to_pylist():
        if operation == "delete":
            model.pop(r["uuid"], None)
        elif r["uuid"] not in model or r["ts"] >= ts_of(model[r["uuid"]]):
            model[r["uuid"]] = value(r)


def update_five_records(table: Table, file_slice, fare: float) -> str:
    """A delta commit updating the first five records of ``file_slice`` (``fare`` set, ``ts`` + 10):
    one new log block in its file group.  For tables with the sample schema (``fare``, ``ts``)."""
    s = file_slice
    rows = read_file_slice(table.storage, SliceSpec.from_file_slice(s), ReadContext.for_table(table)).slice(0, 5)
    rows = rows.set_column(rows.schema.get_field_index("fare"), "fare", pa.array([fare] * 5))
    rows = rows.set_column(rows.schema.get_field_index("ts"), "ts", pc.add(rows.column("ts"), 10))
    w = table.timeline_writer
    d = w.start(w.request(Action.DELTA_COMMIT))
    ctx = WriteContext(table.base_path, table.config.name, table.config.version, d.timestamp, table.schema(), "ts")
    records = rows.drop_columns(["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name"])
    stats = write_file_group(table.storage, ctx, FileGroupTarget.from_slice(s), records, 0, 0)
    md = CommitMetadata({s.partition: tuple(stats)}, False, {"schema": table.schema()}, "UPSERT")
    w.complete(d, encode_commit_metadata(md, table.config.layout))
    return d.timestamp


def compact_by_hand(table: Table, clock: ManualClock | None = None) -> str:
    """What a compaction commits, done directly: every latest slice (with or without a base file)
    merged into a new base file.  ``clock``, if given, is advanced by a second first."""
    slices = table.latest_file_slices()
    plan = CompactionPlan(operations=tuple(CompactionOperation(
        s.base_instant, s.file_id, s.partition, s.base_file.file_name if s.base_file else None,
        tuple(lf.file_name for lf in s.log_files), {"TOTAL_LOG_FILES_SIZE": 0.0}) for s in slices), version=2)
    w = table.timeline_writer
    if clock is not None:
        clock.advance(1000)
    c = w.start(w.request(Action.COMPACTION, encode_compaction_plan(plan)))
    ctx = ReadContext.for_table(table)
    stats: dict[str, list[WriteStat]] = {}
    for s in slices:
        merged = read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx)
        name = BaseFileName(s.file_id, "0-0-0", c.timestamp).name
        merged = merged.set_column(merged.schema.get_field_index("_hoodie_file_name"), "_hoodie_file_name",
                                   pa.array([name] * merged.num_rows, pa.string()))
        pq.write_table(merged, join(table.base_path, s.partition, name))
        stats.setdefault(s.partition, []).append(WriteStat(
            file_id=s.file_id, path=f"{s.partition}/{name}", prev_commit=s.base_instant,
            partition_path=s.partition, num_writes=merged.num_rows))
    md = CommitMetadata({p: tuple(v) for p, v in stats.items()}, True, {"schema": table.schema()}, "COMPACT")
    w.complete(c, encode_commit_metadata(md, table.config.layout))
    return c.timestamp


def tree(path: Path) -> dict[str, str]:
    """Every file and folder under the table (``.hoodie`` included), with a digest of each file's bytes."""
    out = {}
    for root, dirs, files in os.walk(path):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), path) + "/"] = "dir"
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, path)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


# -- the busy sample table (log compaction, the runner) ------------------------------------------------
def tablesvc_rows(table: Table) -> list[tuple]:
    """(uuid, ts, fare) of every row tablesvc's merge reads in the latest slices, sorted."""
    ctx = ReadContext.for_table(table)
    rows = []
    for s in table.latest_file_slices():
        rows += read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx).to_pylist()
    return sorted((r["uuid"], r["ts"], r["fare"]) for r in rows)


def first_file_group(table: Table):
    """The latest slice of the table's first partition (by name)."""
    return sorted(table.latest_file_slices(), key=lambda s: s.partition)[0]


def commit_to_first_group(table: Table, records: pa.Table, operation: str) -> str:
    """A completed delta commit of ``records`` into the first file group (a new log file)."""
    s = first_file_group(table)
    w = table.timeline_writer
    d = w.start(w.request(Action.DELTA_COMMIT))
    ctx = WriteContext(table.base_path, table.config.name, table.config.version, d.timestamp, table.schema(), "ts",
                       operation=operation)
    stats = write_file_group(table.storage, ctx, FileGroupTarget.from_slice(s), records, 0, 0)
    md = CommitMetadata({s.partition: tuple(stats)}, False, {"schema": table.schema()},
                        "DELETE" if operation == "delete" else "UPSERT")
    w.complete(d, encode_commit_metadata(md, table.config.layout))
    return d.timestamp


def first_group_rows(table: Table) -> pa.Table:
    """The merged rows of the first file group's latest slice, meta columns included."""
    s = first_file_group(table)
    return read_file_slice(table.storage, SliceSpec.from_file_slice(s), ReadContext.for_table(table))


def update_five_of_first_group(table: Table, start: int, fare: float) -> str:
    """A delta commit updating five records of the first file group (a new log file)."""
    rows = first_group_rows(table).slice(start, 5)
    rows = rows.set_column(rows.schema.get_field_index("fare"), "fare", pa.array([fare] * rows.num_rows))
    rows = rows.set_column(rows.schema.get_field_index("ts"), "ts", pc.add(rows.column("ts"), 10))
    rows = rows.drop_columns(["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name"])
    return commit_to_first_group(table, rows, "upsert")


def delete_from_first_group(table: Table, start: int, n: int = 2) -> tuple[str, list[str]]:
    """A delta commit deleting ``n`` records of the first file group; its instant and the keys."""
    rows = first_group_rows(table).slice(start, n)
    keys = rows.column("_hoodie_record_key").to_pylist()
    rows = rows.drop_columns(["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name"])
    return commit_to_first_group(table, rows, "delete"), keys


def busy_table(tmp_path, version: int):
    """The sample table plus 6 delta commits (updates and deletes) on its first file group."""
    table = build_sample_table(str(tmp_path / "t"), table_version=version, rows=60).table
    instants = [update_five_of_first_group(table, 0, 1.5), update_five_of_first_group(table, 3, 2.5)]
    d, deleted = delete_from_first_group(table, 0)           # two keys of the base file end deleted
    instants.append(d)
    instants += [update_five_of_first_group(table, 5, 3.5), update_five_of_first_group(table, 0, 4.5)]
    d2, deleted2 = delete_from_first_group(table, 8, 1)
    instants.append(d2)
    return Table.open(table.base_path), instants, deleted + deleted2


# -- small (uuid, ts, city) batches ---------------------------------------------------------------------
UUID_TS_CITY = pa.schema([("uuid", pa.string()), ("ts", pa.int64()), ("city", pa.string())])


def five_digit_key_rows(keys, ts, city=None) -> pa.Table:
    """Keys ``k00000``.., one ``ts``, the city given or a/b/c by key (the rollback tests' rows)."""
    return pa.table({"uuid": [f"k{k:05d}" for k in keys], "ts": [ts] * len(keys),
                     "city": [city or ("a", "b", "c")[k % 3] for k in keys]}, schema=UUID_TS_CITY)


def six_digit_key_rows(keys, ts) -> pa.Table:
    """Keys ``k000000``.., one ``ts``, city a/b/c by key (the killed-write tests' rows)."""
    return pa.table({"uuid": [f"k{k:06d}" for k in keys], "ts": [ts] * len(keys),
                     "city": [("a", "b", "c")[k % 3] for k in keys]})
