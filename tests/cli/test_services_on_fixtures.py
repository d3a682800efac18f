"""Table services on the tables Apache Hudi wrote (tests/data/hudi), through the CLI.

Every fixture (``tables/*`` and ``zips/*``) is classified, and each class has its own contract:

* **metadata table** (``files`` in ``hoodie.table.metadata.partitions``): tablesvc does not
  maintain ``.hoodie/metadata``, and hudi-rs lists files through it on v8+, so every changing
  command (compaction / log compaction schedule+run, clean, rollback) must exit 2 with one
  line naming the table and the metadata table, and leave every byte of the table as it was.
* **other MOR tables**: clean (``commits.retained=3`` and ``=1``; ``KEEP_LATEST_FILE_VERSIONS=1``),
  rollback of the latest write, log compaction, compaction and clean in sequence.  After each
  service, the snapshot read by hudi-rs (all columns) equals the snapshot before the service
  and tablesvc's reader; the row count is the one docs/hudi-rs-oracle.md gives; and files move
  the right way (clean: only files its plan lists, none of a latest slice; log compaction:
  fewer valid log blocks to merge; compaction: latest slices without log files).
* **copy-on-write**: none among the fixtures, so one is derived from v6_trips_8i1u: compaction
  and log compaction are refused (exit 2); clean works, as Hudi cleans COW tables too.

The commands run in-process through ``tablesvc.cli.main.main`` (the function ``python -m
tablesvc`` calls), so that one Spark session serves every compaction;
``test_real_processes_refuse_a_metadata_table`` runs ``python -m tablesvc`` itself.
Fixtures are always copied before a command runs on them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import file_slices, hudi_table, read_rows, read_table

from tablesvc.cli.main import main
from tablesvc.fsview.names import BaseFileName
from tablesvc.logformat import BlockType, HeaderKey, read_log_file
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice, select_blocks
from tablesvc.api import Table
from tablesvc.write import FileGroupTarget, WriteContext, write_file_group
from timeline.instant import Action
from timeline.payloads import CommitMetadata, WriteStat, encode_commit_metadata

from fixture_tables import all_fixture_names, copy_table
from helpers import data_files
from table_builders import tree

REPO = Path(__file__).resolve().parents[2]
RETAINED = "hoodie.cleaner.commits.retained"

# docs/hudi-rs-oracle.md §4: hudi 0.5.0 snapshot row counts, and which fixtures keep a metadata table.
EXPECTED_ROWS = {
    "v6_complexkeygen_hivestyle": 4, "v6_empty": 0, "v6_nonpartitioned": 4, "v6_nonpartitioned_rollback": 3,
    "v6_simplekeygen_nonhivestyle_overwritetable": 1, "v6_trips_8i1u": 8, "v6_trips_8i3d": 5, "v8_trips_8i3u1d": 6,
    "v9_nonpartitioned_rollback": 4, "v9_txns_simple_nometa": 12,
    "zips:mor_avro_v9_txns_complex_meta": 12, "zips:mor_avro_v9_txns_nonpart_meta": 14,
    "zips:mor_avro_v9_txns_simple_meta": 12, "zips:mor_avro_v9_txns_simple_overwrite": 3,
    "zips:mor_parquet_v6_simplekeygen_hivestyle_no_metafields": 4,
}
METADATA_TABLE = frozenset({
    "v8_trips_8i3u1d", "v9_nonpartitioned_rollback", "zips:mor_avro_v9_txns_complex_meta",
    "zips:mor_avro_v9_txns_nonpart_meta", "zips:mor_avro_v9_txns_simple_meta",
    "zips:mor_avro_v9_txns_simple_overwrite",
})
NO_META_FIELDS = "zips:mor_parquet_v6_simplekeygen_hivestyle_no_metafields"
SERVICEABLE = sorted(set(EXPECTED_ROWS) - METADATA_TABLE)
# Old slices or replaced file groups at the start: the first clean deletes something.
OLD_SLICES_AT_START = {"v9_txns_simple_nometa", "v6_simplekeygen_nonhivestyle_overwritetable"}
# Latest slices with log files of completed delta commits: compaction has work at the start.
LOGS_IN_LATEST_SLICES = {"v6_complexkeygen_hivestyle", "v6_nonpartitioned", "v6_nonpartitioned_rollback",
                         "v6_trips_8i1u", "v6_trips_8i3d"}

_SAMPLE = {(1, "Alice", False), (2, "Bob", False), (3, "Carol", True), (4, "Diana", True)}
_TRIPS = {"rider-A": 19.1, "rider-C": 27.7, "rider-D": 25.0, "rider-E": 93.5, "rider-F": 34.15, "rider-G": 43.4,
          "rider-I": 41.06, "rider-J": 17.85}
_TXNS = ["TXN-001", "TXN-003", "TXN-007", "TXN-008"] + [f"TXN-{n:03d}" for n in range(11, 19)]


def facts(name: str, rows: list[dict]):
    """The documented content of a fixture's snapshot (docs/hudi-rs-oracle.md §4.2), for ``rows``."""
    if name.startswith("v6_trips"):
        return {r["rider"]: r["fare"] for r in rows}
    if name in ("v6_nonpartitioned", "v6_complexkeygen_hivestyle", "v6_nonpartitioned_rollback",
                "v6_simplekeygen_nonhivestyle_overwritetable"):
        return {(r["id"], r["name"], r["isActive"]) for r in rows}
    if name == "v9_txns_simple_nometa":
        by_id = {r["txn_id"]: r for r in rows}
        return sorted(by_id), by_id["TXN-001"]["txn_type"], by_id["TXN-007"]["fee_amount"]
    return len(rows)


