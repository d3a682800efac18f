"""The Java tier's fixtures (issue #26; docs/interop.md).  Run by ``make interop`` (marker
``interop_java``, which ``make test`` deselects), with the project's ``.venv``; Java Hudi runs in
driver processes of its own (``java_hudi.py``).

Nothing here skips: when Java Hudi is not set up, or Spark with the Hudi bundle cannot start, the
tests FAIL with what is missing, so that the tier never "passes" without having run.

* ``java_hudi_setup``: the venv and bundles ``make interop`` made (its environment variables);
* ``java_hudi``: one driver on the newest bundle, started once for the session;
* ``start_java_hudi``: starts drivers for one test (one JVM per scenario and table version) and
  stops them when it ends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from java_hudi import HudiBundle, JavaHudi, JavaHudiSetup, JavaHudiUnavailable


@pytest.fixture(scope="session")
def java_hudi_setup() -> JavaHudiSetup:
    try:
        return JavaHudiSetup.from_env()
    except JavaHudiUnavailable as exc:
        missing = str(exc)
    pytest.fail(missing, pytrace=False)


def _start(setup: JavaHudiSetup, bundle: HudiBundle, work_dir: Path) -> JavaHudi:
    try:
        return JavaHudi(setup, bundle, work_dir).start()
    except JavaHudiUnavailable as exc:
        failure = str(exc)
    pytest.fail(f"Java Hudi could not start: {failure}", pytrace=False)


@pytest.fixture(scope="session")
def java_hudi(java_hudi_setup, tmp_path_factory):
    driver = _start(java_hudi_setup, java_hudi_setup.bundle, tmp_path_factory.mktemp("java-hudi"))
    yield driver
    driver.close()


@pytest.fixture
def start_java_hudi(java_hudi_setup):
    started: list[JavaHudi] = []

    def start(bundle: HudiBundle, work_dir: Path) -> JavaHudi:
        driver = _start(java_hudi_setup, bundle, work_dir)
        started.append(driver)
        return driver

    yield start
    for driver in started:
        driver.close()
