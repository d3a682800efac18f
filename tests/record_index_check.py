"""What the record-index tests compare: the metadata table's ``record_index`` (key -> partition and
file group), decoded here without tablesvc's record-index code (its bits turned back into a file id
with ``uuid`` alone), against the table's live keys as hudi-rs reads them (``_hoodie_record_key``,
``_hoodie_partition_path``, and the file group from ``_hoodie_file_name``: a base file's name starts
with its file id, a log record's names the file id itself)."""

from __future__ import annotations

import uuid

from oracles.hudi_rs import read_rows

from tablesvc.api import Table
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.partition_reader import partition_records, slice_records
from tablesvc.metadata.writer import file_group_index

RECORD_INDEX = "record_index"


def _file_id(info: dict) -> str:
    if info["fileIdEncoding"] == 1:
        return info["fileId"]
    bits = ((info["fileIdHighBits"] % (1 << 64)) << 64) | (info["fileIdLowBits"] % (1 << 64))
    text = str(uuid.UUID(int=bits))
    return text if info["fileIndex"] == -1 else f"{text}-{info['fileIndex']}"


def stored_record_index(path) -> dict[str, tuple[str, str, int]]:
    """key -> (partition, file id, instant ms) of every live record-index entry (tombstones left
    out); also checks each key sits in the file group its hash names."""
    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    out: dict[str, tuple[str, str, int]] = {}
    groups = sorted({s.file_id for s in mdt.partition_slices(RECORD_INDEX)})
    for file_slice in mdt.partition_slices(RECORD_INDEX):
        for key, record in slice_records(mdt, file_slice, lambda newer, older: newer).items():
            assert groups[file_group_index(key, len(groups))] == file_slice.file_id, (key, file_slice.file_id)
            if record is None:
                continue
            info = record["recordIndexMetadata"]
            out[key] = (info["partitionName"], _file_id(info), info["instantTime"])
    assert set(out) == {k for k, v in partition_records(mdt, RECORD_INDEX, lambda n, o: n).items() if v is not None}
    return out


def table_key_locations(path) -> dict[str, set[tuple[str, str]]]:
    """key -> every (partition, file id) holding it, as hudi-rs reads the table (a Java insert may
    leave a key in two file groups: ``v9_nonpartitioned_rollback``'s TXN-002)."""
    out: dict[str, set[tuple[str, str]]] = {}
    for row in read_rows(path):
        location = (row["_hoodie_partition_path"] or "", row["_hoodie_file_name"].split("_")[0])
        out.setdefault(row["_hoodie_record_key"], set()).add(location)
    return out


def check_record_index(path) -> int:
    """The record index names exactly the table's live keys, each at a (partition, file group) that
    holds it; returns the count."""
    stored = stored_record_index(path)
    located = {k: v[:2] for k, v in stored.items()}
    actual = table_key_locations(path)
    missing = sorted(set(actual) - set(located))[:5]
    extra = sorted(set(located) - set(actual))[:5]
    wrong = sorted(k for k in set(actual) & set(located) if located[k] not in actual[k])[:5]
    assert not (missing or extra or wrong), (f"record_index differs from the table: missing {missing}, extra {extra}, "
                                             f"wrong location {[(k, located[k], actual[k]) for k in wrong]}")
    return len(stored)
