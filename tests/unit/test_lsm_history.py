"""The LSM history of table versions 8 and 9 (``timeline/history.py``; docs/file-system-view.md,
"Archived instants"), on tables Apache Hudi 1.2.0 wrote and archived itself
(tests/data/hudi/history/, made by tests/interop_java/make_history_fixtures.py).

The expectations beside each table were written down from Java's own files before Java archived
the instants (every completion time from the active timeline's file names) and from Java's read at
the end; tablesvc's answers are compared with them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fixture_tables import HISTORY_FIXTURES_DIR
from helpers import one_error_line, tablesvc
from oracles.hudi_rs import sorted_rows

from tablesvc.api import Table
from tablesvc.demo.hudi_tables import unzip_table
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.storage import storage_for
from timeline.errors import InvalidInputError
from timeline.history import ArchivedCompletionTimes, HistoryError, forget_history, history_folder, manifest_files

NAMES = sorted(p.stem for p in HISTORY_FIXTURES_DIR.glob("*.zip"))


def test_the_history_fixtures_are_carried():
    assert {"history_v8", "inflight_v8", "history_v9", "inflight_v9"} <= set(NAMES), NAMES


def unzipped(name: str, tmp_path: Path) -> tuple[Path, dict]:
    path = unzip_table(HISTORY_FIXTURES_DIR / f"{name}.zip", tmp_path)
    forget_history()        # the process keeps what it read per folder; each test starts clean
    return path, json.loads((HISTORY_FIXTURES_DIR / f"{name}.json").read_text())


def history_reader(path: Path) -> ArchivedCompletionTimes:
    return ArchivedCompletionTimes(storage_for(str(path)), str(path))


def rows_of(table: Table) -> list[list]:
    """(id, ts, part, val) of every row tablesvc's merge reads in the latest slices, sorted."""
    ctx = ReadContext.for_table(table)
    out = []
    for s in table.latest_file_slices():
        out += read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx).to_pylist()
    return sorted([r["id"], r["ts"], r["part"], r["val"]] for r in out)


@pytest.mark.parametrize("name", NAMES)
def test_completion_times_of_archived_instants_are_the_ones_java_recorded(name, tmp_path):
    path, expected = unzipped(name, tmp_path)
    archived = expected["archived"]
    assert len(archived) >= 3
    assert any(expected["completion_times"][t][0] == "deltacommit" for t in archived)
    reader = history_reader(path)
    assert reader.files_read == frozenset()                   # lazy: nothing read yet
    got = reader.completion_times(archived)
    assert got == {t: expected["completion_times"][t][1] for t in archived}
    # an instant still on the active timeline is not in the history
    active = sorted(set(expected["completion_times"]) - set(archived))
    assert reader.completion_times(active) == {}


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("history_")])
def test_only_the_files_whose_name_range_holds_the_instant_are_read(name, tmp_path):
    path, expected = unzipped(name, tmp_path)
    files = manifest_files(storage_for(str(path)), history_folder(str(path)))
    assert len({f.layer for f in files}) >= 2, f"{name}: the history has one layer only: {files}"
    newest = expected["archived"][-1]
    reader = history_reader(path)
    assert reader.completion_time(newest) == expected["completion_times"][newest][1]
    holding = {f.name for f in files if f.may_hold(newest)}
    assert reader.files_read == holding and len(holding) < len(files)


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("history_")])
def test_a_file_the_latest_manifest_does_not_list_is_ignored(name, tmp_path):
    path, expected = unzipped(name, tmp_path)
    folder = Path(history_folder(str(path)))
    listed = {f.name for f in manifest_files(storage_for(str(path)), str(folder))}
    stale = sorted(p for p in folder.glob("*.parquet") if p.name not in listed)
    assert stale, f"{name}: every parquet file is in the latest manifest (no LSM compaction left one behind)"
    for p in stale:
        p.write_bytes(b"not parquet at all")       # it would fail to read if it were read
    archived = expected["archived"]
    assert history_reader(path).completion_times(archived) == \
        {t: expected["completion_times"][t][1] for t in archived}


def test_an_unreadable_version_file_falls_back_to_the_highest_manifest(tmp_path):
    path, expected = unzipped("history_v8", tmp_path)
    folder = Path(history_folder(str(path)))
    (folder / "_version_").write_text("garbage")
    t = expected["archived"][0]
    assert history_reader(path).completion_time(t) == expected["completion_times"][t][1]


