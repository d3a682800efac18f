"""Reading one file slice: base parquet rows + selected log blocks, merged, in ``output_schema``.

This is the one read path for snapshot queries, time travel and compaction.  Everything goes
through the ``Storage`` interface, so it runs the same on a Spark executor as on the driver.

Memory is bounded by the log side, not by the base file: the selected log blocks (usually
small next to the base file) are folded into one result per key first (``fold_log``), then
the base file is read a batch at a time from an open file handle and each batch meets the log
result (``BaseMerge``); the log records no base row beat follow the last batch.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq

from tablesvc.errors import LogFormatError
from tablesvc.logformat import BlockType, block_deletes, block_table
from tablesvc.merge.blocks import BlockSelection, select_blocks
from tablesvc.merge.context import ReadContext, SliceReadMetrics, SliceSpec
from tablesvc.merge.merger import BaseMerge, LogDeletes, LogInput, LogSide, MergeCounts, fold_log
from tablesvc.merge.schema import align_array, align_table, decode_dictionaries, output_schema, work_schema
from timeline.storage import Storage

DEFAULT_BATCH_SIZE = 65_536
# Memory: the constants below hold a compaction of a 5.5M-row, 250 MiB file group (3 x 10 MiB of
# Avro logs) to about 220 MiB of resident memory over the process's idle size
# (tests/benchmarks/test_bench_memory.py at scale 1).
#
# Base rows read and merged at a time by default (compaction; reads merge ``iter_file_slice``'s
# batch size): bounds the decoded base rows held at once.
MERGE_BATCH_ROWS = 16_384
# The most base rows a read (``iter_file_slice``) merges at a time: against 16k-row batches, 64k
# rows per filter and take cost 15-25% less per slice, and fewer, larger Arrow batches cross to
# Spark, for ~35-50 MiB more resident memory on a 5.5M-row file group (test_bench_memory.py).
READ_MERGE_BATCH_ROWS = 65_536
# Base keys looked up per ``index_in`` call.  Each call builds a hash table of every log key (it
# costs a few times more per key than probing one base key), so keys are looked up in chunks of
# at least this many rows and at least LOOKUP_CHUNK_FACTOR times the log keys: the builds then
# cost no more than the probes.  Only the key column is held for a chunk.
KEY_CHUNK_ROWS = 1 << 18
LOOKUP_CHUNK_FACTOR = 2
# Bytes per read from the base file: columns are read through small buffers, not whole row groups.
_READ_BUFFER = 1 << 20
# Decoding on the calling thread only: Arrow's allocator cannot hand back pages that its worker
# threads freed (they stay with those threads' heaps), and a Spark task has one core anyway.
_READ_THREADS = False
# A string column is read as a dictionary array when, in every row group, its dictionary page
# is at most 1/DICTIONARY_READ_RATIO of its bytes or at most SMALL_DICTIONARY_BYTES (compressed)
# (``dictionary_read_columns``).  A dictionary that fell back to plain pages filled the writer's
# page limit (1 MiB by default in parquet-mr and Arrow): far more than 4 KiB even compressed.
DICTIONARY_READ_RATIO = 8
SMALL_DICTIONARY_BYTES = 4096
# Base rows between two hand-backs of Arrow's freed pages (``release_unused``): mimalloc otherwise
# holds about twice the bytes in use while batches come and go.
RELEASE_EVERY_ROWS = 1 << 18
# Log records from which the memory freed by decoding them is handed back before the base file streams.
RELEASE_AFTER_RECORDS = 50_000


def _storage(storage: Storage | None, ctx: ReadContext) -> Storage:
    if storage is not None:
        return storage
    from tablesvc.storage import task_storage

    return task_storage(ctx.base_path, ctx.storage)


def _open_parquet(storage: Storage, path: str, files: ExitStack,
                  columns: Sequence[str] | None = None) -> tuple[pq.ParquetFile, pa.NativeFile]:
    """``path`` as a ParquetFile reading from an open handle (closed with ``files``), and that handle;
    storages without ``open_read`` are read whole into memory.  Of ``columns``, those that
    ``dictionary_read_columns`` picks come back dictionary-encoded (``MergedSlice`` decodes them
    after the merge)."""
    try:
        open_read = getattr(storage, "open_read", None)
        source = files.enter_context(open_read(path)) if open_read else pa.BufferReader(storage.read_bytes(path))
        if not isinstance(source, pa.NativeFile):
            source = pa.PythonFile(source, mode="r")
        pf = pq.ParquetFile(source, pre_buffer=False, buffer_size=_READ_BUFFER)
        by_dictionary = dictionary_read_columns(pf, columns or ())
        if by_dictionary:
            pf = pq.ParquetFile(source, metadata=pf.metadata, pre_buffer=False, buffer_size=_READ_BUFFER,
                                read_dictionary=by_dictionary)
        return pf, source
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise LogFormatError(f"{path}: base file does not read as parquet: {exc}") from exc


def dictionary_read_columns(pf: pq.ParquetFile, columns: Sequence[str]) -> list[str]:
    """The top-level string and binary ``columns`` worth reading as dictionary arrays: in every
    row group a dictionary page that is small, absolutely or next to the column's bytes.  Such
    columns (constants like the partition path and file name, a few hundred distinct values)
    decode 2-4x faster as dictionary indices plus one vectorised take than value by value.  A
    column whose dictionary outgrew the writer's limit and fell back to plain pages has a large
    dictionary page, and stays dense: reading it as a dictionary would hash every value."""
    md = pf.metadata
    arrow = pf.schema_arrow
    if md.num_row_groups == 0:
        return []
    leaf = {md.row_group(0).column(i).path_in_schema: i for i in range(md.num_columns)}
    picked = []
    for name in columns:
        at = arrow.get_field_index(name)
        if at < 0 or name not in leaf:
            continue
        t = arrow.field(at).type
        if not (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t)):
            continue
        for r in range(md.num_row_groups):
            chunk = md.row_group(r).column(leaf[name])
            if not chunk.has_dictionary_page or chunk.dictionary_page_offset is None:
                break
            dictionary_bytes = chunk.data_page_offset - chunk.dictionary_page_offset
            small = dictionary_bytes <= SMALL_DICTIONARY_BYTES or \
                dictionary_bytes * DICTIONARY_READ_RATIO <= chunk.total_compressed_size
            if dictionary_bytes <= 0 or not small:
                break
        else:
            picked.append(name)
    return picked


def _present(pf: pq.ParquetFile, schema: pa.Schema) -> list[str]:
    return [n for n in schema.names if pf.schema_arrow.get_field_index(n) >= 0]


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


# -- the base file, batch by batch --------------------------------------------------------------------
class _KeySlots:
    """The log-side slots (``LogSide.slots``) of the base file's keys, in file order, computed a
    large chunk of keys at a time from a key-column-only reader and handed out ``take(n)`` rows
    at a time to follow the batches of the main reader."""

    def __init__(self, key_batches: Iterator[pa.RecordBatch] | None, chunk_rows: int, log: LogSide,
                 key_type: pa.DataType, total_rows: int):
        self._batches = key_batches
        self._chunk_rows = chunk_rows
        self._log = log
        self._key_type = key_type
        self._missing_rows = total_rows           # the file has no key column: every key is null
        self._keys: pa.ChunkedArray | None = None
        self._slots: pa.ChunkedArray | None = None
        self._at = 0

    def _next_chunk(self) -> None:
        if self._batches is None:
            n, self._missing_rows = self._missing_rows, 0
            pieces = [pa.nulls(n, self._key_type)]
        else:
            pieces, rows = [], 0
            for batch in self._batches:
                pieces.append(align_array(batch.column(0), self._key_type))
                rows += batch.num_rows
                if rows >= self._chunk_rows:
                    break
        # chunked, not combined: the keys are held once
        self._keys = pa.chunked_array(pieces, self._key_type)
        self._slots, self._at = self._log.slots(self._keys), 0

    def take(self, n: int) -> tuple[pa.ChunkedArray, pa.Array]:
        """(keys, slots) of the next ``n`` base rows."""
        keys: list[pa.Array] = []
        slots: list[pa.Array] = []
        while n > 0:
            if self._keys is None or self._at == len(self._keys):
                self._next_chunk()
                if len(self._keys) == 0:
                    raise LogFormatError("base file: the key column has fewer rows than the file")
            step = min(n, len(self._keys) - self._at)
            keys += self._keys.slice(self._at, step).chunks
            slots += self._slots.slice(self._at, step).chunks
            self._at += step
            n -= step
        return pa.chunked_array(keys, self._key_type), pa.concat_arrays(slots)


def _base_batches(storage: Storage, path: str, schema: pa.Schema, log: LogSide, files: ExitStack,
                  batch_rows: int) -> Iterator[tuple[pa.Table, pa.Array | None]]:
    """The base file in ``schema``, ``batch_rows`` rows at a time, with the log-side slots of
    each batch's keys (None when the log side has nothing to merge)."""
    # The key and ordering columns are compared while merging: they are read as plain arrays.
    compared = {log.record_key_field, log.ordering_field}
    pf, source = _open_parquet(storage, path, files, [n for n in schema.names if n not in compared])
    present = _present(pf, schema)
    if log.passthrough:
        batches = pf.iter_batches(batch_size=batch_rows, columns=present, use_threads=_READ_THREADS)
        for batch in _released(batches):
            yield align_table(pa.Table.from_batches([batch]), schema, keep_dictionaries=True), None
        return
    key = log.record_key_field
    chunk_rows = max(KEY_CHUNK_ROWS, LOOKUP_CHUNK_FACTOR * len(log.lookup))
    key_batches = None
    if key in present:
        # A second reader reads the key column alone, for the chunked lookups.  It shares the first
        # one's handle and footer (every read seeks first): on an object store the file is fetched once.
        key_batches = pq.ParquetFile(source, metadata=pf.metadata, pre_buffer=False,
                                     buffer_size=_READ_BUFFER).iter_batches(batch_size=batch_rows, columns=[key],
                                                                            use_threads=_READ_THREADS)
    key_slots = _KeySlots(key_batches, chunk_rows, log, schema.field(key).type, pf.metadata.num_rows)
    others = [n for n in present if n != key]
    if not others:
        for start in range(0, pf.metadata.num_rows, batch_rows):
            keys, slots = key_slots.take(min(batch_rows, pf.metadata.num_rows - start))
            yield align_table(pa.table({key: keys}), schema), slots
        return
    for batch in _released(pf.iter_batches(batch_size=batch_rows, columns=others, use_threads=_READ_THREADS)):
        keys, slots = key_slots.take(batch.num_rows)
        table = pa.Table.from_batches([batch]).append_column(key, keys)
        yield align_table(table, schema, keep_dictionaries=True), slots


