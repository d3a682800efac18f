"""A Spark standalone cluster on this machine for the cluster tests: one master and two workers,
each a JVM of its own started with ``spark-class`` from the venv's pip pyspark (which ships no
``sbin/start-*.sh``: docs/storage-research.md §5).

    cluster = StandaloneCluster.start(tmp_path)      # waits until every worker has registered
    profile = cluster.write_profile(tmp_path / "cluster.yaml")   # spark_conf/standalone.yaml, filled in
    ...                                             # drivers run in other processes (one SparkContext each)
    cluster.stop()                                  # kills each daemon's process group

Everything listens on 127.0.0.1 on free ports.  Each worker has its own folder under the cluster's
root: its ``SPARK_WORKER_DIR`` (an executor runs with ``<work>/<app>/<executor id>`` as its working
directory, and its Python workers inherit it), its ``SPARK_LOCAL_DIRS`` (the executors' scratch
space) and its ``TMPDIR`` (executors inherit the worker's environment, so their Python's
``tempfile.gettempdir()`` is that folder).  None of them is the driver's.  The daemons' output goes
to ``<root>/logs/<name>.log``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
STANDALONE_PROFILE = REPO / "spark_conf" / "standalone.yaml"
# JVM options for the daemons, the driver and the executors of a test cluster: they live a minute
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_home() -> Path:
    """The pip pyspark's folder: its ``bin/spark-class`` and ``jars/`` are a Spark distribution.  Found,
    not imported: the cluster may start in a thread while another imports pyspark."""
    import importlib.util

    return Path(importlib.util.find_spec("pyspark").origin).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class WorkerFolders:
    """One worker's own folders: nothing in them is shared with the driver or the other worker."""
    work: Path      # SPARK_WORKER_DIR: the executors' working directories
    local: Path     # SPARK_LOCAL_DIRS: the executors' block manager and shuffle scratch
    tmp: Path       # TMPDIR of the worker and so of its executors and their Python workers

    @classmethod
    def under(cls, root: Path) -> "WorkerFolders":
        folders = cls(root / "work", root / "local", root / "tmp")
        for folder in (folders.work, folders.local, folders.tmp):
            folder.mkdir(parents=True, exist_ok=True)
        return folders


@dataclass(frozen=True)
class Daemon:
    name: str
    process: subprocess.Popen
    log: Path


