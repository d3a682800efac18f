"""Shared test fixtures for every folder of tests/: ``fixture_root`` (the tables Apache Hudi wrote,
``fixture_tables.py``), ``spark`` (one session for the run) and ``bench`` (the benchmark harness).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# -- the shared helpers: test files sit in tests/{unit,spark,crash_model,cli}, the modules they share
# (fixture_tables, helpers, table_builders, oracles, ...) here and in benchmarks/; both folders go on
# the path whatever pytest's import mode, so every test file imports them by name.
for _folder in (Path(__file__).resolve().parent, Path(__file__).resolve().parent / "benchmarks"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from fixture_tables import FixtureRoot  # noqa: E402


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory) -> "FixtureRoot":
    return FixtureRoot(tmp_path_factory.mktemp("zips"))


def pytest_collection_modifyitems(items) -> None:
    """Every test that uses the S3 endpoint is an object-store case (``pytest -m s3`` runs them
    alone), and every one that uses Azurite an Azure case (``pytest -m azure``), whether or not its
    file marks it."""
    for item in items:
        if "s3_endpoint" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.s3)
        if "azure_endpoint" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.azure)


@pytest.fixture(scope="session")
def s3_endpoint():
    """A moto S3 server on a loopback port, in a process of its own, with one bucket
    (tests/s3_server.py), for the whole run; its start failing fails the tests that use it."""
    from s3_server import S3Server

    server = S3Server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azure_endpoint():
    """Azurite's blob service on a loopback port, in a process of its own, with one container
    (tests/azure_server.py), for the whole run.  ``make test`` installs ``azurite-blob`` with npm.
    On a machine without npm its tests skip; where npm is there, a missing install or a failed start
    fails them (a skip would hide a broken set-up)."""
    import shutil

    from azure_server import AzureServer, azurite_blob

    if azurite_blob() is None:
        missing = "azurite-blob not found (.cache/azurite, PATH)"
        if shutil.which("npm") is None:
            pytest.skip(f"{missing}, and no npm to install it with")
        pytest.fail(f"{missing}, though npm is here: `make test` installs it (see .cache/azurite/npm.log)")
    server = AzureServer.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole test run (start-up costs seconds)."""
    from tablesvc.spark.session import get_spark

    session = get_spark(overrides={"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4",
                                   "spark.default.parallelism": "4", "spark.driver.memory": "2g"})
    yield session
    session.stop()


# -- the benchmark harness (tests/benchmarks/bench_harness.py; `make bench`) ---------------------------
from bench_harness import bench, write_bench_report  # noqa: E402,F401  (the `bench` fixture)


def pytest_sessionfinish(session, exitstatus) -> None:
    write_bench_report()
