"""Races on a table in S3 (moto, fixture ``s3_endpoint``): many processes at once, each a real
``tablesvc`` command line (its ``main``, imported first so that every process reaches the race at
the same moment, ``RACE_AT``), or a bare ``ObjectStorage.write_new``.

* One instant time asked for by 6 ``compaction schedule --instant T`` at once: exactly one plan is
  written, every other command exits 3 with one line naming T.
* One instant file created by 8 processes at once (``If-None-Match: *``): one create wins, the
  others get ``FileExistsError``, the object holds the winner's bytes.
* 6 commands that take the table lock (the storage-based lock, docs/storage.md) at once: the lock
  waits (``hoodie.write.lock.wait_time_ms``), so every one succeeds, one after the other; the new
  instants have distinct, increasing times, the lock object ends released, hudi-rs reads the rows
  it read before.
* The same commands against a lock held by another owner past their wait: exit 3, one line naming
  the lock object and its owner, the timeline unchanged.
"""

from __future__ import annotations

import json
import uuid

import pytest
from process_race import RACE_CREATE, one_line, race
from s3_server import copy_table_to_s3

from tablesvc.storage import storage_for

pytestmark = pytest.mark.s3

FIXTURE = "v8_trips_8i3u1d"
RACERS = 6
def timeline_names(storage, root: str) -> list[str]:
    return sorted(storage.list_names(f"{root}/.hoodie/timeline"))


def rows(s3_endpoint, root: str) -> list[tuple]:
    from oracles.hudi_rs import read_table

    table = read_table(root, storage_options=s3_endpoint.options())
    return sorted((r["_hoodie_record_key"], r["_hoodie_partition_path"], r["_hoodie_commit_time"])
                  for r in table.to_pylist())


def test_six_schedules_of_one_instant_time_write_one_plan_and_the_rest_exit_3_naming_it(s3_endpoint):
    from tablesvc.api import Table

    storage, root = copy_table_to_s3(s3_endpoint, FIXTURE, "races")
    before_names, before_rows = timeline_names(storage, root), rows(s3_endpoint, root)
    instant = "20300101000000000"     # later than every time on the fixture's timeline
    results = race([["compaction", "schedule", root, "--instant", instant, "--json", *s3_endpoint.s3a_conf()]
                    for _ in range(RACERS)])
    # the plan is built under the lock before the time is checked: a loser that gets the lock after
    # the winner finds the table's one file group with logs pinned by the plan (nothing to do, exit 0);
    # one whose load came before the winner's create is refused by the create (exit 3, naming T)
    assert all(rc in (0, 3) for rc, _, _ in results), results
    done = [json.loads(out) for rc, out, _ in results if rc == 0]
    won = [d for d in done if d["status"] == "scheduled"]
    assert len(won) == 1 and won[0]["instant"] == instant, results
    for d in done:
        assert d in won or (d["status"] == "nothing_to_do" and "pending compaction" in d["reason"]), d
    for rc, _, err in results:
        if rc == 3:
            line = one_line(err)
            assert instant in line and "exists" in line, line
    after = timeline_names(storage, root)
    assert sorted(set(after) - set(before_names)) == [f"{instant}.compaction.requested"]
    assert set(before_names) <= set(after)
    timeline = Table.open(root, options=s3_endpoint.options()).timeline()
    assert [i.timestamp for i in timeline.instants if not i.is_completed] == [instant]
    assert rows(s3_endpoint, root) == before_rows      # a plan changes no row hudi-rs reads


def test_eight_processes_creating_one_instant_file_one_wins_and_keeps_its_bytes(s3_endpoint):
    storage = storage_for(s3_endpoint.url("races"), s3_endpoint.options())
    path = s3_endpoint.url("races", uuid.uuid4().hex, ".hoodie", "timeline", "20300101000000000.commit.requested")
    results = race([[path, json.dumps(s3_endpoint.options()), f"writer-{n}"] for n in range(8)], code=RACE_CREATE,
                   lead_s=2.0)
    codes = [rc for rc, _, _ in results]
    assert sorted(codes) == [0] + [3] * 7, results
    assert storage.read_bytes(path) == f"writer-{codes.index(0)}".encode()