def damaged(tmp_path: Path, how: str) -> tuple[Path, dict, str]:
    """inflight_v8 (its one history file holds the archived delta commit D) damaged ``how``;
    returns the table, its expectations and the file named in the error."""
    path, expected = unzipped("inflight_v8", tmp_path)
    folder = Path(history_folder(str(path)))
    version = (folder / "_version_").read_text().strip()
    manifest = folder / f"manifest_{version}"
    data = folder / json.loads(manifest.read_text())["files"][0]["fileName"]
    if how == "missing manifest":
        manifest.unlink()
        return path, expected, str(manifest)
    if how == "bad manifest":
        manifest.write_text("{not json")
        return path, expected, str(manifest)
    if how == "missing file":
        data.unlink()
    elif how == "corrupt parquet":
        data.write_bytes(data.read_bytes()[: len(data.read_bytes()) // 2])
    return path, expected, str(data)


@pytest.mark.parametrize("how", ["missing manifest", "bad manifest", "missing file", "corrupt parquet"])
def test_a_damaged_history_is_one_error_naming_the_file(how, tmp_path):
    path, expected, named = damaged(tmp_path, how)
    d = expected["in_flight"]["delta_commit"]
    with pytest.raises(HistoryError) as err:
        history_reader(path).completion_time(d)
    assert named in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, InvalidInputError) and err.value.exit_code == 2
    # the view needs D's completion time (its log's slice): the same error
    forget_history()
    with pytest.raises(HistoryError, match=named.replace("/", ".")):
        Table.open(str(path)).latest_file_slices()


def test_a_table_without_a_history_reads_nothing_and_is_no_error(tmp_path):
    path, expected = unzipped("history_v8", tmp_path)
    shutil.rmtree(history_folder(str(path)))
    assert history_reader(path).completion_times(expected["archived"]) == {}


@pytest.mark.parametrize("name", NAMES)
def test_tablesvc_reads_what_java_read(name, tmp_path):
    path, expected = unzipped(name, tmp_path)
    assert expected["rows"] == expected["model"]
    assert rows_of(Table.open(str(path))) == expected["rows"]


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("inflight_")])
def test_an_archived_delta_commit_in_flight_at_a_compaction_joins_the_compactions_slice(name, tmp_path):
    """D was requested before the compaction C and completed after C was requested, then archived:
    Java's view puts D's log into C's slice by D's completion time, which only the history has."""
    path, expected = unzipped(name, tmp_path)
    d, c, d_done = (expected["in_flight"][k] for k in ("delta_commit", "compaction", "delta_commit_completed"))
    assert d < c < d_done and d in expected["archived"]
    table = Table.open(str(path))
    timeline = table.timeline()
    assert timeline.get(d) is None and timeline.start > d
    holding = [s for s in table.latest_file_slices() if any(lf.name.instant == d for lf in s.log_files)]
    assert [s.base_instant for s in holding] == [c], [(s.base_instant, s.log_files) for s in holding]


@pytest.mark.parametrize("how", ["missing manifest", "corrupt parquet"])
def test_the_cli_exits_2_with_one_line_naming_the_damaged_history_file(how, tmp_path):
    path, _, named = damaged(tmp_path, how)
    proc = tablesvc("fsview", str(path))
    assert proc.returncode == 2, proc.stderr
    assert named in one_error_line(proc)


@pytest.mark.parametrize("name", NAMES)
def test_hudi_rs_reads_without_the_history(name, tmp_path):
    """hudi-rs 0.5.0 reads no history (a finding, pinned here so that a hudi-rs that reads it shows
    up).  On the history tables the logs of archived delta commits come after their slice's base
    instant, and hudi-rs reads them there, as Java does.  On the in-flight tables D's instant is
    before C's and the slice before C was cleaned: hudi-rs reads C's slice without D's log and loses
    D's records (they read as before D)."""
    path, expected = unzipped(name, tmp_path)
    got = [list(r) for r in sorted_rows(path, ("id", "ts", "part", "val"))]
    if name.startswith("history_"):
        assert got == expected["rows"]
        return
    d_vals = {r[0] for r in expected["rows"] if r[3].startswith("d")}
    assert len(d_vals) == 3
    assert [r for r in got if r[0] not in d_vals] == [r for r in expected["rows"] if r[0] not in d_vals]
    assert not any(r[3].startswith("d") for r in got), got
