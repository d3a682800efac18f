"""Run one table service and kill it with a real SIGKILL at a chosen storage operation.

Used by tests/crash_model/test_service_crash.py; runnable by hand::

    python tests/crash_harness.py [--ops FILE] TABLE KILL SERVICE [ARG]
    python tests/crash_harness.py --fork [--fork-sample K:SEED] TEMPLATE WORKDIR SERVICE [ARG]
    python tests/crash_harness.py --spawn [--fork-sample K:SEED] TEMPLATE WORKDIR SERVICE [ARG]

The table is opened (``Table.open(path, storage=...)``) with a storage wrapper that counts
the *mutating* calls the service makes: ``write_new``, ``write_new_from``, ``write_replace``,
``delete``, ``delete_tree``, ``makedirs`` and ``discard_partial``.  Reads are not counted.  Calls made by other threads are
not counted either: the heartbeat thread beats on a timer, so counting its beats would make
the points depend on timing.  (The first beat, made by ``Heartbeat.start`` on the main
thread, does count.)  Calls that raise, such as an exclusive create that finds the file,
do not count.  Spark tasks run in other processes with their own storage, so only the
driver's calls are counted for compaction.

**Point n** means that the process is killed right *after* the n-th counted call returned,
before control goes back to the service.  Calls 1..n took effect and are durable
(LocalStorage fsyncs the file and its folder), and call n+1 never started.  Each counted
call is appended to ``<TABLE>.ops`` (next to the table folder, one
``<kind> <path relative to the table>`` per line, written unbuffered; each run starts it
afresh) before any kill, so the test can see exactly where the process died.  ``--ops FILE``
names another (local) file: a table on an object store (``s3://...``) has no folder next to it.

TABLE is a local folder or an object-store URL; the storage is the one its path names
(``storage_for``), configured from the environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
...), as the ``tablesvc`` command line is.

KILL
  ``0``             run to the end, then print a JSON object ``{"ops": [...], "results": [...]}``
  ``n``             SIGKILL after the n-th counted call
  ``match:REGEX``   SIGKILL after the first counted call whose ``<kind> <path>`` matches REGEX;
                    ``match:REGEX +K``: K counted calls later
  ``appears:GLOB``  SIGKILL from a watcher thread once a file matching GLOB (relative to TABLE)
                    exists: for work done by Spark tasks in other processes (mid job); local tables

SERVICE
  ``clean``               ``run_clean(table, config)``
  ``rollback [T [--allow-completed]]``  ``rollback_failed(table)``, or ``rollback(table, T)``
  ``logcompaction``       ``run_log_compaction(table, spark=None, config=config)``: runs the pending
                          plans, or schedules one (threshold lowered, as ``force``) and runs it;
                          tasks run in this process
  ``compaction [C]``      ``run_compaction(table, C, spark=<a factory of a local session>)``: the
                          JVM starts only when the tasks run, so driver points before them are cheap
  ``compaction-in-process [C]``  ``run_compaction(table, C, in_process=True)``: the file groups
                          compacted in this process, through the counted storage (no Spark), so
                          the points include the tasks' own creates
  ``write FILE.parquet [OPERATION]``  what a writer does (``tablesvc.write``'s pieces, no Spark, as
                          ``table_builders.write_without_spark``): the eager rollback, then a delta
                          commit of the rows in FILE (a local input file; ``upsert`` by default)

The config is the table's own (``.hoodie/tablesvc.yaml``), as the CLI reads it.

The kill: the process stops and kills every process below it (Spark's JVM, and its Python
workers, whose daemon sits in a process group of its own), then itself, as a machine crash
would (``helpers.kill_tree``).

``--fork`` runs every point of one service cheaply: the harness imports everything once, then
for each point copies TEMPLATE to ``WORKDIR/<n>/<name>`` and forks a child that runs the
service there and kills itself (``os.kill(getpid(), SIGKILL)``: a real kill of a real
process).  Point 0 is a full run; its number of counted calls N gives points 1..N.  It prints
``{"ops": [...], "results": [...], "points": [{"point", "path", "signal", "exit", "ops"}]}``.
Not for compaction (no fork after the JVM starts).  ``--fork-sample K:SEED`` (before TEMPLATE)
runs K of the points 1..N only, drawn with ``random.Random(SEED)`` once N is known.

``--spawn`` does the same for tables on an object store, whose client (obstore's runtime) does
not survive ``fork``: TEMPLATE and WORKDIR are URLs (or folders), each point's copy is made object
by object, and each point runs in a fresh ``python crash_harness.py --ops ...`` process (slower
than a fork: every point pays the interpreter's start and imports).  Same output.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

MUTATING = ("write_new", "write_new_from", "write_replace", "delete", "delete_tree", "makedirs", "discard_partial")
SERVICES = ("clean", "rollback", "logcompaction", "compaction", "compaction-in-process", "write")


def die() -> None:
    """SIGKILL this process and everything below it (Spark's JVM and its Python workers, which
    sit in a process group of their own), as a machine crash would."""
    from helpers import kill_tree

    kill_tree(os.getpid())


class KillingStorage:
    """Delegates to a real storage; counts the main thread's mutating calls and dies at one."""

    def __init__(self, inner, base: str, kill_after: int = 0, match: str | None = None, match_offset: int = 0,
                 ops_log: str | None = None):
        self._inner = inner
        self._base = base.rstrip("/") + "/"
        self._kill_after = kill_after
        self._match = re.compile(match) if match else None
        self._match_offset = match_offset
        self._log_fd = os.open(ops_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
                               0o644) if ops_log else None
        self.ops: list[str] = []

    def __getattr__(self, name):          # read_bytes, open_read, list_dir, list_names, stat, exists
        return getattr(self._inner, name)

    def _rel(self, path: str) -> str:
        path = path[len("file://"):] if path.startswith("file://") else path
        return path[len(self._base):] if path.startswith(self._base) else path

    def _count(self, kind: str, path: str) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        desc = f"{kind} {self._rel(path)}"
        self.ops.append(desc)
        if self._log_fd is not None:
            os.write(self._log_fd, (desc + "\n").encode())
        if self._match is not None and self._match.search(desc):
            self._kill_after = len(self.ops) + self._match_offset
            self._match = None
        if len(self.ops) == self._kill_after:
            die()

    def write_new(self, path: str, data: bytes) -> None:
        self._inner.write_new(path, data)
        self._count("write_new", path)

    def write_new_from(self, path: str, write) -> int:
        size = self._inner.write_new_from(path, write)
        self._count("write_new_from", path)
        return size

    def write_replace(self, path: str, data: bytes) -> None:
        self._inner.write_replace(path, data)
        self._count("write_replace", path)

    def discard_partial(self, folder: str, names) -> list[str]:
        removed = self._inner.discard_partial(folder, names)
        self._count("discard_partial", folder)
        return removed

    def delete(self, path: str) -> bool:
        out = self._inner.delete(path)
        self._count("delete", path)
        return out

    def delete_tree(self, path: str) -> None:
        self._inner.delete_tree(path)
        self._count("delete_tree", path)

    def makedirs(self, path: str) -> None:
        self._inner.makedirs(path)
        self._count("makedirs", path)


