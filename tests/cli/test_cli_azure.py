"""The CLI on tables in Azure Blob storage (Azurite on loopback, fixture ``azure_endpoint``), the endpoint
and account given as a user gives them: ``--conf`` keys in object_store's ``azure_*`` names
(``azure_storage_endpoint``, ``azure_storage_account_name``, ``azure_storage_account_key``,
``azure_allow_http``), or the ``AZURE_*`` environment variables object_store reads.  Each service runs on
an ``az://`` copy of a table Apache Hudi wrote and on a local copy; hudi-rs must read the same rows from
both afterwards.  Last, processes racing for one instant time and for the table lock."""

from __future__ import annotations

import json
import os
import shutil
import uuid

import pytest
from azure_server import ACCOUNT_KEY, copy_table_to_azure
from process_race import RACE_CREATE, one_line, race

from fixture_tables import TABLES_DIR
from oracles.hudi_rs import read_table
from tablesvc.api import Table
from tablesvc.cli.main import main
from timeline.instant import Action

pytestmark = pytest.mark.azure

FIXTURE = "v8_trips_8i3u1d"


@pytest.fixture(autouse=True)
def no_cloud_environment(monkeypatch):
    """Only what a test passes (``--conf`` or the ``AZURE_*`` it sets) reaches the storage."""
    for name in list(os.environ):
        if name.startswith(("AWS_", "GOOGLE_", "AZURE_")):
            monkeypatch.delenv(name)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def copies(azure_endpoint, tmp_path, name: str = FIXTURE) -> tuple[str, str]:
    """The fixture table on Azure and on local files: (az:// URL, local folder)."""
    _, root = copy_table_to_azure(azure_endpoint, name, "cli")
    local = tmp_path / name
    shutil.copytree(TABLES_DIR / name, local)
    return root, str(local)


