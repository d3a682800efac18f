"""The MOR write path as a Spark job: insert, upsert, delete.

Steps, and what a crash at each one leaves (docs/write-path.md has the full table):

1. Validate and reconcile the schema on the driver (nothing written yet; a bad batch is
   refused with exit code 2).
2. ``T.deltacommit.requested`` then ``.inflight``; a heartbeat starts beating for T.
3. Tag: one ``mapInArrow`` pass adds the record key, the partition path and the file
   group (bucket index: a hash of the key; lookup index: a join with the keys of the
   latest file slices).
4. Write: ``groupBy(partition, file group).applyInArrow`` — one task per file group
   dedupes the batch by key and writes a base file (new group) or one log file
   (existing group); a marker is created before each file, each file appears whole.
   Tasks return write stats only.
5. Reconcile: files that have a marker but no write stat (failed task attempts) are
   deleted.
6. Complete ``T`` under the table lock with commit metadata (every write stat and the
   table schema), then delete the markers and the heartbeat.

Until step 6 readers see nothing of T: its files carry an instant that is not completed.
"""

from __future__ import annotations

import enum
import json
import pickle
import time
from dataclasses import asdict, dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import InvalidInputError, UnsupportedTableError
from tablesvc.fsview.names import new_file_id
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.spark.errors import translate_task_error
from tablesvc.spark.read_job import specs_dataframe
from tablesvc.spark.session import task_identity
from tablesvc.storage import storage_for
from tablesvc.write import (BucketSpec, FileGroupTarget, KeySpec, WriteContext, add_key_columns, bucket_file_id,
                            bucket_of_file_id, combine_in_batch, delete_markers, list_markers,
                            reconcile_schema, write_file_group)
from timeline.heartbeat import Heartbeat
from timeline.instant import Action
from timeline.payloads import CommitMetadata, WriteStat, encode_commit_metadata
from timeline.storage import join

FG_COLUMN = "_tablesvc_file_group"
KEY, PARTITION = "_hoodie_record_key", "_hoodie_partition_path"
NEW_GROUP = ""  # file-group column value for keys the lookup index did not find


class Operation(enum.Enum):
    INSERT = "insert"
    UPSERT = "upsert"
    DELETE = "delete"

    @classmethod
    def parse(cls, text: str) -> "Operation":
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise InvalidInputError(f"unknown operation {text!r}: use insert, upsert or delete") from None

    @property
    def hudi_name(self) -> str:
        return self.value.upper()


@dataclass(frozen=True)
class WriteResult:
    instant: str
    operation: str
    files_written: int
    records_written: int
    inserts: int
    updates: int
    deletes: int
    file_groups_created: int
    seconds: float
    services: tuple = ()      # ServiceResults of the inline services that ran after the commit

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["services"] = [r.as_dict() for r in self.services]
        return out


def _arrow_schema(df) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema, timezone="UTC")


def _check_columns(incoming: pa.Schema, table, operation: Operation) -> None:
    cfg = table.config
    needed = list(cfg.record_key_fields) + list(cfg.partition_fields)
    if operation is not Operation.DELETE and cfg.ordering_field:
        needed.append(cfg.ordering_field)
    missing = [c for c in needed if c not in incoming.names]
    if missing:
        raise InvalidInputError(f"input lacks column(s) {', '.join(missing)} that table {cfg.name} needs "
                                f"(record key, partition{', ordering' if cfg.ordering_field else ''} fields)")


def _tag_batches(key_spec: KeySpec, bucket: BucketSpec | None):
    def run(batches):
        for batch in batches:
            keyed = add_key_columns(batch, key_spec)
            if bucket is not None:
                fg = pc.cast(bucket.bucket_ids(keyed.column(KEY), key_spec.record_key_fields), pa.string())
            else:
                fg = pa.nulls(keyed.num_rows, pa.string())
            yield keyed.append_column(FG_COLUMN, fg)
    return run


def _write_groups(ctx: WriteContext, targets: dict, bucket: BucketSpec | None, ordering_field: str | None,
                  data_columns: tuple[str, ...]):
    def run(group: pa.Table) -> pa.Table:
        partition = group.column(PARTITION)[0].as_py()
        fg = group.column(FG_COLUMN)[0].as_py()
        if bucket is not None:
            target = targets.get((partition, fg)) or FileGroupTarget.new(partition, bucket_file_id(int(fg)))
        elif fg:
            target = targets[(partition, fg)]
        else:  # keys the lookup did not find (or an insert): one new file group per partition
            target = FileGroupTarget.new(partition, new_file_id())
        records = combine_in_batch(group.drop_columns([FG_COLUMN]), ordering_field)
        keep = [c for c in records.column_names if c in data_columns or c in (KEY, PARTITION)]
        task_partition, stage, attempt = task_identity()
        stats = write_file_group(storage_for(ctx.base_path), replace(ctx, stage_id=stage), target,
                                 records.select(keep), task_partition, attempt)
        return pa.table({"partition": [partition] * len(stats),
                         "stat": [json.dumps(s.to_avro(), default=str) for s in stats]})
    return run


