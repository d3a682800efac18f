"""Record merge: base rows, then log blocks in order.

The log blocks are folded into one result per key first (``fold_log``, step 1 below); the
base rows then meet that result one batch at a time (``BaseMerge``, step 2), so a base file
never has to be in memory whole.  ``merge_records`` runs both steps over collected inputs.

Everything per row is vectorised with pyarrow compute (sort_indices, take, filter,
index_in/is_in) and numpy masks; Python loops run only over *delete records* of delete
blocks (and the base rows those deletes name), which are few.

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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.errors import InvalidInputError
from tablesvc.logformat import DeleteRecord
from tablesvc.merge.context import EVENT_TIME_ORDERING, MERGE_MODES
from tablesvc.table.meta_fields import COMMIT_TIME, RECORD_KEY

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


def _column(table: pa.Table, name: str | None) -> pa.Array | None:
    if name is None or table.schema.get_field_index(name) < 0:
        return None
    col = table.column(name)
    if isinstance(col, pa.ChunkedArray):
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


def _greatest_per_key(keys: pa.Array, rows: pa.Array, ordering: pa.Array | None) -> pa.Array:
    """Of ``rows`` (positions, ascending = arrival), the one with the greatest
    (ordering valid, ordering, arrival) per key; in no particular order (``fold_log`` puts
    the winners back in arrival order).

    One hash pass numbers the keys; only the rows of keys that arrive more than once are
    sorted, by that number rather than by the key's string (sorting every row by its key cost
    more than the rest of a log compaction's merge; docs/performance.md)."""
    if len(rows) == 0:
        return rows
    candidates = pc.take(keys, rows)
    if pa.types.is_dictionary(candidates.type):
        candidates = candidates.cast(candidates.type.value_type)
    ids = pc.dictionary_encode(candidates).indices.to_numpy(zero_copy_only=False)
    counts = np.bincount(ids)
    if len(counts) == len(rows):
        return rows     # every key once (the usual log block): each row is its key's only candidate
    repeated = counts[ids] > 1
    positions = rows.to_numpy(zero_copy_only=False)
    single, positions = positions[~repeated], positions[repeated]
    cols = {"k": ids[repeated]}
    sort_keys = [("k", "ascending")]
    if ordering is not None:
        o = pc.take(ordering, pa.array(positions))
        cols["v"] = pc.is_valid(o)
        cols["o"] = o
        sort_keys += [("v", "ascending"), ("o", "ascending")]
    cols["a"] = positions
    sort_keys.append(("a", "ascending"))
    order = pc.sort_indices(pa.table(cols), sort_keys=sort_keys).to_numpy(zero_copy_only=False)
    sorted_ids = cols["k"][order]
    last = np.append(sorted_ids[1:] != sorted_ids[:-1], True)     # the greatest row of each key
    return pa.array(np.concatenate([single, positions[order[last]]]))


_ORDERABLE = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_large_string,
              pa.types.is_timestamp, pa.types.is_date, pa.types.is_decimal, pa.types.is_boolean,
              pa.types.is_binary, pa.types.is_time)


def _take_py(array: pa.Array | None, positions: list[int]) -> list:
    if array is None or not positions:
        return [None] * len(positions)
    return pc.take(array, pa.array(positions, pa.int64())).to_pylist()


# -- step 1: the log side --------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogSide:
    """What the log blocks of a slice leave per record key (step 1), ready to meet base rows.

    ``lookup`` holds one key per log result: first the surviving log records (the rows of
    ``records``, in arrival order), then the keys whose result is a natural tombstone, then the
    keys whose result is a tombstone with a real ordering value (``real_tombs`` holds its value
    and instant).  A key appears at most once, so one ``index_in`` against ``lookup`` tells a base
    row everything the log side says about its key.

    ``passthrough``: nothing to merge (no log records or deletes, or an append-only table):
    base rows pass unchanged and ``records`` (every log row) follows them.
    """

    records: pa.Table
    lookup: pa.Array
    natural_tombs: int
    real_tombs: tuple[tuple[Any, str], ...]
    record_key_field: str
    ordering_field: str | None       # set under event-time ordering only
    commit_field: str | None
    passthrough: bool
    record_ordering: pa.Array | None = None      # ordering values of ``records`` (event time)
    # The delete record behind each tombstone, in ``lookup`` order (the natural ones, then the
    # real-valued ones): the key's last natural delete, or its greatest real-valued delete.  What a
    # log compaction writes as its delete block, so that it follows these rules and no copy of them.
    tombstones: tuple[DeleteRecord, ...] = ()

    @property
    def num_records(self) -> int:
        return self.records.num_rows

    def slots(self, keys: pa.Array) -> pa.Array:
        """Position in ``lookup`` of each key (null: the log side does not touch it).  Each call
        builds a hash table of ``lookup``: call it on large chunks of keys, not row by row."""
        return pc.index_in(keys, value_set=self.lookup)


