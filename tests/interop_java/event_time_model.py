"""The independent model of the Java tier: what every reader must show after each step.

A dict of record key -> row, kept by the tests from what they wrote (by any writer), with Hudi's
event-time rule: a record with a lower ordering value (``ts``) than the one stored loses, whether
it is an update or a delete (1.x ``EVENT_TIME_ORDERING``; 0.x ``DefaultHoodieRecordPayload``).

The cases whose outcome Hudi leaves to the order a merge meets the records are refused here
rather than guessed, so a scenario cannot rely on them by accident: an equal ordering value for a
key, an insert of a key already stored (Hudi's insert makes a duplicate), and a key moving to
another partition (with a partition-local index it becomes a second record).
"""

from __future__ import annotations

from typing import Iterable


class AmbiguousStep(ValueError):
    """A scenario wrote something whose outcome the model does not decide."""


class EventTimeModel:
    def __init__(self, rows: dict[str, tuple] | None = None):
        self._rows: dict[str, tuple] = dict(rows or {})

    def apply(self, operation: str, rows: Iterable[tuple]) -> None:
        """``operation``: insert, upsert or delete; rows are ``(id, ts, part, val)``."""
        batch = list(rows)
        if len({r[0] for r in batch}) != len(batch):
            raise AmbiguousStep("a key twice in one batch: Hudi's in-batch combine decides; write it in two steps")
        for row in batch:
            key, ts, part = row[0], row[1], row[2]
            old = self._rows.get(key)
            if old is not None:
                if operation == "insert":
                    raise AmbiguousStep(f"insert of {key!r}, already stored: Hudi's insert keeps both; upsert it")
                if old[2] != part:
                    raise AmbiguousStep(f"{key!r} moves from partition {old[2]!r} to {part!r}")
                if ts == old[1]:
                    raise AmbiguousStep(f"{key!r}: ordering value {ts} equal to the stored one")
                if ts < old[1]:
                    continue                            # an older event loses, update or delete
            if operation == "delete":
                self._rows.pop(key, None)
            else:
                self._rows[key] = tuple(row)

    def rows(self) -> list[tuple]:
        return sorted(self._rows.values())

    def copy(self) -> "EventTimeModel":
        return EventTimeModel(self._rows)

    def __len__(self) -> int:
        return len(self._rows)