def _slice_keys(ctx: ReadContext):
    """Per slice: (partition, record key, file id) of every live record, for the lookup join."""
    def run(batches):
        storage = storage_for(ctx.base_path)
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                spec = pickle.loads(blob)
                keys = read_file_slice(storage, spec, ctx).column(KEY).combine_chunks()
                n = len(keys)
                yield pa.RecordBatch.from_arrays(
                    [pa.array([spec.partition] * n, pa.string()), keys, pa.array([spec.file_id] * n, pa.string())],
                    names=["_lk_partition", "_lk_key", "_lk_fg"])
    return run


def _lookup_targets(spark, table, view_slices, keyed, partitions: set[str]):
    """Lookup index for tables without a bucket index: join the batch's keys with the keys of
    the latest slices of the partitions it touches; unmatched keys get ``NEW_GROUP``."""
    from pyspark.sql import functions as F

    slices = [s for s in view_slices if s.partition in partitions]
    if not slices:
        return keyed.withColumn(FG_COLUMN, F.lit(NEW_GROUP)), {}
    targets = {(s.partition, s.file_id): FileGroupTarget.from_slice(s) for s in slices}
    ctx = ReadContext.for_table(table, columns=(KEY,))
    existing = specs_dataframe(spark, [SliceSpec.from_file_slice(s) for s in slices]).mapInArrow(
        _slice_keys(ctx), "_lk_partition string, _lk_key string, _lk_fg string")
    base = keyed.drop(FG_COLUMN)
    joined = base.join(existing, (base[PARTITION] == existing["_lk_partition"]) & (base[KEY] == existing["_lk_key"]),
                       "left")
    return (joined.withColumn(FG_COLUMN, F.coalesce(F.col("_lk_fg"), F.lit(NEW_GROUP)))
            .drop("_lk_partition", "_lk_key", "_lk_fg")), targets


def _check_no_null_keys(df, key_fields) -> None:
    """Refuse a batch with a null record key before anything is written (one Spark pass)."""
    from functools import reduce

    from pyspark.sql import functions as F

    all_null = reduce(lambda a, b: a & b, [F.col(k).isNull() for k in key_fields])
    if df.filter(all_null).limit(1).count():
        raise InvalidInputError(f"input has records with a null record key ({', '.join(key_fields)})")


def _abort(table, instant) -> None:
    """Undo a write that failed while this process is alive: its files (from the markers),
    the markers, then the pending instant.  A process killed before this point leaves the
    instant inflight for ``tablesvc rollback`` to undo the same way."""
    for partition, file_name, _io in list_markers(table.storage, table.base_path, instant.timestamp):
        table.storage.delete(join(table.base_path, partition, file_name) if partition else
                             join(table.base_path, file_name))
    delete_markers(table.storage, table.base_path, instant.timestamp)
    table.timeline_writer.remove_pending(instant)


