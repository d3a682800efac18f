"""hoodie.properties, the typed table config, and table creation (checked with hudi-rs)."""

from __future__ import annotations

import os
import zlib

import pytest
from oracles.hudi_rs import hudi_table, read_options

from fixture_tables import TABLES_DIR, extracted_table_names
from tablesvc.errors import NotATableError, TableConfigError, UnsupportedTableError
from tablesvc.storage import LocalStorage
from tablesvc.api import Table
from tablesvc.table import MergeMode, TableConfig, TableSpec, parse_properties, render_properties
from tablesvc.table.properties import read_properties, table_checksum, write_properties


@pytest.mark.parametrize("name", extracted_table_names())
def test_fixture_properties_parse_and_checksum_verifies(name):
    props = read_properties(LocalStorage(), str(TABLES_DIR / name))
    assert props["hoodie.table.checksum"] == str(table_checksum(props))
    cfg = TableConfig.from_properties(props)
    assert cfg.version in (6, 8, 9)
    assert cfg.layout.value == (1 if cfg.version == 6 else 2)
    if "hoodie.table.create.schema" in props:
        assert props["hoodie.table.create.schema"].startswith('{"type":"record"')  # \: unescaped


def test_known_checksum_from_the_format_doc():
    assert table_checksum({"hoodie.database.name": "default", "hoodie.table.name": "v6_trips_8i1u"}) == 3843273058
    assert zlib.crc32(b"default.v6_trips_8i1u") == 3843273058


def test_properties_escaping_round_trips():
    props = {"hoodie.table.name": "t", "weird key": "a=b:c#d!e\\f", "schema": '{"type":"record"}',
             "unicode": "caf\u00e9", "lead": " x"}
    text = render_properties(props)
    assert 'schema={"type"\\:"record"}' in text
    back = parse_properties(text)
    assert {k: back[k] for k in props} == props
    assert back["hoodie.table.checksum"] == str(table_checksum(props))


def test_parse_java_properties_syntax():
    text = "# comment\n! also comment\n  key1 = value one\nkey2:v2\nkey3 v3\nlong=a\\\n   b\nuni=\\u0041\n"
    assert parse_properties(text) == {"key1": "value one", "key2": "v2", "key3": "v3", "long": "ab", "uni": "A"}


def test_safe_update_keeps_backup_until_verified(tmp_path):
    storage = LocalStorage()
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("id",), "ts"))
    props = dict(table.config.props) | {"hoodie.table.metadata.partitions": ""}
    write_properties(storage, table.base_path, props)
    assert not os.path.exists(os.path.join(table.base_path, ".hoodie/hoodie.properties.backup"))
    # A damaged main file falls back to the backup.
    main = os.path.join(table.base_path, ".hoodie/hoodie.properties")
    with open(main, "rb") as f:
        good = f.read()
    with open(os.path.join(table.base_path, ".hoodie/hoodie.properties.backup"), "wb") as f:
        f.write(good)
    with open(main, "w") as f:
        f.write(good.decode().replace("hoodie.table.name=t", "hoodie.table.name=other"))
    assert read_properties(storage, table.base_path)["hoodie.table.name"] == "t"


def test_damaged_properties_without_backup_is_a_clear_error(tmp_path):
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("id",)))
    main = os.path.join(table.base_path, ".hoodie/hoodie.properties")
    with open(main, "a") as f:
        f.write("hoodie.table.name=renamed\n")
    with pytest.raises(TableConfigError, match="hoodie.table.checksum"):
        Table.open(table.base_path)


def test_open_errors_name_the_path(tmp_path):
    with pytest.raises(NotATableError, match="no such folder"):
        Table.open(str(tmp_path / "missing"))
    (tmp_path / "plain").mkdir()
    with pytest.raises(NotATableError, match="not a Hudi table"):
        Table.open(str(tmp_path / "plain"))


def test_unsupported_versions_and_mismatched_layouts_are_refused():
    base = {"hoodie.table.name": "t", "hoodie.table.type": "MERGE_ON_READ"}
    with pytest.raises(UnsupportedTableError, match="version 5"):
        TableConfig.from_properties(base | {"hoodie.table.version": "5"})
    with pytest.raises(TableConfigError, match="layout.version=1 does not match table version 8"):
        TableConfig.from_properties(base | {"hoodie.table.version": "8", "hoodie.timeline.layout.version": "1"})
    with pytest.raises(TableConfigError, match="hoodie.table.type"):
        TableConfig.from_properties(base | {"hoodie.table.version": "8", "hoodie.table.type": "BOTH"})


@pytest.mark.parametrize("version", [6, 8, 9])
@pytest.mark.parametrize("partitioned", [True, False])
def test_created_table_opens_in_hudi_rs_and_reads_empty(tmp_path, version, partitioned):
    spec = TableSpec("sample", ("id",), "ts", ("region",) if partitioned else (), table_version=version)
    table = Table.create(str(tmp_path / "t"), spec)
    hudi = hudi_table(table.base_path)
    assert hudi.table_name == "sample"
    assert hudi.is_mor
    assert hudi.read(read_options()) == []
    assert hudi.get_file_slices(read_options()) == []
    reopened = Table.open(table.base_path)
    assert reopened.config.version == version
    assert reopened.config.merge_mode is MergeMode.EVENT_TIME_ORDERING
    assert reopened.config.record_key_fields == ("id",)
    assert reopened.config.ordering_field == "ts"
    assert not reopened.config.has_metadata_table
    assert reopened.timeline().instants == ()


def test_create_refuses_an_existing_table_and_bad_specs(tmp_path):
    Table.create(str(tmp_path / "t"), TableSpec("t", ("id",)))
    with pytest.raises(TableConfigError, match="already a Hudi table"):
        Table.create(str(tmp_path / "t"), TableSpec("t", ("id",)))
    from tablesvc.errors import InvalidInputError
    with pytest.raises(InvalidInputError, match="record key"):
        TableSpec("t", ()).validate()
    with pytest.raises(InvalidInputError, match="ordering field"):
        TableSpec("t", ("id",), merge_mode=MergeMode.EVENT_TIME_ORDERING).validate()
    with pytest.raises(InvalidInputError, match="table name"):
        TableSpec("bad name", ("id",)).validate()


def test_fixture_merge_modes_match_hudi_rs_inference():
    """Merge modes as the oracle doc's P5 matrix says hudi-rs infers them."""
    assert Table.open(str(TABLES_DIR / "v6_trips_8i1u")).config.merge_mode is MergeMode.COMMIT_TIME_ORDERING
    assert Table.open(str(TABLES_DIR / "v8_trips_8i3u1d")).config.merge_mode is MergeMode.EVENT_TIME_ORDERING
    assert Table.open(str(TABLES_DIR / "v8_trips_8i3u1d")).config.has_metadata_table
