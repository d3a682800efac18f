"""Which columns of a new base file get a dictionary.

Dictionary encoding pays off on repeated values (partition paths, commit times, file names,
categories) and costs on mostly distinct ones (record keys, sequence numbers, ids): their
dictionary fills its page and the writer falls back to plain encoding anyway, after hashing
every value.  On the benchmark's file groups the hashing was a fifth of the write time and
the file came out larger (docs/performance.md).  The choice is made from the first rows of
the file, so it needs no table config: the meta key and seqno columns never get one, any
other column only when its sample is not mostly distinct.  Readers do not care: every
Parquet reader reads both encodings.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

UNIQUE_META_COLUMNS = ("_hoodie_record_key", "_hoodie_commit_seqno")   # distinct in every base file
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


__all__ = ["MAX_DISTINCT", "SAMPLE_ROWS", "UNIQUE_META_COLUMNS", "dictionary_columns"]