FACTS = {
    "v6_trips_8i1u": _TRIPS,
    "v6_trips_8i3d": {k: v for k, v in _TRIPS.items() if k in ("rider-E", "rider-F", "rider-G", "rider-I", "rider-J")},
    "v6_nonpartitioned": _SAMPLE, "v6_complexkeygen_hivestyle": _SAMPLE,
    "v6_nonpartitioned_rollback": {(1, "Alice", True), (2, "Bob", True), (3, "Carol", True)},
    "v6_simplekeygen_nonhivestyle_overwritetable": {(4, "Diana", False)},
    "v9_txns_simple_nometa": (_TXNS, "reversal", Decimal("75.00")),
}


# -- reading -------------------------------------------------------------------------------------------
def _sorted(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=repr)


def hudi_rows(path: Path, as_of: str | None = None) -> list[dict]:
    """hudi-rs's snapshot (reader v2, the default), every column, in a canonical order."""
    return _sorted(read_rows(path, as_of))


def hudi_slices(path: Path) -> dict[tuple[str, str], tuple[str, tuple[str, ...]]]:
    """hudi-rs's latest file slices: (partition, file id) -> (base file path, log file paths)."""
    out = {}
    for s in file_slices(path):
        base = s.base_file_relative_path() if s.base_file_name else ""
        out[(s.partition_path, s.file_id)] = (base, tuple(s.log_files_relative_paths()))
    return out


def slice_files(slices) -> set[str]:
    return {f for base, logs in slices.values() for f in ((base,) if base else ()) + logs}


def our_rows(path: Path) -> list[dict]:
    """tablesvc's reader: every latest slice merged by ``read_file_slice`` (what its Spark read job runs)."""
    table = Table.open(str(path))
    ctx = ReadContext.for_table(table)
    parts = [read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx) for s in table.latest_file_slices()]
    return _sorted(pa.concat_tables(parts).to_pylist()) if parts else []


def snapshot(name: str, path: Path) -> list[dict]:
    """hudi-rs's rows, after checking tablesvc's reader returns the same rows."""
    rows = hudi_rows(path)
    ours = our_rows(path)
    if name == NO_META_FIELDS:
        # Quirk (observed with hudi 0.5.0): for hoodie.populate.meta.fields=false hudi-rs returns no
        # _hoodie_* columns at all, while tablesvc returns them (null, _hoodie_file_name set).
        # Compare the columns hudi-rs returns.
        columns = set(rows[0]) if rows else set()
        assert not any(c.startswith("_hoodie_") for c in columns)
        ours = _sorted([{k: v for k, v in r.items() if k in columns} for r in ours])
    assert ours == rows, f"{name}: tablesvc's reader and hudi-rs disagree"
    return rows


