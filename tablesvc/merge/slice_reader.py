"""Reading one file slice: base parquet rows + selected log blocks, merged, in ``output_schema``.

This is the one read path for snapshot queries, time travel and (later) compaction.
Everything goes through the ``Storage`` interface, so it runs the same on a Spark
executor as on the driver.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from tablesvc.errors import LogFormatError
from tablesvc.logformat import BlockType, block_deletes, block_table
from tablesvc.merge.blocks import BlockSelection, select_blocks
from tablesvc.merge.context import ReadContext, SliceReadMetrics, SliceSpec
from tablesvc.merge.merger import LogDeletes, LogInput, merge_records
from tablesvc.merge.schema import align_table, output_schema, work_schema
from timeline.storage import Storage

DEFAULT_BATCH_SIZE = 65_536


def _storage(storage: Storage | None, ctx: ReadContext) -> Storage:
    if storage is not None:
        return storage
    from tablesvc.storage import storage_for

    return storage_for(ctx.base_path)


def _open_parquet(storage: Storage, path: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(pa.BufferReader(storage.read_bytes(path)))
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise LogFormatError(f"{path}: base file does not read as parquet: {exc}") from exc


def _read_base(storage: Storage, path: str, schema: pa.Schema) -> pa.Table:
    pf = _open_parquet(storage, path)
    present = [n for n in schema.names if pf.schema_arrow.get_field_index(n) >= 0]
    return align_table(pf.read(columns=present), schema)


def log_inputs(selection: BlockSelection, schema: pa.Schema) -> tuple[list[LogInput], int, int]:
    """The selected blocks as merge inputs (record tables aligned to ``schema``, delete lists),
    with the number of log records and of deleted keys."""
    inputs: list[LogInput] = []
    records = deletes = 0
    for sb in selection.blocks:
        block = sb.block
        if block.block_type == BlockType.DELETE:
            recs = block_deletes(block, sb.path)
            deletes += len(recs)
            inputs.append(LogDeletes(block.instant_time or "", tuple(recs)))
        else:
            table = align_table(block_table(block, sb.path), schema)
            records += table.num_rows
            inputs.append(table)
    return inputs, records, deletes


def read_file_slice_with_metrics(storage: Storage | None, spec: SliceSpec,
                                 ctx: ReadContext) -> tuple[pa.Table, SliceReadMetrics]:
    """The merged rows of one file slice (deletes applied, ``output_schema(ctx)``) and what it took."""
    storage = _storage(storage, ctx)
    out = output_schema(ctx)
    work = work_schema(ctx)
    base = _read_base(storage, spec.base_file, work) if spec.base_file else None
    selection = select_blocks(storage, spec.log_files, ctx)
    inputs, n_records, n_deletes = log_inputs(selection, work)
    merged = merge_records(base, inputs, merge_mode=ctx.effective_merge_mode, ordering_field=ctx.ordering_field,
                           record_key_field=ctx.record_key_field, append_only=ctx.append_only, schema=work)
    result = pa.Table.from_arrays([merged.column(n) for n in out.names], schema=out)
    metrics = SliceReadMetrics(
        base_rows=base.num_rows if base is not None else 0, log_files=selection.log_files,
        log_blocks_read=len(selection.blocks), log_blocks_skipped=selection.skipped,
        log_blocks_rolled_back=selection.rolled_back, log_blocks_superseded=selection.superseded,
        command_blocks=selection.command_blocks, log_records=n_records, log_deletes=n_deletes,
        corrupt_spans=selection.corrupt_spans, output_rows=result.num_rows)
    return result, metrics


def read_file_slice(storage: Storage | None, spec: SliceSpec, ctx: ReadContext) -> pa.Table:
    """The merged rows of one file slice, in ``output_schema(ctx)``."""
    return read_file_slice_with_metrics(storage, spec, ctx)[0]


def iter_file_slice(storage: Storage | None, spec: SliceSpec, ctx: ReadContext,
                    batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[pa.RecordBatch]:
    """Record batches of at most ``batch_size`` rows.

    A slice whose log blocks all drop out (or that has none) streams its base file
    row group by row group; otherwise the slice is merged in memory first (merging
    needs every version of a key).
    """
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    storage = _storage(storage, ctx)
    out = output_schema(ctx)
    selection = select_blocks(storage, spec.log_files, ctx) if spec.log_files else None
    if spec.base_file and (selection is None or not selection.blocks):
        pf = _open_parquet(storage, spec.base_file)
        present = [n for n in out.names if pf.schema_arrow.get_field_index(n) >= 0]
        for batch in pf.iter_batches(batch_size=batch_size, columns=present):
            yield from align_table(pa.Table.from_batches([batch]), out).to_batches(max_chunksize=batch_size)
        return
    table = read_file_slice(storage, spec, ctx)
    yield from table.to_batches(max_chunksize=batch_size)


__all__ = ["DEFAULT_BATCH_SIZE", "iter_file_slice", "log_inputs", "read_file_slice", "read_file_slice_with_metrics"]
