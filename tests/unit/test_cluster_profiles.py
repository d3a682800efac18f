"""The cluster profiles in spark_conf/ (docs/cluster.md): each loads as a mapping of Spark keys,
names the executors' Python (a cluster's executors otherwise start ``python3`` from their PATH),
turns Arrow's checks off on both JVMs as local.yaml does, and leaves the master for the user to set.
standalone.yaml itself runs on a real cluster in tests/spark/test_standalone_cluster.py."""

from __future__ import annotations

import os

import pytest

from tablesvc.spark.session import load_profile

ARROW_CHECKS_OFF = {"-Darrow.enable_unsafe_memory_access=true", "-Darrow.enable_null_check_for_get=false"}


@pytest.mark.parametrize("profile", ["standalone", "s3-cluster", "cluster-example"])
def test_cluster_profiles_name_the_executors_python_and_turn_arrow_checks_off(profile):
    conf = load_profile(profile)
    assert all(key.startswith("spark.") for key in conf)
    assert os.path.isabs(conf["spark.pyspark.python"])
    assert not conf["spark.master"].startswith("local")
    for key in ("spark.driver.defaultJavaOptions", "spark.executor.defaultJavaOptions"):
        assert ARROW_CHECKS_OFF <= set(conf[key].split()), (profile, key)


def test_the_standalone_profile_points_at_a_standalone_master_and_caps_its_cores():
    conf = load_profile("standalone")
    assert conf["spark.master"].startswith("spark://")
    assert int(conf["spark.cores.max"]) >= int(conf["spark.executor.cores"])


def test_the_s3_profile_gives_executors_the_region_and_no_credentials():
    conf = load_profile("s3-cluster")
    assert conf["spark.master"] == "yarn" and conf["spark.submit.deployMode"] == "client"
    assert conf["spark.executorEnv.AWS_REGION"]
    # keys are commented out: a profile is no place for credentials
    assert not any("SECRET" in key or "ACCESS_KEY" in key for key in conf)


class _Builder:
    """Stands in for ``SparkSession.builder``: records the configuration, starts nothing."""

    def __init__(self):
        self.conf = {}

    def config(self, key, value):
        self.conf[key] = value
        return self

    def getOrCreate(self):
        import os

        seen = os.environ.get("PYSPARK_PYTHON")
        return type("Session", (), {"sparkContext": type("Ctx", (), {"setLogLevel": lambda self, _: None})(),
                                    "python_at_start": seen})()


@pytest.mark.parametrize("master", ["spark://m:7077", "local[2]"])
def test_a_profiles_executor_python_reaches_pyspark_before_the_context_starts(monkeypatch, tmp_path, master):
    """PySpark started from Python (not spark-submit) reads only PYSPARK_PYTHON for the executors'
    Python: get_spark sets it from spark.pyspark.python, which wins over the variable as with
    spark-submit (a standalone cluster's executors otherwise ran /usr/bin/python3)."""
    from pyspark.sql import SparkSession

    from tablesvc.spark import session

    profile = tmp_path / "p.yaml"
    profile.write_text(f"spark.master: {master}\nspark.pyspark.python: /opt/venv/bin/python\n")
    builder = _Builder()
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.setattr(SparkSession, "builder", builder)
    monkeypatch.setattr(session, "prepare_executors", lambda spark: spark)
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    started = session.get_spark(str(profile))
    assert started.python_at_start == "/opt/venv/bin/python"
    assert builder.conf["spark.pyspark.python"] == "/opt/venv/bin/python"
