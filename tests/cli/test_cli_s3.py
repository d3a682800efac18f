"""The CLI on tables in S3 (moto on loopback, fixture ``s3_endpoint``): the endpoint and the
credentials come only from ``--conf`` / ``--config`` in Hadoop S3A's key names (no ``AWS_*``
variables in the environment), reach ``storage_for`` when the command opens or creates the table,
and are never printed.  No Spark: ``status``, ``timeline``, ``clean run``, ``init``."""

from __future__ import annotations

import json
import shutil
import socket
import uuid

import pytest
from s3_server import copy_table_to_s3

from tablesvc.cli.main import main
from timeline.instant import Action

pytestmark = pytest.mark.s3

FIXTURE = "v8_trips_8i3u1d"


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch):
    """Only what the command line says reaches the storage."""
    import os

    for name in list(os.environ):
        if name.startswith(("AWS_", "GOOGLE_", "AZURE_")):
            monkeypatch.delenv(name)


def s3a_conf(s3_endpoint, **override: str) -> list[str]:
    from s3_server import ACCESS_KEY, REGION, SECRET_KEY

    keys = {"fs.s3a.endpoint": f"127.0.0.1:{s3_endpoint.port}", "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.path.style.access": "true", "fs.s3a.endpoint.region": REGION,
            "fs.s3a.access.key": ACCESS_KEY, "fs.s3a.secret.key": SECRET_KEY} | override
    return [arg for key, value in keys.items() for arg in ("--conf", f"{key}={value}")]


def copy_fixture(s3_endpoint, name: str = FIXTURE, scheme: str = "s3") -> str:
    _, root = copy_table_to_s3(s3_endpoint, name, "cli")
    return root.replace("s3://", f"{scheme}://", 1)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_status_and_clean_on_s3_with_s3a_keys_from_conf_match_the_same_clean_of_a_local_copy(
        s3_endpoint, capsys, tmp_path):
    from fixture_tables import TABLES_DIR
    from oracles.hudi_rs import read_table
    from s3_server import SECRET_KEY
    from tablesvc.storage import storage_for

    root = copy_fixture(s3_endpoint, scheme="s3a")
    conf = s3a_conf(s3_endpoint)
    rc, out, err = run(capsys, "status", root, "--json", *conf)
    assert rc == 0, err
    status = json.loads(out)
    assert status["table"] == root and status["version"] == 8     # read from S3
    assert status["delta_commits_since_last_compaction"] > 0
    rc, out, err = run(capsys, "timeline", root, *conf)
    assert rc == 0, err
    assert "deltacommit" in out

    local = tmp_path / FIXTURE
    shutil.copytree(TABLES_DIR / FIXTURE, local)
    retain = ["--conf", "hoodie.cleaner.commits.retained=1"]
    rc, out, err = run(capsys, "clean", "run", root, "--json", *retain, *conf)
    assert rc == 0, err
    [s3_result] = json.loads(out)
    rc, out, err2 = run(capsys, "clean", "run", str(local), "--json", *retain)
    assert rc == 0, err2
    [local_result] = json.loads(out)
    assert s3_result["status"] == local_result["status"] == "done"
    assert s3_result["metrics"]["files_deleted"] == local_result["metrics"]["files_deleted"] > 0
    assert SECRET_KEY not in out + err and SECRET_KEY not in json.dumps(s3_result)

    storage = storage_for(root, s3_endpoint.options())
    assert not storage.exists(f"{root}/.hoodie/tablesvc.yaml")       # nothing written there

    def files(paths):
        return sorted(p for p in paths if not p.startswith(".hoodie/"))

    def s3_keys(folder: str) -> list[str]:
        out = []
        for info in storage.list_dir(folder):
            out += s3_keys(info.path) if info.is_dir else [info.path.split(f"{FIXTURE}/", 1)[1]]
        return out

    assert files(s3_keys(root)) == files(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())

    def rows(table):
        return sorted(table.to_pylist(), key=lambda r: (r["_hoodie_record_key"], r["_hoodie_partition_path"]))

    s3_url = root.replace("s3a://", "s3://", 1)
    assert rows(read_table(s3_url, storage_options=s3_endpoint.options())) == rows(read_table(str(local)))


