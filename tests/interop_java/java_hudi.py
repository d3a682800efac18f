"""Apache Hudi itself (Java, through PySpark) as the tests' second writer and reader (issue #26).

Two halves in one file, so that both ends of the protocol are read in one place:

* **the driver** (``python java_hudi.py --jar J --work-dir D``, run by ``make interop``'s
  ``.venv-hudi`` python): starts ONE Spark session with the Hudi bundle ``J``, then answers
  requests, one JSON object a line on stdin, with one JSON line each on its stdout.  Everything
  else the process prints (the JVM, Spark, Hudi's warnings) is moved to stderr first, so stdout
  carries nothing but answers.  A scenario keeps one driver for all its Java steps: Spark starts
  in ~5-10 s, a step takes ~1-5 s.  A driver started with S3A settings (``JavaHudi(..., s3a=...)``)
  gets Hadoop's S3A connector and its AWS SDK on its class path (``--class-path``) and the settings
  as ``spark.hadoop.fs.s3a.*`` (through ``TABLESVC_HUDI_HADOOP_CONF``), so its paths may be
  ``s3a://`` URLs.
* **the client** (``JavaHudi``, in the tests' process and the project's ``.venv``): starts the
  driver with an environment of its own (the Hudi venv's python for Spark's workers; none of the
  tests' PySpark settings leaks in either way), sends steps and turns failed ones into
  ``JavaStepError`` with Java's first lines.

Only the standard library is imported at module level: the client runs where Hudi's pyspark is not
installed, the driver where tablesvc is not.

Requests (``op`` and its fields; every answer has ``ok`` and ``secs``, a failed one ``error`` and
``message``):

| op | fields | answer |
|---|---|---|
| ``write`` | ``path``, ``operation`` (insert, upsert, delete), ``schema`` (Spark DDL), ``rows``, ``generate`` or ``source`` (a Parquet folder), ``options`` (Hudi write options) | |
| ``read`` | ``path``, ``columns``, ``as_of`` (optional: ``as.of.instant``) | ``rows`` |
| ``scan`` | ``path``: every row and column of the snapshot into Spark's ``noop`` sink (the benchmarks' read) | |
| ``checksum`` | ``path``, ``columns`` | ``rows`` (count), ``hash`` (sum of Spark's ``hash`` of the columns) |
| ``compaction`` | ``path``, ``mode`` (schedule, run), ``options`` (``k=v,...``), ``session`` | ``result`` (the CALL's rows) |
| ``clean`` | ``path``, ``table``, ``retain_commits``, ``options``, ``session`` | ``result`` |
| ``rollback`` | ``path``, ``table``, ``instant``, ``session`` | ``result`` |
| ``validate_metadata`` | ``path`` | ``differences``, ``compared``, ``skipped`` (metadata_validation.py) |

``session``: Hudi keys ``SET`` in the Spark session before the CALL (``JavaTable.session_conf``).
``secs`` is measured inside the driver around the request's work (the JVM's start is not in it):
the benchmarks (tests/benchmarks/java_baseline.py) time Java Hudi by it.
| ``stop`` | | (then the driver exits) |

The first line the driver prints is its start: ``{"ready": true, "spark": ..., "hudi_table_version": ...}``
(the table version the loaded bundle writes by default: proof that Hudi's classes are on the
JVM's class path), or ``{"ready": false, "message": ...}``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]

# The rows every scenario writes: a record key, an event time (Hudi's ordering field), a partition.
SCHEMA_DDL = "id string, ts long, part string, val string"
COLUMNS = ("id", "ts", "part", "val")

# Hudi 0.x merges with the payload class (its default keeps the latest write, whatever its event
# time); DefaultHoodieRecordPayload keeps the highest ordering value, as 1.x's EVENT_TIME_ORDERING.
EVENT_TIME_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"

START_TIMEOUT_S = 240.0
STEP_TIMEOUT_S = 600.0


# ==== the client (tests' process) ====================================================================

# The metadata table with its files partition only (Hudi 1.2 keys; the record index under both
# of its names, partition stats apart from column stats).
FILES_ONLY_METADATA = {
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "false",
    "hoodie.metadata.index.partition.stats.enable": "false",
    "hoodie.metadata.record.index.enable": "false",
    "hoodie.metadata.record.level.index.enable": "false",
    "hoodie.metadata.index.bloom.filter.enable": "false",
}


class JavaHudiUnavailable(RuntimeError):
    """Java Hudi is not set up (no ``make interop`` environment) or could not start."""


class JavaStepError(AssertionError):
    """A step Java Hudi was asked to do failed; the message has Java's first lines."""


