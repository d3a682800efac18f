"""Record merge over already-collected inputs: base rows, then log blocks in order.

Everything per row is vectorised with pyarrow compute (sort_indices, take, filter,
index_in/is_in); Python loops run only over *delete records* of delete blocks (and
the base rows those deletes name), which are few.

The semantics follow Java's file group reader, which hudi-rs 0.5.0 (reader v2)
ports, in two steps (docs/merge-semantics.md):

1. **The log side** is folded per record key over the log blocks in order, starting
   from nothing:
   * EVENT_TIME_ORDERING: a record replaces the current one when its ordering value is
     greater or equal (ties go to the later arrival); a null ordering value is the lowest.
   * COMMIT_TIME_ORDERING: the later arrival always wins; a delete is just an arrival.
   * A *natural* delete (ordering value 0 or null, what Spark SQL and tablesvc write)
     replaces whatever is current; a later record replaces the delete.
   * A delete with a real ordering value ``d`` replaces the current record ``r`` when
     ``d > r``, or ``d == r`` and the delete's instant is later than ``r``'s
     ``_hoodie_commit_time``; a later record replaces such a delete when its ordering
     value is ``>= d``; of two such deletes the greater value stays.
2. **The base row** of the key is then merged with the log result once: COMMIT_TIME —
   the log result wins; EVENT_TIME — a log record wins unless the base ordering value
   is strictly greater; a natural delete removes the base row; a delete with value
   ``d`` removes it under the rule above.

   Consequence (verified against hudi-rs): under event time, a key deleted with a
   natural delete and then re-inserted with a *lower* ordering value than its base
   row reads back the base row.

Inside a run of log arrivals after a key's last natural delete the ordering value of
the fold's state never decreases, so the fold equals: the greatest (ordering,
arrival) log record ``R`` of that run, replaced by a delete tombstone when some
delete of the run beats ``R`` (the tombstone then carries the greatest delete value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import InvalidInputError
from tablesvc.logformat import DeleteRecord
from tablesvc.merge.context import EVENT_TIME_ORDERING, MERGE_MODES
from tablesvc.merge.schema import COMMIT_TIME, RECORD_KEY

_ARRIVAL = "__tablesvc_arrival"


@dataclass(frozen=True)
class LogDeletes:
    """The delete records of one delete block, with the block's instant (their commit time)."""

    instant: str
    records: Sequence[DeleteRecord]


LogInput = Union[pa.Table, LogDeletes]


def is_natural_delete(value: Any) -> bool:
    """Ordering value 0 (any numeric type) or null: Hudi's "no ordering value" marker."""
    if value is None:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def _beats(delete_value: Any, delete_instant: str, record_value: Any, record_commit_time: Any,
           delete_after_record: bool) -> bool:
    """Whether a delete with a real ordering value removes a record (event time)."""
    if record_value is None:
        return True                      # a null ordering value is the lowest
    try:
        if delete_value > record_value:
            return True
        if delete_value == record_value:
            return delete_after_record and record_commit_time is not None and delete_instant > record_commit_time
        return False
    except TypeError:
        # Values of different kinds (say a string delete value against a long field)
        # cannot be ordered; Java then applies the delete, and so do we.
        return True


def _arange(n: int) -> pa.Array:
    """0, 1, ..., n-1 as int64, built inside Arrow."""
    if n == 0:
        return pa.array([], pa.int64())
    ones = pa.repeat(pa.scalar(1, pa.int64()), n) if hasattr(pa, "repeat") else pa.array([1] * n, pa.int64())
    return pc.subtract(pc.cumulative_sum(ones), 1)


def _last_of_each_key(sorted_keys: pa.Array) -> pa.Array:
    """Boolean mask over a key-sorted array: True at the last row of each key."""
    n = len(sorted_keys)
    if n == 0:
        return pa.array([], pa.bool_())
    if n == 1:
        return pa.array([True])
    differs = pc.not_equal(sorted_keys.slice(0, n - 1), sorted_keys.slice(1))
    return pa.concat_arrays([differs, pa.array([True])])


def _column(table: pa.Table, name: str | None) -> pa.Array | None:
    if name is None or table.schema.get_field_index(name) < 0:
        return None
    col = table.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _greatest_per_key(keys: pa.Array, rows: pa.Array, ordering: pa.Array | None) -> pa.Array:
    """Of ``rows`` (positions, ascending = arrival), the one with the greatest
    (ordering valid, ordering, arrival) per key."""
    if len(rows) == 0:
        return rows
    cols = {"k": pc.take(keys, rows)}
    sort_keys = [("k", "ascending")]
    if ordering is not None:
        o = pc.take(ordering, rows)
        cols["v"] = pc.is_valid(o)
        cols["o"] = o
        sort_keys += [("v", "ascending"), ("o", "ascending")]
    cols["a"] = rows
    sort_keys.append(("a", "ascending"))
    order = pc.sort_indices(pa.table(cols), sort_keys=sort_keys)
    last = _last_of_each_key(pc.take(cols["k"], order))
    return pc.take(rows, pc.filter(order, last))


