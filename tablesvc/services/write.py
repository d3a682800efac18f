"""The write as an action: insert, upsert or delete of a Spark DataFrame.

What a write does around its Spark job (``tablesvc/spark/write_job.py``), in order:

1. ``prepare_write``: table and input checked, schema reconciled, the executors checked;
   nothing of the table changed yet.
2. Hudi's EAGER failed-writes policy: a write killed earlier is rolled back before this one
   starts, so one crash never blocks the table (docs/rollback.md).
3. ``run_write``: request, start, the job, commit (or abort).
4. After the commit, the inline services the config enables run in the same Spark session
   (docs/services.md).

Here in services/ because steps 2 and 4 are services; spark/ keeps the Spark job alone.
"""

from __future__ import annotations

import time
from dataclasses import replace

from tablesvc.services.compaction.planner import v6_pending_compaction_targets
from tablesvc.services.inline import run_inline_services
from tablesvc.services.rollback import eager_rollback
from tablesvc.spark.write_job import Operation, WriteResult, prepare_write, run_write


def write_dataframe(table, df, operation: str | Operation = Operation.UPSERT, *,
                    log_block_format: str | None = None, config=None) -> WriteResult | None:
    """Write a Spark DataFrame into ``table``; ``None`` when the input is empty (nothing to do).

    ``log_block_format`` (avro or parquet) defaults to ``hoodie.logfile.data.block.format``
    in ``config``.

    After the commit, the inline services ``config`` enables run in the same Spark session
    (docs/services.md); ``config`` defaults to the table's ``.hoodie/tablesvc.yaml`` over
    the built-in defaults.
    """
    prepared = prepare_write(table, df, operation, log_block_format=log_block_format, config=config)
    if prepared is None:
        return None
    rolled_back = eager_rollback(table, config=prepared.config)
    written = run_write(prepared, v6_pending_compaction_targets)
    if written is None:
        return None
    services = tuple(rolled_back) + tuple(run_inline_services(table, prepared.config, df.sparkSession))
    # seconds: the whole action, inline services included, as before the write was an action
    return replace(written, services=services, seconds=round(time.monotonic() - prepared.started, 3))
