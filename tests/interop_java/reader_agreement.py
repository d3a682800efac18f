"""After every step of a scenario, the three readers and the model must show the same rows, with the
same values: Java Hudi's Spark read, hudi-rs (tests/oracles/hudi_rs.py) and tablesvc's read
(``tablesvc.api.Table.read``).  A difference fails naming the step, the table version, the reader
and the first key where it differs from the model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from java_hudi import COLUMNS, JavaHudi, JavaTable
from oracles.hudi_rs import sorted_rows as hudi_rs_sorted_rows

from tablesvc.api import Table


def first_difference(rows: list[tuple], model: list[tuple]) -> str | None:
    """Where ``rows`` first differs from ``model`` (both rows of ``COLUMNS``, the key first), in key
    order: a key missing, extra, repeated, or with other values."""
    got: dict[str, list[tuple]] = {}
    for r in rows:
        got.setdefault(r[0], []).append(r)
    want = {r[0]: r for r in model}
    for key in sorted(set(got) | set(want), key=str):
        have, expected = got.get(key, []), want.get(key)
        if expected is None:
            return f"key {key!r}: read {have[0]}, the model has no such key"
        if not have:
            return f"key {key!r}: missing, the model has {expected}"
        if len(have) > 1:
            return f"key {key!r}: read {len(have)} times {have}, the model has {expected}"
        if have[0] != expected:
            return f"key {key!r}: read {have[0]}, the model has {expected}"
    return None


def tablesvc_rows(path: str, spark, as_of: str | None = None, options: dict[str, str] | None = None) -> list[tuple]:
    df = Table.open(path, options=options).read(as_of=as_of, columns=list(COLUMNS), spark=spark)
    return sorted(tuple(r) for r in df.collect())


@dataclass
class ThreeReaders:
    """The readers of one scenario's table (``spark``: tablesvc's session, not Java's)."""

    java: JavaHudi
    table: JavaTable
    spark: object
    checked: list[str] = field(default_factory=list)      # "step: n rows (secs)", for a failure's context
    # a table on an object store: the endpoint and credentials in object_store's key names, which
    # hudi-rs and tablesvc both take (Java has its own, given when its driver started)
    storage_options: dict[str, str] | None = None

    def read_all(self, as_of: str | None = None) -> dict[str, list[tuple]]:
        return {
            "Java Hudi": self.java.read(self.table, as_of),
            "hudi-rs": hudi_rs_sorted_rows(self.table.path, COLUMNS, as_of, self.storage_options),
            "tablesvc": tablesvc_rows(self.table.path, self.spark, as_of, self.storage_options),
        }

    def check(self, step: str, model: list[tuple], as_of: str | None = None) -> None:
        t0 = time.perf_counter()
        readings = self.read_all(as_of)
        differences = [f"  {reader} ({len(rows)} rows; model {len(model)}): {diff}"
                       for reader, rows in readings.items() if (diff := first_difference(rows, model))]
        where = f"step {step!r}{f' (as of {as_of})' if as_of else ''}, table version {self.table.table_version}, " \
                f"{self.java.bundle.label}"
        assert not differences, f"{where}: the readers differ from the model\n" + "\n".join(differences) + \
            "\n  steps that agreed before: " + ("; ".join(self.checked) or "none")
        self.checked.append(f"{step}: {len(model)} rows ({time.perf_counter() - t0:.1f} s)")
