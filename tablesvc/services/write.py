"""The write as an action: insert, upsert or delete of a Spark DataFrame.

What a write does around its Spark job (``tablesvc/spark/write_job.py``), in order:

0. The metadata-table partitions the configuration switches off are dropped (under the table
   lock, ``services/metadata_drops.py``), reported first among the result's services.
1. ``prepare_write``: table and input checked, schema reconciled, the executors checked;
   nothing of the table changed yet.
2. Hudi's EAGER failed-writes policy: a write killed earlier is rolled back before this one
   starts, so one crash never blocks the table (docs/rollback.md).
3. The instant's lifecycle (``services/lifecycle``, ``WRITE_LIFECYCLE``): the heartbeat starts
   before ``T.deltacommit.requested`` exists, then ``T`` starts; the Spark job
   (``write_job.write_rows``); the files of failed task attempts go; ``T`` commits (no commit
   requirement: a write plans nothing another process could invalidate), then the heartbeat
   stops and the markers go.  Any failure, or an input without rows, aborts ``T`` (its files,
   markers and timeline files).
4. After the commit, the inline services the config enables run in the same Spark session
   (docs/services.md).

Here in services/ because steps 2-4 are the lifecycle and services; spark/ keeps the Spark job alone.
"""

from __future__ import annotations

import time
from dataclasses import replace

from tablesvc.services.compaction.planner import v6_pending_compaction_targets
from tablesvc.services.inline import run_inline_services
from tablesvc.services.lifecycle import WRITE_LIFECYCLE, InstantLifecycle
from tablesvc.services.metadata_drops import drop_opted_out_partitions, prepend_drop
from tablesvc.services.plan_execution import HEARTBEAT_INTERVAL_KEY
from tablesvc.services.rollback import eager_rollback
from tablesvc.table.writable import WRITE
from tablesvc.spark.write_job import (
    Operation, PreparedWrite, WriteResult, commit_metadata, prepare_write, write_result, write_rows,
)


def write_dataframe(table, df, operation: str | Operation = Operation.UPSERT, *,
                    log_block_format: str | None = None, config=None) -> WriteResult | None:
    """Write a Spark DataFrame into ``table``; ``None`` when the input is empty (nothing to do).

    ``log_block_format`` (avro or parquet) defaults to ``hoodie.logfile.data.block.format``
    in ``config``.

    After the commit, the inline services ``config`` enables run in the same Spark session
    (docs/services.md); ``config`` defaults to the table's ``.hoodie/tablesvc.yaml`` over
    the built-in defaults.
    """
    dropped = drop_opted_out_partitions(table, WRITE, config)
    prepared = prepare_write(table, df, operation, log_block_format=log_block_format, config=config)
    if prepared is None:
        return None
    rolled_back = eager_rollback(table, config=prepared.config)
    written = _run_write(prepared)
    if written is None:
        return None
    services = (tuple(prepend_drop(dropped, rolled_back))
                + tuple(run_inline_services(table, prepared.config, df.sparkSession)))
    # seconds: the whole action, inline services included, as before the write was an action
    return replace(written, services=services, seconds=round(time.monotonic() - prepared.started, 3))


def _run_write(prepared: PreparedWrite) -> WriteResult | None:
    """Request, start, the Spark job, commit (or abort): ``None`` when the input has no row.
    The result carries no services and the seconds so far (``write_dataframe`` adds both)."""
    table = prepared.table
    life = InstantLifecycle(table, WRITE_LIFECYCLE, heartbeat_interval_ms=prepared.config.get(HEARTBEAT_INTERVAL_KEY))
    requested = life.request()
    with life.start(requested):
        stats = write_rows(prepared, requested.timestamp, v6_pending_compaction_targets)
        if stats is None:
            life.abort()        # the input has no row: nothing to do, no instant left
            return None
        life.remove_orphans(stats)
        life.commit(commit_metadata(prepared, stats))
    return write_result(prepared, requested.timestamp, stats)