def valid_blocks(path: Path) -> dict[tuple[str, str], list[str]]:
    """(partition, file id) -> instants of the log blocks a reader merges in the latest slice
    (completed instants, not rolled back, not replaced by a log compaction), in reader order."""
    table = Table.open(str(path))
    ctx = ReadContext.for_table(table)
    out = {}
    for s in table.latest_file_slices():
        selection = select_blocks(table.storage, tuple(lf.path for lf in s.log_files), ctx)
        out[(s.partition, s.file_id)] = [dict(b.block.header)[HeaderKey.INSTANT_TIME] for b in selection.blocks]
    return out


def assert_unchanged(path: Path, state: dict[str, str]) -> None:
    """No file was added, removed or changed.  Only the lock's folder ``.hoodie/.aux`` (Hudi's own
    auxiliary folder) may have appeared: a service that found nothing to do still took the lock."""
    now = tree(path)
    if ".hoodie/.aux/" not in state:
        now.pop(".hoodie/.aux/", None)
    assert now == state


def file_id_of(file_name: str) -> str:
    """The file id in a ``_hoodie_file_name`` value: a base file name, a log file name or the bare id."""
    return file_name.lstrip(".").split("_", 1)[0]


# -- running ---------------------------------------------------------------------------------------------
def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def cli_json(capsys, *argv: str) -> list[dict]:
    rc, out, err = cli(capsys, *argv, "--json")
    assert rc == 0 and not err, (argv, out, err)
    return json.loads(out)


@pytest.fixture
def fixture_copy(fixture_root, tmp_path):
    def make(name: str) -> Path:
        return copy_table(fixture_root.path(name), tmp_path / name.replace(":", "_"))
    return make


def run_clean(capsys, name: str, path: Path, *conf: str) -> tuple[dict, set[str]]:
    """``clean run`` with the invariants every clean keeps; returns (last result, deleted files)."""
    storage_table = Table.open(str(path))
    cleans_before = storage_table.timeline().completed(Action.CLEAN)
    files_before, latest_before = data_files(path), slice_files(hudi_slices(path))
    rows_before = snapshot(name, path)
    results = cli_json(capsys, "clean", "run", str(path), *conf)
    result = results[-1]
    files_after = data_files(path)
    deleted = files_before - files_after
    assert files_after <= files_before, "a clean never adds data files"
    timeline = Table.open(str(path)).timeline()
    if result["status"] == "done":
        instant = timeline.require(result["instant"])
        assert instant.is_completed and instant.action is Action.CLEAN
        plan = timeline.plan_of(storage_table.storage, instant)
        planned = {os.path.relpath(f, path) for fs in plan.files_to_delete().values() for f in fs}
        assert deleted == planned, "exactly the files the clean plan lists are deleted"
        assert timeline.payload(storage_table.storage, instant).total_files_deleted == len(deleted)
    else:
        assert result["status"] == "nothing_to_do" and not deleted, result
        assert timeline.completed(Action.CLEAN) == cleans_before
    assert not deleted & latest_before, "a latest slice lost files"
    assert snapshot(name, path) == rows_before
    return result, deleted


# =========================================================================================================
# Classification
# =========================================================================================================
def test_every_fixture_is_classified():
    assert set(all_fixture_names()) == set(EXPECTED_ROWS), "classify new fixtures here"


