"""The metadata-table opt-outs as a user runs them: ``--conf`` keys with Java's names drop
partitions before the command's own instant, the drop is one line of the command's output, and a
command still refused changes nothing (docs/metadata-table.md, "Refusals and opt-outs").

The rows every reader must show after the command are the rows before it, read by hudi-rs through
the Java-written metadata table and by tablesvc's reader (the two agree, checked first): clean and
compaction change no row.  After ``hoodie.metadata.enable=false`` hudi-rs lists storage (the
properties list no partition); after the index opt-outs it lists through ``files``, which the
command's commit keeps true.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from oracles.hudi_rs import read_rows

from fixture_tables import copy_table
from table_builders import tree
from tablesvc.api import Table
from tablesvc.cli.main import main
from tablesvc.merge import ReadContext, SliceSpec, read_file_slice
from tablesvc.table.properties import parse_properties

MDT_FIXTURES = ["v8_trips_8i3u1d", "v9_nonpartitioned_rollback", "zips:mor_avro_v9_txns_simple_meta",
                "zips:mor_avro_v9_txns_complex_meta", "zips:mor_avro_v9_txns_nonpart_meta"]
DROP_WHOLE = ("--conf", "hoodie.metadata.enable=false")
DROP_INDEXES = ("--conf", "hoodie.metadata.index.column.stats.enable=false",
                "--conf", "hoodie.metadata.record.index.enable=false")


@pytest.fixture
def copy_of(fixture_root, tmp_path):
    def make(name: str) -> Path:
        return copy_table(fixture_root.path(name), tmp_path / name.replace(":", "_"))
    return make


def _sorted(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=repr)


def _ours(path: Path) -> list[dict]:
    table = Table.open(str(path))
    ctx = ReadContext.for_table(table)
    parts = [read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx) for s in table.latest_file_slices()]
    return _sorted(pa.concat_tables(parts).to_pylist()) if parts else []


def _agreed_rows(path: Path) -> list[dict]:
    rows = _sorted(read_rows(path))
    assert rows and _ours(path) == rows, "hudi-rs and tablesvc's reader disagree"
    return rows


def _listed(path: Path) -> str:
    return parse_properties((path / ".hoodie" / "hoodie.properties").read_text())["hoodie.table.metadata.partitions"]


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_clean_with_metadata_enable_false_drops_the_metadata_table_then_cleans(copy_of, capsys, name):
    path = copy_of(name)
    rows = _agreed_rows(path)
    listed = ", ".join(sorted(_listed(path).split(",")))
    rc, out, err = _cli(capsys, "clean", "run", str(path), *DROP_WHOLE, "--conf", "hoodie.cleaner.commits.retained=1")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == f"metadata table: done: dropped the metadata table ({listed}) (hoodie.metadata.enable=false)"
    assert lines[1].startswith("clean: ")
    assert _listed(path) == "" and not (path / ".hoodie" / "metadata").exists()
    assert _agreed_rows(path) == rows


# v8_trips_8i3u1d (written by Hudi 1.0): the metadata delta commit is written with the record schema
# the files partition already holds (1.0's, without valueType), which hudi-rs requires of one slice.
@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_clean_with_index_opt_outs_drops_them_and_keeps_files_true(copy_of, capsys, name):
    path = copy_of(name)
    rows = _agreed_rows(path)
    rc, out, err = _cli(capsys, "clean", "run", str(path), *DROP_INDEXES, "--conf", "hoodie.cleaner.commits.retained=1",
                        "--json")
    assert rc == 0, err
    results = json.loads(out)
    assert results[0]["action"] == "metadata table" and results[0]["status"] == "done"
    assert results[0]["reason"].startswith("dropped column_stats")
    assert not {"column_stats", "partition_stats", "record_index"} & set(_listed(path).split(","))
    assert "files" in _listed(path).split(",")
    assert Table.open(str(path)).uses_metadata_table
    assert _agreed_rows(path) == rows


def test_an_opt_out_of_a_partition_the_table_lacks_drops_nothing(copy_of, capsys):
    # (a rollback is no longer refused by any known partition: Java's MDT rollback keeps them all
    # true; the refusals left are in tests/unit/test_metadata_refusals.py and the table-file case below)
    path = copy_of("zips:mor_avro_v9_txns_simple_meta")
    before = tree(path)
    rc, out, err = _cli(capsys, "clean", "run", str(path), "--dry-run", "--conf",
                        "hoodie.metadata.index.bloom.filter.enable=false")
    assert rc == 0, err
    assert "metadata table" not in out                   # nothing listed to drop
    assert tree(path) == before


def test_metadata_enable_false_in_the_table_file_refuses_instead_of_dropping(copy_of, capsys):
    """``.hoodie/tablesvc.yaml``'s hoodie.metadata.enable=false is a reader setting (reads list
    storage), never an order to delete: a changing command is refused in one line naming the
    key to pass on the command; the same key on the command drops."""
    path = copy_of("zips:mor_avro_v9_txns_simple_meta")
    rows = _agreed_rows(path)
    (path / ".hoodie" / "tablesvc.yaml").write_text("hoodie.metadata.enable: false\n")
    before = tree(path)
    assert not Table.open(str(path)).uses_metadata_table       # reads list storage, as before
    for argv in (("clean", "run", str(path)), ("clean", "run", str(path), "--dry-run"),
                 ("compaction", "schedule", str(path)), ("logcompaction", "schedule", str(path))):
        rc, out, err = _cli(capsys, *argv)
        assert rc == 2 and out == "" and err.count("\n") == 1, (argv, out, err)
        assert str(path) in err and "--conf hoodie.metadata.enable=false" in err and "tablesvc.yaml" in err
        assert tree(path) == before
    assert (path / ".hoodie" / "metadata").is_dir() and "files" in _listed(path).split(",")
    rc, out, err = _cli(capsys, "clean", "run", str(path), *DROP_WHOLE, "--conf", "hoodie.cleaner.commits.retained=1")
    assert rc == 0, err
    assert out.splitlines()[0].startswith("metadata table: done: dropped the metadata table")
    assert _listed(path) == "" and not (path / ".hoodie" / "metadata").exists()
    assert _agreed_rows(path) == rows


def _without_file_names(rows: list[dict]) -> list[dict]:
    return _sorted([{k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in rows])


def test_compaction_after_dropping_the_metadata_table(copy_of, capsys, spark):
    """The fixture with log files of completed delta commits (the others have none to compact)."""
    path = copy_of("v8_trips_8i3u1d")
    rows = _agreed_rows(path)
    rc, out, err = _cli(capsys, "compaction", "run", str(path), *DROP_WHOLE, "--json")
    assert rc == 0, err
    results = json.loads(out)
    assert results[0]["action"] == "metadata table" and results[0]["reason"].startswith("dropped the metadata table")
    assert results[-1]["action"] == "compaction" and results[-1]["status"] == "done", results
    # compaction moves rows into new base files: every value but the file name stays
    assert _without_file_names(_agreed_rows(path)) == _without_file_names(rows)
