"""A tablesvc driver process for the cluster tests: runs tablesvc commands, in order, in one process
(so one SparkContext on the cluster serves them all, as ``get_spark`` reuses the active session),
then one probe job on every executor, and writes what happened as JSON.

    python tests/cluster_driver.py STEPS.json REPORT.json

``STEPS.json`` is a list of argument lists for ``tablesvc`` (``tablesvc.cli.main.main``, the function
the ``tablesvc`` command calls); the Spark commands among them carry ``--spark-profile``.  The
report holds, per step, its exit code, stdout and time; the driver's own working directory and
temporary folder; and the probe's answers: each executor's working directory, ``TMPDIR``, Python
and the driver files it could see.  The test starts this script with a working directory and a
``TMPDIR`` of its own (in a private mount when the machine allows one), so that executors that
read the driver's local disk would fail or be caught by the probe.  Each step's stderr goes to this
process's stderr, after a ``== step N`` line.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import time


def probe_executors(spark, driver_files: list[str], min_executors: int, timeout_s: float = 60.0) -> list[dict]:
    """One task per partition, repeated until ``min_executors`` executors have answered (the
    scheduler may put a short job's tasks on one executor; an executor is told apart by its working
    directory, ``<worker dir>/<app>/<executor id>``): each answer says where the task ran, with
    which folders, and which of the driver's own files it could see."""

    def where(rows):
        import os
        import sys
        import tempfile

        from pyspark import TaskContext

        for _ in rows:
            pass
        yield {"partition": TaskContext.get().partitionId(), "pid": os.getpid(), "cwd": os.getcwd(),
               "tmpdir": tempfile.gettempdir(), "tmpdir_env": os.environ.get("TMPDIR"), "python": sys.executable,
               "sees_driver_files": [p for p in driver_files if os.path.exists(p)]}

    sc = spark.sparkContext
    answers: list[dict] = []
    deadline = time.monotonic() + timeout_s
    while len({a["cwd"] for a in answers}) < min_executors and time.monotonic() < deadline:
        answers += sc.parallelize(range(16), 16).mapPartitions(where).collect()
    return answers


def main(steps_path: str, report_path: str) -> int:
    from tablesvc.cli.main import main as tablesvc

    with open(steps_path, encoding="utf-8") as f:
        steps = json.load(f)
    driver = {"cwd": os.getcwd(), "tmpdir": tempfile.gettempdir(), "pid": os.getpid()}
    # files only the driver has: in its working directory and its temporary folder
    marker_files = []
    for folder in (driver["cwd"], driver["tmpdir"]):
        path = os.path.join(folder, f"driver-only-{os.getpid()}.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("written by the driver\n")
        marker_files.append(path)
    report: dict = {"driver": driver, "steps": [], "probe": []}
    for n, argv in enumerate(steps):
        print(f"== step {n}: tablesvc {' '.join(argv)}", file=sys.stderr, flush=True)
        out = io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stdout(out):
            rc = tablesvc(argv)
        report["steps"].append({"argv": argv, "rc": rc, "stdout": out.getvalue(),
                                "seconds": round(time.monotonic() - started, 2)})
        if rc != 0:
            break
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is not None:
        master = spark.sparkContext.master
        report["master"] = master
        workers = int(os.environ.get("CLUSTER_DRIVER_MIN_EXECUTORS", "1"))
        report["probe"] = probe_executors(spark, marker_files, workers)
        # tablesvc's own executor check, as a job on an object-store table asks for it (obstore too)
        from tablesvc.spark.executor_env import prepare_executors

        try:
            prepare_executors(spark, object_store=True)
            report["object_store_ready"] = True
        except Exception as e:  # noqa: BLE001 - reported; the test decides
            report["object_store_ready"] = str(e)
        spark.stop()
    with open(report_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    os.replace(report_path + ".tmp", report_path)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: cluster_driver.py STEPS.json REPORT.json")
    sys.exit(main(sys.argv[1], sys.argv[2]))
