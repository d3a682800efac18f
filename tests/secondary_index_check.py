"""What the secondary-index tests compare: a ``secondary_index_<name>`` partition of the metadata
table, decoded here from its keys with an unescaping of its own (not tablesvc's
``metadata.secondary_index``), against (value text, record key) pairs of the table's live rows as
hudi-rs reads them.  A value's text is Spark's: a string as is, a date as its day number."""

from __future__ import annotations

import datetime
import json

from oracles.hudi_rs import read_rows

from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.partition_reader import slice_records
from tablesvc.metadata.writer import file_group_index

EPOCH = datetime.date(1970, 1, 1)


def _split(key: str) -> tuple[str | None, str, str]:
    """(value, record key, the escaped value with its separator) of a stored key."""
    parts, current, escaped, prefix = [], [], False, None
    for i, c in enumerate(key):
        if escaped:
            current.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == "$" and prefix is None:
            parts.append("".join(current))
            current, prefix = [], key[:i + 1]
        else:
            current.append(c)
    assert prefix is not None, key
    value = None if prefix == "\u0000$" else parts[0]
    return value, "".join(current), prefix


def index_definition(path, partition: str) -> dict:
    return json.loads((path / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"][partition]


def stored_pairs(path, partition: str) -> set[tuple[str | None, str]]:
    """(value, record key) of every live key of the partition; checks each key's file group too
    (V2 indexes hash the value prefix, V1 the whole key)."""
    table = Table.open(str(path))
    version = index_definition(path, partition).get("version", "V1")
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    slices = mdt.partition_slices(partition)
    groups = sorted(s.file_id for s in slices)
    out: set[tuple[str | None, str]] = set()
    for file_slice in slices:
        for key, record in slice_records(mdt, file_slice, lambda newer, older: newer).items():
            value, record_key, prefix = _split(key)
            hashed = prefix if version == "V2" else key
            assert groups[file_group_index(hashed, len(groups))] == file_slice.file_id, (partition, key)
            if record is not None and not record["SecondaryIndexMetadata"]["isDeleted"]:
                assert (value, record_key) not in out
                out.add((value, record_key))
    return out


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return str((value - EPOCH).days)
    return str(value)


def table_pairs(path, column: str) -> set[tuple[str | None, str]]:
    """(value text, record key) of every live row, as hudi-rs reads the table."""
    return {(_text(row[column]), row["_hoodie_record_key"]) for row in read_rows(path)}


def check_secondary_indexes(path) -> dict[str, int]:
    """Every listed secondary index equals the table's (value, key) pairs; partition -> count."""
    props = (path / ".hoodie" / "hoodie.properties").read_text()
    listed = [p for line in props.splitlines() if line.startswith("hoodie.table.metadata.partitions=")
              for p in line.split("=", 1)[1].split(",") if p.startswith("secondary_index_")]
    counts = {}
    for partition in listed:
        [column] = index_definition(path, partition)["sourceFields"]
        stored, expected = stored_pairs(path, partition), table_pairs(path, column)
        assert stored == expected, (partition, sorted(stored - expected, key=str), sorted(expected - stored, key=str))
        counts[partition] = len(stored)
    return counts
