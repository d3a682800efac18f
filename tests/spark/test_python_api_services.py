"""``Table``'s services from Python: ``compact``, ``log_compact``, ``clean``, ``rollback_failed``,
``rollback`` and ``run_inline_services`` call the functions the CLI calls, take Hudi keys as
``options`` and return the CLI's typed results.  Each runs on a copy of a table (a fixture Apache
Hudi wrote, or one written here) in the test session's Spark, found as the active session as a
user's program would; the rows are read back with hudi-rs."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
from oracles.hudi_rs import read_rows

from fixture_tables import TABLES_DIR, copy_table
from helpers import data_files
from table_builders import write_without_spark
from tablesvc.errors import ConfigError, InvalidInputError, SparkEnvironmentError
from tablesvc.services.result import ServiceResult, Status
from tablesvc.api import Table, TableSpec
from timeline.instant import Action

pytestmark = pytest.mark.spark

SERVICES_OFF = {"hoodie.clean.automatic": "false"}   # compaction and log compaction are off by default


def hudi_records(path) -> list[dict]:
    """Every column of hudi-rs's snapshot but the file name (a compaction moves records to new
    files), sorted by record key."""
    return sorted(({k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in read_rows(path)),
                  key=lambda r: r["_hoodie_record_key"])


def hudi_rows(path) -> list[tuple]:
    return sorted((r["uuid"], r["ts"]) for r in hudi_records(path))


def frame(spark, keys, ts):
    return spark.createDataFrame([(f"k{k:03d}", ts, ("a", "b")[k % 2]) for k in keys], "uuid string, ts long, city string")


def written_table(tmp_path, spark, writes: int, version: int = 8) -> tuple[Table, dict[str, int]]:
    """A table of one bucket per partition after ``writes`` upserts with every service off: one base
    file and ``writes - 1`` log files per file group."""
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), table_version=version,
                                                        num_buckets=1))
    model: dict[str, int] = {}
    for n in range(writes):
        keys = range(20) if n == 0 else range(n * 3, n * 3 + 8)
        table.upsert(frame(spark, keys, n + 1), options=SERVICES_OFF)
        model.update({f"k{k:03d}": n + 1 for k in keys})
    assert hudi_rows(table.base_path) == sorted(model.items())
    return table, model


def test_compact_a_copy_of_a_table_hudi_wrote(tmp_path, spark):
    path = copy_table(TABLES_DIR / "v6_trips_8i1u", tmp_path)
    before = hudi_records(path)
    table = Table.open(str(path))
    assert any(s.log_files for s in table.latest_file_slices())
    results = table.compact()     # no spark=: the active session, as in a user's program
    assert [type(r) for r in results] == [ServiceResult] and results[0].status is Status.DONE, results
    assert results[0].action == "compaction" and results[0].metrics["file_groups"] >= 1
    assert hudi_records(path) == before
    assert not any(s.log_files for s in table.latest_file_slices())
    assert table.compact(results[0].instant)[0].status is Status.NOTHING_TO_DO   # as `compaction run --instant` says


@pytest.mark.parametrize("version", [6, 8])
def test_log_compact(tmp_path, spark, version):
    table, model = written_table(tmp_path, spark, writes=3, version=version)
    [result] = table.log_compact(spark=spark)
    assert result.action == "logcompaction" and result.status is Status.DONE, result
    timeline = table.timeline()
    assert any(timeline.origin_action(i) is Action.LOG_COMPACTION for i in timeline.completed(Action.DELTA_COMMIT))
    assert hudi_rows(table.base_path) == sorted(model.items())
    assert sorted((r["uuid"], r["ts"]) for r in table.read().collect()) == sorted(model.items())


def test_clean_dry_run_then_clean(tmp_path, spark):
    table, model = written_table(tmp_path, spark, writes=3)
    table.compact()
    for n in (4, 5):
        table.upsert(frame(spark, range(n, n + 4), n), options=SERVICES_OFF)
        model.update({f"k{k:03d}": n for k in range(n, n + 4)})
    files = data_files(table.base_path)
    options = {"hoodie.cleaner.commits.retained": 1}
    [dry] = table.clean(dry_run=True, options=options)
    assert dry.status is Status.DRY_RUN and dry.metrics["files_to_delete"] == len(dry.metrics["files"]) > 0
    assert data_files(table.base_path) == files
    [done] = table.clean(options=options)
    assert done.action == "clean" and done.status is Status.DONE, done
    planned = {f for f in files if any(d.endswith(f"/{f}") for d in dry.metrics["files"])}
    assert len(planned) == len(dry.metrics["files"]) and data_files(table.base_path) == files - planned
    assert hudi_rows(table.base_path) == sorted(model.items())


def test_rollback_failed_dry_run_then_rollback(tmp_path, spark):
    table, model = written_table(tmp_path, spark, writes=2)
    files = data_files(table.base_path)
    batch = pa.table({"uuid": [f"k{k:03d}" for k in range(5, 40)], "ts": [9] * 35,
                      "city": [("a", "b")[k % 2] for k in range(5, 40)]})
    failed, _stats = write_without_spark(table, batch, "upsert", stage=7, complete=False)   # no heartbeat: failed
    assert data_files(table.base_path) > files
    [dry] = table.rollback_failed(dry_run=True)
    assert dry.status is Status.DRY_RUN and dry.metrics["target"] == failed
    assert table.timeline().get(failed) is not None
    [done] = table.rollback_failed()
    assert done.action == "rollback" and done.status is Status.DONE and done.metrics["target"] == failed
    assert table.timeline().get(failed) is None and data_files(table.base_path) == files
    assert hudi_rows(table.base_path) == sorted(model.items())
    assert table.rollback_failed() == []


def test_rollback_of_the_latest_completed_write(tmp_path, spark):
    table, model = written_table(tmp_path, spark, writes=2)
    latest = table.upsert(frame(spark, range(0, 5), 9), options=SERVICES_OFF).instant
    with pytest.raises(InvalidInputError, match="allow"):
        table.rollback(latest)
    result = table.rollback(latest, allow_completed=True)
    assert isinstance(result, ServiceResult) and result.status is Status.DONE and result.metrics["target"] == latest
    assert hudi_rows(table.base_path) == sorted(model.items())


def test_run_inline_services_with_hudi_keys_as_options(tmp_path, spark):
    table, model = written_table(tmp_path, spark, writes=2)
    results = table.run_inline_services(options={"hoodie.compact.inline": True,
                                                  "hoodie.compact.inline.max.delta.commits": "1",
                                                  "hoodie.clean.automatic": False})
    assert [(r.action, r.status) for r in results] == [("compaction", Status.SCHEDULED), ("compaction", Status.DONE)]
    assert not any(s.log_files for s in table.latest_file_slices())
    assert hudi_rows(table.base_path) == sorted(model.items())
    # the table's defaults (compaction off inline, clean on): only the clean decides, nothing due
    assert [(r.action, r.status) for r in table.run_inline_services()] == [("clean", Status.NOTHING_TO_DO)]


def test_options_are_checked_as_the_cli_checks_conf(tmp_path, spark):
    table, _model = written_table(tmp_path, spark, writes=1)
    with pytest.raises(ConfigError, match="hoodie.compact.inline.max.delta.commits"):
        table.compact(options={"hoodie.compact.inline.max.delta.commits": "many"})
    with pytest.raises(InvalidInputError, match="options .* or config, not both"):
        table.upsert(frame(spark, range(3), 2), options=SERVICES_OFF, config=table.service_config())
    assert len(table.timeline().instants) == 1


def test_executors_are_checked_before_the_table_changes(tmp_path, spark, monkeypatch):
    """A session whose executors cannot run tablesvc's tasks: the write and the compaction are
    refused before the first instant is requested (here the check itself is made to refuse)."""
    table, model = written_table(tmp_path, spark, writes=2)
    before = [i.file_name() for i in table.timeline().instants]

    def refuse(session, **_options):
        raise SparkEnvironmentError("the Spark executors' Python /x cannot run tablesvc's tasks: fastavro (missing)")

    import tablesvc.spark.session as session_module
    import tablesvc.spark.write_job as write_module

    monkeypatch.setattr(write_module, "prepare_executors", refuse)
    monkeypatch.setattr(session_module, "prepare_executors", refuse)
    with pytest.raises(SparkEnvironmentError):
        table.upsert(frame(spark, range(3), 3))
    with pytest.raises(SparkEnvironmentError):
        table.compact()
    with pytest.raises(SparkEnvironmentError):
        table.log_compact()
    assert [i.file_name() for i in table.timeline().instants] == before
    assert hudi_rows(table.base_path) == sorted(model.items())


def test_importing_table_loads_no_service_and_no_spark():
    code = ("import sys, tablesvc.api\n"
            "print(sorted(m for m in sys.modules if m.startswith(('tablesvc.services', 'tablesvc.spark', 'pyspark'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
