"""The Python API in a user's own PySpark session whose Spark workers cannot import tablesvc.

The workers run a throwaway venv's Python (``PYSPARK_PYTHON``) that sees the main venv's
packages (pyarrow, fastavro, numpy, PyYAML, pandas, pyspark) through a folder of symlinks, but
not tablesvc: the main venv installs tablesvc in editable mode, through a ``.pth`` file and a
finder that the symlink folder leaves out (a folder added by a ``.pth`` line has its own
``.pth`` files ignored anyway).  The driver runs ``.venv/bin/python`` in a scratch working
directory with no ``PYTHONPATH``, so that neither reaches the workers either.

* ``user_pyspark_program.py`` (a subprocess): a plain task fails on ``import tablesvc``; with
  ``TABLESVC_SHIP_CODE=off`` the upsert is refused before any table change; then the README's
  example and a compaction work, the rows read back by hudi-rs, and a task imports tablesvc from
  the zip tablesvc shipped.
* A worker Python without fastavro: ``tablesvc write`` exits 2 with one line naming fastavro and
  what to install; the table is unchanged.
* Without Spark: the shipped zip hashes as the driver's code, the dependency messages, and the
  versions checked equal setup.py's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pyarrow as pa
import pytest
from oracles.hudi_rs import sorted_rows

from tablesvc.errors import SparkEnvironmentError
from tablesvc.spark import executor_env
from tablesvc.spark.executor_env import REQUIREMENTS, ProbeReport, check_dependencies, code_zip, local_code
from tablesvc.api import Table, TableSpec
from helpers import data_files

REPO = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).resolve().parents[1] / "user_pyspark_program.py"
COLUMNS = ("uuid", "ts", "city", "fare")


def worker_python(folder: Path, hide: tuple[str, ...] = ()) -> str:
    """A venv's Python that imports the main venv's packages except tablesvc and ``hide``."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = folder / "site"
    site.mkdir()
    main_site = Path(sysconfig.get_paths()["purelib"])
    for entry in main_site.iterdir():
        name = entry.name.lower()
        if name.startswith(("tablesvc", "__editable__", "_distutils_hack")) or name.endswith(".pth"):
            continue
        if any(name == h or name.startswith((f"{h}-", f"{h}.")) for h in hide):
            continue
        (site / entry.name).symlink_to(entry)
    python = str(venv / "bin" / "python")
    venv_site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip()
    Path(venv_site, "main-venv-packages.pth").write_text(f"{site}\n")
    return python


def imports(python: str, module: str, cwd: Path) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], cwd=cwd, capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def workers(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("workers")
    (root / "plain").mkdir()
    (root / "no_fastavro").mkdir()
    out = {"plain": worker_python(root / "plain"), "no_fastavro": worker_python(root / "no_fastavro", ("fastavro",))}
    # the premise of every test here, checked outside Spark too
    assert not imports(out["plain"], "tablesvc", root) and not imports(out["plain"], "timeline", root)
    assert all(imports(out["plain"], m, root) for m in ("pyarrow", "fastavro", "numpy", "yaml", "pandas"))
    assert not imports(out["no_fastavro"], "fastavro", root) and imports(out["no_fastavro"], "pyarrow", root)
    return out


def user_env(worker: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON", "TABLESVC_SHIP_CODE", "TABLESVC_SPARK_PROFILE")}
    env["PYSPARK_PYTHON"] = worker
    return env


@pytest.mark.spark
def test_readme_example_runs_in_a_plain_pyspark_session_whose_workers_lack_tablesvc(tmp_path, workers):
    path, report_file = tmp_path / "trips", tmp_path / "report.json"
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "python"), str(PROGRAM), str(path), str(report_file)],
                          cwd=tmp_path, env=user_env(workers["plain"]), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(report_file.read_text())

    # Without the fix, a task cannot import tablesvc ...
    assert report["plain_task_before"] == ["ModuleNotFoundError: No module named 'tablesvc'"]
    # ... and with shipping off the write is refused, naming what to do, before any table change.
    refusal = report["ship_off"]
    assert f"Python {workers['plain']} cannot import tablesvc (ModuleNotFoundError" in refusal, refusal
    assert "TABLESVC_SHIP_CODE" in refusal and "\n" not in refusal
    assert report["instants_after_refusal"] == []

    # With shipping (the default), the README's example and a compaction.
    model = {f"u{i:02d}": (1, ("sf", "nyc")[i % 2], float(i)) for i in range(20)}
    model.update({f"u{i:02d}": (2, ("sf", "nyc")[i % 2], 100.0 + i) for i in range(10, 30)})
    expected = sorted((k, *v) for k, v in model.items())
    first, second = report["writes"]
    assert (first["records_written"], second["records_written"]) == (20, 20)
    assert [tuple(r) for r in report["read_before_compaction"]] == expected
    assert sorted_rows(path, COLUMNS, as_of=second["instant"]) == expected
    [compaction] = report["compaction"]
    assert compaction["action"] == "compaction" and compaction["status"] == "done", compaction
    assert [tuple(r) for r in report["read_after_compaction"]] == expected
    assert sorted_rows(path, COLUMNS) == expected
    table = Table.open(str(path))
    assert table.timeline().pending() == ()
    assert all(not s.log_files for s in table.latest_file_slices())   # compacted: base files only
    # The tasks imported tablesvc from the zip the driver shipped.
    [origin] = report["plain_task_after"]
    assert "/tablesvc-" in origin and origin.endswith(".zip/tablesvc/__init__.py"), origin