@pytest.mark.parametrize("name", sorted(EXPECTED_ROWS))
def test_fixture_reads_as_documented(fixture_root, name):
    path = fixture_root.path(name)
    table = Table.open(str(path))
    assert table.config.is_mor  # every table in tests/data/hudi is merge-on-read
    has_mdt = (path / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties").is_file()
    assert table.config.has_metadata_table is has_mdt is (name in METADATA_TABLE)
    rows = snapshot(name, path)
    assert len(rows) == EXPECTED_ROWS[name]
    if name in FACTS:
        assert facts(name, rows) == FACTS[name]


# =========================================================================================================
# Tables with a metadata table: every one lists record_index, which tablesvc keeps true (docs/
# metadata-table.md, "record_index"; the acceptance upsert, delete and services on each:
# tests/spark/test_record_index_partitioned_write.py).  On a partitioned table the global record
# index holds each key in one partition: an upsert of a key into another partition than the one it
# lives in is refused before its instant exists (exit 2, one line naming the key, both partitions
# and the Java keys that decide it), the rows unchanged and nothing on the timeline.
# =========================================================================================================
PARTITIONED_WITH_RLI = ("v8_trips_8i3u1d", "zips:mor_avro_v9_txns_complex_meta", "zips:mor_avro_v9_txns_simple_meta")


def _moved_key_input(path: Path, tmp_path: Path) -> tuple[Path, str, str, str]:
    """One of the table's own rows with its partition field set to another partition's value, as a
    Parquet file; (the file, its record key, the partition it lives in, the one it names)."""
    table = Table.open(str(path))
    rows = read_table(path)
    field = table.config.partition_fields[0]
    first = rows.slice(0, 1)
    key, here = first.column("_hoodie_record_key")[0].as_py(), first.column("_hoodie_partition_path")[0].as_py()
    at = [i for i, p in enumerate(rows.column("_hoodie_partition_path").to_pylist()) if p != here][0]
    there = rows.column("_hoodie_partition_path")[at].as_py()
    first = first.drop_columns([c for c in first.column_names if c.startswith("_hoodie_")])
    index = first.column_names.index(field)
    first = first.set_column(index, field, rows.column(field).slice(at, 1))
    out = tmp_path / "moved_key.parquet"
    pq.write_table(first, out)
    return out, key, here, there


def _instants(path: Path) -> list[tuple[str, str]]:
    return [(i.timestamp, i.state.value) for i in Table.open(str(path)).timeline().instants]


@pytest.mark.parametrize("name", PARTITIONED_WITH_RLI)
def test_partitioned_global_record_index_refuses_moving_a_key(fixture_copy, capfd, tmp_path, name):
    path = fixture_copy(name)
    rows, instants = hudi_rows(path), _instants(path)
    data, key, here, there = _moved_key_input(path, tmp_path)
    # capfd: the write command starts Spark, whose start-up takes over the process's stderr stream
    rc, out, err = cli(capfd, "write", str(path), "--input", str(data))
    assert rc == 2, (out, err)
    assert out == "" and err.count("\n") == 1 and err.startswith("tablesvc: error: "), err
    assert all(repr(t) in err for t in (key, here, there)) and "hoodie.index.type" in err, err
    assert hudi_rows(path) == rows
    assert _instants(path) == instants, "the refused write left an instant"


def test_real_process_refuses_moving_a_key_of_a_partitioned_global_record_index(fixture_copy, tmp_path):
    path = fixture_copy("v8_trips_8i3u1d")
    instants = _instants(path)
    data, key, _here, _there = _moved_key_input(path, tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO), TABLESVC_SPARK_LOG=os.devnull)
    proc = subprocess.run([sys.executable, "-m", "tablesvc", "write", str(path), "--input", str(data)],
                          env=env, cwd=str(REPO), text=True, capture_output=True, timeout=300)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1 and repr(key) in proc.stderr
    assert _instants(path) == instants


# =========================================================================================================
# Clean and rollback (no Spark)
# =========================================================================================================
NOTHING_TO_DELETE = "nothing to clean: every file group holds only slices that are retained"


