"""Run one table service and kill it with a real SIGKILL at a chosen storage operation.

Used by tests/crash_model/test_service_crash.py; runnable by hand::

    python tests/crash_harness.py TABLE KILL SERVICE [ARG]
    python tests/crash_harness.py --fork [--fork-sample K:SEED] TEMPLATE WORKDIR SERVICE [ARG]

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
afresh) before any kill, so the test can see exactly where the process died.

KILL
  ``0``             run to the end, then print a JSON object ``{"ops": [...], "results": [...]}``
  ``n``             SIGKILL after the n-th counted call
  ``match:REGEX``   SIGKILL after the first counted call whose ``<kind> <path>`` matches REGEX;
                    ``match:REGEX +K``: K counted calls later
  ``appears:GLOB``  SIGKILL from a watcher thread once a file matching GLOB (relative to TABLE)
                    exists: for work done by Spark tasks in other processes (mid job)

SERVICE
  ``clean``               ``run_clean(table, config)``
  ``rollback [T [--allow-completed]]``  ``rollback_failed(table)``, or ``rollback(table, T)``
  ``logcompaction``       ``run_log_compaction(table, spark=None, config=config)``: runs the pending
                          plans, or schedules one (threshold lowered, as ``force``) and runs it;
                          tasks run in this process
  ``compaction [C]``      ``run_compaction(table, C, spark=<a factory of a local session>)``: the
                          JVM starts only when the tasks run, so driver points before them are cheap

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
SERVICES = ("clean", "rollback", "logcompaction", "compaction")


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
    elif service == "compaction":
        import tablesvc.services.compaction  # noqa: F401
        import tablesvc.services.rollback  # noqa: F401
    else:
        raise SystemExit(f"unknown service {service!r}; expected one of {', '.join(SERVICES)}")


def run_service(path: str, storage: KillingStorage, service: str, args: list[str]) -> list[dict]:
    from tablesvc.config import load_config
    from tablesvc.storage import LocalStorage
    from tablesvc.api import Table

    table = Table.open(path, storage=storage)
    config = load_config(LocalStorage(), table_path=table.base_path)
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
    else:
        raise SystemExit(f"unknown service {service!r}")
    return [r.as_dict() for r in results]


def open_storage(path: str, kill: str) -> KillingStorage:
    from tablesvc.storage import LocalStorage
    from tablesvc.api.table import normalize_path

    base = normalize_path(path)
    kill_after, match, offset = 0, None, 0
    if kill.startswith("match:"):
        match = kill[len("match:"):]
        m = re.fullmatch(r"(.*) \+(\d+)", match)
        if m:
            match, offset = m.group(1), int(m.group(2))
    elif kill.startswith("appears:"):
        watch_for(base, kill[len("appears:"):])
    else:
        kill_after = int(kill)
    return KillingStorage(LocalStorage(), base, kill_after, match, offset, ops_log=base + ".ops")


def single(path: str, kill: str, service: str, args: list[str]) -> int:
    import_service(service)
    storage = open_storage(path, kill)
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
    chosen = range(1, len(full["ops"]) + 1)
    if sample is not None:
        import random

        k, seed = sample
        chosen = sorted(random.Random(seed).sample(list(chosen), min(k, len(chosen))))
    for n in chosen:
        points.append(run_point(n))
    print(json.dumps({"ops": full["ops"], "results": results, "full_path": full["path"],
                      "points": [{k: v for k, v in p.items() if k != "ops"} | {"ops": len(p["ops"]),
                                                                           "last_op": (p["ops"] or [None])[-1]}
                                 for p in points]}))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--fork"]:
        sample = None
        if argv[1:2] == ["--fork-sample"] and len(argv) > 2:
            k, _, seed = argv[2].partition(":")
            sample, argv = (int(k), int(seed or 0)), argv[2:]
        if len(argv) < 4:
            raise SystemExit(__doc__)
        return fork_points(argv[1], argv[2], argv[3], argv[4:], sample)
    if len(argv) < 3:
        raise SystemExit(__doc__)
    return single(argv[0], argv[1], argv[2], argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
