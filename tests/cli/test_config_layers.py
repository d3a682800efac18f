"""The layered service config through the CLI, on tables tablesvc wrote (no Spark).

Precedence, lowest first (docs/services.md, tablesvc/config/loader.py): built-in defaults <
the table's ``.hoodie/tablesvc.yaml`` < ``--config FILE`` < ``--conf key=value``.  Each layer is
shown to take effect, and the next one to override it, through outcomes a user sees:

* ``hoodie.cleaner.commits.retained`` (and ``hoodie.cleaner.policy``) decide which files
  ``clean run --dry-run`` lists (the ``clean`` command reads the config ``main`` loads);
* ``hoodie.log.compaction.blocks.threshold`` decides whether ``logcompaction schedule`` plans
  anything (that command loads the config again through ``service_support.open_table``).

The expected file sets are derived from file names alone (v6 names every file of a slice with
the slice's base instant), not from tablesvc's planner.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tablesvc.cli.main import main
from tablesvc.demo.sample_table import build_sample_table
from tablesvc.fsview.names import BaseFileName, LogFileName
from tablesvc.api import Table

from helpers import data_files
from table_builders import compact_by_hand, tree, update_five_records

RETAINED = "hoodie.cleaner.commits.retained"
POLICY = "hoodie.cleaner.policy"
VERSIONS = "hoodie.cleaner.fileversions.retained"
THRESHOLD = "hoodie.log.compaction.blocks.threshold"


# -- building tables without Spark ------------------------------------------------------------------
def _update_group(table: Table, partition: str, fare: float) -> str:
    """A delta commit updating five records of ``partition``'s file group (one new log block)."""
    s = [s for s in table.latest_file_slices() if s.partition == partition][0]
    return update_five_records(table, s, fare)


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """v6: t1 insert, t2 update+delete, C1 compaction, D3 update, C2 compaction, D4 update (6 writes)."""
    table = build_sample_table(str(tmp_path_factory.mktemp("layers") / "t"), table_version=6, rows=60).table
    t1 = table.timeline().completed_writes()[0].timestamp
    c1 = compact_by_hand(table)
    _update_group(table, "city=chennai", 1.5)
    c2 = compact_by_hand(table)
    _update_group(table, "city=chennai", 2.5)
    assert len(table.timeline().completed_writes()) == 6
    return Path(table.base_path), {"t1": t1, "C1": c1, "C2": c2}


@pytest.fixture(scope="module")
def four_blocks(tmp_path_factory) -> Path:
    """v8: the chennai slice holds 4 valid log blocks (four update commits); other slices fewer."""
    table = build_sample_table(str(tmp_path_factory.mktemp("blocks") / "t"), table_version=8, rows=60).table
    for fare in (1.0, 2.0, 3.0, 4.0):
        _update_group(table, "city=chennai", fare)
    return Path(table.base_path)


