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
    ordering = None if ordering_field is None else _comparable(table.column(ordering_field), ordering_field)
    keys = table.column(RECORD_KEY_COLUMN)
    if not _has_duplicates(keys):  # the usual batch: one sort of the keys alone, no copy of the rows
        return table
    rows = pa.array(range(n), pa.int64())  # built in C for a range
    sort_cols = {"k": keys, _ROW: rows}
    order = [("k", "ascending")]
    if ordering is not None:
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


def _comparable(ordering: pa.Array | pa.ChunkedArray, name: str) -> pa.Array | pa.ChunkedArray:
    t = ordering.type
    if pa.types.is_nested(t) or pa.types.is_null(t):
        raise InvalidInputError(f"ordering field {name!r} of type {t} cannot be compared")
    return ordering.cast(t.value_type) if pa.types.is_dictionary(t) else ordering


def _has_duplicates(keys: pa.Array | pa.ChunkedArray) -> bool:
    """Whether any key occurs twice (a sort of the keys: cheaper than hashing them in Arrow)."""
    sorted_keys = pc.take(keys, pc.sort_indices(keys))
    if isinstance(sorted_keys, pa.ChunkedArray):
        sorted_keys = sorted_keys.combine_chunks()
    return pc.any(pc.equal(sorted_keys.slice(0, len(sorted_keys) - 1), sorted_keys.slice(1))).as_py() is True


__all__ = ["combine_in_batch"]
