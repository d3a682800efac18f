"""The metadata table's ``record_index`` as tablesvc writes it (``metadata/record_index.py``,
``metadata/write_key_changes.py``), against the records Apache Hudi wrote into the carried tables:
every record-index cell re-encodes from (partition, file id, instant) to Java's exact bytes; the
records of Java's insert commits come out of the key changes those commits made, in the same file
groups; Java's DELETE blocks hold exactly the keys the data commit deleted."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from fixture_tables import TABLES_DIR
from record_index_check import check_record_index
from tablesvc.errors import UnsupportedTableError
from tablesvc.hfile import HFileReader, read_hfile
from tablesvc.logformat import BlockType, block_deletes, read_log_file
from tablesvc.logformat.avro_content import parse_avro_schema
from tablesvc.metadata.record_index import (file_id_of, file_id_parts, record_index_changes, record_index_record)
from tablesvc.metadata.write_key_changes import (FileGroupKeyChanges, WriteKeyChanges, group_key_changes,
                                                 wants_key_changes)
from tablesvc.metadata.writer import file_group_index
from tablesvc.storage import LocalStorage
from tablesvc.table.config import TableConfig
from tablesvc.table.properties import read_properties
from timeline.instant_time import parse_instant, resolve_timezone

RLI_FIXTURES = ["v8_trips_8i3u1d", "v9_nonpartitioned_rollback", "zips:mor_avro_v9_txns_simple_meta"]


def _path(fixture_root, name: str) -> Path:
    return fixture_root.path(name) if name.startswith("zips:") else TABLES_DIR / name


def _rli_files(path: Path) -> list[Path]:
    return sorted(p for p in (path / ".hoodie" / "metadata" / "record_index").iterdir()
                  if not p.name.startswith(".hoodie") and not p.name.endswith(".crc") and p.is_file())


def _cells(path: Path):
    """(instant or None, schema, HFileReader) of every HFile holding record-index records, and the
    DELETE blocks as (instant, [keys])."""
    storage = LocalStorage()
    hfiles, deletes = [], []
    for f in _rli_files(path):
        if f.name.endswith(".hfile"):
            reader = read_hfile(storage, str(f))
            hfiles.append((None, reader.schema, reader))
            continue
        for block in read_log_file(storage, str(f)).blocks:
            if block.block_type is BlockType.HFILE_DATA:
                hfiles.append((block.instant_time, block.schema, HFileReader(block.content, str(f), block.offset)))
            elif block.block_type is BlockType.DELETE:
                deletes.append((block.instant_time, [d.record_key for d in block_deletes(block, str(f))], f))
    return hfiles, deletes


@pytest.mark.parametrize("name", RLI_FIXTURES)
def test_every_record_index_cell_re_encodes_to_java_bytes(fixture_root, name):
    path = _path(fixture_root, name)
    hfiles, _ = _cells(path)
    n = 0
    for _instant, schema_json, reader in hfiles:
        schema = parse_avro_schema(schema_json)
        for cell in reader.cells():
            record = fastavro.schemaless_reader(io.BytesIO(cell.value), schema, None)
            info = record["recordIndexMetadata"]
            file_id = file_id_of(info)
            assert file_id_parts(file_id) == (info["fileIdHighBits"], info["fileIdLowBits"], info["fileIndex"])
            rebuilt = record_index_record(info["partitionName"], file_id, info["instantTime"], schema_json)
            # a compaction fills _hoodie_file_name (as for every partition); the rest is the writer's
            rebuilt["_hoodie_file_name"] = record.get("_hoodie_file_name")
            out = io.BytesIO()
            fastavro.schemaless_writer(out, schema, rebuilt)
            assert out.getvalue() == cell.value, (name, cell.key)
            n += 1
    assert n > 0
    # and Java's record index names the table's live keys (the check the Spark test relies on)
    assert check_record_index(path) > 0


@dataclass(frozen=True)
class _Table:
    storage: object
    base_path: str
    config: TableConfig


def _open(path: Path) -> _Table:
    storage = LocalStorage()
    return _Table(storage, str(path), TableConfig.from_properties(read_properties(storage, str(path)), str(path)))


def test_java_insert_commits_are_what_their_key_changes_give(fixture_root):
    """v9_nonpartitioned_rollback: commit 20260403184238571 inserted TXN-001..003 into a new base
    file, 20260403184302162 inserted TXN-002 again into another: the records tablesvc makes from
    those key changes are Java's, cell for cell, in the same file groups."""
    path = TABLES_DIR / "v9_nonpartitioned_rollback"
    table = _open(path)
    hfiles, _ = _cells(path)
    java: dict[str, dict[str, bytes]] = {}
    schema_json = None
    for instant, schema, reader in hfiles:
        schema_json = schema
        for cell in reader.cells():
            java.setdefault(instant, {})[cell.key] = cell.value
    groups = sorted({f.name.split("_")[0].lstrip(".") for f in _rli_files(path)})
    commits = {"20260403184238571": ("5aa8d873-d341-4a43-aef0-51c33fec06f1-0", ("TXN-001", "TXN-002", "TXN-003")),
               "20260403184302162": ("65ad1e15-43be-4901-b753-5d8b12923927-0", ("TXN-002",))}
    schema = parse_avro_schema(schema_json)
    for ts, (file_id, keys) in commits.items():
        changes = WriteKeyChanges.of([FileGroupKeyChanges("", file_id, ts, False, inserted=keys)])
        out = record_index_changes(table, ts, changes, schema_json)
        assert out.deleted_keys == ()
        mine = {}
        for r in out.records:
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, schema, r.record)
            mine[r.key] = buf.getvalue()
            assert r.record["recordIndexMetadata"]["instantTime"] == parse_instant(ts, resolve_timezone("UTC"))
        assert mine == java[ts]
        # and the file groups: each key's log file of ts is the group its hash names
        for key in keys:
            logs = [f for f in _rli_files(path) if f"_{ts}.log" in f.name]
            holder = {f.name.split("_")[0].lstrip(".") for f in logs
                      if any(c.key == key for b in read_log_file(LocalStorage(), str(f)).blocks
                             if b.block_type is BlockType.HFILE_DATA
                             for c in HFileReader(b.content, str(f), b.offset).cells())}
            assert holder == {groups[file_group_index(key, len(groups))]}