@pytest.mark.parametrize("name", SERVICEABLE)
def test_clean_keeps_the_snapshot_and_deletes_only_planned_old_files(fixture_copy, capsys, name):
    path = fixture_copy(name)
    writes = Table.open(str(path)).timeline().completed_writes()

    # retained=3: readers at the earliest commit to retain see the same rows after the clean
    ectr = writes[-3].timestamp if len(writes) > 3 else None
    before_at_ectr = hudi_rows(path, ectr) if ectr else None
    result, _ = run_clean(capsys, name, path, "--conf", f"{RETAINED}=3")
    if ectr is None:
        assert result["reason"] == f"nothing to clean: {len(writes)} completed commits <= 3 retained " \
                                   "(KEEP_LATEST_COMMITS)"
    else:
        if result["status"] == "done":
            assert result["metrics"]["earliest_commit_to_retain"] == ectr
        else:  # nothing to delete: no clean instant, as Hudi's "nothing to clean"
            assert result["reason"].startswith(NOTHING_TO_DELETE), result
        assert hudi_rows(path, ectr) == before_at_ectr

    # retained=1: only what the latest snapshot reads is left (the latest slices, as hudi-rs lists them)
    result, deleted = run_clean(capsys, name, path, "--conf", f"{RETAINED}=1")
    if len(writes) <= 1:
        assert result["reason"] == f"nothing to clean: {len(writes)} completed commits <= 1 retained " \
                                   "(KEEP_LATEST_COMMITS)"
    elif deleted:
        assert result["status"] == "done" and result["metrics"]["earliest_commit_to_retain"] == writes[-1].timestamp
    else:
        assert result["status"] == "nothing_to_do" and result["reason"].startswith(NOTHING_TO_DELETE), result
    assert bool(deleted) is (name in OLD_SLICES_AT_START)
    assert data_files(path) == slice_files(hudi_slices(path))
    assert len(snapshot(name, path)) == EXPECTED_ROWS[name]

    # nothing failed on these tables: the recovery sweep has nothing to do and changes nothing
    state = tree(path)
    rc, out, err = cli(capsys, "rollback", str(path))
    assert (rc, out, err) == (0, "nothing to roll back\n", "")
    assert_unchanged(path, state)


@pytest.mark.parametrize("name", SERVICEABLE)
def test_clean_keeping_one_file_version(fixture_copy, capsys, name):
    """KEEP_LATEST_FILE_VERSIONS=1 keeps the latest slice of each live file group.  As in Hudi
    (CleanPlanner.getFilesToCleanKeepingLatestVersions), replaced file groups (clustering,
    insert_overwrite) go whole: file versions only count for live groups."""
    path = fixture_copy(name)
    result, deleted = run_clean(capsys, name, path, "--conf", "hoodie.cleaner.policy=KEEP_LATEST_FILE_VERSIONS",
                                "--conf", "hoodie.cleaner.fileversions.retained=1")
    assert bool(deleted) is (name in OLD_SLICES_AT_START)
    if not deleted:
        assert result["reason"] == "nothing to clean: every file group holds only slices that are retained"
    assert data_files(path) == slice_files(hudi_slices(path))


# What hudi-rs reads as of the write before the latest one (docs/hudi-rs-oracle.md §4.2).
BEFORE_LATEST = {
    "v6_trips_8i1u": lambda rows: {r["rider"]: r["fare"] for r in rows}["rider-D"] == 33.9,
    "v6_trips_8i3d": lambda rows: {r["rider"]: r["fare"] for r in rows if r["rider"] in ("rider-A", "rider-C",
                                                                                         "rider-D")}
    == {"rider-A": 19.1, "rider-C": 27.7, "rider-D": 33.9},
    "v6_nonpartitioned": lambda rows: {(r["id"], r["name"], r["isActive"]) for r in rows}
    == {(1, "Alice", True), (2, "Bob", False), (3, "Carol", True)},
}


@pytest.mark.parametrize("name", [n for n in SERVICEABLE if n not in ("v6_empty", NO_META_FIELDS)])
def test_rolling_back_the_latest_write_gives_the_previous_snapshot(fixture_copy, capsys, name):
    path = fixture_copy(name)
    writes = Table.open(str(path)).timeline().completed_writes()
    latest, previous = writes[-1].timestamp, writes[-2].timestamp
    expected = hudi_rows(path, previous)   # time travel: hudi-rs compares the requested time
    if name in BEFORE_LATEST:
        assert BEFORE_LATEST[name](expected)
    [result] = cli_json(capsys, "rollback", str(path), "--instant", latest, "--allow-completed")
    assert result["status"] == "done" and result["metrics"]["target"] == latest
    timeline = Table.open(str(path)).timeline()
    assert timeline.get(latest) is None and timeline.require(result["instant"]).is_completed
    assert [i.timestamp for i in timeline.completed_writes()] == [w.timestamp for w in writes[:-1]]
    assert hudi_rows(path) == expected and our_rows(path) == expected
    assert cli_json(capsys, "rollback", str(path)) == []


