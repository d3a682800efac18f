"""Soak run (issue #7): one writer and two `tablesvc run` runners on one table for a few
minutes, with seeded disturbances, then the invariants and the figures.

    python tests/soak.py [--minutes 3] [--seed 1] [--workdir DIR] [--table-version 8] [--cover] [--json]

* The table (`soak`, key `uuid`, ordering `ts`, partitioned by `city`, bucket index; on v8 with
  a metadata table (`files`) unless `--no-metadata-table`, as `tablesvc init` creates it) keeps the
  settings every process shares in its `.hoodie/tablesvc.yaml`: heartbeats of 1 s, compaction
  after 8 delta commits, log compaction at 3 log blocks, clean keeping 2 commits (the writer's
  inline services fire earlier: tests/soak_writer.py); 2 buckets per partition.
* The writer (tests/soak_writer.py) writes seeded upserts, inserts and deletes; each batch sets
  the writer's inline services on or off, so services run both inline and in the runners.
  The runners (lease 6 s, poll 0.5 s) schedule and run compaction, log compaction and clean.
* Disturbances, at seeded times: kill -9 of a runner's whole process tree (preferably the
  holder of a job, as a machine crash mid-job; each job's holder is hit once, so every job can
  finish on a slow machine too) and a restart; SIGSTOP of a runner's tree for longer than its
  lease, then SIGCONT (a stalled worker); kill -9 of the writer while a write is in flight, and
  a restart a few seconds later (the runners roll the failed write back).
  The first three are one of each; with `--cover` the run goes on past `--minutes` (bounded)
  until a takeover and every kind of service happened, as a slow machine may need.
* At the end: the writer gets SIGTERM (it finishes its batch), the runners drain (nothing
  pending for 15 s) and get SIGTERM (exit code 0 expected), `tablesvc rollback` runs if a
  failed instant is left, then the checks: the snapshot through hudi-rs equals the model of
  the committed batches (`soak_writer.model`), nothing is pending, no `.hoodie/.temp/<instant>`
  is left, and tests/invariants.py's `check_invariants` where it exists.

Exit code 0 when every check holds, 1 otherwise (the violations are printed).  The workdir
(a new temporary folder unless given) keeps the table, every process's output and the
orchestrator's event log (soak.log) for inspection.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from helpers import kill_tree  # noqa: E402
from invariants import InstantHistory, check_invariants  # noqa: E402
from soak_writer import committed_batches, model  # noqa: E402
from tablesvc.api import Table, TableSpec  # noqa: E402
from timeline.instant import Action  # noqa: E402
from timeline.lease import LeaseStore  # noqa: E402

LEASE_S = 6
# Settings every process must share (heartbeat expiry above all), kept in the table's own YAML.
# Compaction is due rarely enough that log compaction (due at 3 log blocks) gets a turn: a
# compaction plans every file group with logs, and writes go on while it runs.
TABLE_YAML = {"hoodie.client.heartbeat.interval_in_ms": 1000, "hoodie.compact.inline.max.delta.commits": 8,
              "hoodie.log.compaction.blocks.threshold": 3, "hoodie.cleaner.commits.retained": 2}
BUCKETS = 2               # file groups per partition (4 partitions): small compactions on 2 cores
WRITER_PAUSE_S = 1.5      # between batches: writes must not outpace the services
SPARK_CONF = {"spark.driver.memory": "1g"}
RUNNER_CONF = SPARK_CONF | {"hoodie.log.compaction.enable": "true", "hoodie.clean.automatic": "true"}
STOP_TIMEOUT_S = 300      # a batch or a job under load may take minutes to finish after SIGTERM
DRAIN_TIMEOUT_S = 600
DRAIN_QUIET_S = 15        # nothing pending for this long: the runners found nothing more due
HOLDER_WAIT_S = 45        # how long a disturbance waits for a runner to hold a job
TIMES_CHECK_S = 10        # how often the instant times are checked while the soak runs
EXTEND_FACTOR = 2         # --cover: at most this many times --minutes more
COLUMNS = ("ts", "fare", "city", "batch")


def conf_args(conf: dict) -> list[str]:
    return [a for k, v in conf.items() for a in ("--conf", f"{k}={v}")]


# -- processes ----------------------------------------------------------------------------------
def descendants(pid: int) -> list[int]:
    """``pid``'s process tree below it, from /proc (a stall must stop Spark's workers too)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(b")") + 2:].split()[1]), []).append(int(entry))
    out, stack = [], [pid]
    while stack:
        for c in children.get(stack.pop(), ()):
            out.append(c)
            stack.append(c)
    return out


