"""tablesvc on a real Spark cluster (issue #28): a standalone master and two workers on this machine,
separate JVMs with their own Python workers (tests/spark_cluster.py), one cluster for the module.

The same history of commands runs on three copies of one Apache Hudi table (v8_trips_8i3u1d: a
metadata table with files, column stats, partition stats, a record index and a secondary index):
three writes from CSV (upserts, then deletes), log compaction, compaction, a fourth write, a
clean, one pass of the runner and a read to Parquet.

* on the cluster, in one driver process: on a local copy of the table, then on a copy in S3 (moto
  on loopback, ``s3_endpoint``; the endpoint and credentials are in the driver's environment and,
  through the profile's ``spark.executorEnv.AWS_*``, in the executors').  The driver
  (tests/cluster_driver.py) runs ``tablesvc`` commands with ``--spark-profile``
  (spark_conf/standalone.yaml with this cluster's master filled in) in a process of its own: one
  SparkContext per process, and this process has its ``local[2]`` one.  It runs in a private
  mount namespace: its working directory and ``TMPDIR`` are on a tmpfs only it sees, so an
  executor that read a file of the driver's local disk would fail; ``PYSPARK_PYTHON`` is unset,
  so the executors' Python comes from the profile;
* in this process's ``local[2]`` session (``local[*]`` on this 2-core machine), meanwhile, on a
  third copy.

Checked: every command succeeds on the cluster with the results of the local run (counts,
statuses; instants and byte sizes aside); hudi-rs reads the same rows from the three tables, and
they are the rows the inputs imply (a model built from the fixture's rows and the CSV files); the
cluster's own read equals hudi-rs; the tasks ran in executors on both workers, each in its
worker's folders (working directory, ``TMPDIR``), with the profile's Python, and saw none of the
driver's files.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import read_table

from fixture_tables import TABLES_DIR, copy_table
from spark_cluster import StandaloneCluster
from tablesvc.cli.main import main as tablesvc

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

FIXTURE = "v8_trips_8i3u1d"
DRIVER = Path(__file__).resolve().parents[1] / "cluster_driver.py"
COLUMNS = ("ts", "uuid", "rider", "driver", "fare", "city")
CITIES = ("san_francisco", "sao_paulo", "chennai")
T = 1_700_000_000_000     # ordering values above every fixture row's: each write's record wins


def new(i: int, ts: int, driver: str, fare: float) -> tuple:
    return (ts, f"new-{i:02d}", f"rider-N{i}", driver, fare, CITIES[i % 3])


# The writes: (file name, operation, rows).  Existing keys keep their partition (a record-index
# table refuses a key that moves).
WRITES = (
    ("w1.csv", "upsert", [(T + 1, "334e26e9-8355-45cc-97c6-c31daf0df330", "rider-A", "driver-K", 11.5, "san_francisco"),
                          (T + 2, "9909a8b1-2d15-4d3d-8ec9-efc48c536a00", "rider-D", "driver-L", 12.5, "san_francisco"),
                          (T + 3, "3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04", "rider-I", "driver-S", 13.5, "chennai")]
     + [new(i, T + 10 + i, f"driver-N{i}", 20.0 + i) for i in range(1, 10)]),
    ("w2.csv", "upsert", [new(i, T + 100 + i, f"driver-X{i}", 40.0 + i) for i in range(1, 5)]
     + [(T + 150, "e96c4396-3fad-413a-a942-4cb36106d721", "rider-C", "driver-M", 77.7, "san_francisco")]),
    ("w3.csv", "delete", [new(5, T + 200, "driver-N5", 0.0),
                          (T + 201, "1dced545-862b-4ceb-8b43-d2a568f6616b", "rider-E", "driver-O", 0.0, "san_francisco")]),
    ("w4.csv", "upsert", [new(i, T + 300 + i, f"driver-Y{i}", 60.0 + i) for i in (6, 7)]
     + [(T + 350, "7a84095f-737f-40bc-b62f-6b69664712d2", "rider-G", "driver-Q", 5.5, "sao_paulo")]),
)


def write_inputs(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, _operation, rows in WRITES:
        lines = [",".join(COLUMNS)] + [",".join(str(v) for v in row) for row in rows]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths[name] = str(folder / name)
    return paths


def history(table: str, inputs: dict[str, str], output: str, profile: str | None = None,
            conf: tuple[str, ...] = ()) -> list[list[str]]:
    """The commands, in order; ``profile`` is added to the commands that run Spark jobs, ``conf``
    (``--conf`` pairs) to every command."""
    spark = ["--spark-profile", profile] if profile else []
    (w1, op1, _), (w2, op2, _), (w3, op3, _), (w4, op4, _) = WRITES
    steps = [
        ["write", table, "--input", inputs[w1], "--operation", op1, "--json", "--quiet", *spark],
        ["write", table, "--input", inputs[w2], "--operation", op2, "--json", "--quiet", *spark],
        ["write", table, "--input", inputs[w3], "--operation", op3, "--json", "--quiet", *spark],
        ["logcompaction", "schedule", table, "--force", "--json"],
        ["logcompaction", "run", table, "--json", "--quiet", *spark],
        ["compaction", "schedule", table, "--json"],
        ["compaction", "run", table, "--json", "--quiet", *spark],
        ["write", table, "--input", inputs[w4], "--operation", op4, "--json", "--quiet", *spark],
        ["clean", "run", table, "--json", "--conf", "hoodie.cleaner.commits.retained=1"],
        # one runner pass: compaction is due after every delta commit, so it schedules and runs one
        ["run", table, "--once", "--json", "--quiet", "--conf", "hoodie.compact.inline.max.delta.commits=1", *spark],
        ["read", table, "--output", output, "--quiet", *spark],
    ]
    return [step + list(conf) for step in steps]


def expected_rows(fixture: Path) -> dict[str, tuple]:
    """uuid -> row after the history, from the fixture's rows (hudi-rs) and the inputs."""
    model = {r["uuid"]: tuple(r[c] for c in COLUMNS) for r in read_table(fixture).to_pylist()}
    for _name, operation, rows in WRITES:
        for row in rows:
            if operation == "delete":
                model.pop(row[1], None)
            else:
                model[row[1]] = row
    return model