# =========================================================================================================
# Compaction, log compaction, clean in sequence (Spark)
# =========================================================================================================
def check_compaction(capsys, name: str, path: Path) -> dict:
    """``compaction run`` on a table whose latest slices may hold logs; returns the result.

    The run completes its plan, so hudi-rs's v6 quirk with a *pending* compaction (logs named
    with the pending instant are dropped, oracle doc P3) never applies to what is compared."""
    slices_before, rows_before = hudi_slices(path), snapshot(name, path)
    [result] = cli_json(capsys, "compaction", "run", str(path))
    with_logs = {k for k, (_, logs) in slices_before.items() if logs}
    if not with_logs:
        assert (result["status"], result["reason"]) == ("nothing_to_do",
                                                        "no file group has log files of completed delta commits")
        return result
    assert result["status"] == "done", result
    c = result["instant"]
    tl = hudi_table(path).get_timeline()
    assert c in [i.timestamp for i in tl.get_completed_commits()], "hudi-rs sees the compaction commit"
    slices_after = hudi_slices(path)
    assert set(slices_after) == set(slices_before)
    assert not any(logs for _, logs in slices_after.values()), "latest slices without log files"
    new_base = {}
    for key, (base, _) in slices_after.items():
        if key in with_logs:
            assert BaseFileName.parse(base.rsplit("/", 1)[-1]).instant == c
            new_base[key[1]] = base.rsplit("/", 1)[-1]
        else:
            assert slices_after[key] == slices_before[key]
    # The rows are those of before; compaction rewrites only _hoodie_file_name, to the new base file.
    expected = _sorted([dict(r, _hoodie_file_name=new_base.get(file_id_of(r["_hoodie_file_name"]),
                                                               r["_hoodie_file_name"])) for r in rows_before])
    assert snapshot(name, path) == expected
    return result


def clean_after_compaction(capsys, name: str, path: Path, compacted_slices) -> None:
    """retained=1 after a compaction: the slices it superseded go, and nothing the latest needs."""
    result, deleted = run_clean(capsys, name, path, "--conf", f"{RETAINED}=1")
    assert result["status"] == "done"
    assert slice_files(compacted_slices) <= deleted
    assert data_files(path) == slice_files(hudi_slices(path))