# -- helpers ----------------------------------------------------------------------------------------
def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def name_instant(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    return LogFileName.parse(name).instant if name.startswith(".") else BaseFileName.parse(name).instant


def files_of(path: Path, *instants: str) -> set[str]:
    """Data files of the slices based at ``instants`` (v6: a slice's files carry its base instant)."""
    return {f for f in data_files(path) if name_instant(f) in instants}


def table_yaml(path: Path, text: str | None) -> None:
    target = path / ".hoodie" / "tablesvc.yaml"
    if text is None:
        target.unlink(missing_ok=True)
    else:
        target.write_text(text)


def dry_run(capsys, path: Path, *extra: str) -> tuple[set[str], str]:
    rc, out, err = cli(capsys, "clean", "run", str(path), "--dry-run", "--json", *extra)
    assert rc == 0 and not err, err
    [result] = json.loads(out)
    assert result["status"] == "dry_run"
    files = {os.path.relpath(f, path) for f in result["metrics"]["files"]}
    assert result["metrics"]["files_to_delete"] == len(files)
    return files, result["reason"]


# -- clean: which files a dry run lists, layer by layer -------------------------------------------------
def test_each_layer_sets_commits_retained_and_the_next_one_overrides_it(history, capsys, tmp_path):
    path, at = history
    state = tree(path)
    old, older = files_of(path, at["t1"]), files_of(path, at["t1"], at["C1"])
    assert old and older > old and files_of(path, at["C2"]) and not files_of(path, at["C2"]) & older
    config_file = tmp_path / "svc.yaml"
    config_file.write_text(f"{RETAINED}: 1\n")
    try:
        # 1. built-in default: 10 retained, 6 commits -> nothing to clean, and the reason says 10
        table_yaml(path, None)
        files, reason = dry_run(capsys, path)
        assert files == set() and reason == "nothing to clean: 6 completed commits <= 10 retained (KEEP_LATEST_COMMITS)"
        # 2. the table's own file: 4 retained -> ECTR = C1: only the t1 slices go
        table_yaml(path, f"{RETAINED}: 4\n")
        assert dry_run(capsys, path)[0] == old
        # 3. --config over the table's file: 1 retained -> ECTR = D4: the t1 and C1 slices go
        assert dry_run(capsys, path, "--config", str(config_file))[0] == older
        # 4. --conf over --config: back to 4
        assert dry_run(capsys, path, "--config", str(config_file), "--conf", f"{RETAINED}=4")[0] == old
        files, reason = dry_run(capsys, path, "--config", str(config_file), "--conf", f"{RETAINED}=6")
        assert files == set() and reason == "nothing to clean: 6 completed commits <= 6 retained (KEEP_LATEST_COMMITS)"
        # --conf alone over the table's file
        assert dry_run(capsys, path, "--conf", f"{RETAINED}=1")[0] == older
    finally:
        table_yaml(path, None)
    assert tree(path) == state, "a dry run must not change the table"


def test_layers_merge_key_by_key(history, capsys, tmp_path):
    """A layer overrides only the keys it sets: the table file's policy survives a --config that
    sets another key, and --conf can switch the policy back."""
    path, at = history
    config_file = tmp_path / "svc.yaml"
    config_file.write_text(f"{RETAINED}: 1\n{VERSIONS}: 2\n")
    try:
        table_yaml(path, f"{POLICY}: KEEP_LATEST_FILE_VERSIONS\n{VERSIONS}: 1\n")
        # FILE_VERSIONS=1 (table file): every group keeps only its C2 slice
        assert dry_run(capsys, path)[0] == files_of(path, at["t1"], at["C1"])
        # FILE_VERSIONS=2 (--config), policy still from the table file: the C1 slices stay
        assert dry_run(capsys, path, "--config", str(config_file))[0] == files_of(path, at["t1"])
        # --conf switches the policy; commits.retained=1 then comes from --config
        assert dry_run(capsys, path, "--config", str(config_file),
                       "--conf", f"{POLICY}=KEEP_LATEST_COMMITS")[0] == files_of(path, at["t1"], at["C1"])
    finally:
        table_yaml(path, None)


# -- log compaction: whether schedule plans anything, layer by layer ----------------------------------------
def schedule(capsys, template: Path, tmp_path: Path, label: str, table_text: str | None, *extra: str) -> dict:
    """``logcompaction schedule`` on a fresh copy (scheduling writes a plan)."""
    path = tmp_path / label
    shutil.copytree(template, path)
    table_yaml(path, table_text)
    rc, out, err = cli(capsys, "logcompaction", "schedule", str(path), "--json", *extra)
    assert rc == 0 and not err, err
    result = json.loads(out)
    pending = Table.open(str(path)).timeline().pending_log_compactions()
    assert (result["status"] == "scheduled") == bool(pending)
    return result


def test_each_layer_sets_the_log_compaction_threshold(four_blocks, capsys, tmp_path):
    def below(threshold: int) -> str:
        return (f"file groups with log blocks below the threshold (at most 4 valid log blocks < {threshold}, "
                f"{THRESHOLD})")

    config_file = tmp_path / "svc.yaml"
    config_file.write_text(f"{THRESHOLD}: 7\n")
    # default 5
    r = schedule(capsys, four_blocks, tmp_path, "default", None)
    assert r["status"] == "nothing_to_do" and f"{below(5)}; threshold 5 is the default" in r["reason"]
    # the table's file: 4 -> the chennai slice (4 blocks) is planned
    r = schedule(capsys, four_blocks, tmp_path, "table", f"{THRESHOLD}: 4\n")
    assert r["status"] == "scheduled" and r["metrics"]["threshold"] == 4 and r["metrics"]["file_groups"] == 1
    r = schedule(capsys, four_blocks, tmp_path, "table6", f"{THRESHOLD}: 6\n")
    assert r["status"] == "nothing_to_do"
    assert f"{below(6)}; threshold 6 comes from the table's .hoodie/tablesvc.yaml" in r["reason"]
    # --config (7) over the table's file (4)
    r = schedule(capsys, four_blocks, tmp_path, "config", f"{THRESHOLD}: 4\n", "--config", str(config_file))
    assert r["status"] == "nothing_to_do" and f"{below(7)}; threshold 7 comes from --config {config_file}" in r["reason"]
    # --conf (3) over --config (7) over the table's file (6)
    r = schedule(capsys, four_blocks, tmp_path, "conf", f"{THRESHOLD}: 6\n", "--config", str(config_file),
                 "--conf", f"{THRESHOLD}=3")
    assert r["status"] == "scheduled" and r["metrics"]["threshold"] == 3


# -- malformed values: exit 2, one line naming the key and the file, nothing changed ------------------------
BAD = [
    pytest.param(f"{RETAINED}: ten\n", RETAINED, "'ten'", id="not-an-integer"),
    pytest.param(f"{POLICY}: KEEP_SOME_FILES\n", POLICY, "KEEP_SOME_FILES", id="unknown-policy"),
    pytest.param(f"{THRESHOLD}: 1\n", THRESHOLD, "must be >= 2", id="below-minimum"),
]
COMMANDS = [
    ("clean", "run"), ("clean", "run", "--dry-run"), ("logcompaction", "schedule"), ("logcompaction", "run"),
    ("compaction", "schedule"), ("compaction", "run"), ("rollback",),
]


@pytest.mark.parametrize("text,key,value", BAD)
def test_a_malformed_value_in_the_table_file_is_exit_2_naming_key_and_file(history, capsys, text, key, value):
    path, _ = history
    yaml_path = path / ".hoodie" / "tablesvc.yaml"
    table_yaml(path, text)
    try:
        state = tree(path)
        for command in COMMANDS:
            rc, out, err = cli(capsys, command[0], *command[1:2], str(path), *command[2:])
            assert rc == 2, (command, out, err)
            assert out == "" and err.count("\n") == 1 and err.startswith("tablesvc: error: "), (command, err)
            assert key in err and str(yaml_path) in err and value in err, (command, err)
        assert tree(path) == state
    finally:
        table_yaml(path, None)


def test_malformed_values_in_config_file_and_conf_name_their_layer(history, capsys, tmp_path):
    path, _ = history
    state = tree(path)
    config_file = tmp_path / "svc.yaml"
    config_file.write_text(f"{POLICY}: KEEP_SOME_FILES\n")
    rc, out, err = cli(capsys, "clean", "run", str(path), "--config", str(config_file))
    assert rc == 2 and err.count("\n") == 1 and POLICY in err and str(config_file) in err
    rc, out, err = cli(capsys, "clean", "run", str(path), "--conf", f"{RETAINED}=ten")
    assert rc == 2 and err.count("\n") == 1 and RETAINED in err and "--conf" in err and "'ten'" in err
    # a valid table file does not hide a bad --conf, and a bad table file is reported even when
    # --conf would override the key (the file is broken either way)
    table_yaml(path, f"{RETAINED}: ten\n")
    try:
        rc, out, err = cli(capsys, "clean", "run", str(path), "--conf", f"{RETAINED}=1")
        assert rc == 2 and "tablesvc.yaml" in err and RETAINED in err
    finally:
        table_yaml(path, None)
    assert tree(path) == state


def test_the_precedence_doc_names_the_table_file():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "services.md").read_text()
    section = doc.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    steps = [line for line in section.splitlines() if line[:3] in ("1. ", "2. ", "3. ", "4. ")]
    assert [line[:2] for line in steps] == ["1.", "2.", "3.", "4."]
    for line, name in zip(steps, ("built-in defaults", ".hoodie/tablesvc.yaml", "--config FILE", "--conf key=value")):
        assert name in line