def test_java_delete_blocks_hold_the_keys_the_data_commit_deleted(fixture_root):
    """mor_avro_v9_txns_simple_meta: each record-index DELETE block at T holds exactly the keys of
    the DELETE blocks of T's data log files (what a tablesvc delete reports as ``deleted``)."""
    path = fixture_root.path("zips:mor_avro_v9_txns_simple_meta")
    _, deletes = _cells(path)
    assert deletes, "the fixture has record-index deletes"
    by_instant: dict[str, set[str]] = {}
    for instant, keys, _f in deletes:
        by_instant.setdefault(instant, set()).update(keys)
    # a replacecommit (insert overwrite / delete partition) deletes the keys of the file groups it
    # replaces (Java's getRecordIndexAdditionalUpserts): not a tablesvc action; deltacommits only
    timeline = path / ".hoodie" / "timeline"
    by_instant = {ts: keys for ts, keys in by_instant.items() if list(timeline.glob(f"{ts}_*.deltacommit"))}
    assert by_instant, "the fixture has record-index deletes of a delta commit"
    storage = LocalStorage()
    for ts, keys in by_instant.items():
        data_deleted = set()
        for log in path.glob(f"*/.*_{ts}.log.*"):
            for block in read_log_file(storage, str(log)).blocks:
                if block.block_type is BlockType.DELETE:
                    data_deleted.update(d.record_key for d in block_deletes(block, str(log)))
        assert keys == data_deleted, ts


def test_group_key_changes():
    keys = pa.array(["a", "b", "c"])
    new = group_key_changes("p", "f-0", "T", False, False, keys)
    assert (new.inserted, new.updated, new.deleted) == (("a", "b", "c"), (), ())
    assert group_key_changes("p", "f-0", "T", False, True, keys).is_empty        # a delete writes no new group
    found = group_key_changes("p", "f-0", "T", True, False, keys)                # lookup index: all present
    assert (found.inserted, found.updated) == ((), ("a", "b", "c"))
    bucket = group_key_changes("p", "f-0", "T", True, False, keys, pa.array([True, False, True]))
    assert (bucket.inserted, bucket.updated) == (("b",), ("a", "c"))
    lean = group_key_changes("p", "f-0", "T", True, False, keys, pa.array([True, False, True]), keep_updates=False)
    assert (lean.inserted, lean.updated) == (("b",), ())
    deleted = group_key_changes("p", "f-0", "T", True, True, keys, pa.array([True, False, True]))
    assert (deleted.deleted, deleted.inserted) == (("a", "c"), ())
    assert FileGroupKeyChanges.from_json(bucket.to_json()) == bucket
    assert wants_key_changes({"hoodie.table.metadata.partitions": "files,record_index"})
    assert wants_key_changes({"hoodie.table.metadata.partitions.inflight": "secondary_index_x"})
    assert not wants_key_changes({"hoodie.table.metadata.partitions": "files,column_stats"})


