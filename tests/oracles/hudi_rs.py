"""hudi-rs, the independent reader the tests check tablesvc's tables against.

hudi-rs is Apache Hudi's native Rust reader, published on PyPI as ``hudi`` and pinned to 0.5.0 in
setup.py's ``test`` extra.  It is read-only and runs no JVM, so it is the one reader of Hudi tables
here that shares no code with tablesvc.  Every hudi-rs read of the tests goes through this module
(the benchmarks, which time hudi-rs as a baseline, aside), with the reader's defaults (file group
reader version 2).

Its known quirks the tests rely on (the probes are in /work/shared/docs/hudi-rs-oracle.md):

* Snapshot batches come in file-slice order, not key order: compare sorted rows (``sorted_rows``).
* Rows carry the ``_hoodie_*`` meta columns; drop them or compare them on purpose.
* An empty table reads as no batches at all, hence no schema: ``read_table`` gives ``None`` and
  ``read_rows`` / ``sorted_rows`` give ``[]``.
* Time travel (``as_of``) takes the *requested* time of an instant, also on table versions 8 and 9.
* Only completed commit / deltacommit / replacecommit instants make files visible; pending
  compaction output, failed writes and rolled-back blocks are never read.
* v6 with a *pending* compaction: log files named with the pending instant are hidden until it
  completes (probe P3, Java Hudi merges them): compare states after the compaction completes.
* A completed log compaction's block (``COMPACTED_BLOCK_TIMES``) replaces the blocks it lists; an
  inflight one is ignored.
* Delete blocks must carry ordering value ``long 0``: a real epoch-millis long (>= 2^31) fails the
  read with ``varint overflow`` (P9).
* A sub-directory inside a partition folder hides that partition (P11); on v8/9 a
  ``hoodie.properties`` naming the metadata table makes hudi-rs list files from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
from hudi import HudiFileSlice, HudiReadOptions, HudiTable, HudiTableBuilder


def hudi_table(path: str | Path, storage_options: dict[str, str] | None = None) -> HudiTable:
    """hudi-rs's handle on the table at ``path`` (timeline, file slices, reads); ``storage_options``
    (object_store's key names: ``aws_endpoint_url``, ...) for a table on an object store."""
    builder = HudiTableBuilder.from_base_uri(str(path))
    if storage_options:
        builder = builder.with_storage_options(storage_options)
    return builder.build()


def read_options(as_of: str | None = None) -> HudiReadOptions:
    """A snapshot read, or a time-travel read as of the instant requested at ``as_of``."""
    return HudiReadOptions() if as_of is None else HudiReadOptions().with_as_of_timestamp(as_of)


def read_table(path: str | Path, as_of: str | None = None,
               storage_options: dict[str, str] | None = None) -> pa.Table | None:
    """Every row hudi-rs reads, meta columns included; ``None`` when it reads no batch at all."""
    batches = hudi_table(path, storage_options).read(read_options(as_of))
    return pa.Table.from_batches(batches) if batches else None


def read_rows(path: str | Path, as_of: str | None = None,
              storage_options: dict[str, str] | None = None) -> list[dict]:
    """Every row hudi-rs reads, as dicts, in hudi-rs's (file-slice) order; ``[]`` when none."""
    table = read_table(path, as_of, storage_options)
    return table.to_pylist() if table is not None else []


def sorted_rows(path: str | Path, columns: Sequence[str], as_of: str | None = None,
                storage_options: dict[str, str] | None = None) -> list[tuple]:
    """The given columns of every row hudi-rs reads, as tuples, sorted (batch order is not key order)."""
    return sorted(tuple(r[c] for c in columns) for r in read_rows(path, as_of, storage_options))


def rows_by_key(path: str | Path, key: str, value: str) -> dict:
    """``key`` -> ``value`` of every row hudi-rs reads (a later row of a repeated key wins)."""
    return {r[key]: r[value] for r in read_rows(path)}


def file_slices(path: str | Path, as_of: str | None = None) -> list[HudiFileSlice]:
    """hudi-rs's latest file slices (as of the instant requested at ``as_of``)."""
    return hudi_table(path).get_file_slices(read_options(as_of))