def test_six_commands_taking_the_table_lock_at_once_wait_for_it_and_all_succeed_in_turn(s3_endpoint):
    from tablesvc.api import Table
    from timeline.storage_lock import StorageLockData, lock_object_path

    storage, root = copy_table_to_s3(s3_endpoint, FIXTURE, "races")
    # a wait no busy machine outlasts (the default 30 s is the documented bound, not what is tested here)
    storage.write_new(f"{root}/.hoodie/tablesvc.yaml", b"hoodie.write.lock.wait_time_ms: 300000\n")
    before_names, before_rows = timeline_names(storage, root), rows(s3_endpoint, root)
    conf = s3_endpoint.s3a_conf(**{"hoodie.cleaner.commits.retained": "1"})   # the fixture has files to clean
    commands = [["compaction", "schedule", root, "--json"], ["clean", "run", root, "--json"],
                ["logcompaction", "schedule", root, "--force", "--json"]] * 2
    results = race([[*argv, *conf] for argv in commands])
    for (rc, out, err), argv in zip(results, commands):
        assert rc == 0 and not err.strip(), (argv, rc, out, err)
    outcomes = [json.loads(out) for _, out, _ in results]
    outcomes = [o for x in outcomes for o in (x if isinstance(x, list) else [x])]
    new = [o["instant"] for o in outcomes if o["status"] in ("scheduled", "done")]
    # a clean and at least one plan get done (which plans, depends on the order the lock went round);
    # the others find the work done or pinned (nothing to do); every holder chose its own time
    assert len(new) == len(set(new)) >= 2, outcomes
    added = sorted({n.split(".", 1)[0].split("_", 1)[0] for n in set(timeline_names(storage, root)) - set(before_names)})
    assert added == sorted(new), (added, outcomes)
    assert max(n.split(".", 1)[0].split("_", 1)[0] for n in before_names) < min(added)
    lock = StorageLockData.parse(storage.read_bytes(lock_object_path(root)))
    assert lock is not None and lock.expired          # the last holder released it
    Table.open(root, options=s3_endpoint.options()).timeline()      # every instant file parses
    assert rows(s3_endpoint, root) == before_rows     # plans and a clean change no row


def test_commands_against_a_lock_held_past_their_wait_exit_3_naming_the_lock_and_its_owner(s3_endpoint):
    from timeline.storage_lock import StorageLock, lock_object_path

    storage, root = copy_table_to_s3(s3_endpoint, FIXTURE, "races")
    # lock settings come from the table's own config, which every process on the table reads
    storage.write_new(f"{root}/.hoodie/tablesvc.yaml", b"hoodie.write.lock.wait_time_ms: 1500\n")
    before_names = timeline_names(storage, root)
    conf = s3_endpoint.s3a_conf(**{"hoodie.cleaner.commits.retained": "1"})   # a clean with work: it locks
    commands = [["compaction", "schedule", root], ["clean", "run", root],
                ["logcompaction", "schedule", root, "--force"]] * 2
    holder = StorageLock(storage, root, wait_ms=0, validity_ms=300_000, renew_ms=0, owner="java-writer-7")
    with holder:
        results = race([[*argv, *conf] for argv in commands], lead_s=3.0)
    for (rc, out, err), argv in zip(results, commands):
        assert rc == 3, (argv, rc, out, err)
        line = one_line(err)
        assert lock_object_path(root) in line and "java-writer-7" in line, line
    assert timeline_names(storage, root) == before_names
    # released: the next command goes through
    results = race([["compaction", "schedule", root, *conf]], lead_s=0.0)
    assert results[0][0] == 0, results
