"""Tables tablesvc creates with a metadata table (``tablesvc/metadata/bootstrap.py``): what is built
against what Java wrote when it initialised the carried fixtures' metadata tables on an empty table
(``mor_avro_v9_txns_simple_meta``; version 6: ``v6_mdt_files``, which Java 0.15.0 initialised),
readers (tablesvc, hudi-rs) after tablesvc's commits, and a kill after every storage call of the
creation."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from oracles.hudi_rs import sorted_rows as hudi_rs_rows

from invariants import check_invariants
from metadata_stats_check import check_column_stats, check_partition_stats
from metadata_tables import metadata_listing, storage_listing
from model_state_machine import CrashingStorage, SimulatedCrash
from table_builders import write_without_spark
from tablesvc.api import Table, TableSpec
from fixture_tables import v6_metadata_table
from tablesvc.errors import NotATableError
from tablesvc.hfile import read_hfile
from tablesvc.logformat.hfile_content import decode_hfile
from tablesvc.metadata.writer import WRITE_TOKEN
from tablesvc.storage import LocalStorage
from tablesvc.table.properties import read_properties
from timeline.active import Timeline
from timeline.clock import ManualClock

SCHEMA = pa.schema([("uuid", pa.string()), ("ts", pa.int64()), ("fare", pa.float64()), ("city", pa.string())])
AVRO_SCHEMA = json.dumps({"type": "record", "name": "trips", "fields": [
    {"name": "uuid", "type": "string"}, {"name": "ts", "type": "long"},
    {"name": "fare", "type": ["null", "double"]}, {"name": "city", "type": ["null", "string"]}]})


def _spec(version=9, schema=None, **kw) -> TableSpec:
    return TableSpec("trips", ("uuid",), "ts", ("city",), table_version=version, num_buckets=2,
                     metadata_table=True, create_schema=schema, **kw)


def _rows(n: int, ts: int, start: int = 0) -> pa.Table:
    return pa.Table.from_pylist([{"uuid": f"k{i:03d}", "ts": ts, "fare": float(i + ts),
                                  "city": ("sf", "nyc", "la")[i % 3]} for i in range(start, start + n)], schema=SCHEMA)


@pytest.fixture(scope="module")
def java_mdt(fixture_root) -> Path:
    """The Java-written metadata table (read only)."""
    return Path(fixture_root.path("zips:mor_avro_v9_txns_simple_meta")) / ".hoodie" / "metadata"


def _props_without_stamp(path: Path) -> dict[str, str]:
    props = read_properties(LocalStorage(), str(path))
    return {k: v for k, v in props.items() if k not in ("hoodie.table.checksum", "hoodie.table.name")}


def _commit(mdt: Path, instant: str) -> dict:
    (path,) = (mdt / ".hoodie" / "timeline").glob(f"{instant}_*.deltacommit")
    return next(iter(fastavro.reader(io.BytesIO(path.read_bytes()))))


def test_what_is_built_is_what_java_built_on_an_empty_table(tmp_path, java_mdt):
    table = Table.create(str(tmp_path / "t"), _spec(schema=AVRO_SCHEMA))
    ours = tmp_path / "t" / ".hoodie" / "metadata"
    assert table.config.props["hoodie.table.metadata.partitions"] == "column_stats,files,partition_stats"
    assert table.config.props["hoodie.table.metadata.partitions.inflight"] == ""
    # the metadata table's hoodie.properties: Java's keys and values (name and checksum aside)
    assert _props_without_stamp(ours) == _props_without_stamp(java_mdt)
    assert read_properties(LocalStorage(), str(ours))["hoodie.table.name"] == "trips_metadata"
    # init log files: byte for byte (files at ...000 and column stats' two groups at ...001, as Java)
    for rel in ("files/.files-0000-0_00000000000000000.log.1_0-0-0",
                "column_stats/.col-stats-0000-0_00000000000000001.log.1_0-0-0",
                "column_stats/.col-stats-0001-0_00000000000000001.log.1_0-0-0"):
        assert (ours / rel).read_bytes() == (java_mdt / rel).read_bytes(), rel
    # partition stats: one group; Java's sits at ...003 (record_index took ...002 there)
    java_ps = (java_mdt / "partition_stats/.partition-stats-0000-0_00000000000000003.log.1_0-0-0").read_bytes()
    ours_ps = (ours / "partition_stats/.partition-stats-0000-0_00000000000000002.log.1_0-0-0").read_bytes()
    assert ours_ps == java_ps.replace(b"00000000000000003", b"00000000000000002")
    assert sorted(p.name for p in (ours / "column_stats").iterdir() if "log" in p.name) == \
        [".col-stats-0000-0_00000000000000001.log.1_0-0-0", ".col-stats-0001-0_00000000000000001.log.1_0-0-0"]
    for part, instant in (("files", "0"), ("column_stats", "1"), ("partition_stats", "2")):
        lines = [x for x in (ours / part / ".hoodie_partition_metadata").read_text().splitlines() if "#" not in x]
        assert lines == [f"commitTime={instant:0>17}", "partitionDepth=1"]
        assert "partitionDepth=1" in (java_mdt / part / ".hoodie_partition_metadata").read_text()
    # the files base file: the same cells (Java's also carries a bloom filter, off in Hudi 1.2)
    java_base = read_hfile(LocalStorage(), str(java_mdt / "files/files-0000-0_0-5-4_00000000000000000.hfile"))
    our_base = read_hfile(LocalStorage(), str(ours / "files/files-0000-0_1-0-1_00000000000000000.hfile"))
    assert [(c.key, c.value) for c in our_base.cells()] == [(c.key, c.value) for c in java_base.cells()]
    assert our_base.schema == java_base.schema
    # the init delta commits: operation, write stats, schema as Java's
    java_files, our_files = _commit(java_mdt, "00000000000000000"), _commit(ours, "00000000000000000")
    assert our_files["operationType"] == java_files["operationType"] == "BULK_INSERT_PREPPED"
    (js,), (os_,) = java_files["partitionToWriteStats"]["files"], our_files["partitionToWriteStats"]["files"]
    for field in ("fileId", "prevCommit", "numWrites", "numInserts", "numDeletes", "partitionPath"):
        assert os_[field] == js[field], field
    assert os_["fileSizeInBytes"] == (ours / os_["path"]).stat().st_size
    assert our_files["extraMetadata"]["schema"] == java_files["extraMetadata"]["schema"]
    assert _commit(ours, "00000000000000001")["partitionToWriteStats"] == \
        _commit(java_mdt, "00000000000000001")["partitionToWriteStats"] == {}
    assert not (ours / ".hoodie" / "timeline" / "00000000000000000.deltacommit.inflight").read_bytes()
    # the column stats' definition: Java's default columns of the schema, index version V2 on v9
    definition = json.loads((tmp_path / "t/.hoodie/.index_defs/index.json").read_text())["indexDefinitions"]
    assert definition["column_stats"]["sourceFields"] == [
        "_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key", "uuid", "ts", "fare", "city"]
    assert definition["column_stats"]["version"] == "V2"


def test_without_a_schema_only_files_and_no_index_definitions(tmp_path):
    table = Table.create(str(tmp_path / "t"), _spec(version=8))
    assert table.config.props["hoodie.table.metadata.partitions"] == "files"
    assert "hoodie.table.index.defs.path" not in table.config.props
    assert not (tmp_path / "t/.hoodie/.index_defs").exists()
    assert table.uses_metadata_table and table.latest_file_slices() == []


def _v6_records(path: Path) -> list[tuple[str, dict]]:
    """The base HFile's records, ``_hoodie_file_name`` without the write token (Java's is Spark's)."""
    reader = read_hfile(LocalStorage(), str(path))
    out = []
    for r in decode_hfile(reader, reader.schema):
        rec = dict(r.record)
        rec["_hoodie_file_name"] = rec["_hoodie_file_name"].split("_")[0] + "_" + rec["_hoodie_file_name"].split("_")[-1]
        out.append((r.key, rec))
    return out


