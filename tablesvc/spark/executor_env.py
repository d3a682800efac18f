"""The Spark executors must run tablesvc's tasks: checked (and tablesvc's code shipped) before any table change.

A tablesvc task is a tablesvc function: the executors' Python unpickles it by importing
``tablesvc`` and ``timeline``, and runs it with pyarrow, fastavro, numpy and PyYAML.  In a
user's own PySpark program, or on a cluster, the executors' Python is not the one tablesvc
was installed in, and a task would fail with ``No module named 'tablesvc'`` half-way through
a write.  ``prepare_executors(spark)``, once per SparkContext:

1. runs one probe task (a Spark job of one task): what the executors' Python imports, the
   fingerprint of its tablesvc code (a hash of every file of ``tablesvc`` and ``timeline``),
   and the versions of the packages tablesvc's tasks need;
2. raises ``SparkEnvironmentError`` naming each of those packages that is missing or outside
   the versions tablesvc supports, and what to install (they are the user's to install:
   compiled wheels for the executors' platform); ``obstore`` is required only for a job on an
   object-store table, ``prepare_executors(spark, object_store=True)``;
3. when the executors cannot import tablesvc, or import other code than the driver runs,
   adds a zip of the driver's ``tablesvc`` and ``timeline`` with ``SparkContext.addPyFile``
   (built once per process, in a temporary folder) and probes again: the zip comes first on
   the tasks' ``sys.path``.  ``TABLESVC_SHIP_CODE=off`` turns shipping off: the executors
   must then have the same tablesvc installed, else the error says so.

The probe runs on every master, local ones too: one rule, and the dependency check needs the
job anyway.  It costs one small Spark job per SparkContext (docs/python-api.md gives the
measured cost); the zip is added only when needed, so sessions whose executors already have
tablesvc import it from their own install, not from a zip.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import threading
import zipfile
from dataclasses import dataclass, field
from functools import cache

from tablesvc.errors import ConfigError, SparkEnvironmentError

PACKAGES = ("tablesvc", "timeline")   # spark_conf is the driver's (session profiles): never needed in a task
SHIP_CODE_VARIABLE = "TABLESVC_SHIP_CODE"


@dataclass(frozen=True)
class Requirement:
    """A package tablesvc's tasks import, and the versions it supports (as setup.py says)."""
    module: str                 # what the task imports
    distribution: str           # what to pip install
    minimum: str
    below: str | None = None    # first unsupported version

    def pip_spec(self) -> str:
        return f"{self.distribution}>={self.minimum}" + (f",<{self.below}" if self.below else "")

    def supports(self, version: str) -> bool:
        found = _version_tuple(version)
        return found >= _version_tuple(self.minimum) and (self.below is None or found < _version_tuple(self.below))


# Kept equal to setup.py's install_requires (tests/spark/test_python_api_executors.py compares them);
# pyspark and pandas are PySpark's own: its worker checks them.
REQUIREMENTS = (Requirement("pyarrow", "pyarrow", "14"), Requirement("fastavro", "fastavro", "1.9"),
                Requirement("numpy", "numpy", "1.24"), Requirement("yaml", "pyyaml", "6"))
