"""Scheduling on a table whose latest completed commit cannot be decoded (issue #24, item 7).

A compaction or log compaction plan is executed with the table schema of the latest completed
write (its commit metadata): a plan scheduled over a commit file that holds garbage could never
run.  So scheduling refuses, naming the file, and writes nothing (exit 2, as every undecodable
timeline payload is: docs/cli.md).  The cleaner's plan does not depend on that payload (which
files go follows from the timeline's completed instants and the listing), so a clean that is
due plans the same files with or without the damage.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from table_builders import compact_by_hand, tree, update_five_records
from tablesvc.cli.main import main
from tablesvc.config import build_config
from tablesvc.demo.sample_table import build_sample_table
from tablesvc.services.clean import plan_clean
from tablesvc.api import Table


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("damaged-commit")
    out = {}
    for version in (6, 8):
        table = build_sample_table(str(root / f"v{version}"), rows=60, table_version=version).table
        compact_by_hand(table)
        update_five_records(table, sorted(table.latest_file_slices(), key=lambda s: s.partition)[0], 1.5)
        out[version] = root / f"v{version}"
    return out


def damage_latest_commit(path: Path) -> str:
    """Garbage in the latest completed write's file; returns its name."""
    table = Table.open(str(path))
    latest = table.timeline().completed_writes()[-1]
    file = Path(table.timeline().path_of(latest))
    file.write_bytes(b"\x07this is not commit metadata\x00")
    return file.name


@pytest.fixture
def no_spark(monkeypatch):
    import tablesvc.spark.session as session

    def tripwire(*_a, **_k):
        raise AssertionError("Spark was started although scheduling should have refused first")
    monkeypatch.setattr(session, "get_spark", tripwire)


@pytest.mark.parametrize("version", [6, 8])
@pytest.mark.parametrize("argv", [["compaction", "schedule"], ["compaction", "run"],
                                  ["logcompaction", "schedule", "--force"], ["logcompaction", "run"]])
def test_scheduling_over_an_undecodable_latest_commit_is_refused_and_writes_nothing(tables, tmp_path, capsys,
                                                                                   no_spark, version, argv):
    path = tmp_path / "t"
    shutil.copytree(tables[version], path)
    name = damage_latest_commit(path)
    before = tree(path)
    code = main([*argv[:2], str(path), *argv[2:]])
    out, err = capsys.readouterr()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (out, err)
    assert name in err, err
    assert tree(path) == before     # no plan, no lock left, nothing else


@pytest.mark.parametrize("version", [6, 8])
def test_a_due_clean_plans_the_same_files_whether_or_not_the_latest_commit_decodes(tables, tmp_path, version):
    config = build_config(conf={"hoodie.cleaner.commits.retained": "1"})
    intact = tmp_path / "intact"
    shutil.copytree(tables[version], intact)
    damaged = tmp_path / "damaged"
    shutil.copytree(tables[version], damaged)
    damage_latest_commit(damaged)

    def planned(path: Path) -> set[str]:
        plan = plan_clean(Table.open(str(path)), config).plan
        assert plan is not None
        return {f.replace(str(path), "") for files in plan.files_to_delete().values() for f in files}

    assert planned(damaged) == planned(intact) != set()