def test_version_6_builds_what_java_0_15_built_on_an_empty_table(tmp_path):
    java = v6_metadata_table("v6_mdt_files", tmp_path) / ".hoodie" / "metadata"
    table = Table.create(str(tmp_path / "t"), _spec(version=6, schema=AVRO_SCHEMA))
    ours = tmp_path / "t" / ".hoodie" / "metadata"
    # files only (Hudi 0.15's default partitions), listed in the data table's properties
    assert table.config.props["hoodie.table.metadata.partitions"] == "files"
    assert table.config.props["hoodie.table.metadata.partitions.inflight"] == ""
    assert sorted(p.name for p in ours.iterdir()) == [".hoodie", "files"]
    assert not (tmp_path / "t/.hoodie/.index_defs").exists()
    # hoodie.properties: 0.15's keys and values (the name aside); same checksum for the same name
    assert _props_without_stamp(ours) == _props_without_stamp(java)
    # the init instant 00000000000000010 (14 zeros + 010); the init log file byte for byte
    init = "00000000000000010"
    rel = f"files/.files-0000-0_{init}.log.1_0-0-0"
    assert (ours / rel).read_bytes() == (java / rel).read_bytes()
    lines = [x for x in (ours / "files/.hoodie_partition_metadata").read_text().splitlines() if "#" not in x]
    assert lines == [f"commitTime={init}", "partitionDepth=1"]
    assert lines == [x for x in (java / "files/.hoodie_partition_metadata").read_text().splitlines() if "#" not in x]
    # the base file: 0.15's record schema and the same record (file name filled in, as 0.15's)
    (our_base,) = (ours / "files").glob("*.hfile")
    java_base = java / f"files/files-0000-0_0-5-4_{init}.hfile"
    assert our_base.name.endswith(f"_{init}.hfile")
    assert read_hfile(LocalStorage(), str(our_base)).schema == read_hfile(LocalStorage(), str(java_base)).schema
    assert _v6_records(our_base) == _v6_records(java_base)
    # the v6 timeline: requested, inflight (both empty) and the completed delta commit, JSON
    timeline = ours / ".hoodie"
    assert sorted(p.name for p in timeline.iterdir() if p.is_file() and p.name.startswith("0")) == \
        [f"{init}.deltacommit", f"{init}.deltacommit.inflight", f"{init}.deltacommit.requested"]
    assert not (timeline / f"{init}.deltacommit.inflight").read_bytes()
    assert not (timeline / f"{init}.deltacommit.requested").read_bytes()
    our_c = json.loads((timeline / f"{init}.deltacommit").read_text())
    java_c = json.loads((java / ".hoodie" / f"{init}.deltacommit").read_text())
    assert our_c["operationType"] == java_c["operationType"] == "BULK_INSERT"
    assert our_c["extraMetadata"] == java_c["extraMetadata"]
    (os_,), (js,) = our_c["partitionToWriteStats"]["files"], java_c["partitionToWriteStats"]["files"]
    assert sorted(os_) == sorted(js)
    for field in ("fileId", "prevCommit", "numWrites", "numInserts", "numDeletes", "numUpdateWrites", "partitionPath"):
        assert os_[field] == js[field], field
    assert os_["fileSizeInBytes"] == our_base.stat().st_size


