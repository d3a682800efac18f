"""``tablesvc init`` and ``hoodie.metadata.enable``: unset or true, every version gets a metadata
table (``files``; Java Spark writers' default is on: Hudi 1.2's on 8 and 9, Hudi 0.15's on 6, at
``00000000000000010``); false gives none.  hudi-rs opens what init made."""

from __future__ import annotations

import json

import pytest

from helpers import tablesvc
from oracles.hudi_rs import file_slices, hudi_table, read_options


def _init(path, *extra: str):
    return tablesvc("init", str(path), "--name", "trips", "--record-key", "uuid", "--ordering-field", "ts",
                    "--partition-field", "city", "--json", *extra)


@pytest.mark.parametrize("version,conf,partitions", [
    ("8", None, "files"), ("9", None, "files"), ("6", None, "files"),
    ("8", "false", ""), ("9", "true", "files"), ("6", "false", ""), ("6", "true", "files"),
])
def test_init_builds_a_metadata_table_by_default_on_every_version(tmp_path, version, conf, partitions):
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


def test_init_on_version_6_builds_hudi_0_15_s_metadata_table(tmp_path):
    target = tmp_path / "t"
    proc = _init(target, "--table-version", "6")
    assert proc.returncode == 0, proc.stderr
    mdt = target / ".hoodie" / "metadata"
    assert (mdt / ".hoodie" / "00000000000000010.deltacommit").is_file()       # the v6 (0.x) layout
    assert (mdt / "files" / ".files-0000-0_00000000000000010.log.1_0-0-0").is_file()
    mdt_props = (mdt / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.keygenerator.class=org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator\n" in mdt_props


def test_init_text_says_what_was_built(tmp_path):
    proc = tablesvc("init", str(tmp_path / "t"), "--name", "t", "--record-key", "id")
    assert proc.returncode == 0, proc.stderr
    assert "metadata table: files" in proc.stdout
