"""Combining the records of one batch that share a record key (Hudi's pre-combine).

One row per ``_hoodie_record_key`` survives: the one with the greatest ordering value,
the later one in input order on a tie; without an ordering field, the last one.  A
null ordering value is smaller than every other value (so a row with a value beats a
row without one).  Survivors keep their input order.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import InvalidInputError
from tablesvc.write.keys import RECORD_KEY_COLUMN

_ROW = "__tablesvc_row__"


def combine_in_batch(table: pa.Table, ordering_field: str | None) -> pa.Table:
    if RECORD_KEY_COLUMN not in table.schema.names:
        raise InvalidInputError(f"column {RECORD_KEY_COLUMN!r} is missing; add the key columns first")
    if ordering_field is not None and ordering_field not in table.schema.names:
        raise InvalidInputError(f"ordering field {ordering_field!r} is missing from the incoming data")
    n = table.num_rows
    if n <= 1:
        return table
    rows = pa.array(range(n), pa.int64())  # built in C for a range
    keys = table.column(RECORD_KEY_COLUMN)
    sort_cols = {"k": keys, _ROW: rows}
    order = [("k", "ascending")]
    if ordering_field is not None:
        ordering = table.column(ordering_field)
        t = ordering.type
        if pa.types.is_nested(t) or pa.types.is_null(t):
            raise InvalidInputError(f"ordering field {ordering_field!r} of type {t} cannot be compared")
        if pa.types.is_dictionary(t):
            ordering = ordering.cast(t.value_type)
        sort_cols["o"] = ordering
        order.append(("o", "ascending", "at_start"))
    order.append((_ROW, "ascending"))
    helper = pa.table(sort_cols)
    # Nulls first: a null ordering value loses to any value.  Keys and rows have no nulls.
    idx = pc.sort_indices(helper, sort_keys=order)
    sorted_keys = pc.take(keys, idx)
    if isinstance(sorted_keys, pa.ChunkedArray):
        sorted_keys = sorted_keys.combine_chunks()
    # The last row of each run of equal keys wins.
    differs = pc.not_equal(sorted_keys.slice(0, n - 1), sorted_keys.slice(1))
    last = pa.concat_arrays([differs, pa.array([True])])
    winners = pc.filter(idx, last)
    winners = pc.take(winners, pc.sort_indices(winners))  # back to input order
    return table.take(winners)


__all__ = ["combine_in_batch"]