@dataclass(frozen=True)
class HudiBundle:
    """One Hudi Spark bundle jar and the Hudi release it is."""

    jar: Path
    version: str

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def label(self) -> str:
        return f"Hudi {self.version} ({self.jar.name})"


@dataclass(frozen=True)
class JavaHudiSetup:
    """What ``make interop`` set up, as its environment variables name it (``.cache/hudi/bundle.env``)."""

    python: Path
    bundle: HudiBundle                  # the newest bundle that resolved: tables v8 and v9 (and v6 without the next)
    v6_bundle: HudiBundle | None        # Hudi 0.x on the same Spark: table version 6 as 0.x writes it
    # Hadoop's S3A connector for the venv's Hadoop and its AWS SDK (TABLESVC_HUDI_S3A_JARS): Java on s3a://
    s3a_jars: tuple[Path, ...] = ()

    @classmethod
    def from_env(cls, environ=os.environ) -> "JavaHudiSetup":
        def path(name: str) -> Path | None:
            value = environ.get(name, "").strip()
            # not resolved: a venv's python is a symlink that must stay one to find its venv
            return Path(os.path.abspath(REPO / value)) if value else None

        python, jar, version = path("TABLESVC_HUDI_PYTHON"), path("TABLESVC_HUDI_JAR"), environ.get("TABLESVC_HUDI_VERSION")
        if python is None or jar is None or not version:
            raise JavaHudiUnavailable(
                "Java Hudi is not set up: TABLESVC_HUDI_PYTHON, TABLESVC_HUDI_JAR and TABLESVC_HUDI_VERSION are "
                "unset. Run these tests with `make interop`, which fetches the Hudi bundle with Maven and makes "
                ".venv-hudi")
        missing = [str(p) for p in (python, jar) if not p.exists()]
        if missing:
            raise JavaHudiUnavailable(f"Java Hudi is not set up: missing {', '.join(missing)}. Run `make interop` "
                                      "(`make interop-clean` first if the cache is damaged)")
        v6_jar, v6_version = path("TABLESVC_HUDI_V6_JAR"), environ.get("TABLESVC_HUDI_V6_VERSION", "").strip()
        if v6_jar is not None and not v6_jar.exists():
            raise JavaHudiUnavailable(f"Java Hudi is not set up: missing {v6_jar}. Run `make interop`")
        v6 = HudiBundle(v6_jar, v6_version) if v6_jar is not None and v6_version else None
        s3a_jars = tuple(Path(os.path.abspath(REPO / j.strip()))
                         for j in environ.get("TABLESVC_HUDI_S3A_JARS", "").split(",") if j.strip())
        return cls(python, HudiBundle(jar, version), v6, s3a_jars)

    def bundle_for(self, table_version: int) -> HudiBundle:
        return self.v6_bundle if table_version == 6 and self.v6_bundle is not None else self.bundle

    def bundles(self) -> tuple[HudiBundle, ...]:
        return (self.bundle,) + ((self.v6_bundle,) if self.v6_bundle is not None else ())


def read_properties(path: str | Path) -> dict[str, str]:
    props = {}
    for line in (Path(path) / ".hoodie" / "hoodie.properties").read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