# Needed only by tasks of tables on object stores (tablesvc.storage.object_store imports it lazily):
# checked when a job on such a table asks (``prepare_executors(spark, object_store=True)``), so
# executors serving local or mounted tables need not have it.  setup.py pins it (==0.12.1).
OBJECT_STORE_REQUIREMENTS = (Requirement("obstore", "obstore", "0.12.1", "0.12.2"),)


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(c for c in piece[:6] if c.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


@dataclass(frozen=True)
class ProbeReport:
    """What one executor's Python imports (the probe task's answer)."""
    python: str                             # sys.executable of the executor's Python worker
    fingerprint: str | None                 # of its tablesvc + timeline, None when they do not import
    code_error: str | None                  # why they do not import
    code_origin: str | None                 # where its tablesvc came from (a file path, maybe inside the zip)
    versions: dict[str, str | None] = field(default_factory=dict)   # module -> version, None when missing
    errors: dict[str, str] = field(default_factory=dict)            # module -> import error


def probe_kit(packages: tuple[str, ...] = PACKAGES,
              modules: tuple[str, ...] = tuple(r.module for r in REQUIREMENTS + OBJECT_STORE_REQUIREMENTS)):
    """(package_files, fingerprint, probe), as nested functions: cloudpickle sends a nested
    function by value, so an executor runs the probe without importing tablesvc (a function of
    this module would be sent by reference and fail to unpickle right where tablesvc is missing).
    They use the standard library only; the driver hashes its own files with the same two
    (``local_code``)."""

    def package_files(package):
        """(path in the zip, bytes) of every file of ``package``, sorted.  The package is found,
        not imported (importing ``timeline`` would load the whole lower floor into the worker);
        its loader's resource reader walks a folder and a zip on sys.path alike."""
        import importlib.util

        spec = importlib.util.find_spec(package)
        if spec is None or spec.loader is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError(f"No module named {package!r}")
        out = []

        def walk(node, prefix):
            for child in sorted(node.iterdir(), key=lambda c: c.name):
                if child.name == "__pycache__" or child.name.endswith((".pyc", ".pyo")):
                    continue
                if child.is_dir():
                    walk(child, f"{prefix}{child.name}/")
                else:
                    out.append((f"{prefix}{child.name}", child.read_bytes()))

        walk(spec.loader.get_resource_reader(package).files(), f"{package}/")
        return out

    def fingerprint(files):
        import hashlib as hl

        h = hl.sha256()
        for name, data in files:
            h.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
        return h.hexdigest()

    def probe(rows):
        import importlib
        import importlib.util
        import sys

        for _ in rows:   # read the input to its end: else Spark discards the Python worker instead of reusing it
            pass
        report = {"python": sys.executable, "fingerprint": None, "code_error": None, "code_origin": None,
                  "versions": {}, "errors": {}}
        try:
            report["fingerprint"] = fingerprint([f for package in packages for f in package_files(package)])
            report["code_origin"] = importlib.util.find_spec(packages[0]).origin
        except Exception as e:   # noqa: BLE001 - reported, the driver decides
            report["code_error"] = f"{type(e).__name__}: {e}"
        for name in modules:
            try:
                module = importlib.import_module(name)
                report["versions"][name] = str(getattr(module, "__version__", "0"))
            except Exception as e:   # noqa: BLE001
                report["versions"][name] = None
                report["errors"][name] = f"{type(e).__name__}: {e}"
        yield report

    return package_files, fingerprint, probe


@cache
def local_code() -> tuple[str, tuple[tuple[str, bytes], ...]]:
    """(fingerprint, files) of the tablesvc code this driver runs, read once per process."""
    package_files, fingerprint, _probe = probe_kit()
    files = tuple(f for package in PACKAGES for f in package_files(package))
    return fingerprint(files), files


@cache
def code_zip() -> str:
    """A zip of the driver's tablesvc and timeline, built once per process in a temporary folder
    (not the working directory) and removed at exit.  Named by fingerprint: Spark refuses a
    second file of one name with other content."""
    fp, files = local_code()
    folder = tempfile.mkdtemp(prefix="tablesvc-pyfiles-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, f"tablesvc-{fp[:16]}.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            zf.writestr(name, data)
    return path


def run_probe(spark) -> ProbeReport:
    """One Spark job of one task: the executors' answer."""
    sc = spark.sparkContext
    try:
        [answer] = sc.parallelize([0], 1).mapPartitions(probe_kit()[2]).collect()
    except Exception as e:   # noqa: BLE001 - the executors cannot run a Python task at all
        raise SparkEnvironmentError(f"the Spark executors cannot run a Python task ({_task_failure(e)}); "
                                    "check PYSPARK_PYTHON / spark.pyspark.python") from None
    return ProbeReport(**answer)


# Spark's "Lost task 0.0 in stage 1.0 (TID 1) (host executor driver): java.io.IOException: Cannot run
# program ..." line: the JVM's reason, without the exception's class
_TASK_FAILURE = re.compile(r"most recent failure: .*?\): (?:[\w.$]+(?:Exception|Error): )?(.+)$", re.MULTILINE)


def _task_failure(error: Exception) -> str:
    """One line: the Python error of the task (``translate_task_error``), else the JVM's reason."""
    from tablesvc.spark.errors import translate_task_error

    cause = translate_task_error(error)
    if cause is error:
        found = _TASK_FAILURE.search(str(error))
        if found:
            return found.group(1).strip()
    text = str(cause).strip().splitlines()
    return text[0] if text else type(cause).__name__


def ship_mode() -> str:
    mode = os.environ.get(SHIP_CODE_VARIABLE, "auto").strip().lower() or "auto"
    if mode not in ("auto", "off"):
        raise ConfigError(f"{SHIP_CODE_VARIABLE}={mode!r}: expected auto (the default) or off")
    return mode


def dependency_problems(report: ProbeReport, requirements: tuple[Requirement, ...] = REQUIREMENTS) -> list[str]:
    problems = []
    for req in requirements:
        version = report.versions.get(req.module)
        if version is None:
            problems.append(f"{req.distribution} ({report.errors.get(req.module, 'missing')})")
        elif not req.supports(version):
            problems.append(f"{req.distribution} {version} (tablesvc supports {req.pip_spec()})")
    return problems


def check_dependencies(report: ProbeReport, requirements: tuple[Requirement, ...] = REQUIREMENTS,
                       what: str = "tablesvc's tasks") -> None:
    problems = dependency_problems(report, requirements)
    if problems:
        needed = " ".join(f"'{r.pip_spec()}'" for r in requirements if any(p.startswith(f"{r.distribution} ")
                                                                             for p in problems))
        raise SparkEnvironmentError(
            f"the Spark executors' Python {report.python} cannot run {what}: {'; '.join(problems)}; "
            f"install them there (pip install {needed}) or point PYSPARK_PYTHON / spark.pyspark.python at a "
            "Python that has them")


_READY: dict[str, ProbeReport] = {}   # applicationId of each SparkContext whose executors passed -> their probe
_LOCK = threading.Lock()


def prepare_executors(spark, *, object_store: bool = False):
    """``spark``, once its executors are known to run tablesvc's tasks (see the module doc);
    the first call per SparkContext costs a probe job (two when the code is shipped), later
    ones a dict lookup.  ``object_store``: the job reads or writes a table on an object store, so
    the executors must also have ``obstore`` (``OBJECT_STORE_REQUIREMENTS``; the probe has already
    asked).  Raises ``SparkEnvironmentError`` (exit 2) before any table change."""
    sc = spark.sparkContext
    key = sc.applicationId
    report = _READY.get(key)
    if report is None:
        with _LOCK:
            report = _READY.get(key) or _checked_probe(spark)
            _READY[key] = report
    if object_store:
        check_dependencies(report, OBJECT_STORE_REQUIREMENTS, "tablesvc's tasks on object-store tables")
    return spark


def _checked_probe(spark) -> ProbeReport:
    sc = spark.sparkContext
    expected, _files = local_code()
    report = run_probe(spark)
    check_dependencies(report)
    if report.fingerprint != expected:
        if ship_mode() == "off":
            raise SparkEnvironmentError(
                f"the Spark executors' Python {report.python} {_code_problem(report)}; install this "
                f"tablesvc there, or unset {SHIP_CODE_VARIABLE} (now off) so that tablesvc ships its code "
                "with SparkContext.addPyFile")
        sc.addPyFile(code_zip())
        report = run_probe(spark)
        if report.fingerprint != expected:
            raise SparkEnvironmentError(f"the Spark executors' Python {report.python} "
                                        f"{_code_problem(report)}, even after tablesvc shipped its code "
                                        f"({code_zip()}) with SparkContext.addPyFile")
    return report


def _code_problem(report: ProbeReport) -> str:
    if report.fingerprint is None:
        return f"cannot import tablesvc ({report.code_error})"
    return f"imports other tablesvc code than the driver runs ({report.code_origin})"