_Delete = tuple[int, int, str, Any, str, DeleteRecord]


def _split_inputs(log_inputs: Sequence[LogInput]) -> tuple[list[pa.Table], list[_Delete]]:
    """Data tables in block order, and deletes as (log rows before it, sequence, key, value,
    instant, the delete record)."""
    logs: list[pa.Table] = []
    deletes: list[_Delete] = []
    log_rows = 0
    for item in log_inputs:
        if isinstance(item, LogDeletes):
            for rec in item.records:
                if rec.record_key is not None:
                    deletes.append((log_rows, len(deletes), rec.record_key, rec.ordering_value, item.instant, rec))
        else:
            logs.append(item)
            log_rows += item.num_rows
    return logs, deletes


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    return table if table.schema == schema else table.select(schema.names).cast(schema)


def _require_keys(keys: pa.Array | None, where: str, record_key_field: str, schema: pa.Schema) -> pa.Array:
    if keys is None:
        raise InvalidInputError(f"record key field {record_key_field} is not among the columns {schema.names}")
    if keys.null_count:
        raise InvalidInputError(f"{keys.null_count} {where} row(s) have no {record_key_field}; "
                                "records cannot be merged")
    return keys


def _real_deletes(deletes, cut, winners: pa.Array, winner_keys: pa.Array, log_t: pa.Table, log_ord: pa.Array,
                  commit_col: str | None) -> tuple[dict[str, tuple[Any, str, DeleteRecord]], set[int]]:
    """Deletes with a real ordering value after their key's last natural delete (event time):
    the greatest value, its instant and its delete record per key, and the positions in
    ``winners`` they beat."""
    real: dict[str, tuple[Any, str, DeleteRecord]] = {}
    beaten: set[int] = set()
    run = [d for d in deletes if not is_natural_delete(d[3]) and (d[2] not in cut or (d[0], d[1]) > cut[d[2]])]
    if not run:
        return real, beaten
    slots = pc.index_in(pa.array([d[2] for d in run], pa.utf8()).cast(winner_keys.type),
                        value_set=winner_keys).to_pylist()
    hit_rows = [winners[s].as_py() for s in slots if s is not None]
    o_at = iter(_take_py(log_ord, hit_rows))
    ct_at = iter(_take_py(_column(log_t, commit_col), hit_rows))
    rows_at = iter(hit_rows)
    for d, slot in zip(run, slots):
        rows_before, _, key, value, instant, record = d
        if slot is not None:
            row, o_r, ct_r = next(rows_at), next(o_at), next(ct_at)
            if _beats(value, instant, o_r, ct_r, delete_after_record=rows_before > row):
                beaten.add(slot)
        prev = real.get(key)
        if prev is None or ordering_not_less(value, prev[0]):
            real[key] = (value, instant, record)
    return real, beaten