def test_storage_keys_from_a_config_file_and_the_python_api(s3_endpoint, capsys, tmp_path):
    from s3_server import ACCESS_KEY, REGION, SECRET_KEY
    from tablesvc.api import Table

    root = copy_fixture(s3_endpoint)
    config = tmp_path / "s3.yaml"
    config.write_text(f"fs.s3a.endpoint: http://127.0.0.1:{s3_endpoint.port}\nfs.s3a.endpoint.region: {REGION}\n"
                      f"fs.s3a.access.key: {ACCESS_KEY}\nfs.s3a.secret.key: {SECRET_KEY}\n")
    rc, out, err = run(capsys, "status", root, "--config", str(config))
    assert rc == 0, err
    assert SECRET_KEY not in out + err
    table = Table.open(root, options={"fs.s3a.endpoint": f"http://127.0.0.1:{s3_endpoint.port}",
                                      "fs.s3a.access.key": ACCESS_KEY, "fs.s3a.secret.key": SECRET_KEY,
                                      "fs.s3a.endpoint.region": REGION})
    assert table.base_path == root and table.config.name


def test_init_creates_a_table_on_s3_that_status_then_reads(s3_endpoint, capsys):
    root = s3_endpoint.url("cli", uuid.uuid4().hex, "new")
    conf = s3a_conf(s3_endpoint)
    rc, out, err = run(capsys, "init", root, "--name", "fresh", "--record-key", "id", *conf)
    assert rc == 0, err
    assert root in out
    rc, out, err = run(capsys, "status", root, "--json", *conf)
    assert rc == 0, err
    assert json.loads(out)["name"] == "fresh"
    rc, out, err = run(capsys, "init", root, "--name", "again", "--record-key", "id", *conf)
    assert rc in (2, 3) and len(err.strip().splitlines()) == 1 and root in err, err


def test_a_bad_endpoint_is_one_line_naming_the_path_exit_1(s3_endpoint, capsys):
    from s3_server import SECRET_KEY

    with socket.socket() as s:          # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = s3_endpoint.url("cli", uuid.uuid4().hex, FIXTURE)
    conf = s3a_conf(s3_endpoint, **{"fs.s3a.endpoint": f"127.0.0.1:{port}", "tablesvc.storage.max.retries": "0",
                                    "tablesvc.storage.retry.timeout.ms": "1000"})
    for argv in (["status", root], ["clean", "run", root]):
        rc, out, err = run(capsys, *argv, *conf)
        assert rc == 1
        lines = err.strip().splitlines()
        assert len(lines) == 1 and root in lines[0] and "Traceback" not in err, err
        assert SECRET_KEY not in err + out


def test_an_unsupported_scheme_is_exit_2(capsys):
    for argv in (["status", "ftp://host/t"], ["clean", "run", "hdfs://nn/t"], ["init", "ftp://host/t", "--name", "t",
                                                                             "--record-key", "id"]):
        rc, out, err = run(capsys, *argv)
        assert rc == 2, err
        assert len(err.strip().splitlines()) == 1 and "unsupported scheme" in err


def test_the_runner_reaches_s3_with_keys_from_conf_only(s3_endpoint, capsys):
    """``tablesvc run`` opens its tables with the ``--conf`` storage keys (no ``AWS_*``): its clean on
    the S3 copy deletes what the same clean deletes on a local copy."""
    root = copy_fixture(s3_endpoint)
    rc, out, err = run(capsys, "run", root, "--once", "--json",
                       *s3a_conf(s3_endpoint, **{"hoodie.cleaner.commits.retained": "1"}))
    assert rc == 0, err
    assert "Forbidden" not in err and "error" not in err.lower(), err
    from tablesvc.api import Table

    table = Table.open(root, options=s3_endpoint.options())
    assert table.timeline().completed(Action.CLEAN), out


def test_read_output_to_an_object_store_is_refused_before_spark_starts(s3_endpoint, capsys, monkeypatch):
    import tablesvc.spark.session as session

    def no_spark(*_a, **_k):
        raise AssertionError("Spark was started")
    monkeypatch.setattr(session, "get_spark", no_spark)
    root = copy_fixture(s3_endpoint)
    rc, out, err = run(capsys, "read", root, "--output", f"s3://{s3_endpoint.bucket}/exported/rows",
                       *s3a_conf(s3_endpoint))
    assert rc == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "--output s3://" in err, err