_ORDERABLE = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_large_string,
              pa.types.is_timestamp, pa.types.is_date, pa.types.is_decimal, pa.types.is_boolean,
              pa.types.is_binary, pa.types.is_time)


def _take_py(array: pa.Array | None, positions: list[int]) -> list:
    if array is None or not positions:
        return [None] * len(positions)
    return pc.take(array, pa.array(positions, pa.int64())).to_pylist()


def merge_records(base: pa.Table | None, log_inputs: Sequence[LogInput], *, merge_mode: str,
                  ordering_field: str | None, record_key_field: str = RECORD_KEY,
                  append_only: bool = False, schema: pa.Schema | None = None) -> pa.Table:
    """Merge ``base`` with ``log_inputs`` (data tables and ``LogDeletes``, in block order).

    Every table must already have the same schema (``schema``, or the first table's).
    Output: the surviving base rows in file order, then the surviving log records in
    arrival order.  A base file alone is returned as written (no de-duplication, as
    Hudi readers do); ``append_only`` concatenates everything and ignores deletes
    (tables without meta fields).
    """
    if merge_mode not in MERGE_MODES:
        raise InvalidInputError(f"merge mode {merge_mode!r} is not supported (only {', '.join(MERGE_MODES)})")
    logs: list[pa.Table] = []
    # deletes as (log rows before it, sequence, key, ordering value, instant)
    deletes: list[tuple[int, int, str, Any, str]] = []
    log_rows = 0
    for item in log_inputs:
        if isinstance(item, LogDeletes):
            for rec in item.records:
                if rec.record_key is not None:
                    deletes.append((log_rows, len(deletes), rec.record_key, rec.ordering_value, item.instant))
        else:
            logs.append(item)
            log_rows += item.num_rows
    if schema is None:
        first = base if base is not None else (logs[0] if logs else None)
        if first is None:
            raise InvalidInputError("merge_records needs a schema when there are no data tables")
        schema = first.schema

    def conform(t: pa.Table) -> pa.Table:
        return t if t.schema == schema else t.select(schema.names).cast(schema)

    base_t = conform(base) if base is not None else schema.empty_table()
    log_t = pa.concat_tables([conform(t) for t in logs]) if logs else schema.empty_table()
    if append_only or (not logs and not deletes):
        return pa.concat_tables([base_t, log_t])

    # Without an ordering column there is nothing to order events by: commit time, as Java infers.
    event_time = (merge_mode == EVENT_TIME_ORDERING and ordering_field is not None
                  and schema.get_field_index(ordering_field) >= 0)
    base_keys = _column(base_t, record_key_field)
    log_keys = _column(log_t, record_key_field)
    if base_keys is None or log_keys is None:
        raise InvalidInputError(f"record key field {record_key_field} is not among the columns {schema.names}")
    for where, keys in (("base", base_keys), ("log", log_keys)):
        if keys.null_count:
            raise InvalidInputError(f"{keys.null_count} {where} row(s) have no {record_key_field}; "
                                    "records cannot be merged")
    base_ord = _column(base_t, ordering_field) if event_time else None
    log_ord = _column(log_t, ordering_field) if event_time else None
    if log_ord is not None and not any(check(log_ord.type) for check in _ORDERABLE):
        raise InvalidInputError(f"ordering field {ordering_field} has type {log_ord.type}, which has no order")
    commit_col = COMMIT_TIME if schema.get_field_index(COMMIT_TIME) >= 0 else None

    # -- 1. the log side -------------------------------------------------------------------
    # The last natural delete of a key cuts off every log arrival before it.
    cut: dict[str, tuple[int, int]] = {}
    for rows_before, seq, key, value, _ in deletes:
        if not event_time or is_natural_delete(value):
            cut[key] = (rows_before, seq)
    arrival = _arange(log_t.num_rows)
    candidates = arrival
    if cut and log_t.num_rows:
        where = pc.index_in(log_keys, value_set=pa.array(list(cut), pa.utf8()).cast(log_keys.type))
        limit = pc.take(pa.array([v[0] for v in cut.values()], pa.int64()), where)
        keep = pc.fill_null(pc.or_kleene(pc.is_null(limit), pc.greater_equal(arrival, limit)), True)
        candidates = pc.filter(arrival, keep)
    winners = _greatest_per_key(log_keys, candidates, log_ord)       # R per key (positions in log_t)
    winner_keys = pc.take(log_keys, winners)

    # Deletes with a real ordering value after the key's last natural delete.
    real: dict[str, tuple[Any, str]] = {}          # key -> (greatest value, its instant)
    beaten: set[int] = set()                       # positions in ``winners`` replaced by a tombstone
    if event_time:
        run = [d for d in deletes if not is_natural_delete(d[3]) and (d[2] not in cut or (d[0], d[1]) > cut[d[2]])]
        if run:
            slots = pc.index_in(pa.array([d[2] for d in run], pa.utf8()).cast(log_keys.type),
                                value_set=winner_keys).to_pylist()
            hit_rows = [winners[s].as_py() for s in slots if s is not None]
            o_at = iter(_take_py(log_ord, hit_rows))
            ct_at = iter(_take_py(_column(log_t, commit_col), hit_rows))
            rows_at = iter(hit_rows)
            for d, slot in zip(run, slots):
                rows_before, _, key, value, instant = d
                if slot is not None:
                    row, o_r, ct_r = next(rows_at), next(o_at), next(ct_at)
                    if _beats(value, instant, o_r, ct_r, delete_after_record=rows_before > row):
                        beaten.add(slot)
                prev = real.get(key)
                if prev is None or _not_less(value, prev[0]):
                    real[key] = (value, instant)
    if beaten:
        positions = _arange(len(winners))
        survive = pc.invert(pc.is_in(positions, value_set=pa.array(sorted(beaten), pa.int64())))
        winners = pc.filter(winners, survive)
        winner_keys = pc.filter(winner_keys, survive)
    # tombstones: natural (the key's run has no record and no real delete) and real
    live: set[str] = set()      # keys with deletes whose log record still stands
    delete_keys = set(cut) | set(real)
    if delete_keys:
        dk = pa.array(sorted(delete_keys), pa.utf8()).cast(log_keys.type)
        has_record = pc.is_in(dk, value_set=winner_keys).to_pylist()
        live = {k for k, h in zip(dk.to_pylist(), has_record) if h}
    natural_tombs = [k for k in cut if k not in live and k not in real]
    real_tombs = {k: v for k, v in real.items() if k not in live}

    # -- 2. merge each base row with its key's log result ----------------------------------
    n_base = base_t.num_rows
    keep_base = pa.repeat(pa.scalar(True), n_base) if n_base else pa.array([], pa.bool_())
    drop_winner = None
    if n_base:
        slot = pc.index_in(base_keys, value_set=winner_keys)
        has_log = pc.is_valid(slot)
        if event_time:
            o_log = pc.take(pc.take(log_ord, winners), slot)
            base_wins = pc.and_kleene(has_log, pc.and_kleene(
                pc.is_valid(base_ord), pc.or_kleene(pc.is_null(o_log), pc.greater(base_ord, o_log))))
            base_wins = pc.fill_null(base_wins, False)
            drop_winner = pc.filter(slot, base_wins)
            keep_base = pc.invert(pc.and_(has_log, pc.invert(base_wins)))
        else:
            keep_base = pc.invert(has_log)
        if natural_tombs:
            gone = pc.is_in(base_keys, value_set=pa.array(natural_tombs, pa.utf8()).cast(base_keys.type))
            keep_base = pc.and_(keep_base, pc.invert(gone))
        if real_tombs:
            named = pc.is_in(base_keys, value_set=pa.array(list(real_tombs), pa.utf8()).cast(base_keys.type))
            rows = pc.indices_nonzero(named).to_pylist()          # only base rows that deletes name
            ks, os_, cts = (_take_py(base_keys, rows), _take_py(base_ord, rows),
                            _take_py(_column(base_t, commit_col), rows))
            removed = [r for r, k, o, ct in zip(rows, ks, os_, cts)
                       if _beats(real_tombs[k][0], real_tombs[k][1], o, ct, delete_after_record=True)]
            if removed:
                positions = _arange(n_base)
                keep_base = pc.and_(keep_base, pc.invert(pc.is_in(positions, value_set=pa.array(removed, pa.int64()))))
    log_keep = winners
    if drop_winner is not None and len(drop_winner):
        positions = _arange(len(winners))
        log_keep = pc.filter(winners, pc.invert(pc.is_in(positions, value_set=drop_winner.cast(pa.int64()))))
    log_keep = pc.take(log_keep, pc.sort_indices(log_keep))
    return pa.concat_tables([base_t.filter(keep_base), log_t.take(log_keep)])


def _not_less(a: Any, b: Any) -> bool:
    try:
        return not a < b
    except TypeError:
        return True


__all__ = ["LogDeletes", "LogInput", "is_natural_delete", "merge_records"]