@pytest.mark.spark
@pytest.mark.parametrize("name", SERVICEABLE)
def test_compaction_then_clean(fixture_copy, capsys, spark, name):
    path = fixture_copy(name)
    if name == NO_META_FIELDS:
        # Without stored record keys tablesvc cannot merge (Hudi could, from the key fields);
        # refusing clearly and changing nothing is the contract.
        state = tree(path)
        for action in ("schedule", "run"):
            rc, out, err = cli(capsys, "compaction", action, str(path))
            assert rc == 2 and err.count("\n") == 1 and "hoodie.populate.meta.fields=false" in err
        assert tree(path) == state
        return
    rows = snapshot(name, path)
    with_logs = {k: v for k, v in hudi_slices(path).items() if v[1]}
    assert bool(with_logs) is (name in LOGS_IN_LATEST_SLICES)
    result = check_compaction(capsys, name, path)
    if result["status"] == "done":
        clean_after_compaction(capsys, name, path, with_logs)
    after = snapshot(name, path)
    assert len(after) == EXPECTED_ROWS[name]
    if name in FACTS:
        assert facts(name, after) == FACTS[name]
    drop = lambda rs: _sorted([{k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in rs])  # noqa: E731
    assert drop(after) == drop(rows)
    if result["status"] == "done":  # tablesvc's Spark reader agrees with hudi-rs on every column
        assert _sorted(Table.open(str(path)).read(spark=spark).toArrow().to_pylist()) == after


# -- two updates through tablesvc's file-group writer, into a Java-written file group ------------------------------
def _block_format(table: Table) -> str:
    """The data block format the table's writer used (the mor/parquet fixtures: parquet)."""
    for f in sorted(data_files(Path(table.base_path))):
        if ".log." in f and any(b.block_type is BlockType.PARQUET_DATA
                                for b in read_log_file(table.storage, f"{table.base_path}/{f}").blocks):
            return "parquet"
    return "avro"


def update_two_records(path: Path, step: int) -> tuple[str, dict[str, dict]]:
    """A delta commit updating (up to) two records of one file group (a group with Java log files
    when there is one): ordering value + step, and a non-key string column set to ``svc-<step>``."""
    table = Table.open(str(path))
    cfg = table.config
    ctx = ReadContext.for_table(table)
    for s in sorted(table.latest_file_slices(), key=lambda s: (not s.log_files, s.partition, s.file_id)):
        rows = read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx).sort_by("_hoodie_record_key")
        if rows.num_rows:
            break
    rows = rows.slice(0, 2)
    i = rows.schema.get_field_index(cfg.ordering_field)
    rows = rows.set_column(i, cfg.ordering_field, pc.add(rows.column(i), step))
    text = [f.name for f in rows.schema if pa.types.is_string(f.type) and not f.name.startswith("_hoodie_")
            and f.name not in cfg.record_key_fields + cfg.partition_fields]
    if text:
        rows = rows.set_column(rows.schema.get_field_index(text[0]), text[0], pa.array([f"svc-{step}"] * rows.num_rows))
    w = table.timeline_writer
    d = w.start(w.request(Action.DELTA_COMMIT))
    ctx = WriteContext(table.base_path, cfg.name, cfg.version, d.timestamp, table.schema(), cfg.ordering_field,
                       log_block_format=_block_format(table))
    records = rows.drop_columns(["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name"])
    stats = write_file_group(table.storage, ctx, FileGroupTarget.from_slice(s), records, 0, 0)
    w.complete(d, encode_commit_metadata(CommitMetadata({s.partition: tuple(stats)}, False,
                                                        {"schema": table.schema()}, "UPSERT"), cfg.layout))
    data = {r["_hoodie_record_key"]: {k: v for k, v in r.items() if not k.startswith("_hoodie_")}
            for r in rows.to_pylist()}
    return s.file_id, data


@pytest.mark.spark
@pytest.mark.parametrize("name", [n for n in SERVICEABLE if n not in ("v6_empty", NO_META_FIELDS)])
def test_log_compaction_then_compaction_then_clean(fixture_copy, capsys, spark, name):
    path = fixture_copy(name)
    # 1. the fixture as Apache Hudi left it: no latest slice has two valid blocks
    state = tree(path)
    [result] = cli_json(capsys, "logcompaction", "run", str(path))
    assert result["status"] == "nothing_to_do"
    if name in LOGS_IN_LATEST_SLICES:
        # v6_nonpartitioned_rollback: 3 log files, but one block was rolled back and one is the
        # rollback command; one valid block is left.
        assert "(at most 1 valid log block < 2, hoodie.log.compaction.blocks.threshold)" in result["reason"]
    else:
        assert result["reason"] == "no file group has log blocks of completed delta commits"
    assert_unchanged(path, state)

    # 2. two updates of the same two records into one of Java's file groups
    before = snapshot(name, path)
    file_id, first = update_two_records(path, 1)
    _, second = update_two_records(path, 2)
    assert first.keys() == second.keys()
    expected = _sorted([second.get(r["_hoodie_record_key"]) or {k: v for k, v in r.items()
                                                                 if not k.startswith("_hoodie_")} for r in before])
    assert _sorted([{k: v for k, v in r.items() if not k.startswith("_hoodie_")}
                    for r in snapshot(name, path)]) == expected
    rows = snapshot(name, path)
    blocks = valid_blocks(path)
    target = [k for k in blocks if k[1] == file_id][0]
    assert len(blocks[target]) >= 2

    # 3. log compaction: the same rows (every column), fewer blocks to merge
    rc, out, err = cli(capsys, "logcompaction", "run", str(path), "--json")
    assert rc == 0, err  # tables with a map column included: the compacted Avro block holds maps
    [result] = json.loads(out)
    assert result["status"] == "done" and result["metrics"]["file_groups"] == 1, result
    lc = result["instant"]
    assert lc in [i.timestamp for i in hudi_table(path).get_timeline()
                  .get_completed_deltacommits()], "completes as a deltacommit hudi-rs sees"
    after = valid_blocks(path)
    # one compacted data block (plus a delete block when deletes survive, v6_trips_8i3d) replaces them
    assert len(after[target]) < len(blocks[target]) and set(after[target]) == {lc}, after[target]
    assert {k: v for k, v in after.items() if k != target} == {k: v for k, v in blocks.items() if k != target}
    assert snapshot(name, path) == rows

    # 4. compaction honours the compacted block; 5. clean removes the superseded slices
    with_logs = {k: v for k, v in hudi_slices(path).items() if v[1]}
    assert check_compaction(capsys, name, path)["status"] == "done"
    clean_after_compaction(capsys, name, path, with_logs)
    assert len(snapshot(name, path)) == EXPECTED_ROWS[name]