def watch_for(base: str, pattern: str) -> None:
    """Kill the process (group) from a daemon thread once a file matching ``pattern`` exists."""
    def run():
        while True:
            for root, _dirs, files in os.walk(base):
                rel_root = os.path.relpath(root, base)
                for f in files:
                    rel = f if rel_root == "." else f"{rel_root}/{f}"
                    if fnmatch.fnmatch(rel, pattern):
                        die()
            time.sleep(0.005)
    threading.Thread(target=run, name="crash-watcher", daemon=True).start()


def import_service(service: str) -> None:
    """Import what ``service`` needs up front (before forking, and outside the counted run)."""
    import tablesvc.config  # noqa: F401
    import tablesvc.api  # noqa: F401
    if service == "clean":
        import tablesvc.services.clean  # noqa: F401
    elif service == "rollback":
        import tablesvc.services.rollback  # noqa: F401
    elif service == "logcompaction":
        import tablesvc.services.log_compaction  # noqa: F401
        import tablesvc.services.rollback  # noqa: F401
    elif service in ("compaction", "compaction-in-process"):
        import tablesvc.services.compaction  # noqa: F401
        import tablesvc.services.rollback  # noqa: F401
    elif service == "write":
        import table_builders  # noqa: F401
        import tablesvc.services.rollback  # noqa: F401
    else:
        raise SystemExit(f"unknown service {service!r}; expected one of {', '.join(SERVICES)}")


