"""Services inline after writes: the inline / schedule-inline / async matrix, checked with hudi-rs."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from tablesvc.config import build_config
from tablesvc.services.inline import run_inline_services
from tablesvc.services.result import Status
from tablesvc.table import Table, TableSpec
from timeline.instant import Action

pytestmark = pytest.mark.spark


def hudi_rows(path):
    batches = HudiTableBuilder.from_base_uri(str(path)).build().read(HudiReadOptions())
    return sorted((r["uuid"], r["ts"]) for r in pa.Table.from_batches(batches).to_pylist()) if batches else []


def df(spark, keys, ts):
    return spark.createDataFrame([(f"k{k:03d}", ts, ("a", "b")[k % 2]) for k in keys], "uuid string, ts long, city string")


@pytest.mark.parametrize("version", [6, 8])
def test_inline_compaction_and_clean_after_writes(tmp_path, spark, version):
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), table_version=version,
                                                        num_buckets=1))
    config = build_config(conf={"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2",
                                "hoodie.cleaner.commits.retained": "1"})
    model = {}
    services = []
    for n in range(5):
        keys = range(0, 40) if n == 0 else range(n * 5, n * 5 + 10)
        result = table.upsert(df(spark, keys, n + 1), config=config)
        model.update({f"k{k:03d}": n + 1 for k in keys})
        services.extend(result.services)
        assert hudi_rows(table.base_path) == sorted(model.items())
    done = {(s.action, s.status) for s in services}
    assert ("compaction", Status.DONE) in done and ("clean", Status.DONE) in done
    timeline = table.timeline()
    assert timeline.completed(Action.CLEAN) and timeline.pending() == ()
    assert any(timeline.origin_action(i) is Action.COMPACTION for i in timeline.completed(Action.COMMIT))
    assert sorted((r["uuid"], r["ts"]) for r in table.read(spark=spark).collect()) == sorted(model.items())


def test_schedule_inline_leaves_the_plan_for_async_execution(tmp_path, spark):
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), num_buckets=1))
    config = build_config(conf={"hoodie.compact.schedule.inline": "true",
                                "hoodie.compact.inline.max.delta.commits": "1", "hoodie.clean.automatic": "false"})
    table.upsert(df(spark, range(10), 1), config=config)
    result = table.upsert(df(spark, range(5), 2), config=config)
    scheduled = [s for s in result.services if s.status is Status.SCHEDULED]
    assert scheduled and table.timeline().pending_compactions()
    from tablesvc.services.compaction import run_compaction

    ran = run_compaction(table, spark=spark)
    assert [r.status for r in ran] == [Status.DONE] and not table.timeline().pending_compactions()
    assert hudi_rows(table.base_path) == sorted({f"k{k:03d}": (2 if k < 5 else 1) for k in range(10)}.items())


def test_deciding_nothing_is_due_reads_the_timeline_only(tmp_path, spark):
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), num_buckets=1))
    table.upsert(df(spark, range(10), 1), config=build_config(conf={"hoodie.clean.automatic": "false"}))
    config = build_config(conf={"hoodie.compact.inline": "true"})
    started = time.perf_counter()
    results = run_inline_services(table, config, spark)
    elapsed = time.perf_counter() - started
    assert [r.status for r in results] == [Status.NOTHING_TO_DO, Status.NOTHING_TO_DO]
    assert "1 delta commits since the last compaction < 5" in results[0].reason or "< 5" in results[0].reason
    assert elapsed < 1.0   # a timeline read, no Spark job (the benchmark suite measures it properly)


@pytest.mark.parametrize("version", [6, 8])
def test_inline_log_compaction_through_spark(tmp_path, spark, version):
    """Log compaction's Spark path: blocks stitched after writes; hudi-rs reads the same rows."""
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), table_version=version,
                                                        num_buckets=1))
    config = build_config(conf={"hoodie.log.compaction.inline": "true", "hoodie.log.compaction.blocks.threshold": "3",
                                "hoodie.clean.automatic": "false"})
    model = {}
    statuses = []
    for n in range(4):
        keys = range(0, 20) if n == 0 else range(n, n + 6)
        result = table.upsert(df(spark, keys, n + 1), config=config)
        model.update({f"k{k:03d}": n + 1 for k in keys})
        statuses.extend((s.action, s.status) for s in result.services)
        assert hudi_rows(table.base_path) == sorted(model.items())
    assert ("log_compaction", Status.DONE) in statuses or ("logcompaction", Status.DONE) in statuses
    timeline = table.timeline()
    assert any(timeline.origin_action(i) is Action.LOG_COMPACTION for i in timeline.completed(Action.DELTA_COMMIT))
    assert sorted((r["uuid"], r["ts"]) for r in table.read(spark=spark).collect()) == sorted(model.items())