# -- what is compared ------------------------------------------------------------------------------

_INSTANT = re.compile(r"\b\d{17}\b")
_VOLATILE = {"instant", "seconds", "completion_time", "earliest_commit_to_retain"}


def comparable(value):
    """A command's JSON result without what differs between two runs of the same history: instant
    times (also inside reasons), durations, byte sizes (files carry their instant times)."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in _VOLATILE and "bytes" not in k}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, str):
        return _INSTANT.sub("<instant>", value)
    return value


def step_result(stdout: str):
    """The JSON a step printed (the runner prints its log lines first), else its text."""
    starts = [0] + [m.end() for m in re.finditer(r"\n", stdout)]
    for start in starts:
        if stdout[start:start + 1] in ("{", "["):
            try:
                return comparable(json.loads(stdout[start:]))
            except ValueError:
                continue
    return re.sub(r"/\S+", "<path>", _INSTANT.sub("<instant>", stdout.strip()))


def hudi_rs_records(table: str, options: dict[str, str] | None = None) -> list[dict]:
    """hudi-rs's snapshot, sorted by key, without the meta columns that name instants or files."""
    ignore = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")
    rows = read_table(table, storage_options=options).to_pylist()
    return sorted(({k: v for k, v in r.items() if k not in ignore} for r in rows),
                  key=lambda r: r["_hoodie_record_key"])


# -- the runs --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    table: str                 # a local path or an s3:// URL
    output: Path               # what `tablesvc read --output` wrote
    steps: list[dict]          # {"argv", "rc", "stdout"} per command
    options: dict[str, str] | None = None    # hudi-rs's storage options for an S3 table


@dataclass(frozen=True)
class Runs:
    local: Run                 # in this process's local[2] session
    cluster: Run               # on the cluster, a table on local files
    cluster_s3: Run            # on the cluster, a table in S3
    report: dict               # tests/cluster_driver.py's report
    private_mount: bool        # the driver's folders were on a tmpfs only it saw
    driver_stderr: str