def signal_tree(pid: int, sig: int) -> None:
    for p in [pid, *descendants(pid)]:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


class Role:
    """The writer or one runner: successive processes (a new one after each kill -9), each with
    its own output file."""

    def __init__(self, name: str, argv: list[str], workdir: Path):
        self.name, self.argv, self.workdir = name, argv, workdir
        self.proc: subprocess.Popen | None = None
        self.outputs: list[Path] = []

    def start(self) -> None:
        n = len(self.outputs) + 1
        out = self.workdir / f"{self.name}-{n}.out"
        self.outputs.append(out)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]),
                   PYSPARK_PYTHON=sys.executable, TABLESVC_SPARK_LOG=str(self.workdir / f"{self.name}-{n}-spark.log"))
        with open(out, "w") as f:
            self.proc = subprocess.Popen(self.argv, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.running():
            kill_tree(self.proc.pid)
            self.proc.wait()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM the process (not its tree: the JVM stops with it) and wait; None when it did not stop."""
        if not self.running():
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in self.outputs if p.exists())


# -- what the table shows -------------------------------------------------------------------------
def pending(path: Path) -> list[str]:
    return [str(i) for i in Table.open(str(path)).timeline().pending()]


def write_in_flight(path: Path) -> str | None:
    """The instant of a writer's inflight delta commit, if any.  (``pending(DELTA_COMMIT)`` also
    gives pending log compactions, which complete as delta commits: the action tells them apart.)"""
    return next((i.timestamp for i in Table.open(str(path)).timeline().pending(Action.DELTA_COMMIT)
                 if i.action is Action.DELTA_COMMIT and i.state.value == "inflight"), None)


def lease_holders(path: Path) -> list[tuple[str, int]]:
    """(job, pid) of each pending job whose lease is held now."""
    table = Table.open(str(path))
    timeline = table.timeline()
    pending_times = {i.timestamp for i in timeline.pending()}
    leases = LeaseStore(table.storage, table.base_path)
    now = int(time.time() * 1000)
    out = []
    try:
        jobs = leases.jobs()
    except FileNotFoundError:
        return []
    for job in jobs:
        if job.split("-", 1)[1] not in pending_times or leases.is_done(job):
            continue
        lease = leases.current(job)
        if lease is not None and not lease.expired(now):
            try:
                out.append((job, int(lease.owner.split(":")[1])))
            except (IndexError, ValueError):
                pass
    return out


def completed_services(path: Path) -> dict[str, int]:
    """Completed service instants per kind, from the timeline."""
    tl = Table.open(str(path)).timeline()
    return {
        "compaction": sum(1 for i in tl.completed(Action.COMMIT) if tl.origin_action(i) is Action.COMPACTION),
        "logcompaction": sum(1 for i in tl.completed(Action.DELTA_COMMIT)
                             if tl.origin_action(i) is Action.LOG_COMPACTION),
        "clean": len(tl.completed(Action.CLEAN)),
        "rollback": len(tl.completed(Action.ROLLBACK)),
    }


# -- the disturbances -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Disturbance:
    at_s: float            # seconds after the start
    kind: str              # kill-runner | stall-runner | kill-writer
    victim: int            # index of the runner when no runner holds a job
    pause_s: float         # kill-runner: until the restart; stall: how long stopped; kill-writer: delay into the write
    restart_s: float = 0   # kill-writer: until the restart


def plan_disturbances(seed: int, seconds: float) -> list[Disturbance]:
    """Seeded times and parameters.  The first three are one of each kind, so even a short run
    sees a takeover after a crash, a stalled worker and a rolled-back write."""
    rng = random.Random(f"disturbances:{seed}")
    out, t = [], rng.uniform(20, 35)
    firsts = ["kill-runner", "stall-runner", "kill-writer"]
    while t < seconds - 10:
        kind = firsts.pop(0) if firsts else rng.choices(["kill-runner", "stall-runner", "kill-writer"], [5, 3, 2])[0]
        pause = {"kill-runner": rng.uniform(2, 8), "stall-runner": LEASE_S + rng.uniform(3, 8),
                 "kill-writer": rng.uniform(0.05, 0.8)}[kind]
        out.append(Disturbance(round(t, 1), kind, rng.randrange(2), round(pause, 1), round(rng.uniform(4, 12), 1)))
        t += rng.uniform(15, 35)
    return out


@dataclass
class Counts:
    runner_kills: int = 0
    runner_kills_of_holders: int = 0
    runner_stalls: int = 0
    stalls_of_holders: int = 0
    writer_kills: int = 0
    writes_killed_in_flight: int = 0
    disturbed_pids: set[int] = field(default_factory=set)   # runners killed or stalled
    unexpected_exits: list[str] = field(default_factory=list)


class Soak:
    def __init__(self, args: argparse.Namespace, workdir: Path):
        self.args = args
        self.workdir = workdir
        self.table = workdir / "table"
        self.started = time.monotonic()
        self.counts = Counts()
        self.extended_s = 0.0
        self.disturbed_jobs: set[str] = set()   # jobs whose holder was killed or stalled
        self.history = InstantHistory()     # instant times seen so far: new ones must be later
        self.times_violations: list[str] = []
        self._times_checked = 0.0
        self.log = open(workdir / "soak.log", "a")
        py = sys.executable
        self.writer = Role("writer", [py, str(REPO / "tests" / "soak_writer.py"), str(self.table), "--seed",
                                      str(args.seed), "--pause", str(WRITER_PAUSE_S), *conf_args(SPARK_CONF)],
                           workdir)
        runner_argv = [py, "-m", "tablesvc", "run", str(self.table), "--lease-seconds", str(LEASE_S),
                       "--poll-seconds", "0.5", *conf_args(RUNNER_CONF)]
        self.runners = [Role(f"runner-{n}", runner_argv, workdir) for n in "ab"]

    def say(self, message: str) -> None:
        line = f"soak: t={time.monotonic() - self.started:6.1f}s {message}"
        print(line, file=sys.stderr if self.args.json else sys.stdout, flush=True)
        print(line, file=self.log, flush=True)

    # -- set-up -----------------------------------------------------------------------------------
    def create_table(self) -> None:
        # a metadata table (files) as `tablesvc init` builds by default on v8; every process keeps it
        # true, and check_invariants compares it with storage and hudi-rs at the end
        metadata = self.args.table_version >= 8 and not self.args.no_metadata_table
        Table.create(str(self.table), TableSpec("soak", ("uuid",), "ts", ("city",),
                                                table_version=self.args.table_version, num_buckets=BUCKETS,
                                                metadata_table=metadata))
        (self.table / ".hoodie" / "tablesvc.yaml").write_text("".join(f"{k}: {v}\n" for k, v in TABLE_YAML.items()))

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> None:
        seconds = self.args.minutes * 60
        limit = seconds * (1 + EXTEND_FACTOR) if self.args.cover else seconds
        plan = plan_disturbances(self.args.seed, limit)
        self.say(f"seed {self.args.seed}, {self.args.minutes:g} min, table v{self.args.table_version}, "
                 f"disturbances planned: " + ", ".join(f"{d.kind}@{d.at_s:g}s" for d in plan if d.at_s < seconds)
                 + (f"; extended until covered, up to {limit:g} s" if self.args.cover else ""))
        self.writer.start()
        for r in self.runners:
            r.start()
        for d in plan:
            self.supervise_until(d.at_s)
            if self.elapsed() >= seconds and (not self.args.cover or self.covered() or self.elapsed() >= limit):
                break
            getattr(self, d.kind.replace("-", "_"))(d)
        self.supervise_until(seconds)
        self.extended_s = max(0.0, round(self.elapsed() - seconds, 1))

    def covered(self) -> bool:
        """A takeover from a killed or stalled runner happened, and every kind of service completed."""
        runner_text = "".join(r.text() for r in self.runners)
        takeovers = re.findall(r": taken over from [^:]+:(\d+):", runner_text)
        return (any(int(pid) in self.counts.disturbed_pids for pid in takeovers)
                and all(completed_services(self.table).values()))

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def supervise_until(self, at_s: float) -> None:
        """Wait, restarting a process that ended by itself, and checking the instant times."""
        while self.elapsed() < at_s:
            self.restart_exited((self.writer, *self.runners))
            self.check_instant_times()
            time.sleep(0.5)

    def restart_exited(self, roles) -> None:
        """Nothing should end by itself: each such exit is noted (a figure), and the process restarted."""
        for role in roles:
            if role.proc is not None and not role.running():
                note = f"{role.name} (pid {role.pid}) exited by itself with code {role.proc.returncode}"
                self.counts.unexpected_exits.append(note)
                self.say(note + "; restarting it")
                role.start()

    def check_instant_times(self) -> None:
        """While the soak runs: every new instant time is later than every one seen before (a
        rolled-back time is never reused), checked from snapshots of the timeline."""
        if time.monotonic() - self._times_checked < TIMES_CHECK_S:
            return
        self._times_checked = time.monotonic()
        try:
            found = self.history.check(Table.open(str(self.table)).timeline())
        except (OSError, ValueError) as e:   # a timeline file replaced while listed: next time
            self.say(f"instant-time check skipped: {e}")
            return
        for v in found:
            self.say(f"VIOLATION {v}")
        self.times_violations += found

    def _choose_runner(self, d: Disturbance) -> tuple[Role, str | None] | None:
        """The runner to disturb, and the job it holds: preferably the holder of a job not disturbed
        before (each job is hit once, so every job can finish even on a slow machine), else a
        runner holding nothing or no job disturbed before; None when every runner holds one."""
        deadline = time.monotonic() + HOLDER_WAIT_S
        held: list[tuple[Role, str]] = []
        while time.monotonic() < deadline:
            by_pid = {r.pid: r for r in self.runners if r.running()}
            try:
                held = [(by_pid[pid], job) for job, pid in lease_holders(self.table) if pid in by_pid]
            except (OSError, ValueError):
                held = []  # a file replaced while read: look again
            fresh = [(r, job) for r, job in held if job not in self.disturbed_jobs]
            if fresh:
                self.disturbed_jobs.add(fresh[0][1])
                return fresh[0]
            time.sleep(0.2)
        spared = {r.name for r, job in held if job in self.disturbed_jobs}
        candidates = [r for r in (self.runners[d.victim], self.runners[1 - d.victim]) if r.name not in spared]
        return (candidates[0], None) if candidates else None

    def kill_runner(self, d: Disturbance) -> None:
        chosen = self._choose_runner(d)
        if chosen is None:
            self.say("every runner holds a job disturbed before: no kill this time")
            return
        victim, job = chosen
        self.counts.runner_kills += 1
        self.counts.disturbed_pids.add(victim.pid)
        self.counts.runner_kills_of_holders += job is not None
        self.say(f"kill -9 {victim.name} (pid {victim.pid}{', holding ' + job if job else ', holding no new job'}); "
                 f"restart in {d.pause_s:g} s")
        victim.kill()
        time.sleep(d.pause_s)
        victim.start()

    def stall_runner(self, d: Disturbance) -> None:
        chosen = self._choose_runner(d)
        if chosen is None or not chosen[0].running():
            self.say("no runner to stall this time")
            return
        victim, job = chosen
        self.counts.runner_stalls += 1
        self.counts.disturbed_pids.add(victim.pid)
        self.counts.stalls_of_holders += job is not None
        self.say(f"SIGSTOP {victim.name} (pid {victim.pid}{', holding ' + job if job else ', holding no new job'}) "
                 f"for {d.pause_s:g} s (lease {LEASE_S} s)")
        signal_tree(victim.pid, signal.SIGSTOP)
        try:
            time.sleep(d.pause_s)
        finally:
            signal_tree(victim.pid, signal.SIGCONT)
        self.say(f"SIGCONT {victim.name}")

    def kill_writer(self, d: Disturbance) -> None:
        # A writer's start-up costs a JVM: kill only one that got going (two batches since its
        # start), or a slow machine would spend the soak restarting writers.
        deadline = time.monotonic() + 2 * HOLDER_WAIT_S
        while self.writer_commits() < 2:
            if time.monotonic() > deadline:
                self.say("the writer has not committed two batches since its start: no kill this time")
                return
            time.sleep(0.5)
        instant = None
        while time.monotonic() < deadline and instant is None:
            instant = write_in_flight(self.table)
            time.sleep(0.1)
        time.sleep(d.pause_s)
        self.counts.writer_kills += 1
        still = write_in_flight(self.table)
        self.counts.writes_killed_in_flight += still is not None
        self.say(f"kill -9 writer (pid {self.writer.pid}, "
                 f"{'write ' + still + ' in flight' if still else 'no write in flight'}); restart in {d.restart_s:g} s")
        self.writer.kill()
        time.sleep(d.restart_s)
        self.writer.start()

    def writer_commits(self) -> int:
        """Batches the current writer process printed as committed."""
        out = self.writer.outputs[-1]
        return out.read_text(errors="replace").count(" committed ") if out.exists() else 0

    # -- the end ------------------------------------------------------------------------------------
    def finish(self) -> tuple[dict, list[str]]:
        violations: list[str] = []
        self.say("stopping the writer (SIGTERM: it finishes its batch)")
        self.wait_until_writer_is_up()
        rc = self.writer.stop()
        if rc != 0:
            violations.append(f"writer: exit code {rc} after SIGTERM (None: did not stop within {STOP_TIMEOUT_S} s)")
        self.say(f"writer stopped ({rc}); letting the runners drain")
        drained = self.drain()
        self.say("drained" if drained else f"not drained after {DRAIN_TIMEOUT_S} s: {pending(self.table)}")
        for r in self.runners:
            rc = r.stop()
            self.say(f"{r.name} stopped with exit code {rc}")
            if rc != 0:
                violations.append(f"{r.name}: exit code {rc} after SIGTERM (None: did not stop within "
                                  f"{STOP_TIMEOUT_S} s)")
        left = pending(self.table)
        if left:
            self.say(f"pending after the runners stopped: {left}; running tablesvc rollback")
            out = subprocess.run([sys.executable, "-m", "tablesvc", "rollback", str(self.table)], cwd=REPO,
                                 capture_output=True, text=True, timeout=STOP_TIMEOUT_S)
            self.say(f"tablesvc rollback: exit {out.returncode}: {(out.stdout + out.stderr).strip()}")
        figures = self.figures(left)
        expected = model(self.args.seed, figures["batches_committed"])
        figures["rows"] = len(expected)
        self.say(f"checking the table against the model of {figures['batches_committed']} batches")
        violations += self.times_violations + check_table(self.table, expected, self.history)
        violations += self.check_accounting(figures)
        return figures, violations

    def wait_until_writer_is_up(self) -> None:
        """A writer just restarted may not have installed its SIGTERM handler yet."""
        deadline = time.monotonic() + STOP_TIMEOUT_S
        out = self.writer.outputs[-1]
        while self.writer.running() and time.monotonic() < deadline and "writer: resuming" not in out.read_text():
            time.sleep(0.5)

    def drain(self) -> bool:
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        quiet_since = None
        while time.monotonic() < deadline:
            self.restart_exited(self.runners)
            self.check_instant_times()
            if pending(self.table):
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= DRAIN_QUIET_S:
                return True
            time.sleep(1)
        return False

    def figures(self, left: list[str]) -> dict:
        runner_text = "".join(r.text() for r in self.runners)
        writer_text = self.writer.text()
        inline: dict[str, int] = {}
        for action in re.findall(r"^writer: inline (\w+): done", writer_text, re.M):
            inline[action] = inline.get(action, 0) + 1
        errors = [line for line in runner_text.splitlines() if is_error_line(line, str(self.table))]
        return {
            "seed": self.args.seed, "minutes": self.args.minutes, "extended_s": self.extended_s,
            "table_version": self.args.table_version,
            "batches_committed": committed_batches(Table.open(str(self.table))),
            "batches_printed": len(set(re.findall(r"^writer: batch (\d+) committed", writer_text, re.M))),
            "writer_kills": self.counts.writer_kills,
            "writes_killed_in_flight": self.counts.writes_killed_in_flight,
            "writer_errors": len(re.findall(r"^writer: batch \d+ (?:committed, then )?failed", writer_text, re.M)),
            "rows": None,  # filled in after the checks read the table
            "services_completed": completed_services(self.table),
            "services_inline": inline,
            "jobs_done": len(re.findall(r": finished in ", runner_text)),
            "jobs_finished_elsewhere": len(re.findall(r": finished by another process meanwhile", runner_text)),
            "takeovers": len(re.findall(r": taken over from ", runner_text)),
            # the runner also says "taken over" when the other runner released the job (busy): these
            # are the takeovers from a runner this soak killed or stalled
            "takeovers_from_disturbed": sum(int(pid) in self.counts.disturbed_pids
                                            for pid in re.findall(r": taken over from [^:]+:(\d+):", runner_text)),
            "leases_lost": len(re.findall(r": lease lost, stopped", runner_text)),
            "jobs_failed": len(re.findall(r": failed \(\d+/\d+\)", runner_text)),
            "jobs_busy": len(re.findall(r": busy, retry later", runner_text)),
            "runner_kills": self.counts.runner_kills, "runner_kills_of_holders": self.counts.runner_kills_of_holders,
            "runner_stalls": self.counts.runner_stalls, "stalls_of_holders": self.counts.stalls_of_holders,
            "runner_processes": sum(len(r.outputs) for r in self.runners),
            "unexpected_exits": self.counts.unexpected_exits,
            "pending_after_runners": left,
            "errors": len(errors), "error_lines": errors[:20],
            "workdir": str(self.workdir),
        }

    def check_accounting(self, f: dict) -> list[str]:
        out = []
        printed = {int(i) for i in re.findall(r"^writer: batch (\d+) committed", self.writer.text(), re.M)}
        if printed and max(printed) >= f["batches_committed"]:
            out.append(f"the writer printed batch {max(printed)} committed, but the timeline holds "
                       f"{f['batches_committed']} completed writes")
        return out

    def cleanup(self) -> None:
        for role in (self.writer, *self.runners):
            if role.running():
                signal_tree(role.pid, signal.SIGCONT)
                role.kill()


# -- the checks ----------------------------------------------------------------------------------------
def hudi_snapshot(path: Path) -> tuple[dict[str, tuple], int]:
    """uuid -> COLUMNS through hudi-rs (an independent reader), and the number of rows read."""
    from oracles.hudi_rs import read_rows

    rows = read_rows(path)
    return {r["uuid"]: tuple(r[c] for c in COLUMNS) for r in rows}, len(rows)


def compare(name: str, got: dict, expected: dict) -> list[str]:
    if got == expected:
        return []
    missing = sorted(expected.keys() - got.keys())
    extra = sorted(got.keys() - expected.keys())
    differ = sorted(k for k in expected.keys() & got.keys() if got[k] != expected[k])
    return [f"{name} differs from the model: {len(missing)} keys missing (e.g. {missing[:3]}), {len(extra)} extra "
            f"(e.g. {[(k, got[k]) for k in extra[:3]]}), {len(differ)} with other values (e.g. "
            f"{[(k, got[k], expected[k]) for k in differ[:3]]}; as {COLUMNS})"]


def stray_temp_folders(path: Path) -> list[str]:
    """Marker folders (`.hoodie/.temp/<instant>`) of instants that are no longer pending."""
    temp = path / ".hoodie" / ".temp"
    pending_times = {i.timestamp for i in Table.open(str(path)).timeline().pending()}
    return sorted(p.name for p in temp.iterdir() if p.is_dir() and p.name not in pending_times) \
        if temp.is_dir() else []


def check_table(path: Path, expected: dict[str, tuple], history: InstantHistory) -> list[str]:
    """Violations of the soak's own checks, then of tests/invariants.py's (snapshots through
    hudi-rs and tablesvc's reader, plans, needed files, orphans and leftovers, instant times)."""
    out = []
    got, n = hudi_snapshot(path)
    if n != len(got):
        out.append(f"hudi-rs: {n - len(got)} keys appear more than once in the snapshot")
    out += compare("hudi-rs snapshot", got, expected)
    left = pending(path)
    if left:
        out.append(f"pending on the timeline at the end: {left}")
    stray = stray_temp_folders(path)
    if stray:
        out.append(f"stray marker folders under .hoodie/.temp of instants not pending: {stray}")
    out += [f"invariants: {v}" for v in check_invariants(str(path), expected, key_field="uuid", columns=COLUMNS,
                                                         history=history)]
    return out


def is_error_line(line: str, table: str) -> bool:
    """A runner line that reports an error: a failed job, a traceback, or a poll that failed
    (printed as `<table path>: <error>`)."""
    return (bool(re.search(r": failed \(\d+/\d+\)|Traceback|set aside after", line))
            or f"] {table}: " in line)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir", type=Path, help="folder for the table and the logs (default: a new temporary one)")
    p.add_argument("--table-version", type=int, choices=(6, 8), default=8)
    p.add_argument("--no-metadata-table", action="store_true",
                   help="create the v8 table without a metadata table (default: with one, as tablesvc init)")
    p.add_argument("--cover", action="store_true",
                   help="if no takeover or not every service happened within --minutes, go on (with more "
                        f"disturbances) until they did, for at most {EXTEND_FACTOR}x --minutes more")
    p.add_argument("--json", action="store_true", help="print the figures and violations as JSON")
    args = p.parse_args(argv)
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="tablesvc-soak-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # cleanup below runs on SIGTERM too
    soak = Soak(args, workdir)
    started = time.monotonic()
    try:
        soak.create_table()
        soak.run()
        figures, violations = soak.finish()
    finally:
        soak.cleanup()
    figures["wall_s"] = round(time.monotonic() - started, 1)
    if args.json:
        print(json.dumps({"figures": figures, "violations": violations}, indent=2))
    else:
        print("soak figures: " + ", ".join(f"{k}={v}" for k, v in figures.items() if k != "error_lines"))
        for line in figures["error_lines"]:
            print(f"soak error line: {line}")
        print("soak: all invariants hold" if not violations else "soak: VIOLATIONS:")
        for v in violations:
            print(f"  {v}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