# =========================================================================================================
# Copy-on-write (derived from a fixture: the carried tables are all MOR)
# =========================================================================================================
def test_copy_on_write_table_is_cleaned_but_not_compacted(fixture_copy, capsys):
    """v6_trips_8i1u as a COW table: its first commit, then a COW-style update of rider-D that
    rewrites the san_francisco base file as a new file version."""
    path = fixture_copy("v6_trips_8i1u")
    t1, update = "20250331030642808", "20250331030645735"
    for p in list((path / ".hoodie").iterdir()) + list(path.rglob(".*.log.*")):
        if p.name.startswith(update) or ".log." in p.name or (p.name.startswith(t1) and p.name != f"{t1}.deltacommit"):
            p.unlink()
    (path / ".hoodie" / f"{t1}.deltacommit").rename(path / ".hoodie" / f"{t1}.commit")
    props = path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.table.type=MERGE_ON_READ", "hoodie.table.type=COPY_ON_WRITE"))
    table = Table.open(str(path))
    assert not table.config.is_mor
    [old] = [p for p in path.rglob("*.parquet") if p.parent.name == "city=san_francisco"]
    w = table.timeline_writer
    c = w.start(w.request(Action.COMMIT))
    new = BaseFileName(BaseFileName.parse(old.name).file_id, "0-0-0", c.timestamp).name
    rows = pq.read_table(old).to_pylist()
    for r in rows:
        r["_hoodie_file_name"] = new
        if r["rider"] == "rider-D":
            r.update(fare=25.0, _hoodie_commit_time=c.timestamp, _hoodie_commit_seqno=f"{c.timestamp}_0_1")
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(old)), old.parent / new)
    stat = WriteStat(file_id=BaseFileName.parse(new).file_id, path=f"city=san_francisco/{new}", prev_commit=t1,
                     partition_path="city=san_francisco", num_writes=len(rows), num_update_writes=1)
    w.complete(c, encode_commit_metadata(CommitMetadata({"city=san_francisco": (stat,)}, False,
                                                        {"schema": table.schema()}, "UPSERT"), table.config.layout))
    rows = hudi_rows(path)
    assert {r["rider"]: r["fare"] for r in rows} == _TRIPS   # the same content as the MOR fixture
    assert our_rows(path) == rows

    state = tree(path)
    for argv in (("compaction", "schedule"), ("compaction", "run"), ("logcompaction", "schedule"),
                 ("logcompaction", "run")):
        rc, out, err = cli(capsys, *argv, str(path))
        assert rc == 2 and err.count("\n") == 1 and "merge-on-read tables only" in err, (argv, err)
    assert tree(path) == state

    result, deleted = run_clean(capsys, "cow", path, "--conf", f"{RETAINED}=1")
    assert result["status"] == "done" and deleted == {str(old.relative_to(path))}
    assert hudi_rows(path) == rows