def write_dataframe(table, df, operation: str | Operation = Operation.UPSERT, *,
                    log_block_format: str = "avro", config=None) -> WriteResult | None:
    """Write a Spark DataFrame into ``table``; ``None`` when the input is empty (nothing to do).

    After the commit, the inline services ``config`` enables run in the same Spark session
    (docs/services.md); ``config`` defaults to the table's ``.hoodie/tablesvc.yaml`` over
    the built-in defaults.
    """
    op = operation if isinstance(operation, Operation) else Operation.parse(operation)
    started = time.monotonic()
    spark = df.sparkSession
    cfg = table.config
    if cfg.has_metadata_table:
        raise UnsupportedTableError(
            f"{table.base_path}: the table keeps a metadata table (hoodie.table.metadata.partitions="
            f"{','.join(cfg.metadata_partitions)}) that tablesvc does not update; readers listing through it "
            "would miss new files, so tablesvc refuses to write")
    if not cfg.is_mor:
        raise UnsupportedTableError(f"{table.base_path}: tablesvc writes merge-on-read tables only")
    incoming = _arrow_schema(df)
    _check_columns(incoming, table, op)
    timeline = table.timeline()
    old_schema = table.schema(timeline)
    if op is Operation.DELETE:
        if old_schema is None:
            return None  # nothing was ever written: nothing to delete
        data_schema = old_schema
    else:
        data_schema = reconcile_schema(old_schema, incoming, cfg.record_key_fields, cfg.ordering_field,
                                       cfg.partition_fields, table_name=cfg.name)
    if df.isEmpty():
        return None
    _check_no_null_keys(df, cfg.record_key_fields)
    if config is None:
        from tablesvc.config import load_config

        config = load_config(table.storage, table_path=table.base_path)
    data_columns = tuple(f["name"] for f in json.loads(data_schema)["fields"])
    key_spec = KeySpec.from_config(cfg)
    bucket = BucketSpec.from_props(cfg.props)

    # Hudi's EAGER failed-writes policy: a write killed earlier is rolled back before this
    # one starts, so one crash never blocks the table (docs/rollback.md).
    from tablesvc.services.rollback import eager_rollback

    rolled_back = eager_rollback(table, config=config)
    writer = table.timeline_writer
    instant = writer.request(Action.DELTA_COMMIT)
    # Beat before anything else: an instant without a heartbeat looks dead to a rollback sweep.
    heartbeat = Heartbeat(table.storage, table.base_path, instant.timestamp, table.clock,
                          interval_ms=config.get("hoodie.client.heartbeat.interval_in_ms")).start()
    inflight = writer.start(instant)
    try:
        view_slices = table.file_system_view().latest_file_slices(table.storage)
        from pyspark.sql.types import StringType, StructField, StructType

        tagged_schema = StructType(list(df.schema.fields) + [StructField(c, StringType()) for c in
                                                             (KEY, PARTITION, FG_COLUMN)])
        keyed = df.mapInArrow(_tag_batches(key_spec, bucket), tagged_schema)
        if bucket is not None:
            targets = {}
            for s in view_slices:
                b = bucket_of_file_id(s.file_id)
                if b is not None:
                    targets[(s.partition, str(b))] = FileGroupTarget.from_slice(s)
        elif op is Operation.INSERT:
            targets = {}
        else:
            partitions = {r[0] for r in keyed.select(PARTITION).distinct().collect()}
            keyed, targets = _lookup_targets(spark, table, view_slices, keyed, partitions)
        if cfg.version < 8:
            # Compaction, v6 only (docs/compaction.md): a file group in a pending compaction plan C
            # takes its new log into slice C (named with base instant C), or C's completion would hide
            # it.  v8/v9 need nothing: a log joins the slice its completion time falls into.
            from tablesvc.services.compaction.planner import v6_pending_compaction_targets

            targets = v6_pending_compaction_targets(table, targets)
        ctx = WriteContext(base_path=table.base_path, table_name=cfg.name, table_version=cfg.version,
                           instant=instant.timestamp, data_schema_json=data_schema,
                           ordering_field=cfg.ordering_field, log_block_format=log_block_format,
                           operation=op.value, stage_id=0)
        result = keyed.groupBy(PARTITION, FG_COLUMN).applyInArrow(
            _write_groups(ctx, targets, bucket, None if op is Operation.DELETE else cfg.ordering_field, data_columns),
            "partition string, stat string")
        stats: dict[str, list[WriteStat]] = {}
        for row in result.collect():  # write stats only: a few hundred bytes per file group
            stats.setdefault(row["partition"], []).append(WriteStat.from_avro(json.loads(row["stat"])))
        _remove_orphans(table, instant.timestamp, stats)
        metadata = CommitMetadata(partition_to_write_stats={p: tuple(v) for p, v in stats.items()},
                                  extra_metadata={"schema": data_schema}, operation_type=op.hudi_name)
        writer.complete(inflight, encode_commit_metadata(metadata, cfg.layout))
    except BaseException as e:
        _abort(table, inflight)
        raise translate_task_error(e) from None
    finally:
        heartbeat.stop()
    delete_markers(table.storage, table.base_path, instant.timestamp)
    from tablesvc.services.inline import run_inline_services

    services = tuple(rolled_back) + tuple(run_inline_services(table, config, spark))
    all_stats = [s for v in stats.values() for s in v]
    return WriteResult(
        instant=instant.timestamp, operation=op.hudi_name, files_written=len(all_stats),
        records_written=sum(s.num_writes or 0 for s in all_stats),
        inserts=sum(s.num_inserts or 0 for s in all_stats),
        updates=sum(s.num_update_writes or 0 for s in all_stats),
        deletes=sum(s.num_deletes or 0 for s in all_stats),
        file_groups_created=sum(1 for s in all_stats if s.prev_commit in (None, "null")),
        seconds=round(time.monotonic() - started, 3), services=services)


def _remove_orphans(table, instant: str, stats: dict[str, list[WriteStat]]) -> None:
    """Delete files a failed task attempt left behind: a marker, but no write stat."""
    written = {s.path for v in stats.values() for s in v}
    for partition, file_name, _io in list_markers(table.storage, table.base_path, instant):
        rel = f"{partition}/{file_name}" if partition else file_name
        if rel not in written:
            table.storage.delete(join(table.base_path, rel))