@dataclass(frozen=True)
class JavaTable:
    """A MERGE_ON_READ table as Java Hudi is told to write it: the options of every write and of
    the table services' CALLs.  The metadata table stays off (issue #27 turns it on)."""

    path: str
    name: str
    table_version: int
    bundle: HudiBundle
    record_key: str = "id"
    ordering_field: str = "ts"
    partition_field: str = "part"
    hive_style: bool = False
    index: tuple[tuple[str, str], ...] = ()     # the table's own index keys (a tablesvc table: its bucket index)
    writer: tuple[tuple[str, str], ...] = ()    # more write options (scenario 3: OCC, the file-system lock, LAZY)
    # issue #27: the metadata table on, with its files partition only (no column stats, partition
    # stats, record index or bloom filters); Java's reads then list files through it too
    files_only_metadata: bool = False
    # the metadata table as a default Hudi 1.2 writer has it: on, every index key left to Hudi's
    # defaults (the driver's session SETs hoodie.metadata.enable=false, so "on" must be said)
    default_metadata: bool = False

    @classmethod
    def existing(cls, path: str | Path, bundle: HudiBundle, properties: dict[str, str] | None = None) -> "JavaTable":
        """A table another writer made, written with the settings its ``hoodie.properties`` records
        (``properties``: that file's keys, for a table not on local files)."""
        props = properties if properties is not None else read_properties(path)
        ordering = props.get("hoodie.table.ordering.fields") or props.get("hoodie.table.precombine.field", "")
        index = tuple((k, props[k]) for k in ("hoodie.index.type", "hoodie.bucket.index.num.buckets",
                                               "hoodie.bucket.index.hash.field") if props.get(k))
        return cls(str(path), props["hoodie.table.name"], int(props["hoodie.table.version"]), bundle,
                   record_key=props["hoodie.table.recordkey.fields"], ordering_field=ordering,
                   partition_field=props.get("hoodie.table.partition.fields", ""),
                   hive_style=props.get("hoodie.datasource.write.hive_style_partitioning", "false") == "true",
                   index=index)

    def _common(self) -> dict[str, str]:
        """What writes and table services alike must be told.  The index and the key field too: Hudi
        1.2.0 checks a bucket index against the record key field, and a compaction without that key
        fails (a NullPointerException in ``validateBucketIndexConfig``)."""
        opts = {"hoodie.metadata.enable": "false", "hoodie.datasource.write.recordkey.field": self.record_key,
                **dict(self.index)}
        if self.files_only_metadata:
            opts.update(FILES_ONLY_METADATA)
        if self.default_metadata:
            opts["hoodie.metadata.enable"] = "true"
        if self.bundle.major >= 1:
            opts["hoodie.write.table.version"] = str(self.table_version)
        if self.table_version == 6:
            opts["hoodie.datasource.write.payload.class"] = EVENT_TIME_PAYLOAD
            opts["hoodie.compaction.payload.class"] = EVENT_TIME_PAYLOAD
        return opts

    def write_options(self) -> dict[str, str]:
        return {
            "hoodie.table.name": self.name,      # Hudi refuses a name other than the table's own
            "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.precombine.field": self.ordering_field,
            "hoodie.datasource.write.partitionpath.field": self.partition_field,
            "hoodie.datasource.write.hive_style_partitioning": str(self.hive_style).lower(),
            # the scenarios run every table service on purpose (tablesvc's or a CALL): none inline
            "hoodie.compact.inline": "false",
            "hoodie.clean.automatic": "false",
            "hoodie.archive.automatic": "false",
            **{k: "2" for k in ("hoodie.insert.shuffle.parallelism", "hoodie.upsert.shuffle.parallelism",
                                "hoodie.delete.shuffle.parallelism", "hoodie.bulkinsert.shuffle.parallelism")},
            **self._common(),
            **dict(self.writer),
        }

    def procedure_options(self) -> str:
        """The ``options => '...'`` of a CALL: what a write has that the service needs, and a compaction
        trigger of one delta commit (its default waits for five)."""
        opts = {**self._common(), "hoodie.compact.inline.max.delta.commits": "1"}
        return ",".join(f"{k}={v}" for k, v in opts.items())

    def session_conf(self) -> dict[str, str]:
        """``SET`` in the session before a CALL.  ``rollback_to_instant`` takes no options, and a Hudi 1.x
        client without ``hoodie.write.table.version`` upgrades a v8 table to v9 before it does anything
        (running a compaction as part of the upgrade): seen with 1.2.0."""
        return self._common()


