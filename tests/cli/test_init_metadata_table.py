"""``tablesvc init`` and ``hoodie.metadata.enable``: unset, versions 8 and 9 get a metadata table
(``files``; Java Spark writers' default is on) and version 6 none; true with version 6 is refused
in one line (exit 2) with nothing created; false gives none.  hudi-rs opens what init made."""

from __future__ import annotations

import json

import pytest

from helpers import one_error_line, tablesvc
from oracles.hudi_rs import file_slices, hudi_table, read_options


def _init(path, *extra: str):
    return tablesvc("init", str(path), "--name", "trips", "--record-key", "uuid", "--ordering-field", "ts",
                    "--partition-field", "city", "--json", *extra)


@pytest.mark.parametrize("version,conf,partitions", [
    ("8", None, "files"), ("9", None, "files"), ("6", None, ""),
    ("8", "false", ""), ("9", "true", "files"), ("6", "false", ""),
])
def test_init_builds_a_metadata_table_by_default_on_versions_8_and_9(tmp_path, version, conf, partitions):
    target = tmp_path / "t"
    proc = _init(target, "--table-version", version, *(["--conf", f"hoodie.metadata.enable={conf}"] if conf else []))
    assert proc.returncode == 0, proc.stderr
    props = (target / ".hoodie" / "hoodie.properties").read_text()
    assert f"hoodie.table.metadata.partitions={partitions}\n" in props
    assert (target / ".hoodie" / "metadata").exists() == bool(partitions)
    assert hudi_table(target).read(read_options()) == [] and file_slices(target) == []
    if partitions:
        mdt_props = (target / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties").read_text()
        assert "hoodie.table.name=trips_metadata\n" in mdt_props and f"hoodie.table.version={version}\n" in mdt_props
    assert json.loads(tablesvc("timeline", str(target), "--json").stdout) == []


def test_init_refuses_a_metadata_table_on_version_6(tmp_path):
    target = tmp_path / "t"
    proc = _init(target, "--table-version", "6", "--conf", "hoodie.metadata.enable=true")
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "hoodie.metadata.enable=true" in line and "table version 6" in line
    assert not target.exists()


def test_init_text_says_what_was_built(tmp_path):
    proc = tablesvc("init", str(tmp_path / "t"), "--name", "t", "--record-key", "id")
    assert proc.returncode == 0, proc.stderr
    assert "metadata table: files" in proc.stdout