@pytest.mark.spark
def test_a_worker_python_without_fastavro_is_refused_with_one_line_before_any_change(tmp_path, workers):
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",)))
    pa_rows = pa.table({"uuid": ["a", "b"], "ts": [1, 1], "city": ["sf", "sf"]})
    import pyarrow.parquet as pq

    pq.write_table(pa_rows, tmp_path / "in.parquet")
    before = sorted(os.listdir(Path(table.base_path) / ".hoodie"))
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "tablesvc", "write", table.base_path,
                           "--input", str(tmp_path / "in.parquet")],
                          cwd=tmp_path, env=user_env(workers["no_fastavro"]), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"tablesvc: error: the Spark executors' Python {workers['no_fastavro']} cannot run "
                               "tablesvc's tasks: fastavro (ModuleNotFoundError: No module named 'fastavro')")
    assert "pip install 'fastavro>=1.9'" in lines[0] and "PYSPARK_PYTHON" in lines[0]
    assert sorted(os.listdir(Path(table.base_path) / ".hoodie")) == before and not data_files(table.base_path)
    assert table.timeline().instants == ()


def test_the_shipped_zip_holds_exactly_the_drivers_code(tmp_path):
    """The probe's walk over the zip on sys.path gives the driver's fingerprint, in a Python that
    has nothing but the zip and the standard library (``-S``: no site-packages)."""
    expected, files = local_code()
    assert {name.split("/", 1)[0] for name, _ in files} == {"tablesvc", "timeline"}
    assert any(name.endswith(".avsc") for name, _ in files) and not any("__pycache__" in n for n, _ in files)
    script = ("from tablesvc.spark.executor_env import PACKAGES, probe_kit\n"
              "import importlib.util\n"
              "files, fingerprint, _ = probe_kit()\n"
              "print(fingerprint([f for p in PACKAGES for f in files(p)]))\n"
              "print(importlib.util.find_spec('tablesvc').origin)\n")
    env = {"PYTHONPATH": code_zip(), "PATH": os.environ.get("PATH", "")}
    out = subprocess.run([sys.executable, "-S", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [expected, os.path.join(code_zip(), "tablesvc", "__init__.py")]
    assert code_zip() == code_zip() and not code_zip().startswith(os.getcwd())   # once per process, in a temp folder


def _report(**versions) -> ProbeReport:
    found = {"pyarrow": "26.0.1", "fastavro": "1.13.1", "numpy": "2.4.6", "yaml": "6.0.4"} | versions
    return ProbeReport(python="/opt/py/bin/python3", fingerprint=None, code_error=None, code_origin=None,
                       versions=found, errors={m: f"ModuleNotFoundError: No module named '{m}'"
                                               for m, v in found.items() if v is None})


def test_the_dependency_error_names_each_missing_or_old_package_and_the_pip_command():
    check_dependencies(_report())
    with pytest.raises(SparkEnvironmentError) as e:
        check_dependencies(_report(pyarrow=None, fastavro="1.8.2"))
    assert str(e.value) == (
        "the Spark executors' Python /opt/py/bin/python3 cannot run tablesvc's tasks: pyarrow (ModuleNotFoundError: "
        "No module named 'pyarrow'); fastavro 1.8.2 (tablesvc supports fastavro>=1.9); install them there "
        "(pip install 'pyarrow>=14' 'fastavro>=1.9') or point PYSPARK_PYTHON / spark.pyspark.python at a Python "
        "that has them")
    assert e.value.exit_code == 2
    with pytest.raises(SparkEnvironmentError, match=r"pyyaml 5.4.1 \(tablesvc supports pyyaml>=6\)"):
        check_dependencies(_report(yaml="5.4.1"))


def test_the_versions_checked_on_the_executors_are_setup_pys():
    """REQUIREMENTS repeats setup.py's install_requires for the packages a task imports."""
    declared = {}
    for line in metadata.requires("tablesvc") or ():
        if ";" in line:
            continue   # extras (test, bench)
        name, specs = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?(.*)", line).groups()
        bounds = dict.fromkeys((">=", "<"))
        for spec in filter(None, (s.strip() for s in specs.split(","))):
            op = ">=" if spec.startswith(">=") else "<" if spec.startswith("<") else spec
            bounds[op] = spec[len(op):]
        declared[name.lower()] = (bounds[">="], bounds["<"])
    for req in REQUIREMENTS:
        assert declared[req.distribution] == (req.minimum, req.below), req


def test_ship_mode_accepts_auto_and_off_only(monkeypatch):
    from tablesvc.errors import ConfigError

    monkeypatch.delenv("TABLESVC_SHIP_CODE", raising=False)
    assert executor_env.ship_mode() == "auto"
    monkeypatch.setenv("TABLESVC_SHIP_CODE", "OFF")
    assert executor_env.ship_mode() == "off"
    monkeypatch.setenv("TABLESVC_SHIP_CODE", "sometimes")
    with pytest.raises(ConfigError, match="TABLESVC_SHIP_CODE='sometimes': expected auto"):
        executor_env.ship_mode()


def test_a_worker_python_that_cannot_start_is_named_in_one_line():
    """The probe job failing as a whole (here Spark's text when PYSPARK_PYTHON names no program)."""
    class Py4JJavaError(Exception):
        pass

    Py4JJavaError.__module__ = "py4j.protocol"
    error = Py4JJavaError(
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, "
        "most recent failure: Lost task 0.0 in stage 1.0 (TID 1) (192.0.2.2 executor driver): java.io.IOException: "
        'Cannot run program "/nonexistent/python": error=2, No such file or directory\n'
        "Caused by: java.io.IOException: error=2, No such file or directory\n\t... 20 more\n")
    assert executor_env._task_failure(error) == 'Cannot run program "/nonexistent/python": error=2, No such file or directory'