def run_service(path: str, storage: KillingStorage, service: str, args: list[str]) -> list[dict]:
    from tablesvc.config import load_config
    from tablesvc.api import Table

    table = Table.open(path, storage=storage)
    config = load_config(table.storage, table_path=table.base_path)     # reads: not counted
    if service == "clean":
        from tablesvc.services.clean import run_clean
        results = run_clean(table, config)
    elif service == "rollback":
        from tablesvc.services.rollback import rollback, rollback_failed
        allow_completed = args[1:] == ["--allow-completed"]
        results = ([rollback(table, args[0], config=config, allow_completed=allow_completed)] if args
                   else rollback_failed(table, config=config))
    elif service == "logcompaction":
        from tablesvc.services.log_compaction import run_log_compaction
        results = run_log_compaction(table, args[0] if args else None, spark=None, config=config)
    elif service == "compaction":
        from tablesvc.services.compaction import run_compaction
        from tablesvc.spark.session import get_spark

        def spark():
            # One core: tasks run one after another (a kill "mid job" falls between them), and a
            # JVM tuned for start-up rather than throughput (C1 only, serial GC, no codegen).
            from importlib import resources

            log4j = resources.files("spark_conf").joinpath("log4j2.properties")
            return get_spark(overrides={
                "spark.master": "local[1]", "spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "1",
                "spark.driver.memory": "1g", "spark.sql.codegen.wholeStage": "false",
                "spark.sql.adaptive.enabled": "false",
                "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j} "
                                                 "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}, quiet=True)
        results = run_compaction(table, args[0] if args else None, spark=spark, config=config)
    elif service == "compaction-in-process":
        from tablesvc.services.compaction import run_compaction
        results = run_compaction(table, args[0] if args else None, config=config, in_process=True)
    elif service == "write":
        import pyarrow.parquet as pq

        from table_builders import write_without_spark
        from tablesvc.services.rollback import eager_rollback

        results = eager_rollback(table, config=config)
        instant, _stats = write_without_spark(table, pq.read_table(args[0]), args[1] if len(args) > 1 else "upsert",
                                              stage=1000)
        return [r.as_dict() for r in results] + [{"status": "done", "instant": instant, "action": "write"}]
    else:
        raise SystemExit(f"unknown service {service!r}")
    return [r.as_dict() for r in results]


def open_storage(path: str, kill: str, ops_log: str | None = None) -> KillingStorage:
    from tablesvc.storage import storage_for
    from tablesvc.api.table import normalize_path

    base = normalize_path(path)
    remote = "://" in base
    kill_after, match, offset = 0, None, 0
    if kill.startswith("match:"):
        match = kill[len("match:"):]
        m = re.fullmatch(r"(.*) \+(\d+)", match)
        if m:
            match, offset = m.group(1), int(m.group(2))
    elif kill.startswith("appears:"):
        if remote:
            raise SystemExit(f"{path}: appears: watches a local folder; use a point or match: on an object store")
        watch_for(base, kill[len("appears:"):])
    else:
        kill_after = int(kill)
    if ops_log is None and remote:
        raise SystemExit(f"{path}: give --ops FILE for a table on an object store")
    return KillingStorage(storage_for(base), base, kill_after, match, offset, ops_log=ops_log or base + ".ops")


def single(path: str, kill: str, service: str, args: list[str], ops_log: str | None = None) -> int:
    import_service(service)
    storage = open_storage(path, kill, ops_log)
    results = run_service(path, storage, service, args)
    if service == "compaction":
        from pyspark.sql import SparkSession
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
    print(json.dumps({"ops": storage.ops, "results": results}))
    return 0


def fork_points(template: str, workdir: str, service: str, args: list[str], sample: tuple[int, int] | None = None) -> int:
    if service == "compaction":
        raise SystemExit("--fork is not for compaction: a JVM does not survive fork()")
    import_service(service)
    name = Path(template).name
    points = []

    def run_point(n: int) -> dict:
        dest = Path(workdir) / str(n) / name
        shutil.copytree(template, dest, symlinks=True)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: run the service, die at point n (or finish: point 0)
            code = 0
            try:
                storage = open_storage(str(dest), str(n))
                results = run_service(str(dest), storage, service, args)
                (dest.parent / "results.json").write_text(json.dumps(results))
            except BaseException as e:  # a service error: report it, never return into the parent's loop
                (dest.parent / "error.txt").write_text(f"{type(e).__name__}: {e}")
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        ops_file = Path(str(dest) + ".ops")
        ops = ops_file.read_text().splitlines() if ops_file.exists() else []
        error = dest.parent / "error.txt"
        return {"point": n, "path": str(dest), "ops": ops,
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                "error": error.read_text() if error.exists() else None}

    full = run_point(0)
    if full["exit"] != 0:
        print(json.dumps({"error": full["error"] or f"the full run ended with {full}"}))
        return 1
    results = json.loads((Path(full["path"]).parent / "results.json").read_text())
    for n in chosen_points(len(full["ops"]), sample):
        points.append(run_point(n))
    print_points(full, results, points)
    return 0


def chosen_points(n_ops: int, sample: tuple[int, int] | None) -> list[int]:
    """Points 1..N, or K of them drawn with ``random.Random(SEED)`` (``sample``: (K, SEED))."""
    chosen = list(range(1, n_ops + 1))
    if sample is not None:
        import random

        k, seed = sample
        chosen = sorted(random.Random(seed).sample(chosen, min(k, len(chosen))))
    return chosen


def print_points(full: dict, results: list[dict], points: list[dict]) -> None:
    print(json.dumps({"ops": full["ops"], "results": results, "full_path": full["path"],
                      "points": [{k: v for k, v in p.items() if k != "ops"} | {"ops": len(p["ops"]),
                                                                           "last_op": (p["ops"] or [None])[-1]}
                                 for p in points]}))


def spawn_points(template: str, workdir: str, service: str, args: list[str],
                 sample: tuple[int, int] | None = None) -> int:
    """``--fork``'s runs with a process started afresh for each point (object stores: module doc)."""
    import subprocess
    import tempfile

    from table_locations import copy_tree
    from tablesvc.storage import storage_for

    if service == "compaction":
        raise SystemExit("--spawn runs compaction-in-process, not compaction (a Spark start per point)")
    storage = storage_for(template)
    name = template.rstrip("/").rsplit("/", 1)[-1]
    logs = tempfile.mkdtemp(prefix="crash-ops-")
    points = []

    def run_point(n: int) -> dict:
        dest = f"{workdir.rstrip('/')}/{n}/{name}"
        copy_tree(storage, template, dest)
        ops_file = Path(logs, f"{n}.ops")
        proc = subprocess.run([sys.executable, __file__, "--ops", str(ops_file), dest, str(n), service, *args],
                              capture_output=True, text=True, start_new_session=True)
        ops = ops_file.read_text().splitlines() if ops_file.exists() else []
        killed = proc.returncode == -9
        return {"point": n, "path": dest, "ops": ops, "signal": 9 if killed else None,
                "exit": None if killed else proc.returncode,
                "error": None if killed or proc.returncode == 0 else proc.stderr.strip()[-2000:],
                "stdout": proc.stdout}

    full = run_point(0)
    if full["exit"] != 0:
        print(json.dumps({"error": full["error"] or f"the full run ended with {full}"}))
        return 1
    results = json.loads(full["stdout"].strip().splitlines()[-1])["results"]
    for n in chosen_points(len(full["ops"]), sample):
        points.append({k: v for k, v in run_point(n).items() if k != "stdout"})
    print_points(full, results, points)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--spawn"] or argv[:1] == ["--fork"]:
        points = spawn_points if argv[0] == "--spawn" else fork_points
        sample = None
        if argv[1:2] == ["--fork-sample"] and len(argv) > 2:
            k, _, seed = argv[2].partition(":")
            sample, argv = (int(k), int(seed or 0)), argv[2:]
        if len(argv) < 4:
            raise SystemExit(__doc__)
        return points(argv[1], argv[2], argv[3], argv[4:], sample)
    ops_log = None
    if argv[:1] == ["--ops"] and len(argv) > 1:
        ops_log, argv = argv[1], argv[2:]
    if len(argv) < 3:
        raise SystemExit(__doc__)
    return single(argv[0], argv[1], argv[2], argv[3:], ops_log)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