# The driver's Hadoop settings (``fs.s3a.*``; JSON) come in this variable rather than on its command
# line, which every process on the machine can read: they hold the endpoint's credentials.
HADOOP_CONF_ENV = "TABLESVC_HUDI_HADOOP_CONF"


def _driver_env(python: Path, hadoop_conf: dict[str, str] | None = None) -> dict[str, str]:
    """The tests' environment less anything that points PySpark elsewhere, with the Hudi venv's
    python for Spark's Python workers."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS", "SPARK_HOME",
                        "PYTHONPATH", "VIRTUAL_ENV", "SPARK_CONF_DIR", HADOOP_CONF_ENV)}
    env["PYSPARK_PYTHON"] = str(python)
    env["PYTHONUNBUFFERED"] = "1"
    if hadoop_conf:
        env[HADOOP_CONF_ENV] = json.dumps(hadoop_conf)
    return env


class JavaHudi:
    """One driver process: one JVM with one Hudi bundle.  Use as a context manager, or ``start``/``close``."""

    def __init__(self, setup: JavaHudiSetup, bundle: HudiBundle, work_dir: Path, driver_memory: str = "1536m",
                 s3a: dict[str, str] | None = None):
        self.setup = setup
        self.bundle = bundle
        self.work_dir = work_dir
        self.driver_memory = driver_memory    # the benchmarks give it what tablesvc's session has
        # Hadoop S3A settings (``fs.s3a.endpoint``, credentials, ...): the session gets the S3A jars
        # and these keys as ``spark.hadoop.*``, so the driver reads and writes ``s3a://`` tables
        self.s3a = dict(s3a) if s3a is not None else None
        self.ready: dict = {}           # the driver's first answer (Spark's version, ...)
        self._proc: subprocess.Popen | None = None
        self._answers: queue.Queue = queue.Queue()
        self._log_path = work_dir / "driver.log"

    # -- the process ------------------------------------------------------------------------------
    def start(self) -> "JavaHudi":
        s3a_jars: tuple[Path, ...] = ()
        if self.s3a is not None:
            if not self.setup.s3a_jars:
                raise JavaHudiUnavailable(
                    "Java Hudi on S3 is not set up: TABLESVC_HUDI_S3A_JARS is unset (`make interop` copies "
                    "hadoop-aws and its AWS SDK into .cache/hudi/s3a and lists them in .cache/hudi/s3a.env)")
            missing = [str(j) for j in self.setup.s3a_jars if not j.exists()]
            if missing:
                raise JavaHudiUnavailable(f"Java Hudi on S3 is not set up: missing {', '.join(missing)}. "
                                          "Delete .cache/hudi/s3a.env and run `make interop`")
            s3a_jars = self.setup.s3a_jars
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log = open(self._log_path, "wb")
        try:
            # a session of its own: a kill takes the driver's JVM with it (``kill``)
            self._proc = subprocess.Popen(
                [str(self.setup.python), str(HERE), "--jar", str(self.bundle.jar), "--work-dir", str(self.work_dir),
                 "--driver-memory", self.driver_memory, "--class-path", os.pathsep.join(str(j) for j in s3a_jars)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self.work_dir,
                env=_driver_env(self.setup.python, self.s3a), text=True, start_new_session=True)
        finally:
            log.close()
        threading.Thread(target=self._pump, name="java-hudi-answers", daemon=True).start()
        first = self._next_answer(START_TIMEOUT_S, "start")
        if not first.get("ready"):
            self.close()
            raise JavaHudiUnavailable(f"{self.bundle.label} did not start: {first.get('message', first)}"
                                      f"\n--- driver log (tail) ---\n{self.log_tail()}")
        self.ready = first
        return self

    @property
    def pid(self) -> int:
        """The driver's process id (its JVM is a child of it): the benchmarks measure its memory and CPU."""
        if self._proc is None:
            raise JavaHudiUnavailable(f"{self.bundle.label}: the driver is not running")
        return self._proc.pid

    def __enter__(self) -> "JavaHudi":
        return self.start() if self._proc is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def _pump(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            line = line.strip()
            if line:
                try:
                    self._answers.put(json.loads(line))
                except json.JSONDecodeError:
                    self._answers.put({"ok": False, "error": "protocol", "message": f"not JSON: {line[:300]}"})
        self._answers.put(None)    # the driver's stdout closed: it ended

    def _next_answer(self, timeout: float, what: str) -> dict:
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise JavaHudiUnavailable(f"{self.bundle.label}: no answer to {what} within {timeout:.0f} s"
                                      f"\n--- driver log (tail) ---\n{self.log_tail()}") from None
        if answer is None:
            code = self._proc.wait(timeout=30) if self._proc else None
            raise JavaHudiUnavailable(f"{self.bundle.label}: the driver ended (exit {code}) during {what}"
                                      f"\n--- driver log (tail) ---\n{self.log_tail()}")
        return answer

    def log_tail(self, lines: int = 25) -> str:
        if not self._log_path.exists():
            return "(no log)"
        text = self._log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def send(self, request: dict) -> None:
        """Send a request without waiting for its answer (``answer`` collects it)."""
        if self._proc is None or self._proc.poll() is not None:
            raise JavaHudiUnavailable(f"{self.bundle.label}: the driver is not running")
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()

    def answer(self, request: dict, timeout: float = STEP_TIMEOUT_S) -> dict:
        got = self._next_answer(timeout, request.get("op", "a step"))
        if not got.get("ok"):
            raise JavaStepError(f"{self.bundle.label}, {request.get('op')} on {request.get('path')}: "
                                f"{got.get('error')}: {got.get('message')}")
        return got

    def step(self, request: dict, timeout: float = STEP_TIMEOUT_S) -> dict:
        self.send(request)
        return self.answer(request, timeout)

    def close(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            try:
                self.send({"op": "stop"})
                self._proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired, JavaHudiUnavailable):
                self.kill()
        self._proc = None

    def kill(self) -> None:
        """SIGKILL the driver and its JVM (a crash: nothing of Hudi runs to its end)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)   # the process group this driver leads
            except ProcessLookupError:
                pass
            self._proc.wait(timeout=60)

    # -- the steps ---------------------------------------------------------------------------------
    def write(self, table: JavaTable, operation: str, rows: list[tuple]) -> dict:
        return self.step(self.write_request(table, operation, rows=rows))

    @staticmethod
    def write_request(table: JavaTable, operation: str, rows: list[tuple] | None = None,
                      generate: dict | None = None, source: str | None = None) -> dict:
        """``generate``: ``{"count", "key_prefix", "ts", "partitions"}``, rows made in the JVM (a large batch);
        ``source``: a folder of Parquet files whose rows are written (the benchmarks' data)."""
        return {"op": "write", "path": table.path, "operation": operation, "schema": SCHEMA_DDL,
                "rows": [list(r) for r in rows] if rows is not None else None, "generate": generate,
                "source": source, "options": table.write_options()}

    def read(self, table: JavaTable, as_of: str | None = None) -> list[tuple]:
        got = self.step({"op": "read", "path": table.path, "columns": list(COLUMNS), "as_of": as_of,
                         "options": {"hoodie.metadata.enable": "true"}
                         if table.files_only_metadata or table.default_metadata else {}})
        return sorted(tuple(r) for r in got["rows"])

    def read_columns(self, table: JavaTable, columns: list[str]) -> list[list]:
        """Any columns of a snapshot read (a Java-written fixture's own schema), metadata table on."""
        return self.step({"op": "read", "path": table.path, "columns": list(columns),
                          "options": {"hoodie.metadata.enable": "true"}})["rows"]

    def compaction(self, table: JavaTable, mode: str = "run") -> list[dict]:
        """``CALL run_compaction``: ``schedule``, or ``run`` (the pending plans, else one scheduled now)."""
        return self.step({"op": "compaction", "path": table.path, "mode": mode,
                          "options": table.procedure_options(), "session": table.session_conf()})["result"]

    def clean(self, table: JavaTable, retain_commits: int = 1) -> list[dict]:
        return self.step({"op": "clean", "path": table.path, "table": table.name, "retain_commits": retain_commits,
                          "options": table.procedure_options(), "session": table.session_conf()})["result"]

    def rollback(self, table: JavaTable, instant: str) -> list[dict]:
        """``CALL rollback_to_instant``: Java's rollback of a completed instant (the table's latest)."""
        return self.step({"op": "rollback", "path": table.path, "table": table.name, "instant": instant,
                          "session": table.session_conf()})["result"]


# ==== the driver (its own process, the Hudi venv) ===================================================

def _spark_session(jar: str, work_dir: str, driver_memory: str = "1536m", hadoop_conf: dict | None = None,
                   class_path: str = ""):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("tablesvc-interop-java-hudi")
    for key, value in {
        "spark.jars": jar,
        # more jars (S3A's) on the JVM's own class path: local[2] runs its tasks in this JVM, and so
        # the 280 MB AWS SDK is neither copied into the work folder nor loaded through Spark's
        # added-jar class loader
        **({"spark.driver.extraClassPath": class_path} if class_path else {}),
        # what Hudi's Spark quick start asks for: Kryo with Hudi's registrar, its SQL extension and catalog
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
        "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
        "spark.sql.warehouse.dir": os.path.join(work_dir, "warehouse"),
        "spark.local.dir": os.path.join(work_dir, "spark-local"),
        "spark.driver.memory": driver_memory,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Hadoop's own keys (fs.s3a.*): the session's Hadoop configuration, which Hudi's storage reads
        **{f"spark.hadoop.{k}": v for k, v in (hadoop_conf or {}).items()},
    }.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # the session's own writes and procedures must not create a metadata table either
    spark.sql("SET hoodie.metadata.enable=false")
    return spark


def _error_lines(exc: BaseException, limit: int = 14) -> str:
    """Java's exception and its causes, without the stack frames."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.startswith("at ") and not ln.startswith("...")]
    return "\n".join(keep[:limit])


class _Driver:
    def __init__(self, spark):
        self.spark = spark
        self.registered: set[str] = set()

    def write(self, req: dict) -> dict:
        spark = self.spark
        if req.get("source"):
            df = spark.read.parquet(req["source"])
        elif req.get("generate"):
            g = req["generate"]
            parts = ", ".join(f"'{p}'" for p in g["partitions"])
            df = spark.range(int(g["count"])).selectExpr(
                f"concat('{g['key_prefix']}', lpad(cast(id as string), 8, '0')) as id",
                f"cast({int(g['ts'])} as long) as ts",
                f"element_at(array({parts}), cast(id % {len(g['partitions'])} as int) + 1) as part",
                "'generated' as val")
        else:
            df = spark.createDataFrame([tuple(r) for r in req["rows"]], req["schema"])
        (df.write.format("hudi").options(**req["options"])
         .option("hoodie.datasource.write.operation", req["operation"]).mode("append").save(req["path"]))
        return {}

    def read(self, req: dict) -> dict:
        reader = self.spark.read.format("hudi").options(**(req.get("options") or {}))
        if req.get("as_of"):
            reader = reader.option("as.of.instant", req["as_of"])
        rows = reader.load(req["path"]).select(*req["columns"]).collect()
        return {"rows": [list(r) for r in rows]}

    def scan(self, req: dict) -> dict:
        # every row and column materialised, nothing brought back: the same sink tablesvc's read is timed into
        self.spark.read.format("hudi").load(req["path"]).write.format("noop").mode("overwrite").save()
        return {}

    def checksum(self, req: dict) -> dict:
        from pyspark.sql import functions as F

        row = self.spark.read.format("hudi").load(req["path"]).select(
            F.count(F.lit(1)).alias("n"), F.sum(F.hash(*req["columns"]).cast("long")).alias("h")).collect()[0]
        return {"rows": int(row["n"]), "hash": int(row["h"] or 0)}

    def _register(self, name: str, path: str) -> None:
        # run_clean and rollback_to_instant find the table by name: the catalog entry points at the path
        if name not in self.registered:
            self.spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING hudi LOCATION '{path}'")
            self.registered.add(name)

    def _call(self, req: dict, sql: str) -> dict:
        for key, value in req.get("session", {}).items():
            self.spark.sql(f"SET {key}={value}")
        return {"result": [r.asDict() for r in self.spark.sql(sql).collect()], "sql": sql}

    def compaction(self, req: dict) -> dict:
        return self._call(req, f"CALL run_compaction(op => '{req['mode']}', path => '{req['path']}', "
                          f"options => '{req['options']}')")

    def clean(self, req: dict) -> dict:
        self._register(req["table"], req["path"])
        return self._call(req, f"CALL run_clean(table => '{req['table']}', retain_commits => {int(req['retain_commits'])}, "
                          f"options => '{req['options']}')")

    def rollback(self, req: dict) -> dict:
        self._register(req["table"], req["path"])
        return self._call(req, f"CALL rollback_to_instant(table => '{req['table']}', instant_time => '{req['instant']}')")

    def validate_metadata(self, req: dict) -> dict:
        """Java's checks of the table's metadata table against storage (metadata_validation.py, beside this file)."""
        from metadata_validation import validate_in_jvm
        return validate_in_jvm(self.spark, req["path"])

    def secondary_index(self, req: dict) -> dict:
        """Java's answers by a secondary key (secondary_index_java.py, beside this file)."""
        from secondary_index_java import secondary_index_in_jvm
        return secondary_index_in_jvm(self.spark, req["path"], req["partition"], req["column"], req["values"])

    # -- HFiles through hudi-io's own reader and writer (org.apache.hudi.io.hfile) ----------------
    def hfile_read(self, req: dict) -> dict:
        """Every cell of the HFile at ``path`` (a full scan), the values of ``lookups`` by key
        (null when absent) and the file info entries ``info`` asked for, as Java reads them."""
        jvm = self.spark.sparkContext._jvm
        data = Path(req["path"]).read_bytes()
        stream = jvm.org.apache.hudi.io.ByteArraySeekableDataInputStream(
            jvm.org.apache.hudi.io.ByteBufferBackedInputStream(data))
        reader = jvm.org.apache.hudi.io.hfile.HFileReaderImpl(stream, len(data))
        try:
            reader.initializeMetadata()
            cells = []
            if reader.seekTo():
                while True:
                    kv = reader.getKeyValue().get()
                    raw = bytes(kv.getBytes())
                    cells.append([kv.getKey().getContentInString(),
                                  base64.b64encode(raw[kv.getValueOffset():kv.getValueOffset() + kv.getValueLength()]).decode()])
                    if not reader.next():
                        break
            found = {}
            # seekTo(key) only moves forward from the cursor (as Hudi's readers use it): back to
            # the first cell, then the keys in ascending order
            reader.seekTo()
            for key in sorted(req.get("lookups", []), key=lambda k: k.encode("utf-8")):
                hit = reader.seekTo(jvm.org.apache.hudi.io.hfile.UTF8StringKey(key)) == 0
                if hit:
                    kv = reader.getKeyValue().get()
                    raw = bytes(kv.getBytes())
                    found[key] = base64.b64encode(raw[kv.getValueOffset():kv.getValueOffset() + kv.getValueLength()]).decode()
                else:
                    found[key] = None
            info = {}
            for name in req.get("info", []):
                value = reader.getMetaInfo(jvm.org.apache.hudi.io.hfile.UTF8StringKey(name))
                info[name] = base64.b64encode(bytes(value.get())).decode() if value.isPresent() else None
            return {"entries": int(reader.getNumKeyValueEntries()), "cells": cells, "lookups": found, "info": info}
        finally:
            reader.close()

    def hfile_write(self, req: dict) -> dict:
        """Java's ``HFileWriterImpl`` writes ``cells`` ([key, base64 value], in order) and
        ``file_info`` to ``path`` with the given block size, codec name and creation time."""
        jvm = self.spark.sparkContext._jvm
        hfile = jvm.org.apache.hudi.io.hfile
        context = (hfile.HFileContext.builder().blockSize(int(req["block_size"]))
                   .compressionCodec(jvm.org.apache.hudi.io.compress.CompressionCodec.findCodecByName(req["codec"]))
                   .fileCreationTime(int(req["creation_time_ms"])).build())
        out = jvm.java.io.ByteArrayOutputStream()
        writer = hfile.HFileWriterImpl(context, out)
        for name, value in req.get("file_info", []):
            writer.appendFileInfo(name, base64.b64decode(value))
        for key, value in req["cells"]:
            writer.append(key, base64.b64decode(value))
        writer.close()
        Path(req["path"]).write_bytes(bytes(out.toByteArray()))
        return {}


def driver_main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--jar", required=True)
    args.add_argument("--class-path", default="", help="more jars for the JVM's class path (S3A's)")
    args.add_argument("--work-dir", required=True)
    args.add_argument("--driver-memory", default="1536m")
    opts = args.parse_args(argv)

    # answers go to the real stdout; everything else written to fd 1 from now on (the JVM that
    # Spark starts inherits it) goes to stderr
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def say(obj: dict) -> None:
        answers.write(json.dumps(obj, default=str) + "\n")

    hadoop_conf = json.loads(os.environ.pop(HADOOP_CONF_ENV, "") or "{}")
    t0 = time.perf_counter()
    try:
        spark = _spark_session(os.path.abspath(opts.jar), os.path.abspath(opts.work_dir), opts.driver_memory,
                               hadoop_conf, opts.class_path)
        # a class of the bundle, called: fails here when the jar is not on the JVM's class path
        writes = spark.sparkContext._jvm.org.apache.hudi.common.table.HoodieTableVersion.current().versionCode()
    except Exception as exc:  # noqa: BLE001 - reported to the client, which fails the test with it
        say({"ready": False, "message": f"{type(exc).__name__}: {_error_lines(exc)}"})
        return 1
    say({"ready": True, "spark": spark.version, "hudi_table_version": int(writes),
         "secs": round(time.perf_counter() - t0, 2)})

    driver = _Driver(spark)
    handlers = {"write": driver.write, "read": driver.read, "compaction": driver.compaction,
                "clean": driver.clean, "rollback": driver.rollback, "scan": driver.scan, "checksum": driver.checksum,
                "hfile_read": driver.hfile_read, "hfile_write": driver.hfile_write,
                "validate_metadata": driver.validate_metadata, "secondary_index": driver.secondary_index}
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("op") == "stop":
            break
        t1 = time.perf_counter()
        handler = handlers.get(req.get("op"))
        try:
            if handler is None:
                raise ValueError(f"unknown op {req.get('op')!r}")
            out = {"ok": True, **handler(req)}
        except Exception as exc:  # noqa: BLE001 - every failure is an answer; the next step may go on
            out = {"ok": False, "error": type(exc).__name__, "message": _error_lines(exc)}
        say({**out, "secs": round(time.perf_counter() - t1, 2)})
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(driver_main())
