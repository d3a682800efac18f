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
   (``write_job.write_rows``); the files of failed task attempts go; ``T`` commits (on a table
   whose metadata table indexes record keys, once no write that completed meanwhile touched
   one of its file groups: ``write_requirements``), then the heartbeat stops and the markers go.  Any failure, or an input without rows, aborts ``T`` (its files,
   markers and timeline files).
4. After the commit, the inline services the config enables run in the same Spark session
   (docs/services.md).

Here in services/ because steps 2-4 are the lifecycle and services; spark/ keeps the Spark job alone.
"""

from __future__ import annotations

import time
from dataclasses import replace

from tablesvc.metadata.secondary_index import listed_secondary_partitions, secondary_indexes
from tablesvc.metadata.write_key_changes import WriteKeyChanges, wants_key_changes
from tablesvc.services.compaction.planner import v6_pending_compaction_targets
from tablesvc.services.inline import run_inline_services
from tablesvc.services.lifecycle import WRITE_LIFECYCLE, InstantLifecycle
from tablesvc.services.metadata_drops import drop_opted_out_partitions, prepend_drop
from tablesvc.services.plan_execution import HEARTBEAT_INTERVAL_KEY
from tablesvc.services.rollback import eager_rollback
from tablesvc.services.write_requirements import NoConcurrentFileGroupWrite, touched_file_groups
from tablesvc.table.writable import WRITE
from tablesvc.spark.record_index_lookup_job import refuse_keys_in_other_partitions
from tablesvc.spark.secondary_index_job import secondary_index_changes
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
    life = InstantLifecycle(table, WRITE_LIFECYCLE, heartbeat_interval_ms=prepared.config.get(HEARTBEAT_INTERVAL_KEY),
                            config=prepared.config)
    # secondary indexes of a type tablesvc cannot key are refused before anything is written
    secondary_indexes(table.storage, table.base_path, table.config.props, table.config.version, prepared.data_schema)
    # a partitioned table's global record index: an upsert's key living in another partition is
    # refused before the instant exists (spark.record_index_lookup_job; nothing to do without one)
    if prepared.op is Operation.UPSERT:
        refuse_keys_in_other_partitions(table, prepared.df, prepared.key_spec)
    requested = life.request()
    # the metadata table indexes record keys (record_index): the tasks report their keys' changes
    keys: list | None = [] if wants_key_changes(table.config.props) else None
    with life.start(requested):
        stats = write_rows(prepared, requested.timestamp, v6_pending_compaction_targets, keys)
        if stats is None:
            life.abort()        # the input has no row: nothing to do, no instant left
            return None
        life.remove_orphans(stats)
        # the metadata table's secondary indexes: the write's (value, key) changes, by Spark tasks
        # reading the touched file groups before and with the write (spark.secondary_index_job)
        secondary = (secondary_index_changes(prepared.df.sparkSession, table, requested.timestamp, stats,
                                             prepared.data_schema)
                     if listed_secondary_partitions(table.config.props) else None)
        # key-indexed metadata partitions: a concurrent write to one of these file groups would
        # leave a stale index entry, so it makes this commit a conflict (write_requirements)
        requirements = (NoConcurrentFileGroupWrite(requested.timestamp, touched_file_groups(stats)),) \
            if keys is not None else ()
        life.commit(commit_metadata(prepared, stats), requirements,
                    key_changes=None if keys is None else WriteKeyChanges.of(keys), secondary_index=secondary)
    return write_result(prepared, requested.timestamp, stats)