def run_locally(steps: list[list[str]]) -> list[dict]:
    """The commands in this process: its ``local[2]`` session (the ``spark`` fixture) is active, so
    every command uses it."""
    results = []
    for argv in steps:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = tablesvc(argv)
        results.append({"argv": argv, "rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()})
        assert rc == 0, results[-1]
    return results


def private_mount_available() -> bool:
    """A mount namespace with a tmpfs of its own (root on Linux, as here and on CI)."""
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs tablesvc-probe /mnt && umount /mnt"], capture_output=True)
    return probe.returncode == 0


@dataclass(frozen=True)
class DriverProcess:
    """tests/cluster_driver.py running in a process of its own whose working directory, ``TMPDIR``
    and Spark scratch folder are under ``folder/driver-private``: a tmpfs mounted in a mount
    namespace of the driver's own when the machine allows it (the executors then see an empty
    folder there)."""
    process: subprocess.Popen
    folder: Path
    private_mount: bool

    @classmethod
    def start(cls, cluster: StandaloneCluster, folder: Path, steps: list[list[str]],
              env: dict[str, str]) -> "DriverProcess":
        private = folder / "driver-private"
        private.mkdir(parents=True)
        (folder / "steps.json").write_text(json.dumps(steps), encoding="utf-8")
        environment = {k: v for k, v in os.environ.items()
                       if k not in ("PYSPARK_PYTHON", "PYTHONPATH", "TABLESVC_SPARK_PROFILE", "SPARK_LOCAL_DIRS")}
        environment |= {"TMPDIR": str(private / "tmp"), "SPARK_LOCAL_DIRS": str(private / "local"),
                        "TABLESVC_SPARK_LOG": str(folder / "driver-spark.log"),
                        "CLUSTER_DRIVER_MIN_EXECUTORS": str(len(cluster.workers)), **env}
        script = ('set -e; if [ "$1" = yes ]; then mount -t tmpfs tablesvc-driver "$2"; fi; '
                  'mkdir -p "$2/cwd" "$2/tmp" "$2/local"; cd "$2/cwd"; shift 2; exec "$@"')
        mounted = private_mount_available()
        command = ["sh", "-c", script, "sh", "yes" if mounted else "no", str(private),
                   sys.executable, str(DRIVER), str(folder / "steps.json"), str(folder / "report.json")]
        if mounted:
            command = ["unshare", "--mount", "--propagation", "private", *command]
        with open(folder / "driver.out", "wb") as out, open(folder / "driver.err", "wb") as err:
            process = subprocess.Popen(command, env=environment, stdout=out, stderr=err, start_new_session=True)
        return cls(process, folder, mounted)

    def kill(self) -> None:
        """The driver and its JVM (one process group); the tmpfs goes with its namespace."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def finish(self, timeout_s: float = 300) -> tuple[dict, str]:
        """(report, stderr) once the driver has exited 0."""
        try:
            rc = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = f"killed after {timeout_s:.0f} s"
        stderr = (self.folder / "driver.err").read_text(errors="replace")
        report = self.folder / "report.json"
        assert rc == 0 and report.exists(), f"cluster driver exit {rc}: {stderr[-3000:]}"
        return json.loads(report.read_text()), stderr


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    """The cluster, started while this process's ``local[2]`` session (the ``spark`` fixture) starts:
    both are seconds of JVM start-up."""
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(StandaloneCluster.start, tmp_path_factory.mktemp("standalone"))
        try:
            request.getfixturevalue("spark")
        except BaseException:
            starting.result().stop()
            raise
        started = starting.result()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def runs(cluster, s3_endpoint, tmp_path_factory) -> Runs:
    """The history on the cluster, in one driver process: on a local copy of the fixture, then on a
    copy in S3 (the driver and, through the profile's ``spark.executorEnv.*``, the executors find
    the endpoint and credentials in their environment; no ``--conf`` carries them); meanwhile the
    same history in this process's session (started by ``cluster``) on another local copy."""
    from s3_server import copy_table_to_s3

    on_cluster, local = tmp_path_factory.mktemp("cluster-run"), tmp_path_factory.mktemp("local-run")
    cluster_table, local_table = copy_table(TABLES_DIR / FIXTURE, on_cluster), copy_table(TABLES_DIR / FIXTURE, local)
    _storage, s3_table = copy_table_to_s3(s3_endpoint, FIXTURE, "cluster")
    environment = s3_endpoint.env()
    profile = cluster.write_profile(on_cluster / "standalone.yaml",
                                    **{f"spark.executorEnv.{k}": v for k, v in environment.items()})
    inputs = write_inputs(on_cluster / "inputs")
    steps = (history(str(cluster_table), inputs, str(on_cluster / "read.parquet"), str(profile))
             + history(s3_table, inputs, str(on_cluster / "read-s3.parquet"), str(profile)))
    driver = DriverProcess.start(cluster, on_cluster, steps, environment)
    try:
        local_steps = run_locally(history(str(local_table), write_inputs(local / "inputs"),
                                          str(local / "read.parquet")))
    except BaseException:
        driver.kill()
        raise
    report, stderr = driver.finish()
    n = len(local_steps)
    return Runs(Run(str(local_table), local / "read.parquet", local_steps),
                Run(str(cluster_table), on_cluster / "read.parquet", report["steps"][:n]),
                Run(s3_table, on_cluster / "read-s3.parquet", report["steps"][n:], s3_endpoint.options()),
                report, driver.private_mount, stderr)


# -- the tests -------------------------------------------------------------------------------------

ON_CLUSTER = pytest.mark.parametrize("where", ["cluster", "cluster_s3"])


@ON_CLUSTER
def test_every_command_succeeds_on_the_cluster_with_the_results_of_local(runs, where):
    run = getattr(runs, where)
    ran = [(s["argv"][:2], s["rc"]) for s in runs.report["steps"]]
    assert len(run.steps) == len(runs.local.steps), f"{ran}\n{runs.driver_stderr[-3000:]}"
    assert all(s["rc"] == 0 for s in run.steps), f"{ran}\n{runs.driver_stderr[-3000:]}"
    assert runs.report["master"].startswith("spark://127.0.0.1:")      # no task ran in the driver
    for on_cluster, local in zip(run.steps, runs.local.steps):
        assert step_result(on_cluster["stdout"]) == step_result(local["stdout"]), on_cluster["argv"][:2]
    # the history did what it is there for
    results = [step_result(s["stdout"]) for s in run.steps]
    assert [r["operation"] for r in results[:3]] == ["UPSERT", "UPSERT", "DELETE"]
    assert results[2]["deletes"] == 2
    assert results[4][0]["status"] == "done" and results[4][0]["metrics"]["file_groups"] >= 1    # log compaction
    assert results[6][0]["status"] == "done" and results[6][0]["metrics"]["file_groups"] >= 1    # compaction
    assert results[8][0]["status"] == "done" and results[8][0]["metrics"]["files_deleted"] >= 1  # clean
    assert results[9]["jobs_done"] >= 1 and results[9]["jobs_failed"] == 0                        # runner


@ON_CLUSTER
def test_hudi_rs_reads_the_rows_of_the_local_run_and_of_the_inputs(runs, where):
    run = getattr(runs, where)
    model = expected_rows(TABLES_DIR / FIXTURE)
    rows = hudi_rs_records(run.table, run.options)
    assert sorted(tuple(r[c] for c in COLUMNS) for r in rows) == sorted(model.values())
    assert rows == hudi_rs_records(runs.local.table)


@ON_CLUSTER
def test_the_clusters_own_read_equals_hudi_rs(runs, where):
    run = getattr(runs, where)
    read = pq.read_table(run.output).to_pylist()
    by_hudi_rs = read_table(run.table, storage_options=run.options).to_pylist()
    key = "_hoodie_record_key"
    assert sorted(read, key=lambda r: r[key]) == sorted(by_hudi_rs, key=lambda r: r[key])


def test_tasks_ran_in_executors_on_both_workers_in_their_own_folders(cluster, runs):
    driver = runs.report["driver"]
    probe = runs.report["probe"]
    assert probe, "the probe job got no answer"
    workers = {w.work: w for w in cluster.workers}
    used = set()
    for answer in probe:
        cwd = Path(answer["cwd"])
        [work] = [w for w in workers if w in cwd.parents]           # <worker dir>/<app>/<executor id>
        used.add(work)
        assert answer["tmpdir"] == str(workers[work].tmp) == answer["tmpdir_env"]
        assert answer["python"] == sys.executable                   # from the profile: PYSPARK_PYTHON unset
        assert not cwd.is_relative_to(driver["cwd"])
        assert not Path(answer["tmpdir"]).is_relative_to(driver["tmpdir"])
    assert used == set(workers), f"executors answered from {sorted(map(str, used))} only"
    # each worker started an executor for the driver's application
    [app] = {Path(a["cwd"]).parent.name for a in probe}
    for worker in cluster.workers:
        assert (worker.work / app).is_dir() and any((worker.work / app).iterdir())
    # tablesvc's executor check passes for object-store jobs too: the executors' Python has obstore
    assert runs.report["object_store_ready"] is True


def test_executors_never_see_the_drivers_local_files(runs):
    if not runs.private_mount:
        pytest.skip("no private mount namespace here (unshare/mount refused): the driver's folders are "
                    "visible to the executors, so only their separate folders are checked")
    driver = runs.report["driver"]
    # the driver wrote a file into its working directory and its TMPDIR: no executor saw either, and
    # the whole history above succeeded without any executor reading the driver's disk
    assert all(answer["sees_driver_files"] == [] for answer in runs.report["probe"])
    assert not Path(driver["cwd"]).exists(), "outside the driver's namespace its folder is an empty mount point"
