"""What a commit decides about the metadata table (MDT) under its lock, and what a rollback and a
drop check before they change anything (docs/metadata-table.md, "Writing" and "Refusals and
opt-outs").

* The commit re-reads ``hoodie.properties``: a table that gained a partition tablesvc does not keep
  between ``Table.open`` and the commit is refused (exit 2), one that gained the MDT gets the
  MDT's delta commit, and a pending ``indexing`` instant refuses (exit 3); nothing commits.
* A rollback of an instant whose MDT delta commit a later MDT compaction or log compaction holds is
  refused before the rollback is requested: no data file is deleted, no rollback instant exists.
* Drops take completed partitions only; an inflight partition tablesvc does not keep refuses, and
  the whole MDT is not deleted while a partition is inflight.
* ``hoodie.metadata.enable=false`` from ``.hoodie/tablesvc.yaml`` never drops; a changing command
  is refused naming the key to pass on the command.

Oracles: the Java-written fixtures' own timelines and files (a digest of the tree before and after),
hudi-rs's rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from oracles.hudi_rs import read_rows

from fixture_tables import copy_table
from metadata_tables import keep_only_files_partition
from table_builders import tree
from tablesvc.api import Table
from tablesvc.config import build_config
from tablesvc.errors import ConflictError, UnsupportedTableError
from tablesvc.metadata import MetadataTable
from tablesvc.services.metadata_drops import drop_opted_out_partitions
from tablesvc.table.metadata_opt_outs import MetadataOptOuts
from tablesvc.table.properties import read_properties, write_properties
from tablesvc.table.writable import CLEAN, COMPACT, require_writable
from timeline.instant import Action, State

SIMPLE = "zips:mor_avro_v9_txns_simple_meta"
CLEAN_OPTIONS = {"hoodie.cleaner.commits.retained": 1}


@pytest.fixture
def copy_of(fixture_root, tmp_path):
    def make(name: str) -> Path:
        return copy_table(fixture_root.path(name), tmp_path / name.replace(":", "_"))
    return make


def _set_props(path: Path, **changes: str) -> None:
    storage = Table.open(str(path)).storage
    props = read_properties(storage, str(path))
    props.update({k.replace("_", "."): v for k, v in changes.items()})
    write_properties(storage, str(path), props)


def _partitions(path: Path, completed: str, inflight: str = "") -> None:
    storage = Table.open(str(path)).storage
    props = read_properties(storage, str(path))
    props["hoodie.table.metadata.partitions"] = completed
    props["hoodie.table.metadata.partitions.inflight"] = inflight
    write_properties(storage, str(path), props)


def _clean_state(table: Table) -> dict:
    timeline = table.timeline()
    return {i.timestamp: i.state for i in timeline.instants if i.action.completed_action is Action.CLEAN}


def _mdt_delta_commits(table: Table) -> set[str]:
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    return {i.timestamp for i in mdt.timeline.completed(Action.DELTA_COMMIT)}


# -- 1. the commit decides from the properties it reads under its lock -------------------------------------
def test_a_partition_added_after_open_refuses_the_commit(copy_of):
    path = copy_of(SIMPLE)
    keep_only_files_partition(path)
    table = Table.open(str(path))                       # files only: a clean may go ahead
    mdt_before = _mdt_delta_commits(table)
    cleans_before = {t for t, s in _clean_state(table).items() if s is State.COMPLETED}
    # a Java writer initialises bloom filters meanwhile (a clean would leave them stale)
    _partitions(path, "bloom_filters,files")
    with pytest.raises(UnsupportedTableError) as refused:
        table.clean(options=CLEAN_OPTIONS)
    message = str(refused.value)
    assert refused.value.exit_code == 2 and "\n" not in message
    assert "bloom_filters" in message and "found when committing" in message
    fresh = Table.open(str(path))
    assert {t for t, s in _clean_state(fresh).items() if s is State.COMPLETED} == cleans_before
    assert _mdt_delta_commits(fresh) == mdt_before     # no MDT delta commit for the refused clean


def test_a_metadata_table_initialised_after_open_gets_the_commits_delta_commit(copy_of):
    path = copy_of(SIMPLE)
    keep_only_files_partition(path)
    _partitions(path, "")                               # no partition listed: readers list storage
    table = Table.open(str(path))
    assert not table.config.has_metadata_table
    rows = sorted(map(repr, read_rows(path)))           # hudi-rs lists storage
    _partitions(path, "files")                          # Java (re)initialises files meanwhile
    [result] = table.clean(options=CLEAN_OPTIONS)
    assert result.metrics.files_deleted > 0
    fresh = Table.open(str(path))
    assert result.instant in _mdt_delta_commits(fresh)  # decided from the properties read at commit
    assert sorted(map(repr, read_rows(path))) == rows   # hudi-rs lists through files: the deletions are in it


def test_a_pending_indexing_instant_refuses_the_commit_retry_later(copy_of):
    path = copy_of(SIMPLE)
    keep_only_files_partition(path)
    table = Table.open(str(path))
    timeline_dir = path / ".hoodie" / "timeline"
    later = max(p.name.split(".")[0].split("_")[0] for p in timeline_dir.iterdir() if p.is_file())
    indexing = str(int(later) + 1)
    (timeline_dir / f"{indexing}.indexing.inflight").write_bytes(b"")
    with pytest.raises(ConflictError) as refused:
        table.clean(options=CLEAN_OPTIONS)
    assert refused.value.exit_code == 3 and f"indexing {indexing} is pending" in str(refused.value)
    assert "retry later" in str(refused.value)
    [left] = [t for t, s in _clean_state(Table.open(str(path))).items() if s is not State.COMPLETED]
    assert left not in _mdt_delta_commits(Table.open(str(path)))
    (timeline_dir / f"{indexing}.indexing.inflight").unlink()
    # the indexer gone, the clean (left inflight) resumes and completes, its MDT delta commit first
    Table.open(str(path)).clean(options=CLEAN_OPTIONS)
    assert _clean_state(Table.open(str(path)))[left] is State.COMPLETED
    assert left in _mdt_delta_commits(Table.open(str(path)))


# -- 3. a rollback whose MDT delta commit is held refuses before anything changes --------------------------
@pytest.mark.parametrize("holder", ["logcompaction.requested", "compaction.requested"])
def test_a_rollback_whose_delta_commit_a_later_mdt_compaction_holds_changes_nothing(copy_of, holder):
    path = copy_of("v9_nonpartitioned_rollback")        # its latest write has no later instant
    table = Table.open(str(path))
    latest = table.timeline().completed_writes()[-1]
    mdt_timeline = path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    done = [p.name for p in mdt_timeline.iterdir() if p.name.startswith(f"{latest.timestamp}_")]
    assert done, "the fixture's latest write has an MDT delta commit"
    completion = done[0].split("_")[1].split(".")[0]
    (mdt_timeline / f"{int(completion) + 1}.{holder}").write_bytes(b"")
    before = tree(path)
    for dry_run in (True, False):
        with pytest.raises(UnsupportedTableError) as refused:
            table.rollback(latest.timestamp, allow_completed=True, dry_run=dry_run)
        kind = "log compaction" if holder.startswith("log") else "compaction"
        assert refused.value.exit_code == 2 and "\n" not in str(refused.value)
        assert f"cannot roll back {latest.timestamp}" in str(refused.value)
        assert f"its {kind} {int(completion) + 1} already holds it" in str(refused.value)
        assert tree(path) == before                      # no R requested, no data file deleted


# -- 5. drops: completed partitions only ------------------------------------------------------------------
def test_an_inflight_partition_is_never_dropped_and_refuses_if_not_kept(copy_of):
    path = copy_of(SIMPLE)
    keep_only_files_partition(path)
    _partitions(path, "column_stats,files", inflight="record_index")
    before = tree(path)
    conf = {"hoodie.metadata.record.index.enable": "false", "hoodie.metadata.index.column.stats.enable": "false"}
    # the record index (inflight) stays; a clean leaves it true, so the clean may go on once
    # column_stats (completed) is dropped
    result = drop_opted_out_partitions(Table.open(str(path)), CLEAN, conf)
    assert result.reason.startswith("dropped column_stats (")
    props = read_properties(Table.open(str(path)).storage, str(path))
    assert props["hoodie.table.metadata.partitions"] == "files"
    assert props["hoodie.table.metadata.partitions.inflight"] == "record_index"
    # an inflight bloom_filters (not kept, a compaction leaves it stale) refuses; nothing dropped
    _partitions(path, "column_stats,files", inflight="bloom_filters")
    before = tree(path)
    table = Table.open(str(path))
    assert drop_opted_out_partitions(table, COMPACT, {"hoodie.metadata.index.bloom.filter.enable": "false"}) is None
    with pytest.raises(UnsupportedTableError) as refused:
        require_writable(table, COMPACT)
    assert "bloom_filters" in str(refused.value) and tree(path) == before


def test_the_whole_metadata_table_is_not_deleted_while_a_partition_is_inflight(copy_of):
    path = copy_of(SIMPLE)
    keep_only_files_partition(path)
    _partitions(path, "files", inflight="column_stats")
    before = tree(path)
    with pytest.raises(UnsupportedTableError) as refused:
        drop_opted_out_partitions(Table.open(str(path)), CLEAN, {"hoodie.metadata.enable": "false"})
    assert "partitions.inflight lists column_stats" in str(refused.value) and tree(path) == before


# -- 2. the table file's hoodie.metadata.enable=false never drops ------------------------------------------
def test_the_table_files_enable_false_is_not_an_opt_out():
    table_yaml = "hoodie.metadata.enable: false\nhoodie.metadata.index.column.stats.enable: false\n"
    from_file = build_config(table_yaml=table_yaml, table_yaml_where="/t/.hoodie/tablesvc.yaml")
    assert from_file.get("hoodie.metadata.enable") is False          # still read: reads list storage
    assert not MetadataOptOuts.of(from_file)
    on_command = build_config(table_yaml=table_yaml, table_yaml_where="/t/.hoodie/tablesvc.yaml",
                              conf={"hoodie.metadata.enable": "false"})
    assert MetadataOptOuts.of(on_command).whole
    assert MetadataOptOuts.of(build_config(yaml_text="hoodie.metadata.enable: false", yaml_where="c.yaml")).whole


def test_the_table_files_enable_false_refuses_a_changing_command(copy_of):
    path = copy_of(SIMPLE)
    (path / ".hoodie" / "tablesvc.yaml").write_text("hoodie.metadata.enable: false\n")
    before = tree(path)
    table = Table.open(str(path))
    for call in (lambda: drop_opted_out_partitions(table, CLEAN), lambda: table.clean(options=CLEAN_OPTIONS)):
        with pytest.raises(UnsupportedTableError) as refused:
            call()
        assert refused.value.exit_code == 2 and "\n" not in str(refused.value)
        assert "pass --conf hoodie.metadata.enable=false on the command" in str(refused.value)
        assert tree(path) == before
    # the Python API's options are the command's own: they drop
    [dropped, _clean] = Table.open(str(path)).clean(options={**CLEAN_OPTIONS, "hoodie.metadata.enable": "false"})
    assert dropped.reason.startswith("dropped the metadata table")


# -- 7. enable=true in hoodie.properties without files -----------------------------------------------------
def test_metadata_enable_true_without_files_listed_is_refused(copy_of):
    path = copy_of(SIMPLE)
    keep_only_files_partition(path)
    _partitions(path, "")
    _set_props(path, hoodie_metadata_enable="true")
    before = tree(path)
    with pytest.raises(UnsupportedTableError) as refused:
        Table.open(str(path)).clean(options=CLEAN_OPTIONS)
    assert "hoodie.metadata.enable=true but hoodie.table.metadata.partitions does not list files" in str(refused.value)
    assert tree(path) == before


# -- 9. rolling back a completed MDT delta commit under the lock lists only the folders it wrote to --------
# (its plan comes from its write stats; the folders T wrote to are listed once, for partial copies a
# killed create left there, as the data rollback discards them)
def test_a_completed_delta_commits_logs_come_from_its_write_stats(copy_of):
    from tablesvc.metadata.writer import MetadataTableWriter
    from tablesvc.storage import LocalStorage

    class Counting(LocalStorage):
        listed: list[str] = []

        def list_names(self, path):
            self.listed.append(path)
            return super().list_names(path)

    path = copy_of("v9_nonpartitioned_rollback")
    table = Table.open(str(path), storage=Counting())
    mdt = MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)
    latest = [i for i in mdt.timeline().completed(Action.DELTA_COMMIT)][-1]
    logs = sorted((path / ".hoodie" / "metadata").rglob(f".*_{latest.timestamp}.log.*"))
    written = {str(p.parent) for p in logs}
    partitions = {str(p) for p in (path / ".hoodie" / "metadata").iterdir() if p.is_dir() and p.name != ".hoodie"}
    assert logs and written <= partitions
    Counting.listed.clear()
    from tablesvc.metadata.mdt_rollback import new_instant_time, rollback_delta_commit
    assert rollback_delta_commit(mdt, latest.timestamp, new_instant_time(mdt)) is not None
    listed = [p for p in Counting.listed if "/.hoodie/metadata/" in p and "/.hoodie/metadata/.hoodie" not in p]
    assert set(listed) <= written and len(listed) == len(set(listed)), listed
    assert not list((path / ".hoodie" / "metadata").rglob(f".*_{latest.timestamp}.log.*"))