@pytest.mark.parametrize("version,schema", [(8, None), (9, AVRO_SCHEMA), (6, None)],
                         ids=["v8-files", "v9-files-and-stats", "v6-files"])
def test_tablesvc_commits_keep_the_new_metadata_table_true(tmp_path, version, schema):
    path = str(tmp_path / "t")
    clock = ManualClock(1_700_000_000_000)
    Table.create(path, _spec(version, schema), clock=clock)
    model: dict = {}
    for step, (n, start, op) in enumerate([(9, 0, "upsert"), (6, 4, "upsert"), (5, 7, "insert"), (3, 0, "delete")]):
        clock.advance(1000)
        table = Table.open(path, clock=clock)
        batch = _rows(n, step + 1, start)
        write_without_spark(table, batch if op != "delete" else batch.select(["uuid", "city"]), op, stage=step)
        for r in batch.to_pylist():
            if op == "delete":
                model.pop(r["uuid"], None)
            else:
                model[r["uuid"]] = (r["ts"], r["fare"])
        violations = check_invariants(path, model)      # includes the metadata table == storage check
        assert violations == [], f"after step {step}: {violations}"
        assert metadata_listing(table) == storage_listing(path)
        if schema:
            assert check_column_stats(path, metadata_listing(Table.open(path))) > 0
            check_partition_stats(path)
        if version == 6:        # hudi-rs lists v6 tables from storage: its rows are the model's
            assert hudi_rs_rows(path, ("uuid", "ts", "fare")) == sorted((k, *v) for k, v in model.items())
    table = Table.open(path)
    mdt_timeline = Timeline.load(table.storage, f"{path}/.hoodie/metadata", table.config.layout)
    assert len(mdt_timeline.completed()) == (3 if schema else 1) + 4
    if version == 6:            # each write a delta commit at its own time, after the one at ...010
        assert [i.timestamp for i in mdt_timeline.completed()][0] == "00000000000000010"


