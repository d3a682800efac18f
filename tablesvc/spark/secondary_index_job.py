"""The Spark job that computes what one write changes in the table's secondary indexes
(``metadata.secondary_index``): run by the write action after its files are written and before
its commit, with the write's instant ``T`` still inflight.

Per file group the write touched, one item: the file group's latest merged slice without ``T``
(before) and the slice with ``T``'s files (``T``'s log files appended to it, or ``T``'s new base
file alone), as Hudi's ``convertWriteStatsToSecondaryIndexRecords`` compares them.  A task reads
both slices with the merge reader, projected to the record key and the indexed columns, and
yields only secondary-index keys with a deleted flag; the table's rows never reach the driver.
The driver reduces the keys per index (an insert beats a delete of the same key).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator, Mapping, Sequence

import pyarrow as pa

from tablesvc.errors import TablesvcError
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.metadata.secondary_index import (
    SecondaryIndex, SecondaryIndexChanges, column_texts, reduce_changes, secondary_index_key, secondary_indexes,
    slice_changes,
)
from tablesvc.spark.read_job import pack_tasks, task_items
from tablesvc.storage import task_storage
from tablesvc.table.meta_fields import RECORD_KEY
from timeline.payloads import WriteStat
from timeline.storage import join

OUTPUT = "si_partition string, si_key string, si_deleted boolean"


@dataclass(frozen=True)
class SliceDiff:
    """One touched file group: its slice before the write (None: a new file group) and with it."""

    before: SliceSpec | None
    after: SliceSpec


def slice_diffs(table, timeline, instant: str, stats: Mapping[str, Sequence[WriteStat]]) -> list[SliceDiff]:
    """The items of the job: one per file group ``stats`` (write ``instant``'s) names.  A write
    gives a file group either one new base file or log files: anything else is refused, as Hudi
    refuses it (``Only either of base file or log files``), since no single slice is the write's."""
    touched = sorted(stats)
    view = table.file_system_view(timeline)
    latest = {(s.partition, s.file_id): s for s in view.latest_file_slices(table.storage)
              if s.partition in set(touched)}
    out = []
    for partition in touched:
        by_group: dict[str, list[WriteStat]] = {}
        for stat in stats[partition]:
            if stat.path:
                by_group.setdefault(stat.file_id, []).append(stat)
        for file_id, written in sorted(by_group.items()):
            current = latest.get((partition, file_id))
            before = SliceSpec.from_file_slice(current) if current is not None else None
            paths = [join(table.base_path, s.path) for s in written]
            logs = [p for p in paths if ".log." in p.rsplit("/", 1)[-1]]
            bases = [p for p in paths if p not in logs]
            if len(bases) > 1 or (bases and logs):
                raise TablesvcError(f"{table.base_path}: write {instant} wrote {len(bases)} base and {len(logs)} log "
                                    f"files into file group {file_id} of partition {partition!r}: only either one "
                                    "base file or log files can be indexed")
            if bases:       # a new base file: the slice with the write is that file alone (Java)
                after = SliceSpec(partition, file_id, bases[0], ())
            elif before is not None:
                after = replace(before, log_files=tuple(before.log_files) + tuple(logs))
            else:
                after = SliceSpec(partition, file_id, None, tuple(logs))
            out.append(SliceDiff(before, after))
    return out


def _task(before_ctx: ReadContext, after_ctx: ReadContext, indexes: tuple[SecondaryIndex, ...],
          groups: Sequence[bytes]):
    def texts_by_key(storage, spec: SliceSpec | None, ctx: ReadContext) -> dict[str, dict[str, str | None]]:
        if spec is None:
            return {ix.partition: {} for ix in indexes}
        rows = read_file_slice(storage, spec, ctx)
        keys = rows.column(RECORD_KEY).to_pylist()
        return {ix.partition: dict(zip(keys, column_texts(rows.column(ix.source_field).combine_chunks(), ix.kind)))
                for ix in indexes}

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = task_storage(before_ctx.base_path, before_ctx.storage)
        for item in task_items(batches, groups):
            before = texts_by_key(storage, item.before, before_ctx)
            after = texts_by_key(storage, item.after, after_ctx)
            parts, keys, deleted = [], [], []
            for ix in indexes:
                for value, record_key, is_delete in slice_changes(before[ix.partition], after[ix.partition]):
                    parts.append(ix.partition)
                    keys.append(secondary_index_key(value, record_key))
                    deleted.append(is_delete)
            if parts:
                yield pa.RecordBatch.from_arrays(
                    [pa.array(parts, pa.string()), pa.array(keys, pa.string()), pa.array(deleted, pa.bool_())],
                    names=["si_partition", "si_key", "si_deleted"])
    return run


def secondary_index_changes(spark, table, instant: str, stats: Mapping[str, Sequence[WriteStat]],
                            data_schema: str) -> dict[str, SecondaryIndexChanges]:
    """Index partition -> what write ``instant`` (inflight, its files written: ``stats``) changes
    in it; empty when the table lists no secondary index.  ``data_schema``: the table schema
    after the write (Avro JSON)."""
    cfg = table.config
    indexes = secondary_indexes(table.storage, table.base_path, cfg.props, cfg.version, data_schema)
    if not indexes:
        return {}
    timeline = table.timeline()
    items = slice_diffs(table, timeline, instant, stats)
    found: dict[str, list[tuple[str, bool]]] = {ix.partition: [] for ix in indexes}
    if items:
        columns = (RECORD_KEY, *sorted({ix.source_field for ix in indexes}))
        before_ctx = ReadContext.for_table(table, timeline, columns=columns)
        after_ctx = replace(before_ctx, completed_instants=before_ctx.completed_instants | {instant},
                            table_schema_json=data_schema)
        tasks = pack_tasks(spark, items)
        rows = tasks.frame.mapInArrow(_task(before_ctx, after_ctx, indexes, tasks.groups), OUTPUT).collect()
        for row in rows:
            found[row["si_partition"]].append((row["si_key"], bool(row["si_deleted"])))
    return {partition: reduce_changes(partition, pairs, instant) for partition, pairs in found.items()}


__all__ = ["SliceDiff", "secondary_index_changes", "slice_diffs"]
