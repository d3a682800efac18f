"""Which columns of a new base file, or of a Parquet log block, get a dictionary.

Dictionary encoding pays off on repeated values (partition paths, commit times, file names,
categories) and costs on mostly distinct ones (record keys, sequence numbers, ids): their
dictionary fills its page and the writer falls back to plain encoding anyway, after hashing
every value.  On the benchmark's file groups the hashing was a fifth of the write time and
the file came out larger (docs/performance.md).  A log compaction's Parquet block of 38k
records took 16 ms to write instead of 39 ms, and the benchmark's four such blocks came out
15% smaller.  The choice is made from the first rows of the file, so it needs no table
config: the meta key and seqno columns never get one, any other column only when its sample
is not mostly distinct.  Readers do not care: every
Parquet reader reads both encodings.

Compaction also keeps encodings it already has (the rest of this module): string columns the
reader took through the old base file's dictionary (``merge.slice_reader``) and the new file
name (one value) reach the writer as dictionary arrays, so their values are neither decoded
nor hashed again.  One file keeps one Arrow schema (``encoded_columns``,
``align_keeping_encodings``), and each row group one dictionary per column
(``share_dictionaries``).  Such a file is written without an Arrow schema so that readers see
plain strings (``base_file_writer``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.table.meta_fields import COMMIT_SEQNO, RECORD_KEY
from tablesvc.write.schema_evolution import align_to_schema

UNIQUE_META_COLUMNS = (RECORD_KEY, COMMIT_SEQNO)   # distinct in every base file
SAMPLE_ROWS = 8192
MAX_DISTINCT = 0.5          # share of distinct values in the sample above which a column goes plain


def dictionary_columns(schema: pa.Schema, sample: pa.Table | None) -> list[str]:
    """The columns of ``schema`` to dictionary-encode, judged on the first rows of ``sample``
    (the file's first row group; None or empty: every column but the unique meta columns)."""
    chosen = [n for n in schema.names if n not in UNIQUE_META_COLUMNS]
    if sample is None or sample.num_rows == 0:
        return chosen
    head = sample.slice(0, SAMPLE_ROWS)
    limit = MAX_DISTINCT * head.num_rows
    def repeats(name: str) -> bool:
        if name not in head.schema.names:
            return True
        t = head.schema.field(name).type
        if pa.types.is_nested(t):
            return True
        column = head.column(name)
        if pa.types.is_dictionary(t):       # read through its dictionary: judged on its values
            column = column.cast(t.value_type)
        return pc.count_distinct(column, mode="all").as_py() <= limit

    return [n for n in chosen if repeats(n)]


# -- keeping the encodings a writer is handed ----------------------------------------------------

def constant_strings(value: str, n: int, encoded: bool) -> pa.Array:
    """``value`` ``n`` times: as a one-entry dictionary array (no copies of the string) or plain."""
    if encoded:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value], pa.string()))
    return pa.repeat(pa.scalar(value, pa.string()), n)


def encoded_columns(schema: pa.Schema, target: pa.Schema) -> frozenset[str]:
    """The columns of ``schema`` (a file's first table) that are dictionary arrays of the values
    ``target`` gives them: they stay encoded for the whole file."""
    return frozenset(f.name for f in schema if pa.types.is_dictionary(f.type) and target.get_field_index(f.name) >= 0
                     and f.type.value_type == target.field(f.name).type)


def align_keeping_encodings(table: pa.Table, schema_json: str, encoded: frozenset[str]) -> pa.Table:
    """``align_to_schema``, except that the ``encoded`` columns are dictionary arrays of the
    target type's values (plain ones, such as the log records' rows, are encoded here): every
    table of one file then has the same Arrow schema."""
    if not encoded:
        return align_to_schema(table, schema_json)
    out = align_to_schema(table.drop_columns([n for n in encoded if n in table.column_names]), schema_json)
    for n in encoded:
        field = out.schema.field(n)
        column = table.column(n) if n in table.column_names else pa.nulls(table.num_rows, field.type)
        if not pa.types.is_dictionary(column.type):
            column = pc.dictionary_encode(column.cast(field.type))
        out = out.set_column(out.schema.get_field_index(n), pa.field(n, column.type, field.nullable), column)
    return out


def share_dictionaries(table: pa.Table) -> pa.Table:
    """``table`` (one row group) with one dictionary per dictionary column: a Parquet writer
    handed a new dictionary in the middle of a column chunk writes the rest of it plain (between
    input row groups, or from base rows to log records: 6x the bytes in a test)."""
    if any(pa.types.is_dictionary(t) for t in table.schema.types):
        return table.unify_dictionaries()
    return table


def arrow_bytes(table: pa.Table) -> int:
    """The bytes of ``table``'s rows: a dictionary column counts its indices, not the dictionary
    that every batch of one input row group shares (``nbytes`` would count it once per batch)."""
    return sum(sum(chunk.indices.nbytes for chunk in column.chunks) if pa.types.is_dictionary(column.type)
               else column.nbytes for column in table.columns)


__all__ = ["MAX_DISTINCT", "SAMPLE_ROWS", "UNIQUE_META_COLUMNS", "align_keeping_encodings", "arrow_bytes",
           "constant_strings", "dictionary_columns", "encoded_columns", "share_dictionaries"]
