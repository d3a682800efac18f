"""Spark jobs on tables in S3 (moto on loopback, fixture ``s3_endpoint``): writes, log compaction,
compaction, clean and reads through the Python API in the test session's ``local[2]`` Spark, with
the endpoint and credentials given only as the table's options (no ``AWS_*`` variable in the
driver), so they reach the tasks with the job (``ObjectStorage.for_tasks``).  The same steps on a
local table give the expectation; hudi-rs reads both (the S3 one through its own object_store
client at the endpoint) and tablesvc's own read is checked against hudi-rs."""

from __future__ import annotations

import uuid

import pytest
from oracles.hudi_rs import read_table
from s3_server import copy_table_to_s3

from fixture_tables import TABLES_DIR, copy_table
from tablesvc.api import Table, TableSpec
from tablesvc.services.result import Status
from timeline.instant import Action

pytestmark = [pytest.mark.spark, pytest.mark.s3]

NATIVE_FIXTURE = "v8_trips_8i3u1d"
SERVICES_OFF = {"hoodie.clean.automatic": "false"}
CLEAN_KEEPING_ONE = {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "1"}


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch):
    """Only the table's options reach the storage, in the driver and in the tasks."""
    import os

    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)


def hudi_records(path: str, options: dict | None = None) -> list[dict]:
    """hudi-rs's snapshot without the file name (compaction moves records), sorted by key."""
    table = read_table(path, storage_options=options)
    rows = table.to_pylist() if table is not None else []
    return sorted(({k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in rows),
                  key=lambda r: r["_hoodie_record_key"])


def frame(spark, keys, ts):
    return spark.createDataFrame([(f"k{k:03d}", ts, ("a", "b")[k % 2]) for k in keys],
                                 "uuid string, ts long, city string")


def history(table: Table, spark) -> dict[str, int]:
    """Three upserts, log compaction, compaction, one more upsert, a clean: every Spark job kind
    but the index lookups, on one table.  Returns the expected uuid -> ts."""
    model: dict[str, int] = {}
    for n in range(3):
        keys = range(20) if n == 0 else range(n * 3, n * 3 + 8)
        table.upsert(frame(spark, keys, n + 1), options=SERVICES_OFF)
        model.update({f"k{k:03d}": n + 1 for k in keys})
    [logc] = table.log_compact(spark=spark)
    assert logc.status is Status.DONE, logc
    [comp] = table.compact(spark=spark)
    assert comp.status is Status.DONE and comp.metrics["file_groups"] >= 1, comp
    table.upsert(frame(spark, range(15, 25), 9), options=SERVICES_OFF)
    model.update({f"k{k:03d}": 9 for k in range(15, 25)})
    [clean] = table.clean(options=CLEAN_KEEPING_ONE)
    assert clean.status is Status.DONE, clean
    return model


def test_write_services_and_read_on_s3_match_the_same_history_on_local_files(s3_endpoint, spark, tmp_path):
    spec = TableSpec("t", ("uuid",), "ts", ("city",), table_version=8, num_buckets=1)
    root = f"s3://{s3_endpoint.bucket}/spark-{uuid.uuid4().hex[:8]}/t"
    on_s3 = Table.create(root, spec, options=s3_endpoint.options())
    local = Table.create(str(tmp_path / "t"), spec)

    model = history(on_s3, spark)
    assert history(local, spark) == model

    timeline = on_s3.timeline()
    assert any(timeline.origin_action(i) is Action.LOG_COMPACTION for i in timeline.completed(Action.DELTA_COMMIT))
    assert timeline.completed(Action.COMMIT) and timeline.completed(Action.CLEAN)
    s3_rows = hudi_records(root, s3_endpoint.options())
    assert sorted((r["uuid"], r["ts"]) for r in s3_rows) == sorted(model.items())
    # the same rows and values as the local history, meta columns but the commit times aside
    ignore = ("_hoodie_commit_time", "_hoodie_commit_seqno")
    assert ([{k: v for k, v in r.items() if k not in ignore} for r in s3_rows]
            == [{k: v for k, v in r.items() if k not in ignore} for r in hudi_records(str(tmp_path / "t"))])
    # tablesvc's own Spark read of the S3 table (Python tasks only: no native scan there) equals hudi-rs
    assert sorted((r["uuid"], r["ts"]) for r in on_s3.read(spark=spark).collect()) == sorted(model.items())


def test_compaction_of_a_hudi_written_table_copied_to_s3_keeps_its_rows(s3_endpoint, spark, tmp_path):
    _, root = copy_table_to_s3(s3_endpoint, "v6_trips_8i1u", "spark")
    local = copy_table(TABLES_DIR / "v6_trips_8i1u", tmp_path)
    before = hudi_records(root, s3_endpoint.options())
    assert before == hudi_records(str(local))
    table = Table.open(root, options=s3_endpoint.options())
    assert any(s.log_files for s in table.latest_file_slices())
    [result] = table.compact(spark=spark)
    assert result.status is Status.DONE, result
    assert not any(s.log_files for s in table.latest_file_slices())
    assert hudi_records(root, s3_endpoint.options()) == before


def test_read_plan_on_s3_sends_the_slices_a_local_read_scans_natively_to_python_tasks(s3_endpoint, tmp_path):
    from tablesvc.spark.read_job import plan_read

    _, root = copy_table_to_s3(s3_endpoint, NATIVE_FIXTURE, "plan")
    local = plan_read(Table.open(str(copy_table(TABLES_DIR / NATIVE_FIXTURE, tmp_path))))
    on_s3 = plan_read(Table.open(root, options=s3_endpoint.options()))
    assert local.native_base_files, "the fixture must have slices a local read scans natively"
    assert not on_s3.native_base_files
    assert len(on_s3.slices) == len(local.slices) + len(local.native_base_files)


def test_cli_compaction_run_and_read_on_s3_with_s3a_keys_from_conf(s3_endpoint, spark, tmp_path, capsys):
    import json

    from s3_server import ACCESS_KEY, REGION, SECRET_KEY
    from tablesvc.cli.main import main

    _, root = copy_table_to_s3(s3_endpoint, NATIVE_FIXTURE, "cli-spark")
    local = copy_table(TABLES_DIR / NATIVE_FIXTURE, tmp_path)
    keys = {"fs.s3a.endpoint": f"127.0.0.1:{s3_endpoint.port}", "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.endpoint.region": REGION, "fs.s3a.access.key": ACCESS_KEY, "fs.s3a.secret.key": SECRET_KEY}
    conf = [arg for key, value in keys.items() for arg in ("--conf", f"{key}={value}")]
    for path, extra in ((root.replace("s3://", "s3a://", 1), conf), (str(local), [])):
        capsys.readouterr()
        assert main(["compaction", "run", path, "--json", "--quiet", *extra]) == 0, capsys.readouterr().err
        [result] = json.loads(capsys.readouterr().out)
        assert result["status"] == "done", result
    assert hudi_records(root, s3_endpoint.options()) == hudi_records(str(local))
    out = tmp_path / "rows.parquet"
    assert main(["read", root, "--output", str(out), "--quiet", *conf]) == 0, capsys.readouterr().err
    import pyarrow.parquet as pq

    rows = pq.read_table(out).to_pylist()
    assert sorted(r["_hoodie_record_key"] for r in rows) == [r["_hoodie_record_key"] for r in hudi_records(str(local))]
    assert SECRET_KEY not in "".join(capsys.readouterr())


def test_a_spark_compaction_under_a_503_storm_fails_with_one_line_and_a_rerun_completes_it(s3_endpoint, spark, capsys):
    """The base files' PUTs, made by Spark tasks, answer 503 past the retries: one line, exit 1, the
    plan left for the re-run; nothing new visible to hudi-rs; the re-run compacts as if nothing had
    happened."""
    import json

    from tablesvc.cli.main import main

    _, root = copy_table_to_s3(s3_endpoint, "v6_trips_8i1u", "storm")
    before = hudi_records(root, s3_endpoint.options())
    retries = s3_endpoint.s3a_conf(**{"tablesvc.storage.max.retries": "0", "tablesvc.storage.retry.timeout.ms": "1000"})
    capsys.readouterr()
    s3_endpoint.inject("slowdown", 1000, method="PUT", key=".parquet")
    try:
        rc = main(["compaction", "run", root, "--json", "--quiet", *retries])
    finally:
        s3_endpoint.clear_faults()
    out, err = capsys.readouterr()
    assert rc == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and ".parquet" in lines[0], err
    assert "503" in lines[0] or "SlowDown" in lines[0] or "Slow Down" in lines[0], err
    table = Table.open(root, options=s3_endpoint.options())
    pending = [i for i in table.timeline().instants if i.action is Action.COMPACTION and not i.is_completed]
    assert pending, "the plan stays for the re-run"
    assert hudi_records(root, s3_endpoint.options()) == before
    assert main(["compaction", "run", root, "--json", "--quiet", *s3_endpoint.s3a_conf()]) == 0
    results = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in results] == ["done"] and results[0]["instant"] == pending[0].timestamp
    assert not any(s.log_files for s in table.latest_file_slices())
    assert hudi_records(root, s3_endpoint.options()) == before