def fold_log(log_inputs: Sequence[LogInput], *, merge_mode: str, ordering_field: str | None, schema: pa.Schema,
             record_key_field: str = RECORD_KEY, append_only: bool = False) -> LogSide:
    """Step 1: fold the log blocks (data tables aligned to ``schema`` and ``LogDeletes``, in block
    order) into one result per record key (see the module doc)."""
    if merge_mode not in MERGE_MODES:
        raise InvalidInputError(f"merge mode {merge_mode!r} is not supported (only {', '.join(MERGE_MODES)})")
    logs, deletes = _split_inputs(log_inputs)
    log_t = pa.concat_tables([_conform(t, schema) for t in logs]) if logs else schema.empty_table()
    # Without an ordering column there is nothing to order events by: commit time, as Java infers.
    event_time = (merge_mode == EVENT_TIME_ORDERING and ordering_field is not None
                  and schema.get_field_index(ordering_field) >= 0)
    commit_col = COMMIT_TIME if schema.get_field_index(COMMIT_TIME) >= 0 else None
    if append_only or (not logs and not deletes):
        return LogSide(log_t, pa.array([], pa.utf8()), 0, (), record_key_field,
                       ordering_field if event_time else None, commit_col, passthrough=True)
    log_keys = _require_keys(_column(log_t, record_key_field), "log", record_key_field, schema)
    log_ord = _column(log_t, ordering_field) if event_time else None
    if log_ord is not None and not any(check(log_ord.type) for check in _ORDERABLE):
        raise InvalidInputError(f"ordering field {ordering_field} has type {log_ord.type}, which has no order")

    # The last natural delete of a key cuts off every log arrival before it.
    cut: dict[str, tuple[int, int]] = {}
    last_natural: dict[str, DeleteRecord] = {}
    for rows_before, seq, key, value, _, record in deletes:
        if not event_time or is_natural_delete(value):
            cut[key] = (rows_before, seq)
            last_natural[key] = record
    arrival = _arange(log_t.num_rows)
    candidates = arrival
    if cut and log_t.num_rows:
        where = pc.index_in(log_keys, value_set=pa.array(list(cut), pa.utf8()).cast(log_keys.type))
        limit = pc.take(pa.array([v[0] for v in cut.values()], pa.int64()), where)
        keep = pc.fill_null(pc.or_kleene(pc.is_null(limit), pc.greater_equal(arrival, limit)), True)
        candidates = pc.filter(arrival, keep)
    winners = _greatest_per_key(log_keys, candidates, log_ord)       # R per key (positions in log_t)
    winner_keys = pc.take(log_keys, winners)

    real: dict[str, tuple[Any, str, DeleteRecord]] = {}
    if event_time:
        real, beaten = _real_deletes(deletes, cut, winners, winner_keys, log_t, log_ord, commit_col)
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
    real_tombs = [(k, v) for k, v in real.items() if k not in live]

    if len(winners) == log_t.num_rows:      # every record won (distinct positions): all of them, in order
        records = log_t.combine_chunks()
    else:
        records = log_t.take(pc.take(winners, pc.sort_indices(winners))).combine_chunks()   # arrival order
    tomb_keys = pa.array(natural_tombs + [k for k, _ in real_tombs], pa.utf8()).cast(log_keys.type)
    lookup = pa.concat_arrays([_column(records, record_key_field), tomb_keys])
    return LogSide(records, lookup, len(natural_tombs), tuple((v[0], v[1]) for _, v in real_tombs), record_key_field,
                   ordering_field if event_time else None, commit_col, passthrough=False,
                   record_ordering=_column(records, ordering_field) if event_time else None,
                   tombstones=tuple(last_natural[k] for k in natural_tombs) + tuple(v[2] for _, v in real_tombs))


# -- step 2: base rows meet the log side, a batch at a time -----------------------------------------------
@dataclass(frozen=True)
class MergeCounts:
    """What merging did to the base file (compaction's write stats)."""

    base_rows: int = 0
    inserts: int = 0          # log records whose key no base row has
    updates: int = 0          # log records that replaced a base row
    deletes: int = 0          # base rows a tombstone removed


