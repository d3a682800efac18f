"""Spark sessions from the YAML profiles in ``spark_conf/``.

``get_spark()`` reuses the active session (so inline services after a write cost no
second start-up), else builds one from a profile: ``local`` by default, or the name in
``TABLESVC_SPARK_PROFILE``, or a path to a YAML file.  ``spark.*`` keys given with
``--conf`` override the profile.  Either way the session's executors are checked (and given
tablesvc's code when they lack it) before it is returned: ``executor_env.prepare_executors``.
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from typing import Mapping

import yaml

from tablesvc.errors import ConfigError
from tablesvc.spark.executor_env import prepare_executors

DEFAULT_PROFILE = "local"


def load_profile(profile: str | None = None) -> dict[str, str]:
    name = profile or os.environ.get("TABLESVC_SPARK_PROFILE") or DEFAULT_PROFILE
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        try:
            with open(name, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(f"Spark profile {name}: cannot read ({e.strerror})") from None
    else:
        try:
            text = resources.files("spark_conf").joinpath(f"{name}.yaml").read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"Spark profile {name!r}: no spark_conf/{name}.yaml") from None
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"Spark profile {name}: expected a mapping of spark.* keys")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in data.items()}


def send_jvm_output_to_log(log_path: str | None = None) -> str:
    """Give the JVM (and Spark's Python workers) a log file as stderr; keep Python's own stderr.

    The JVM and its children inherit file descriptor 2, so it is pointed at a log file,
    while ``sys.stderr`` moves to a duplicate of the original descriptor.  The CLI's
    one-line errors stay alone on the terminal; Spark's start-up notes and progress go
    to the log (``TABLESVC_SPARK_LOG``, default ``<tmp>/tablesvc-spark.log``).
    """
    import tempfile

    path = log_path or os.environ.get("TABLESVC_SPARK_LOG") or os.path.join(tempfile.gettempdir(),
                                                                             "tablesvc-spark.log")
    sys.stderr.flush()
    original = os.dup(2)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)
    os.close(log)
    sys.stderr = os.fdopen(original, "w", buffering=1)
    return path


def get_spark(profile: str | None = None, overrides: Mapping[str, str] | None = None, *, quiet: bool = False):
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return prepare_executors(active)
    if quiet:
        send_jvm_output_to_log()
    conf = session_conf(profile, overrides)
    if "spark.pyspark.python" in conf:
        # PySpark started from Python (not spark-submit) takes the executors' Python from
        # PYSPARK_PYTHON only: without this a cluster's executors ignore the profile's key and start
        # `python3` from their PATH.  The key wins over the variable, as with spark-submit.
        os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
    elif conf.get("spark.master", "").startswith("local"):
        # Local Python workers must run the driver's interpreter (the one with pyarrow).
        # PySpark reads PYSPARK_PYTHON when it starts the context.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return prepare_executors(spark)


def session_conf(profile: str | None = None, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark configuration a new session gets: the profile, then the ``spark.*`` keys of
    ``overrides`` (``--conf``: each replaces the profile's value of its key), then tablesvc's
    log configuration added to the driver's JVM options (kept beside any the user gave)."""
    conf = load_profile(profile)
    conf.update({k: v for k, v in (overrides or {}).items() if k.startswith("spark.")})
    log_config = resources.files("spark_conf").joinpath("log4j2.properties")
    conf["spark.driver.extraJavaOptions"] = with_java_option(conf.get("spark.driver.extraJavaOptions", ""),
                                                             f"-Dlog4j2.configurationFile=file:{log_config}")
    return conf


def with_java_option(options: str, option: str) -> str:
    """JVM ``options`` with ``option`` (``-Dname=value``) added unless they already set ``name``:
    a profile's or ``--conf``'s own choice wins, and other options are kept."""
    name = option.split("=", 1)[0]
    if any(o.split("=", 1)[0] == name for o in options.split()):
        return options
    return f"{options} {option}".strip()


def task_attempt_id() -> int | None:
    """The running Spark task's attempt id (unique in its Spark application), or None outside a
    Spark task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return None if ctx is None else ctx.taskAttemptId()


def task_identity() -> tuple[int, int, int]:
    """(partition id, stage id, attempt number) of the running Spark task: Hudi's write token parts."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, 0, 0
    return ctx.partitionId(), ctx.stageId(), ctx.attemptNumber()


def service_session(spark=None, overrides: Mapping[str, str] | None = None):
    """The Spark a service started from Python (``Table.compact()``, …) runs its plans in:
    ``spark``, else the active session, with its executors checked now, before the service
    changes the table; without either, a function that starts one (``get_spark``, ``spark.*``
    keys of ``overrides`` applied) only when a plan needs it, as the CLI does."""
    from pyspark.sql import SparkSession

    session = spark if spark is not None else SparkSession.getActiveSession()
    if session is not None:
        return prepare_executors(session)
    return lambda: get_spark(overrides=overrides)