# -- memory ------------------------------------------------------------------------------------------------
def _libc_malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim       # glibc only
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _libc_malloc_trim()


def _return_free_memory() -> None:
    """Give memory that is free but still held back to the OS, so that the peaks of successive
    phases do not add up in the resident size: Arrow's allocator (mimalloc by default) keeps
    freed pages for reuse, and glibc keeps the heap that the Avro decoder's Python objects used.
    No ``gc.collect()``: those objects hold no cycles, reference counting has freed them by
    now, and a full collection cost 6% of a compaction task (a Spark worker holds many objects)."""
    pa.default_memory_pool().release_unused()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _released(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches``, handing Arrow's freed pages back every ``RELEASE_EVERY_ROWS`` rows."""
    rows = 0
    for batch in batches:
        yield batch
        rows += batch.num_rows
        if rows >= RELEASE_EVERY_ROWS:
            pa.default_memory_pool().release_unused()
            rows = 0


# -- one slice, streamed ---------------------------------------------------------------------------------
class MergedSlice:
    """One file slice merged, as a stream of tables in ``output_schema(ctx)``.

    Built by ``open_merged_slice``, which selects and folds the log blocks at once (a corrupt
    log raises there); ``tables()`` then streams the base file.  ``metrics`` and ``counts`` are
    complete once ``tables()`` is exhausted.
    """

    def __init__(self, storage: Storage, spec: SliceSpec, ctx: ReadContext, log: LogSide,
                 log_metrics: SliceReadMetrics, batch_rows: int):
        self._storage = storage
        self._spec = spec
        self._schema = output_schema(ctx)
        # Without anything to merge only the output columns are read (a projection stays narrow).
        self._read_schema = self._schema if log.passthrough else work_schema(ctx)
        self._merge = BaseMerge(log)
        self._batch_rows = batch_rows
        self._output_rows = 0
        self._done = False
        self.read_seconds = 0.0         # time spent reading and merging (not consuming) the rows
        self._log_metrics = log_metrics

    def _project(self, table: pa.Table, decode: bool) -> pa.Table:
        """The output columns, the base file's dictionary-read ones decoded (``decode``): after
        the merge's filter, which then moved their indices rather than their values."""
        table = table.select(self._schema.names)
        return decode_dictionaries(table, self._schema) if decode else table

    def _merged(self) -> Iterator[pa.Table]:
        with ExitStack() as files:
            if self._spec.base_file:
                for batch, slots in _base_batches(self._storage, self._spec.base_file, self._read_schema,
                                                  self._merge.log, files, self._batch_rows):
                    yield self._merge.merge(batch, slots)
        yield self._merge.tail()

    def tables(self, decode_dictionaries: bool = True) -> Iterator[pa.Table]:
        """The merged rows: surviving base rows in file order, then the surviving log records in
        arrival order; no empty tables.  Can be iterated once.  With ``decode_dictionaries``
        false, the base file's columns read through their dictionary (``dictionary_read_columns``)
        stay dictionary arrays of the output type's values (a writer can keep the encoding)."""
        if self._done:
            raise RuntimeError(f"{self._spec.file_id}: the merged slice was already read")
        self._done = True
        rows = self._merged()
        try:
            while True:
                started = time.perf_counter()
                table = next(rows, None)
                self.read_seconds += time.perf_counter() - started
                if table is None:
                    return
                if table.num_rows:
                    self._output_rows += table.num_rows
                    yield self._project(table, decode_dictionaries)
        finally:
            rows.close()            # closes the base file handles when the consumer stops early

    @property
    def metrics(self) -> SliceReadMetrics:
        return replace(self._log_metrics, base_rows=self._merge.counts().base_rows, output_rows=self._output_rows)

    @property
    def counts(self) -> MergeCounts:
        """Inserts, updates and deletes against the base file (see ``BaseMerge.counts``)."""
        return self._merge.counts()


def _fold_slice_logs(storage: Storage, spec: SliceSpec, ctx: ReadContext) -> tuple[LogSide, SliceReadMetrics]:
    """The slice's log side, and the log half of its metrics (the blocks' bytes are not kept)."""
    selection = select_blocks(storage, spec.log_files, ctx)
    inputs, n_records, n_deletes = log_inputs(selection, work_schema(ctx))
    log = fold_log(inputs, merge_mode=ctx.effective_merge_mode, ordering_field=ctx.ordering_field,
                   schema=work_schema(ctx), record_key_field=ctx.record_key_field, append_only=ctx.append_only)
    metrics = SliceReadMetrics(
        log_files=selection.log_files, log_blocks_read=len(selection.blocks), log_blocks_skipped=selection.skipped,
        log_blocks_rolled_back=selection.rolled_back, log_blocks_superseded=selection.superseded,
        command_blocks=selection.command_blocks, log_records=n_records, log_deletes=n_deletes,
        corrupt_spans=selection.corrupt_spans)
    return log, metrics


def open_merged_slice(storage: Storage | None, spec: SliceSpec, ctx: ReadContext,
                      batch_rows: int | None = None) -> MergedSlice:
    """Select and fold the slice's log blocks now; stream the base file from ``tables()``."""
    storage = _storage(storage, ctx)
    log, log_metrics = _fold_slice_logs(storage, spec, ctx)
    if log_metrics.log_records >= RELEASE_AFTER_RECORDS:
        _return_free_memory()        # what decoding the log blocks freed, before the base file streams
    return MergedSlice(storage, spec, ctx, log, log_metrics, batch_rows or MERGE_BATCH_ROWS)


def read_file_slice_with_metrics(storage: Storage | None, spec: SliceSpec,
                                 ctx: ReadContext) -> tuple[pa.Table, SliceReadMetrics]:
    """The merged rows of one file slice (deletes applied, ``output_schema(ctx)``) and what it took."""
    merged = open_merged_slice(storage, spec, ctx)
    parts = list(merged.tables())
    result = pa.concat_tables(parts) if parts else output_schema(ctx).empty_table()
    return result, merged.metrics


def read_file_slice(storage: Storage | None, spec: SliceSpec, ctx: ReadContext) -> pa.Table:
    """The merged rows of one file slice, in ``output_schema(ctx)``."""
    return read_file_slice_with_metrics(storage, spec, ctx)[0]


def iter_file_slice(storage: Storage | None, spec: SliceSpec, ctx: ReadContext,
                    batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[pa.RecordBatch]:
    """Record batches of at most ``batch_size`` rows (no empty ones), merged as ``read_file_slice``
    merges them, with the base file streamed a batch at a time."""
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    # The base file is merged ``batch_size`` rows at a time too (up to READ_MERGE_BATCH_ROWS).
    merge_rows = min(batch_size, READ_MERGE_BATCH_ROWS)
    for table in open_merged_slice(storage, spec, ctx, batch_rows=merge_rows).tables():
        yield from table.to_batches(max_chunksize=batch_size)


__all__ = ["DEFAULT_BATCH_SIZE", "MergedSlice", "iter_file_slice", "log_inputs", "open_merged_slice",
           "read_file_slice", "read_file_slice_with_metrics"]
