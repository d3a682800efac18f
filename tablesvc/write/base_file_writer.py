"""The one writer of base files: ``<fileId>_<token>_<instant>.parquet`` streamed row group by row group.

Two callers feed it: a write's new file group (``file_group_writer``: the records of one task, as
one table) and compaction (``services/compaction``: the merged slice, batch by batch, regrouped
by ``row_groups`` or sorted by ``sorted_row_groups``).  What a base file is, is decided here once:

* announced by a CREATE marker before anything else, so that a rollback finds whatever a crash
  left (and, for the first file of a new partition, visits the partition to remove a partial
  copy of its ``.hoodie_partition_metadata``, which is created next);
* created exclusively and atomically (``Storage.write_new_from``: a temporary copy, fsynced, then
  linked under its name): readers see no file or the whole one; an existing name is a
  ``ConflictError``;
* snappy; a dictionary for the columns whose first rows repeat (``parquet_encoding``); row
  groups of at most ``ROW_GROUP_ROWS`` rows; the Arrow schema stored in the footer unless some
  column arrives dictionary-encoded (then readers must see the plain type, as in the files
  Hudi writes, which carry none).
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from tablesvc.errors import ConflictError
from tablesvc.write.markers import IOType, create_marker, rel_path
from tablesvc.write.parquet_encoding import arrow_bytes, dictionary_columns, share_dictionaries
from tablesvc.write.partition_metadata import ensure_partition_metadata
from timeline.storage import Storage, join

# A row group of a new base file ends at ROW_GROUP_ROWS rows (pyarrow's default, what
# ``pq.write_table`` writes) or, where batches are regrouped (``row_groups``), once its rows take
# ROW_GROUP_BYTES in Arrow: the rows a task buffers before writing them.  Smaller row groups
# compress a little less (16 MiB: about 80k rows of the memory benchmark's rows, a file 9% larger
# than with 1M-row groups).
ROW_GROUP_ROWS = 1 << 20
ROW_GROUP_BYTES = 16 << 20


def row_groups(tables: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """``tables`` regrouped into row groups of up to ``ROW_GROUP_ROWS`` rows or about
    ``ROW_GROUP_BYTES`` (merged batches are small, row groups should not be)."""
    pending: list[pa.Table] = []
    rows = size = 0
    for table in tables:
        pending.append(table)
        rows += table.num_rows
        size += arrow_bytes(table)
        if rows >= ROW_GROUP_ROWS or size >= ROW_GROUP_BYTES:
            yield share_dictionaries(pa.concat_tables(pending))
            pending, rows, size = [], 0, 0
    if pending:
        yield share_dictionaries(pa.concat_tables(pending))


def sorted_row_groups(tables: Iterable[pa.Table], sort_columns: tuple[str, ...]) -> Iterator[pa.Table]:
    """Sorting needs every row: the rows are materialised here (the one case that does)."""
    parts = list(tables)
    if not parts:               # every row deleted: an empty file, as without sorting
        return
    rows = pa.concat_tables(parts).sort_by([(c, "ascending") for c in sort_columns])
    for start in range(0, rows.num_rows, ROW_GROUP_ROWS):
        yield rows.slice(start, ROW_GROUP_ROWS)


def write_base_file(storage: Storage, base_path: str, instant: str, partition: str, name: str,
                    schema: pa.Schema, groups: Iterable[pa.Table], *, new_partition: bool = False) -> tuple[int, int]:
    """Create the base file ``partition/name`` of ``instant`` from ``groups`` (one row group each,
    split at ``ROW_GROUP_ROWS``; pulled one at a time, so a lazy iterator streams); (rows, bytes).

    ``schema``: the file's columns when ``groups`` is empty (an empty file, as ``pq.write_table``
    writes an empty table) and the columns the dictionary choice looks at.  ``new_partition``:
    the partition may not exist yet; its metadata file is made after the marker, before the file."""
    create_marker(storage, base_path, instant, partition, name, IOType.CREATE)
    if new_partition:
        ensure_partition_metadata(storage, base_path, partition, instant)
    try:
        return _create_parquet(storage, join(base_path, partition, name), schema, groups)
    except FileExistsError:
        raise ConflictError(f"{rel_path(partition, name)} already exists (the same task attempt ran twice?)") \
            from None


def _create_parquet(storage: Storage, path: str, schema: pa.Schema, groups: Iterable[pa.Table]) -> tuple[int, int]:
    """Create ``path`` (atomically, exclusively) from ``groups``; (rows, bytes).  Columns that come
    as dictionary arrays are written from their dictionaries (no hashing of the values); the file
    then stores no Arrow schema, so that every reader reads them back as the plain type ``schema``
    says, as it reads the files Hudi writes (which have none either)."""
    rows = 0

    def write(sink) -> None:
        nonlocal rows
        pending = iter(groups)
        first = next(pending, None)
        dictionary = dictionary_columns(schema, first)
        file_schema = first.schema if first is not None else schema
        encoded = any(pa.types.is_dictionary(t) for t in file_schema.types)
        with pq.ParquetWriter(sink, file_schema, compression="snappy", use_dictionary=dictionary,
                              store_schema=not encoded) as writer:
            for group in itertools.chain(() if first is None else (first,), pending):
                first = None        # else the first group stays alive while the next fills
                writer.write_table(group, row_group_size=ROW_GROUP_ROWS)
                rows += group.num_rows
                del group           # else it stays alive while the next group fills
            if not rows:
                writer.write_table(schema.empty_table())    # as pq.write_table writes an empty table

    write_from = getattr(storage, "write_new_from", None)
    if write_from is not None:
        size = write_from(path, write)
        return rows, size
    sink = io.BytesIO()             # a storage that cannot stream: the file is built in memory
    write(sink)
    storage.write_new(path, sink.getvalue())
    return rows, sink.tell()


__all__ = ["ROW_GROUP_BYTES", "ROW_GROUP_ROWS", "row_groups", "sorted_row_groups", "write_base_file"]