class BaseMerge:
    """Step 2 over a base file read in batches, in file order; then ``tail()`` once.

    Each base row meets its key's log result once.  A log record is emitted at the end unless
    some base row of its key beat it (event time), so batches can be merged one at a time and
    the output is the same as merging the whole base file at once: surviving base rows in file
    order, then surviving log records in arrival order.
    """

    def __init__(self, log: LogSide):
        self.log = log
        self._beaten = np.zeros(log.num_records, dtype=bool)     # records a base row beat: not emitted
        self._in_base = np.zeros(log.num_records, dtype=bool)    # records whose key a base row has
        self._base_rows = 0
        self._deleted = 0

    def merge(self, batch: pa.Table, slots: pa.Array | None = None) -> pa.Table:
        """The rows of ``batch`` (base rows, in the log side's schema) that survive.  ``slots``:
        ``log.slots`` of the batch's keys when the caller looked them up already."""
        self._base_rows += batch.num_rows
        if self.log.passthrough or batch.num_rows == 0:
            return batch
        keys = _require_keys(_column(batch, self.log.record_key_field), "base", self.log.record_key_field,
                             batch.schema)
        slots = self.log.slots(keys) if slots is None else slots
        if slots.null_count == len(slots):
            return batch                                           # the log side touches no key here
        remove = self._removed_rows(batch, pc.fill_null(slots, -1).to_numpy(zero_copy_only=False))
        return batch.filter(pa.array(~remove)) if remove.any() else batch

    def _removed_rows(self, batch: pa.Table, slots: np.ndarray) -> np.ndarray:
        n_records, n_natural = self.log.num_records, self.log.natural_tombs
        remove = (slots >= n_records) & (slots < n_records + n_natural)        # natural tombstones
        self._deleted += int(remove.sum())
        rows = np.flatnonzero((slots >= 0) & (slots < n_records))              # rows meeting a log record
        if rows.size:
            hit = slots[rows]
            self._in_base[hit] = True
            if self.log.ordering_field is not None:
                base_wins = self._base_wins(batch, rows, hit)
                self._beaten[hit[base_wins]] = True
                rows = rows[~base_wins]
            remove[rows] = True
        real = np.flatnonzero(slots >= n_records + n_natural)
        if real.size:
            gone = real[self._beaten_by_real_tombs(batch, real, slots[real] - n_records - n_natural)]
            remove[gone] = True
            self._deleted += int(gone.size)
        return remove

    def _base_wins(self, batch: pa.Table, rows: np.ndarray, hit: np.ndarray) -> np.ndarray:
        """Event time: a log record wins unless the base ordering value is strictly greater."""
        base_o = pc.take(_column(batch, self.log.ordering_field), pa.array(rows))
        log_o = pc.take(self.log.record_ordering, pa.array(hit))
        wins = pc.and_kleene(pc.is_valid(base_o), pc.or_kleene(pc.is_null(log_o), pc.greater(base_o, log_o)))
        return pc.fill_null(wins, False).to_numpy(zero_copy_only=False)

    def _beaten_by_real_tombs(self, batch: pa.Table, rows: np.ndarray, tombs: np.ndarray) -> np.ndarray:
        """Which of the base rows ``rows`` their key's real-valued tombstone removes (a Python loop:
        only rows that such deletes name get here)."""
        positions = rows.tolist()
        values = _take_py(_column(batch, self.log.ordering_field), positions)
        commit_times = _take_py(_column(batch, self.log.commit_field), positions)
        out = []
        for t, o, ct in zip(tombs.tolist(), values, commit_times):
            value, instant = self.log.real_tombs[t]
            out.append(_beats(value, instant, o, ct, delete_after_record=True))
        return np.array(out, dtype=bool)

    def tail(self) -> pa.Table:
        """The log records no base row beat, in arrival order (after the last batch)."""
        if self._beaten.any():
            return self.log.records.filter(pa.array(~self._beaten))
        return self.log.records

    def counts(self) -> MergeCounts:
        """Inserts, updates and deletes (after the last batch).  For a base file whose keys are
        unique (Hudi's invariant) these equal comparing the output's keys with the base file's."""
        emitted = ~self._beaten
        if self.log.passthrough:
            return MergeCounts(self._base_rows, self.log.num_records, 0, 0)
        return MergeCounts(self._base_rows, int((emitted & ~self._in_base).sum()),
                           int((emitted & self._in_base).sum()), self._deleted)


def merge_records(base: pa.Table | None, log_inputs: Sequence[LogInput], *, merge_mode: str,
                  ordering_field: str | None, record_key_field: str = RECORD_KEY,
                  append_only: bool = False, schema: pa.Schema | None = None) -> pa.Table:
    """Merge ``base`` with ``log_inputs`` (data tables and ``LogDeletes``, in block order).

    Every table must already have the same schema (``schema``, or the first table's).
    Output: the surviving base rows in file order, then the surviving log records in
    arrival order.  A base file alone is returned as written (no de-duplication, as
    Hudi readers do); ``append_only`` concatenates everything and ignores deletes
    (tables without meta fields).  The slice reader runs the same two steps with the
    base file streamed batch by batch (``fold_log`` + ``BaseMerge``).
    """
    if merge_mode not in MERGE_MODES:
        raise InvalidInputError(f"merge mode {merge_mode!r} is not supported (only {', '.join(MERGE_MODES)})")
    if schema is None:
        first = base if base is not None else next((t for t in log_inputs if isinstance(t, pa.Table)), None)
        if first is None:
            raise InvalidInputError("merge_records needs a schema when there are no data tables")
        schema = first.schema
    log = fold_log(log_inputs, merge_mode=merge_mode, ordering_field=ordering_field, schema=schema,
                   record_key_field=record_key_field, append_only=append_only)
    merge = BaseMerge(log)
    base_t = _conform(base, schema) if base is not None else schema.empty_table()
    return pa.concat_tables([merge.merge(base_t), merge.tail()])


def ordering_not_less(a: Any, b: Any) -> bool:
    """``a >= b`` for the ordering values of two deletes of one key, ``a`` the later: on a tie the
    later delete wins, and so it does when the values do not compare (None, mixed types).  Log
    compaction writes the delete it keeps (``LogSide.tombstones``)."""
    try:
        return not a < b
    except TypeError:
        return True


__all__ = ["BaseMerge", "LogDeletes", "LogInput", "LogSide", "MergeCounts", "fold_log", "is_natural_delete",
           "merge_records", "ordering_not_less"]