def _names(path: Path) -> list[str]:
    """Every file and folder under the table, completion times of timeline files aside."""
    names = (p.relative_to(path).as_posix() for p in path.rglob("*"))
    return sorted(n.split("_2")[0] if "/timeline/" in n else n for n in names)


@pytest.mark.parametrize("version", [9, 6])
def test_a_kill_after_any_storage_call_leaves_no_table_and_a_retry_builds_it(tmp_path, version):
    clean = tmp_path / "clean"
    Table.create(str(clean), _spec(version, schema=AVRO_SCHEMA))
    point = 1
    while True:
        path = tmp_path / f"k{point}"
        storage = CrashingStorage(LocalStorage(), crash_at=point)
        try:
            Table.create(str(path), _spec(version, schema=AVRO_SCHEMA), storage=storage)
        except SimulatedCrash:
            if (path / ".hoodie" / "hoodie.properties").exists():
                # killed right after the last call, the data table's hoodie.properties: the table is done
                assert check_invariants(str(path), {}) == [] and _names(path) == _names(clean)
                break
            # no hoodie.properties: no table, for every reader
            with pytest.raises(NotATableError):
                Table.open(str(path))
            Table.create(str(path), _spec(version, schema=AVRO_SCHEMA))      # the retry
            assert _names(path) == _names(clean), f"kill at storage call {point}"
            assert check_invariants(str(path), {}) == [], f"kill at storage call {point}"
            point += 1
            continue
        raise AssertionError(f"the creation made {point - 1} storage calls and then one that did not die")
    assert point > (20 if version == 9 else 10)          # every call of the creation was a kill point


def test_an_existing_table_is_refused_before_its_metadata_table_is_touched(tmp_path):
    path = tmp_path / "t"
    Table.create(str(path), _spec(version=8))
    before = {p: p.stat().st_mtime_ns for p in (path / ".hoodie" / "metadata").rglob("*")}
    with pytest.raises(Exception, match="already a Hudi table"):
        Table.create(str(path), _spec(version=8))
    assert {p: p.stat().st_mtime_ns for p in (path / ".hoodie" / "metadata").rglob("*")} == before


def test_a_v6_metadata_write_skips_the_crc_files_java_leaves_beside_its_log_files(tmp_path):
    """Java 0.15's Hadoop file system writes ``.<log name>.crc`` beside each metadata log file; the
    next tablesvc delta commit picks its log version among the log files only."""
    path = str(tmp_path / "t")
    clock = ManualClock(1_700_000_000_000)
    Table.create(path, _spec(6), clock=clock)
    files = tmp_path / "t/.hoodie/metadata/files"
    (files / "..files-0000-0_00000000000000010.log.1_0-0-0.crc").write_bytes(b"crc")
    clock.advance(1000)
    write_without_spark(Table.open(path, clock=clock), _rows(3, 1), "upsert", stage=0)
    assert (files / f".files-0000-0_00000000000000010.log.2_{WRITE_TOKEN}").is_file()
    assert check_invariants(path, {f"k{i:03d}": (1, float(i + 1)) for i in range(3)}) == []
