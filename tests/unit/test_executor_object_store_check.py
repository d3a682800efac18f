"""``prepare_executors(spark, object_store=True)``: obstore is checked on the executors only for jobs
on object-store tables (tablesvc.storage.object_store imports it lazily, so executors serving
local tables need not have it), from the probe the SparkContext already answered (no second job)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tablesvc.errors import SparkEnvironmentError
from tablesvc.spark import executor_env
from tablesvc.spark.executor_env import OBJECT_STORE_REQUIREMENTS, ProbeReport, prepare_executors

BASE = {"pyarrow": "19.0.1", "fastavro": "1.10.0", "numpy": "2.2.0", "yaml": "6.0.2"}


def probed(monkeypatch, versions: dict, errors: dict | None = None):
    """A session whose probe already answered ``versions``: no Spark job runs here."""
    spark = SimpleNamespace(sparkContext=SimpleNamespace(applicationId="app-test-object-store"))
    monkeypatch.setitem(executor_env._READY, "app-test-object-store",
                        ProbeReport("/opt/py/bin/python", "fp", None, None, versions, errors or {}))
    return spark


def test_without_obstore_local_jobs_pass_and_object_store_jobs_are_refused_in_one_line(monkeypatch):
    spark = probed(monkeypatch, {**BASE, "obstore": None}, {"obstore": "ModuleNotFoundError: No module named 'obstore'"})
    assert prepare_executors(spark) is spark
    with pytest.raises(SparkEnvironmentError) as raised:
        prepare_executors(spark, object_store=True)
    message = str(raised.value)
    assert "\n" not in message
    assert "/opt/py/bin/python" in message and "object-store tables" in message
    assert "No module named 'obstore'" in message and "pip install 'obstore>=0.12.1,<0.12.2'" in message


def test_another_obstore_version_is_refused_and_the_pinned_one_passes(monkeypatch):
    spark = probed(monkeypatch, {**BASE, "obstore": "0.13.0"})
    with pytest.raises(SparkEnvironmentError, match=r"obstore 0\.13\.0 \(tablesvc supports obstore>=0\.12\.1,<0\.12\.2\)"):
        prepare_executors(spark, object_store=True)
    spark = probed(monkeypatch, {**BASE, "obstore": "0.12.1"})
    assert prepare_executors(spark, object_store=True) is spark


def test_the_probe_asks_for_obstore_and_the_pin_is_setup_pys():
    from importlib import metadata

    _files, _fingerprint, probe = executor_env.probe_kit()
    [answer] = list(probe(iter([0])))
    assert "obstore" in answer["versions"]
    assert "obstore==0.12.1" in (metadata.requires("tablesvc") or [])
    [req] = OBJECT_STORE_REQUIREMENTS
    assert req.supports("0.12.1") and not req.supports("0.12.2") and not req.supports("0.12.0")