def hudi_rows(path: str, options: dict | None = None) -> list[dict]:
    """hudi-rs's snapshot, sorted by key, without the file name (a compaction's new base file is
    named by its own instant time, which differs between the two runs)."""
    table = read_table(path, storage_options=options)
    rows = table.to_pylist() if table is not None else []
    assert rows, f"hudi-rs read no rows from {path}"     # every table here has rows: empty == empty proves nothing
    return sorted(({k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in rows),
                  key=lambda r: (r["_hoodie_record_key"], r["_hoodie_partition_path"]))


def data_files(storage, root: str) -> list[str]:
    """Every file under ``root`` but the timeline's, relative."""
    from table_locations import files_under

    return sorted(p for p in files_under(storage, root) if not p.startswith(".hoodie/"))


def test_status_rollback_and_clean_on_azure_with_keys_from_conf_match_the_same_on_a_local_copy(
        azure_endpoint, capsys, tmp_path):
    from tablesvc.storage import LocalStorage, storage_for

    root, local = copies(azure_endpoint, tmp_path)
    conf = azure_endpoint.conf()
    rc, out, err = run(capsys, "status", root, "--json", *conf)
    assert rc == 0, err
    status = json.loads(out)
    assert status["table"] == root and status["version"] == 8
    assert status["delta_commits_since_last_compaction"] > 0
    rc, out, err = run(capsys, "timeline", root, *conf)
    assert rc == 0 and "deltacommit" in out, err
    assert hudi_rows(root, azure_endpoint.options()) == hudi_rows(local)

    # the latest write undone, then a clean keeping one commit: each under the storage-based lock on Azure
    latest = [i for i in Table.open(local).timeline().instants if i.is_completed][-1]
    assert latest.action is Action.DELTA_COMMIT
    steps = ((["rollback"], ["--instant", latest.timestamp, "--allow-completed", "--json"]),
             (["clean", "run"], ["--json", "--conf", "hoodie.cleaner.commits.retained=1"]))
    for command, rest in steps:
        rc, out, err = run(capsys, *command, root, *rest, *conf)
        assert rc == 0, err
        [on_azure] = json.loads(out)
        rc, out, err2 = run(capsys, *command, local, *rest)
        assert rc == 0, err2
        [on_local] = json.loads(out)
        assert on_azure["status"] == on_local["status"] == "done", (on_azure, on_local)
        assert on_azure["metrics"]["files_deleted"] == on_local["metrics"]["files_deleted"] > 0
        assert ACCOUNT_KEY not in out + err + json.dumps(on_azure)

    storage = storage_for(root, azure_endpoint.options())
    assert data_files(storage, root) == data_files(LocalStorage(), local)
    after = hudi_rows(root, azure_endpoint.options())
    assert after == hudi_rows(local) and after
    assert latest.timestamp not in {r["_hoodie_commit_time"] for r in after}      # its rows are gone
    lock = json.loads(storage.read_bytes(f"{root}/.hoodie/.locks/table_lock.json"))
    assert lock["expired"] is True                                                  # taken, then released
    timeline = Table.open(root, options=azure_endpoint.options()).timeline()
    assert timeline.completed(Action.ROLLBACK) and timeline.completed(Action.CLEAN)


def test_init_status_and_the_runner_with_the_account_from_azure_environment_variables(
        azure_endpoint, capsys, monkeypatch, tmp_path):
    for name, value in azure_endpoint.env().items():
        monkeypatch.setenv(name, value)
    fresh = azure_endpoint.url("cli", uuid.uuid4().hex, "new")
    rc, out, err = run(capsys, "init", fresh, "--name", "fresh", "--record-key", "id")
    assert rc == 0 and fresh in out, err
    rc, out, err = run(capsys, "status", fresh, "--json")
    assert rc == 0 and json.loads(out)["name"] == "fresh", err
    rc, out, err = run(capsys, "init", fresh, "--name", "again", "--record-key", "id")
    assert rc in (2, 3) and len(err.strip().splitlines()) == 1 and fresh in err, err

    root, local = copies(azure_endpoint, tmp_path)
    # everything from the environment, AZURE_ALLOW_HTTP included: the lock's own client (a per-call
    # bound, given as client options) must still allow the emulator's http:// endpoint
    rc, out, err = run(capsys, "run", root, "--once", "--json", "--conf", "hoodie.cleaner.commits.retained=1")
    assert rc == 0 and "error" not in err.lower(), err
    assert Table.open(root).timeline().completed(Action.CLEAN), out
    rc, out, err = run(capsys, "clean", "run", local, "--json", "--conf", "hoodie.cleaner.commits.retained=1")
    assert rc == 0, err
    assert hudi_rows(root) == hudi_rows(local)                   # hudi-rs too takes the AZURE_* variables


@pytest.mark.spark
def test_compaction_run_on_azure_with_keys_from_conf_matches_a_local_copy(azure_endpoint, spark, capsys, tmp_path):
    """Spark's tasks reach Azure with the options the driver was given (``ObjectStorage.for_tasks``)."""
    root, local = copies(azure_endpoint, tmp_path, "v6_trips_8i1u")
    before = hudi_rows(local)
    assert hudi_rows(root, azure_endpoint.options()) == before
    assert any(s.log_files for s in Table.open(root, options=azure_endpoint.options()).latest_file_slices())
    for path, extra in ((root, azure_endpoint.conf()), (local, [])):
        rc, out, err = run(capsys, "compaction", "run", path, "--json", "--quiet", *extra)
        assert rc == 0, err
        [result] = json.loads(out)
        assert result["status"] == "done", result
    table = Table.open(root, options=azure_endpoint.options())
    assert table.timeline().completed(Action.COMMIT)
    assert not any(s.log_files for s in table.latest_file_slices())
    assert hudi_rows(root, azure_endpoint.options()) == hudi_rows(local) == before


# -- races: real command lines in processes of their own, meeting at one moment (tests/process_race.py) --
def test_six_processes_scheduling_one_instant_time_on_azure_one_plan_is_written_the_rest_exit_3(azure_endpoint):
    storage, root = copy_table_to_azure(azure_endpoint, FIXTURE, "races")
    timeline_folder = f"{root}/.hoodie/timeline"
    before = set(storage.list_names(timeline_folder))
    instant = "20300101000000000"
    results = race([["compaction", "schedule", root, "--instant", instant, "--json", *azure_endpoint.conf()]] * 6)
    # as on S3 (tests/crash_model/test_s3_races.py): a loser whose turn at the lock comes after the
    # winner's finds the file group pinned by the plan (exit 0, nothing to do); one that loaded the
    # timeline before the winner's create is refused by the create (exit 3, naming the time)
    assert all(rc in (0, 3) for rc, _, _ in results), results
    done = [json.loads(out) for rc, out, _ in results if rc == 0]
    won = [d for d in done if d["status"] == "scheduled"]
    assert len(won) == 1 and won[0]["instant"] == instant, results
    assert all(d in won or (d["status"] == "nothing_to_do" and "pending compaction" in d["reason"]) for d in done)
    for rc, _, err in results:
        if rc == 3:
            line = one_line(err)
            assert instant in line and "exists" in line, line
    assert set(storage.list_names(timeline_folder)) - before == {f"{instant}.compaction.requested"}


def test_eight_processes_creating_one_instant_file_on_azure_one_wins_and_keeps_its_bytes(azure_endpoint):
    """What the timeline's create of an instant file rests on, decided by Azure's ``If-None-Match: *``
    across processes: one create wins, the other seven exit 3, the blob holds the winner's bytes."""
    from tablesvc.storage import storage_for

    path = azure_endpoint.url("races", uuid.uuid4().hex, ".hoodie", "timeline", "20300101000000000.commit.requested")
    options = json.dumps(azure_endpoint.options())
    results = race([[path, options, f"writer-{n}"] for n in range(8)], code=RACE_CREATE, lead_s=2.0)
    codes = [rc for rc, _, _ in results]
    assert sorted(codes) == [0] + [3] * 7, results
    assert storage_for(path, azure_endpoint.options()).read_bytes(path) == f"writer-{codes.index(0)}".encode()


def test_commands_against_a_lock_another_owner_holds_on_azure_exit_3_naming_it_and_change_nothing(
        azure_endpoint, capsys):
    from timeline.storage_lock import StorageLock, lock_object_path

    storage, root = copy_table_to_azure(azure_endpoint, FIXTURE, "races")
    storage.write_new(f"{root}/.hoodie/tablesvc.yaml", b"hoodie.write.lock.wait_time_ms: 1500\n")
    timeline_folder = f"{root}/.hoodie/timeline"
    before = sorted(storage.list_names(timeline_folder))
    retain = ["--conf", "hoodie.cleaner.commits.retained=1"]      # a clean with work to do: it locks
    commands = [["compaction", "schedule", root], ["clean", "run", root, *retain],
                ["logcompaction", "schedule", root, "--force"]] * 2
    with StorageLock(storage, root, wait_ms=0, validity_ms=300_000, renew_ms=0, owner="java-writer-9"):
        results = race([[*argv, *azure_endpoint.conf()] for argv in commands], lead_s=3.0)
    for (rc, out, err), argv in zip(results, commands):
        assert rc == 3, (argv, rc, out, err)
        line = one_line(err)
        assert lock_object_path(root) in line and "java-writer-9" in line, line
    assert sorted(storage.list_names(timeline_folder)) == before
    rc, out, err = run(capsys, "clean", "run", root, "--json", *retain, *azure_endpoint.conf())
    assert rc == 0 and json.loads(out)[0]["status"] == "done", err    # released: the next one goes through
