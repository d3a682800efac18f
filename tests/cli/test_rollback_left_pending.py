"""What `tablesvc rollback` leaves pending, and why (issue #24, item 3): one line per instant it
left alone, exit 3 while any remains, `--wait` until their heartbeats expire; `tablesvc status`
shows the same verdicts.  No Spark here (writes go through the write pieces); the real killed
write is tests/crash_model/test_rollback_wait_crash.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import file_digests
from oracles.hudi_rs import rows_by_key
from table_builders import five_digit_key_rows, write_without_spark

from tablesvc.cli.main import main
from tablesvc.config import build_config
from tablesvc.runner import table_status
from tablesvc.services import Status
from tablesvc.services.rollback import plan_rollback, recover, rollback_failed, wait_and_recover
from tablesvc.services.rollback import executor as rb_executor
from tablesvc.services.rollback.pending import HeartbeatWindow, Verdict, classify_pending, pending_instants
from tablesvc.api import Table, TableSpec
from timeline.clock import ManualClock, SystemClock
from timeline.heartbeat import Heartbeat
from timeline.instant import Action, State
from timeline.payloads import CompactionOperation, CompactionPlan, encode_compaction_plan

WINDOW = {"hoodie.client.heartbeat.interval_in_ms": "10000", "hoodie.client.heartbeat.tolerable.misses": "3"}
CONFIG = build_config(conf=WINDOW)   # judged dead 30 s after the last beat
CONF_ARGS = [a for k, v in WINDOW.items() for a in ("--conf", f"{k}={v}")]
LINE = re.compile(r"^left pending: (\d{17}) (\w+) \((requested|inflight)\): (.*)$")


def new_table(path: Path, clock, version: int = 8) -> Table:
    table = Table.create(str(path), TableSpec("trips", ("uuid",), "ts", ("city",), table_version=version,
                                              num_buckets=2), clock=clock)
    write_without_spark(table, five_digit_key_rows(range(0, 30), 1), "upsert", stage=1)
    return table


def live_write(table: Table, stage: int = 2) -> str:
    """A write whose process is still running: inflight, with files, markers and a fresh beat."""
    t, _ = write_without_spark(table, five_digit_key_rows(range(0, 40), stage), "upsert", stage=stage, complete=False)
    Heartbeat(table.storage, table.base_path, t, table.clock).beat()
    return t


def request_compaction(table: Table):
    ops = tuple(CompactionOperation(base_instant_time=s.base_instant, file_id=s.file_id, partition_path=s.partition,
                                    data_file_path=s.base_file.file_name if s.base_file else None,
                                    delta_file_paths=tuple(lf.file_name for lf in s.log_files))
                for s in table.latest_file_slices())
    return table.timeline_writer.request(Action.COMPACTION, encode_compaction_plan(CompactionPlan(ops, version=2)))


def cli(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# =============================================================================================
# The verdicts: one decision for the sweep, its report and status
# =============================================================================================

def test_live_write_is_left_pending_with_its_heartbeat_numbers(tmp_path):
    clock = ManualClock()
    table = new_table(tmp_path / "t", clock)
    before = rows_by_key(table.base_path, "uuid", "ts")
    t = live_write(table)
    clock.advance(12_000)
    files = file_digests(table.base_path)

    outcome = recover(table, config=CONFIG)
    assert outcome.results == ()
    [left] = outcome.left_pending
    assert (left.instant.timestamp, left.action, left.verdict) == (t, Action.DELTA_COMMIT, Verdict.HEARTBEAT_ALIVE)
    assert left.render() == (f"{t} deltacommit (inflight): heartbeat alive: last beat 12.0 s ago, "
                             "judged dead in 18.0 s")
    assert left.as_dict() == {"instant": t, "action": "deltacommit", "state": "inflight",
                              "verdict": "heartbeat_alive", "reason": left.reason(), "last_beat_s_ago": 12.0,
                              "dead_in_s": 18.0, "rollback": None, "rolls_back": None}
    assert file_digests(table.base_path) == files          # nothing touched
    # the sweep rolls back exactly what the classification calls failed: once the beat is 30 s old
    clock.advance(18_000)
    assert [p.verdict for p in classify_pending(table, HeartbeatWindow.of(CONFIG))] \
        == [Verdict.HEARTBEAT_ALIVE]               # 30 s old: not yet *more* than the window
    clock.advance(1)
    assert [p.verdict for p in pending_instants(table, CONFIG)] == [Verdict.FAILED]
    outcome = recover(table, config=CONFIG)
    assert [(r.status, r.metrics["target"]) for r in outcome.results] == [(Status.DONE, t)]
    assert outcome.left_pending == ()
    assert table.timeline().pending() == ()
    assert rows_by_key(table.base_path, "uuid", "ts") == before


def test_requested_compaction_plan_is_not_left_for_recovery(tmp_path):
    clock = ManualClock()
    table = new_table(tmp_path / "t", clock)
    write_without_spark(table, five_digit_key_rows(range(0, 10), 2), "upsert", stage=2)
    clock.advance(1000)
    comp = request_compaction(table)
    clock.advance(86_400_000)                      # however old: a requested plan is waiting, not failed
    outcome = recover(table, config=CONFIG)
    assert outcome == type(outcome)((), ())
    [p] = pending_instants(table, CONFIG)
    assert (p.instant.timestamp, p.verdict, p.left_for_recovery) == (comp.timestamp, Verdict.PLAN_WAITING, False)
    assert p.render() == f"{comp.timestamp} compaction (requested): a plan waiting to be executed (not failed)"


def test_inflight_compaction_with_a_live_heartbeat_is_left_pending(tmp_path):
    clock = ManualClock()
    table = new_table(tmp_path / "t", clock)
    write_without_spark(table, five_digit_key_rows(range(0, 10), 2), "upsert", stage=2)
    clock.advance(1000)
    comp = table.timeline_writer.start(request_compaction(table))
    Heartbeat(table.storage, table.base_path, comp.timestamp, clock).beat()
    clock.advance(5000)
    [left] = recover(table, config=CONFIG).left_pending
    assert (left.instant.timestamp, left.action, left.verdict) == \
        (comp.timestamp, Action.COMPACTION, Verdict.HEARTBEAT_ALIVE)
    assert left.render().endswith("heartbeat alive: last beat 5.0 s ago, judged dead in 25.0 s")
    clock.advance(30_000)
    [res] = recover(table, config=CONFIG).results
    assert res.status is Status.DONE
    assert table.timeline().get(comp.timestamp).state is State.REQUESTED     # plan kept, not "left pending"
    assert recover(table, config=CONFIG).left_pending == ()


def test_rollback_running_elsewhere_is_left_pending_and_named(tmp_path):
    clock = ManualClock()
    table = new_table(tmp_path / "t", clock)
    t, _ = write_without_spark(table, five_digit_key_rows(range(0, 10), 2), "upsert", stage=2, complete=False)
    clock.advance(86_400_000)                      # the write died long ago
    settings = rb_executor._Settings.of(table, CONFIG)
    tl = table.timeline()
    r = rb_executor._request(table, t, plan_rollback(table, t), tl.files_of(t), tl.get(t), settings,
                             failed_only=False)
    clock.advance(2000)                            # another process runs R: its beat is 2 s old
    outcome = recover(table, config=CONFIG)
    assert outcome.results == ()
    [left] = outcome.left_pending
    assert (left.instant.timestamp, left.verdict, left.rollback) == (t, Verdict.ROLLBACK_RUNNING, r)
    assert left.render() == (f"{t} deltacommit (inflight): rollback {r.timestamp} of it is running: "
                             "last beat 2.0 s ago, judged dead in 28.0 s")
    assert left.as_dict()["rollback"] == r.timestamp
    clock.advance(30_000)                          # R's process died too: the sweep finishes R
    outcome = recover(table, config=CONFIG)
    assert [(x.instant, x.status) for x in outcome.results] == [(r.timestamp, Status.DONE)]
    assert outcome.left_pending == () and table.timeline().pending() == ()


def test_dry_run_reports_the_live_ones_and_would_roll_back_the_failed(tmp_path):
    clock = ManualClock()
    table = new_table(tmp_path / "t", clock)
    dead, _ = write_without_spark(table, five_digit_key_rows(range(0, 10), 2), "upsert", stage=2, complete=False)
    clock.advance(86_400_000)
    alive = live_write(table, stage=3)
    files = file_digests(table.base_path)
    outcome = recover(table, dry_run=True, config=CONFIG)
    assert [(r.status, r.metrics["target"]) for r in outcome.results] == [(Status.DRY_RUN, dead)]
    assert [p.instant.timestamp for p in outcome.left_pending] == [alive]
    assert file_digests(table.base_path) == files
    # the eager pass (a writer's start) and the sweep agree: only the dead write goes
    assert [r.metrics["target"] for r in rollback_failed(table, config=CONFIG)] == [dead]


# =============================================================================================
# --wait, on a clock the test moves
# =============================================================================================

def test_wait_rolls_back_once_the_heartbeat_expires(tmp_path):
    clock = ManualClock()
    table = new_table(tmp_path / "t", clock)
    before = rows_by_key(table.base_path, "uuid", "ts")
    t = live_write(table)
    slept: list[float] = []
    progress: list[tuple[int, list[str]]] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(int(seconds * 1000))

    outcome = wait_and_recover(table, timeout_ms=60_000, config=CONFIG, sleep=sleep, progress_every_ms=5000,
                               on_progress=lambda left, waited_ms, _timeout: progress.append(
                                   (waited_ms, [p.instant.timestamp for p in left])))
    assert [(r.status, r.metrics["target"]) for r in outcome.results] == [(Status.DONE, t)]
    assert outcome.left_pending == ()
    assert table.timeline().pending() == () and rows_by_key(table.base_path, "uuid", "ts") == before
    assert 30.0 <= sum(slept) <= 31.0              # no longer than the heartbeat needed
    assert max(slept) <= 5.0                       # a progress line every 5 s
    assert [w for w, _ in progress] == [0, 5000, 10000, 15000, 20000, 25000, 30000]
    assert all(ts == [t] for _, ts in progress)


def test_wait_gives_up_at_its_bound_with_the_same_report(tmp_path):
    clock = ManualClock()
    table = new_table(tmp_path / "t", clock)
    t = live_write(table)
    beat = Heartbeat(table.storage, table.base_path, t, clock)

    def sleep(seconds: float) -> None:           # the writer keeps beating: it never dies
        clock.advance(int(seconds * 1000))
        beat.beat()

    files = file_digests(table.base_path)
    outcome = wait_and_recover(table, timeout_ms=12_000, config=CONFIG, sleep=sleep)
    assert outcome.results == ()
    [left] = outcome.left_pending
    assert left.instant.timestamp == t and left.verdict is Verdict.HEARTBEAT_ALIVE
    assert clock.now_ms() - 1_700_000_000_000 >= 12_000
    assert {k for k in file_digests(table.base_path) if ".heartbeat" not in k} == \
        {k for k in files if ".heartbeat" not in k}


# =============================================================================================
# The CLI (system clock, real beats): lines, exit 3, --json, status
# =============================================================================================

def test_cli_reports_each_instant_left_pending_and_exits_3(tmp_path, capsys):
    table = new_table(tmp_path / "t", SystemClock())
    t = live_write(table)
    files = file_digests(table.base_path)

    code, out, err = cli(["rollback", table.base_path, *CONF_ARGS], capsys)
    assert code == 3, err
    [line] = out.splitlines()
    m = LINE.match(line)
    assert m and m.group(1) == t and m.group(2) == "deltacommit" and m.group(3) == "inflight", line
    assert re.fullmatch(r"heartbeat alive: last beat \d+\.\d s ago, judged dead in \d+\.\d s", m.group(4)), line
    [err_line] = err.splitlines()
    assert err_line.startswith("tablesvc: error: ") and t in err_line and "--wait" in err_line
    assert file_digests(table.base_path) == files

    code, out, _ = cli(["rollback", table.base_path, "--json", *CONF_ARGS], capsys)
    assert code == 3
    [item] = json.loads(out)
    assert item["status"] == "left_pending" and item["metrics"] == {"target": t}
    assert item["pending"]["instant"] == t and item["pending"]["verdict"] == "heartbeat_alive"
    assert item["reason"] == item["pending"]["reason"]
    assert file_digests(table.base_path) == files


def test_cli_dry_run_also_exits_3_for_a_live_instant(tmp_path, capsys):
    table = new_table(tmp_path / "t", SystemClock())
    t = live_write(table)
    code, out, err = cli(["rollback", table.base_path, "--dry-run", *CONF_ARGS], capsys)
    assert code == 3 and t in out and t in err


def test_cli_requested_plan_is_nothing_to_roll_back(tmp_path, capsys):
    table = new_table(tmp_path / "t", SystemClock())
    write_without_spark(table, five_digit_key_rows(range(0, 10), 2), "upsert", stage=2)
    request_compaction(table)
    code, out, err = cli(["rollback", table.base_path, *CONF_ARGS], capsys)
    assert (code, out, err) == (0, "nothing to roll back\n", "")


def test_cli_wait_with_a_short_heartbeat(tmp_path, capsys):
    table = new_table(tmp_path / "t", SystemClock())
    before = rows_by_key(table.base_path, "uuid", "ts")
    t = live_write(table)
    short = ["--conf", "hoodie.client.heartbeat.interval_in_ms=500", "--conf",
             "hoodie.client.heartbeat.tolerable.misses=2"]
    code, out, err = cli(["rollback", table.base_path, "--wait", "--timeout", "30", *short], capsys)
    assert code == 0, err
    assert [line.startswith("rollback: done") for line in out.splitlines()] == [True] and t in out
    assert table.timeline().pending() == () and rows_by_key(table.base_path, "uuid", "ts") == before


def test_cli_wait_times_out_with_exit_3(tmp_path, capsys):
    table = new_table(tmp_path / "t", SystemClock())
    t = live_write(table)
    code, out, err = cli(["rollback", table.base_path, "--wait", "--timeout", "1", *CONF_ARGS], capsys)
    assert code == 3
    assert LINE.match(out.splitlines()[-1]).group(1) == t
    progress = [line for line in err.splitlines() if line.startswith("waiting")]
    assert progress and t in progress[0]
    assert err.splitlines()[-1].startswith("tablesvc: error: ") and t in err.splitlines()[-1]
    assert table.timeline().get(t).state is State.INFLIGHT


@pytest.mark.parametrize("argv,word", [
    (["--timeout", "5"], "--wait"),
    (["--wait", "--instant", "20250101000000000"], "--instant"),
    (["--wait", "--dry-run"], "--dry-run"),
    (["--wait", "--timeout", "0"], "--timeout"),
])
def test_cli_refuses_bad_wait_options(tmp_path, capsys, argv, word):
    table = new_table(tmp_path / "t", SystemClock())
    code, out, err = cli(["rollback", table.base_path, *argv], capsys)
    assert code == 2 and word in err and len(err.splitlines()) == 1


def test_status_shows_the_same_verdicts(tmp_path, capsys):
    table = new_table(tmp_path / "t", SystemClock())
    write_without_spark(table, five_digit_key_rows(range(0, 10), 2), "upsert", stage=2)
    comp = request_compaction(table)
    t = live_write(table, stage=3)

    status = table_status(Table.open(table.base_path), CONFIG)
    by_instant = {p["instant"]: p for p in status["pending_instants"]}
    assert by_instant[comp.timestamp]["verdict"] == "plan_waiting"
    assert by_instant[t]["verdict"] == "heartbeat_alive" and by_instant[t]["rollback"] is None
    assert by_instant[t]["dead_in_s"] <= 30.0

    code, out, _ = cli(["status", table.base_path, "--json", *CONF_ARGS], capsys)
    assert code == 0
    assert {p["instant"]: p["verdict"] for p in json.loads(out)["pending_instants"]} == \
        {comp.timestamp: "plan_waiting", t: "heartbeat_alive"}
    code, out, _ = cli(["status", table.base_path, *CONF_ARGS], capsys)
    assert code == 0
    assert f"{comp.timestamp} compaction (requested): a plan waiting to be executed (not failed)" in out
    assert re.search(rf"{t} deltacommit \(inflight\): heartbeat alive: last beat \d+\.\d s ago", out), out
    # and the rollback it announces is what rollback does
    code, out, _ = cli(["rollback", table.base_path, "--json", *CONF_ARGS], capsys)
    assert code == 3 and [i["pending"]["instant"] for i in json.loads(out)] == [t]