@dataclass(frozen=True)
class StandaloneCluster:
    root: Path
    master_port: int
    webui_port: int
    workers: tuple[WorkerFolders, ...]
    daemons: tuple[Daemon, ...]
    cores_per_worker: int
    memory_per_worker: str

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @classmethod
    def start(cls, root: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
              timeout_s: float = 90.0) -> "StandaloneCluster":
        """The master, then ``workers`` workers of ``cores`` cores and ``memory`` each; returns once
        the master's JSON lists every worker ALIVE.  On failure everything started is stopped and
        the error quotes the daemons' logs."""
        root.mkdir(parents=True, exist_ok=True)
        (root / "logs").mkdir(exist_ok=True)
        master_port, webui_port = free_port(), free_port()
        folders = tuple(WorkerFolders.under(root / f"worker-{n}") for n in range(1, workers + 1))
        cluster = cls(root, master_port, webui_port, folders, (), cores, memory)
        started: list[Daemon] = []
        try:
            started.append(cluster._spawn("master", "org.apache.spark.deploy.master.Master",
                                          ["--host", "127.0.0.1", "--port", str(master_port),
                                           "--webui-port", str(webui_port)], {}))
            cluster = cls(root, master_port, webui_port, folders, tuple(started), cores, memory)
            cluster._wait(lambda: cluster.state() is not None, timeout_s, "the master's web UI")
            for n, worker in enumerate(folders, start=1):
                started.append(cluster._spawn(
                    f"worker-{n}", "org.apache.spark.deploy.worker.Worker",
                    [cluster.master_url, "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                     "--work-dir", str(worker.work), "--webui-port", str(free_port())],
                    {"SPARK_WORKER_DIR": str(worker.work), "SPARK_LOCAL_DIRS": str(worker.local),
                     "TMPDIR": str(worker.tmp)}))
            cluster = cls(root, master_port, webui_port, folders, tuple(started), cores, memory)
            cluster._wait(lambda: len(cluster.alive_workers()) == workers, timeout_s,
                          f"{workers} workers registered with the master")
            return cluster
        except BaseException:
            cls(root, master_port, webui_port, folders, tuple(started), cores, memory).stop()
            raise

    def _spawn(self, name: str, main_class: str, args: list[str], env: dict[str, str]) -> Daemon:
        home = spark_home()
        log = self.log_dir / f"{name}.log"
        environment = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
                       "SPARK_DAEMON_MEMORY": "512m", "SPARK_DAEMON_JAVA_OPTS": SHORT_LIVED_JVM,
                       "SPARK_LOG_DIR": str(self.log_dir),
                       "SPARK_CONF_DIR": str(self.root / "conf"), **env}
        # the executors' Python must come from the driver's profile, not from the daemons
        for name in ("PYTHONPATH", "PYSPARK_PYTHON"):
            environment.pop(name, None)
        with open(log, "ab") as out:
            # a session (and so a process group) of its own: stop() kills the daemon and the
            # executors it started with one signal, and a Ctrl-C of the test run does not reach it
            process = subprocess.Popen([str(home / "bin" / "spark-class"), main_class, *args], env=environment,
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       cwd=self.root, start_new_session=True)
        return Daemon(name, process, log)

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            for daemon in self.daemons:
                if daemon.process.poll() is not None:
                    raise RuntimeError(f"Spark {daemon.name} exited ({daemon.process.returncode}) while waiting "
                                       f"for {what}: {self._tail(daemon.log)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} after {timeout_s:.0f} s: "
                                   + " | ".join(f"{d.name}: {self._tail(d.log)}" for d in self.daemons))
            time.sleep(0.25)

    @staticmethod
    def _tail(log: Path, chars: int = 1500) -> str:
        try:
            return log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def state(self) -> dict | None:
        """The master's state as its web UI serves it (``/json``), None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json", timeout=2) as answer:
                return json.load(answer)
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> list[dict]:
        state = self.state() or {}
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def completed_apps(self) -> list[dict]:
        return (self.state() or {}).get("completedapps", [])

    def driver_conf(self) -> dict[str, str]:
        """The profile a driver on this machine needs: spark_conf/standalone.yaml with the master URL
        filled in, the driver bound to loopback, and every executor core the cluster has."""
        conf = {str(k): str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in yaml.safe_load(STANDALONE_PROFILE.read_text(encoding="utf-8")).items()}
        conf.update({
            "spark.master": self.master_url,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.pyspark.python": sys.executable,
            "spark.executor.cores": str(self.cores_per_worker),
            "spark.executor.memory": self.memory_per_worker,
            "spark.cores.max": str(self.cores_per_worker * len(self.workers)),
            "spark.driver.memory": "1g",
            # the executors log as quietly as the driver (their INFO lines cost CPU on 2 cores), and the
            # short-lived JVMs compile with C1 only and collect serially: less CPU on a 2-core machine
            "spark.executor.extraJavaOptions": f"{SHORT_LIVED_JVM} -Dlog4j2.configurationFile=file:"
                                               f"{REPO / 'spark_conf' / 'log4j2.properties'}",
            "spark.driver.extraJavaOptions": SHORT_LIVED_JVM,
        })
        return conf

    def write_profile(self, path: Path, **extra: str) -> Path:
        path.write_text(yaml.safe_dump({**self.driver_conf(), **extra}, sort_keys=True), encoding="utf-8")
        return path

    def stop(self) -> None:
        """SIGTERM to each daemon's process group (workers first: a worker takes its executors
        along), SIGKILL to whatever is left after a few seconds."""
        for daemon in reversed(self.daemons):
            _signal_group(daemon.process, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for daemon in reversed(self.daemons):
            try:
                daemon.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(daemon.process, signal.SIGKILL)   # executors left in the group, if any
            if daemon.process.poll() is None:
                daemon.process.wait(timeout=10)


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