def test_reduce_and_refusals(tmp_path):
    path = TABLES_DIR / "v9_nonpartitioned_rollback"
    table = _open(path)
    fid = "5aa8d873-d341-4a43-aef0-51c33fec06f1-0"
    both = WriteKeyChanges.of([FileGroupKeyChanges("", fid, "20260403184238571", True, deleted=("k", "d")),
                               FileGroupKeyChanges("", "65ad1e15-43be-4901-b753-5d8b12923927-0",
                                                   "20260403184238571", False, inserted=("k",))])
    out = record_index_changes(table, "20260403184238571", both, None)
    assert [r.key for r in out.records] == ["k"] and out.deleted_keys == ("d",)   # the insert wins
    twice = WriteKeyChanges.of([FileGroupKeyChanges("", fid, "20260403184238571", False, inserted=("k",)),
                                FileGroupKeyChanges("", "65ad1e15-43be-4901-b753-5d8b12923927-0",
                                                    "20260403184238571", False, inserted=("k",))])
    with pytest.raises(UnsupportedTableError, match="two file groups"):
        record_index_changes(table, "20260403184238571", twice, None)
    # a partitioned table: the upsert looked its keys up in the built index before it ran
    # (spark.record_index_lookup_job), so an insert gets its record; with the index still being
    # built (listed inflight only) nothing could answer, and an insert is refused
    partitioned = _open(TABLES_DIR / "v8_trips_8i3u1d")
    ins = WriteKeyChanges.of([FileGroupKeyChanges("city=x", fid, "20251220210108078", False, inserted=("k",))])
    [record] = record_index_changes(partitioned, "20251220210108078", ins, None).records
    assert record.key == "k" and record.record["recordIndexMetadata"]["partitionName"] == "city=x"
    props = dict(partitioned.config.props)
    props["hoodie.table.metadata.partitions"] = props["hoodie.table.metadata.partitions"].replace("record_index,", "")
    props["hoodie.table.metadata.partitions.inflight"] = "record_index"
    building = _Table(partitioned.storage, partitioned.base_path,
                      TableConfig.from_properties(props, partitioned.base_path))
    with pytest.raises(UnsupportedTableError, match="still being built"):
        record_index_changes(building, "20251220210108078", ins, None)
    upd = WriteKeyChanges.of([FileGroupKeyChanges("city=x", fid, "20251220210108078", True, updated=("k",))])
    assert record_index_changes(partitioned, "20251220210108078", upd, None).records == ()


def test_present_key_mask_reads_which_keys_a_slice_holds():
    """The bucket index's question (``write.existing_keys.present_key_mask``): which of a batch's
    keys the file group's latest slice holds, deletes applied; against hudi-rs's rows."""
    from oracles.hudi_rs import read_rows

    from tablesvc.api import Table
    from tablesvc.merge import ReadContext, SliceSpec
    from tablesvc.write.existing_keys import PresentKeys, present_key_mask

    path = TABLES_DIR / "v9_nonpartitioned_rollback"
    table = Table.open(str(path))
    ctx = ReadContext.for_table(table, columns=("_hoodie_record_key",))
    held_by: dict[str, set[str]] = {}
    for row in read_rows(path):
        held_by.setdefault(row["_hoodie_file_name"].split("_")[0], set()).add(row["_hoodie_record_key"])
    keys = pa.array(["TXN-001", "TXN-002", "TXN-003", "TXN-999"])
    slices = table.latest_file_slices()
    assert {s.file_id for s in slices} == set(held_by)
    for s in slices:
        mask = present_key_mask(table.storage, SliceSpec.from_file_slice(s), ctx, keys).to_pylist()
        assert mask == [k in held_by[s.file_id] for k in keys.to_pylist()]
    present = PresentKeys(ctx, {})
    assert present.mask(table.storage, "", "unknown-0", keys).to_pylist() == [False] * 4
