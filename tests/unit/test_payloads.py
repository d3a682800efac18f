"""Timeline payload codecs against every timeline file of the real Hudi fixtures."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import fastavro
import pytest

from fixture_tables import REPO, TABLES_DIR, all_fixture_names, copy_table
from timeline.errors import PayloadError
from timeline.instant import Action, Instant, State, TimelineLayout
from timeline.payloads import (
    ActionInstant, CleanFileInfo, CleanMetadata, CleanPartitionMetadata, CleanerPlan, CommitMetadata,
    CompactionOperation, CompactionPlan, CompactionStrategy, GenericPayload, InstantInfo, RawPayload,
    RequestedReplaceMetadata, RestoreMetadata, RestorePlan, RollbackMetadata, RollbackPartitionMetadata,
    RollbackPlan, SavepointMetadata, WriteStat, decode_clean_metadata,
    decode_cleaner_plan, decode_commit_metadata, decode_compaction_plan, decode_payload,
    decode_restore_metadata, decode_restore_plan, decode_rollback_metadata, decode_savepoint_metadata,
    encode_clean_metadata, encode_cleaner_plan, encode_commit_metadata, encode_compaction_plan,
    encode_payload, encode_restore_metadata, encode_restore_plan, encode_rollback_metadata,
    encode_savepoint_metadata, schema_json,
)
from timeline.payloads.avro_container import SCHEMA_DIR, is_avro_container

V1, V2 = TimelineLayout.V1, TimelineLayout.V2
TIMELINE_DIRS = (".hoodie", ".hoodie/timeline", ".hoodie/metadata/.hoodie", ".hoodie/metadata/.hoodie/timeline")


# -- helpers ------------------------------------------------------------------------------------
def table_layout(root: Path) -> TimelineLayout:
    """Layout from hoodie.properties: version 1 only when the property says so."""
    props = {}
    for line in (root / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            props[k.strip()] = v.strip()
    return V1 if props.get("hoodie.timeline.layout.version") == "1" else V2


def timeline_files(root: Path) -> list[Path]:
    out = []
    for sub in TIMELINE_DIRS:
        d = root / sub
        if d.is_dir():
            out += sorted(p for p in d.iterdir() if p.is_file() and p.name[:1].isdigit())
    return out


def read_avro(data: bytes) -> tuple[dict, dict]:
    reader = fastavro.reader(io.BytesIO(data))
    records = list(reader)
    assert len(records) == 1
    return reader.writer_schema, records[0]


def project(data: bytes, reader_schema: dict) -> dict:
    """Read our bytes with Hudi's original writer schema as the reader schema: Avro
    resolution by field name projects our record onto exactly the original's fields."""
    records = list(fastavro.reader(io.BytesIO(data), reader_schema=reader_schema))
    assert len(records) == 1
    return records[0]


# -- every timeline file of every fixture -----------------------------------------------------------
@pytest.mark.parametrize("name", all_fixture_names())
def test_every_timeline_file_round_trips(name, fixture_root):
    root = fixture_root.path(name)
    layout = table_layout(root)
    files = timeline_files(root)
    if name != "v6_empty":
        assert files, f"{name}: no timeline files found"
    for path in files:
        data = path.read_bytes()
        instant = Instant.parse(path.name)
        payload = decode_payload(instant, data, layout, str(path))
        if not data:
            assert payload is None, path
        out = encode_payload(payload, layout)
        again = decode_payload(instant, out, layout, str(path))
        assert again == payload, f"{path}: round trip changed the payload"
        if is_avro_container(data):
            writer_schema, original = read_avro(data)
            assert is_avro_container(out), path
            our_schema, _ = read_avro(out)  # plain fastavro can read what we wrote
            assert our_schema["name"].startswith("org.apache.hudi.avro.model.") or \
                our_schema.get("namespace") == "org.apache.hudi.avro.model"
            assert project(out, writer_schema) == original, f"{path}: known field values changed"
        elif data.strip():
            # Layout 1 commit metadata: we write the same JSON Hudi wrote, byte for byte.
            assert out == data, f"{path}: re-encoded JSON differs from Hudi's"


# -- specific fixture values -----------------------------------------------------------------------
def test_v8_compaction_plan_values():
    p = TABLES_DIR / "v8_trips_8i3u1d/.hoodie/timeline/20251220210129235.compaction.requested"
    plan = decode_payload(Instant.parse(p.name), p.read_bytes(), V2, str(p))
    assert isinstance(plan, CompactionPlan)
    assert plan.version == 2 and plan.strategy is None and plan.preserve_hoodie_metadata is False
    assert plan.missing_schedule_partitions == ()
    assert plan.extra_metadata == {"_hoodie.spark.sql.writes.prepped": "true"}
    assert len(plan.operations) == 3
    for op in plan.operations:
        assert op.base_instant_time == "20251220210108078"
        assert op.file_id and op.data_file_path.startswith(op.file_id)
        assert 1 <= len(op.delta_file_paths) <= 2
        assert all(n.startswith("." + op.file_id) and "/" not in n for n in op.delta_file_paths)
        assert {"TOTAL_LOG_FILES", "TOTAL_IO_READ_MB", "TOTAL_IO_WRITE_MB", "TOTAL_IO_MB",
                "TOTAL_LOG_FILES_SIZE"} <= set(op.metrics)
        assert op.metrics["TOTAL_LOG_FILES"] == len(op.delta_file_paths)
    assert sorted(op.partition_path for op in plan.operations) == [
        "city=chennai", "city=san_francisco", "city=sao_paulo"]


def test_v6_rollback_plan_and_metadata():
    d = TABLES_DIR / "v6_nonpartitioned_rollback/.hoodie"
    plan = decode_payload(Instant.parse("20250126040936578.rollback.requested"),
                          (d / "20250126040936578.rollback.requested").read_bytes(), V1)
    assert isinstance(plan, RollbackPlan)
    assert plan.instant_to_rollback == InstantInfo("20250126040826878", "deltacommit")
    first, second = plan.rollback_requests
    assert (first.partition_path, first.file_id, first.latest_base_instant) == ("", "", "")
    assert len(first.files_to_be_deleted) == 1 and first.files_to_be_deleted[0].endswith(
        "_20250126040826878.parquet") and first.files_to_be_deleted[0].startswith("/")
    assert first.log_blocks_to_be_deleted == {}
    assert second.partition_path == "" and second.file_id == "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0"
    assert second.latest_base_instant == "20250126040823628" and second.files_to_be_deleted == ()
    [(log, size)] = second.log_blocks_to_be_deleted.items()
    assert log.startswith("file:/") and ".log.1_0-33-43" in log and size == 11828

    md = decode_payload(Instant.parse("20250126040936578.rollback"),
                        (d / "20250126040936578.rollback").read_bytes(), V1)
    assert isinstance(md, RollbackMetadata)
    assert md.commits_rollback == ("20250126040826878",)
    assert md.start_rollback_time == "20250126040936578" and md.total_files_deleted == 1
    assert md.instants_rollback == (InstantInfo("20250126040826878", "deltacommit"),)
    pm = md.partition_metadata[""]
    assert pm.log_files_from_failed_commit and list(pm.log_files_from_failed_commit.values()) == [11828]
    assert pm.rollback_log_files and len(pm.success_delete_files) == 1
    # inflight rollback file is empty → None
    assert decode_payload(Instant.parse("20250126040936578.rollback.inflight"), b"", V1) is None


def test_v6_json_deltacommit():
    d = TABLES_DIR / "v6_trips_8i1u/.hoodie"
    for name in ("20250331030642808.deltacommit", "20250331030645735.deltacommit"):
        md = decode_payload(Instant.parse(name), (d / name).read_bytes(), V1)
        assert isinstance(md, CommitMetadata) and not md.is_replace and md.compacted is False
        assert md.operation_type in ("UPSERT", "UPSERT_PREPPED")
        assert json.loads(md.schema)["type"] == "record"
    first = decode_payload(Instant.parse("20250331030642808.deltacommit"),
                           (d / "20250331030642808.deltacommit").read_bytes(), V1)
    assert first.operation_type == "UPSERT"
    stats = list(first.write_stats())
    assert len(stats) == 3 and all(s.prev_commit == "null" and not s.is_log_write for s in stats)
    assert {s.partition_path for s in stats} == set(first.partitions())
    upd = decode_payload(Instant.parse("20250331030645735.deltacommit"),
                         (d / "20250331030645735.deltacommit").read_bytes(), V1)
    [log_stat] = upd.write_stats()
    assert log_stat.is_log_write and log_stat.log_version == 1 and log_stat.log_offset == 0
    assert log_stat.prev_commit == "20250331030642808"
    assert log_stat.base_file.endswith("_20250331030642808.parquet")
    assert log_stat.log_files == (log_stat.path.split("/")[-1],)
    # workload profile in the inflight file
    prof = decode_payload(Instant.parse("20250331030645735.deltacommit.inflight"),
                          (d / "20250331030645735.deltacommit.inflight").read_bytes(), V1)
    assert isinstance(prof, CommitMetadata) and prof.extra_metadata == {}
    assert decode_payload(Instant.parse("20250331030645735.deltacommit.requested"), b"", V1) is None


def test_v9_replace_and_compaction_commit():
    d = TABLES_DIR / "v9_txns_simple_nometa/.hoodie/timeline"
    replaces, compactions = [], []
    for p in sorted(d.iterdir()):
        if not p.is_file() or not p.name[:1].isdigit():
            continue
        inst = Instant.parse(p.name)
        if inst.state is not State.COMPLETED:
            continue
        md = decode_payload(inst, p.read_bytes(), V2, str(p))
        if inst.action is Action.REPLACE_COMMIT:
            replaces.append(md)
        elif inst.action is Action.COMMIT:
            compactions.append(md)
    assert replaces and all(m.is_replace for m in replaces)
    assert any(sum(len(v) for v in m.partition_to_replace_file_ids.values()) > 0 for m in replaces)
    assert any(list(m.replaced_file_ids()) for m in replaces)
    assert len(compactions) == 1
    c = compactions[0]
    assert c.compacted is True and c.operation_type == "COMPACT"
    assert all(s.prev_base_file for s in c.write_stats())
    # clustering plan pins file groups
    [req] = [p for p in d.iterdir() if p.name.endswith(".clustering.requested")]
    rr = decode_payload(Instant.parse(req.name), req.read_bytes(), V2)
    assert isinstance(rr, RequestedReplaceMetadata) and rr.operation_type == "CLUSTER"
    assert rr.file_ids() and all(fid for _, fid in rr.file_ids())


def test_v6_insert_overwrite_requested_replace_is_all_null():
    p = TABLES_DIR / "v6_simplekeygen_nonhivestyle_overwritetable/.hoodie/20250121000702475.replacecommit.requested"
    rr = decode_payload(Instant.parse(p.name), p.read_bytes(), V1)
    assert rr == RequestedReplaceMetadata(None, None, None, None)
    done = p.with_name("20250121000702475.replacecommit")
    md = decode_payload(Instant.parse(done.name), done.read_bytes(), V1)
    assert md.operation_type == "INSERT_OVERWRITE_TABLE" and len(md.partition_to_replace_file_ids) == 3


def test_v8_indexing_decodes_generically():
    d = TABLES_DIR / "v8_trips_8i3u1d/.hoodie/timeline"
    [req] = [p for p in d.iterdir() if p.name.endswith(".indexing.requested")]
    plan = decode_payload(Instant.parse(req.name), req.read_bytes(), V2)
    assert isinstance(plan, GenericPayload) and plan.record_name == "HoodieIndexPlan"
    assert plan.record["indexPartitionInfos"][0]["metadataPartitionPath"] == "secondary_index_rider_idx"


# -- hudi-rs reads what we write --------------------------------------------------------------------
def _snapshot(path: Path):
    pytest.importorskip("hudi")
    pytest.importorskip("pyarrow")
    from oracles.hudi_rs import file_slices, read_table

    rows = read_table(path).sort_by("_hoodie_record_key").to_pylist()
    slices = sorted((s.partition_path, s.file_id, s.base_file_name, tuple(sorted(s.log_file_names)))
                    for s in file_slices(path))
    return rows, slices


@pytest.mark.parametrize("name", ["v6_trips_8i1u", "v9_txns_simple_nometa",
                                  "v6_simplekeygen_nonhivestyle_overwritetable"])
def test_hudi_rs_reads_reencoded_commit_metadata(name, tmp_path):
    src = TABLES_DIR / name
    expected = _snapshot(src)
    dst = copy_table(src, tmp_path)
    layout = table_layout(dst)
    rewritten = 0
    for path in timeline_files(dst):
        if "metadata" in path.relative_to(dst).parts:
            continue
        inst = Instant.parse(path.name)
        if inst.state is State.COMPLETED and inst.action.is_write:
            md = decode_payload(inst, path.read_bytes(), layout, str(path))
            # Drop Hudi's bytes entirely: encode from the dataclass.
            path.write_bytes(encode_commit_metadata(md, layout))
            rewritten += 1
    assert rewritten >= 2
    rows, slices = _snapshot(dst)
    assert slices == expected[1]
    assert rows == expected[0]


def test_hudi_rs_notices_lost_replace_ids(tmp_path):
    """Guard that the comparison above can fail: hiding the replace ids changes the view."""
    src = TABLES_DIR / "v9_txns_simple_nometa"
    expected = _snapshot(src)
    dst = copy_table(src, tmp_path)
    for path in timeline_files(dst):
        inst = Instant.parse(path.name)
        if inst.state is State.COMPLETED and inst.action is Action.REPLACE_COMMIT:
            md = decode_payload(inst, path.read_bytes(), V2)
            stripped = CommitMetadata(md.partition_to_write_stats, md.compacted, md.extra_metadata,
                                      md.operation_type, {}, md.version)
            path.write_bytes(encode_commit_metadata(stripped, V2))
    assert _snapshot(dst)[1] != expected[1]


# -- synthetic round trips for payloads absent from the fixtures -------------------------------------
def _cleaner_plan() -> CleanerPlan:
    return CleanerPlan(
        policy="KEEP_LATEST_COMMITS",
        earliest_instant_to_retain=ActionInstant("20250101000000000", "deltacommit", "COMPLETED"),
        last_completed_commit_timestamp="20250102000000000",
        file_paths_to_be_deleted_per_partition={
            "p=1": (CleanFileInfo("/t/p=1/a_0-1-1_20240101000000000.parquet", False),),
            "": (CleanFileInfo("/t/.b_20240101000000000.log.1_0-1-1"),)},
        partitions_to_be_deleted=(),
    )


def test_cleaner_plan_round_trip_and_schema():
    plan = _cleaner_plan()
    data = encode_cleaner_plan(plan)
    schema, rec = read_avro(data)
    assert schema["name"] in ("HoodieCleanerPlan", "org.apache.hudi.avro.model.HoodieCleanerPlan")
    assert rec["version"] == 2 and rec["filesToBeDeletedPerPartition"] is None
    assert rec["filePathsToBeDeletedPerPartition"]["p=1"][0]["isBootstrapBaseFile"] is False
    assert decode_cleaner_plan(data, "x") == plan
    assert plan.files_to_delete()["p=1"] == ("/t/p=1/a_0-1-1_20240101000000000.parquet",)
    assert decode_payload(Instant("20250103000000000", Action.CLEAN, State.REQUESTED), data, V2) == plan
    # inflight may carry a copy of the plan, or nothing
    assert decode_payload(Instant("20250103000000000", Action.CLEAN, State.INFLIGHT), data, V1) == plan
    assert decode_payload(Instant("20250103000000000", Action.CLEAN, State.INFLIGHT), b"", V1) is None


def test_clean_metadata_round_trip():
    md = CleanMetadata(
        start_clean_time="20250103000000000", time_taken_in_millis=12, total_files_deleted=1,
        earliest_commit_to_retain="20250101000000000",
        partition_metadata={"p=1": CleanPartitionMetadata(
            "p=1", "KEEP_LATEST_COMMITS", ("a.parquet",), ("a.parquet",), (), False)},
        last_completed_commit_timestamp="20250102000000000", policy="KEEP_LATEST_COMMITS",
        extra_metadata={"savepointed_timestamps": ""})
    data = encode_clean_metadata(md)
    _, rec = read_avro(data)
    assert rec["version"] == 2 and rec["partitionMetadata"]["p=1"]["successDeleteFiles"] == ["a.parquet"]
    assert decode_clean_metadata(data, "x") == md
    assert decode_payload(Instant("20250103000000000", Action.CLEAN, State.COMPLETED, "20250103000000001"),
                          data, V2) == md


def test_compaction_plan_encode_defaults():
    plan = CompactionPlan(operations=(CompactionOperation(
        "20250101000000000", "fg-0", "p", "fg-0_0-1-1_20250101000000000.parquet",
        (".fg-0_20250101000000000.log.1_0-1-1",),
        {"TOTAL_LOG_FILES": 1, "TOTAL_IO_READ_MB": 0, "TOTAL_IO_WRITE_MB": 0, "TOTAL_IO_MB": 0,
         "TOTAL_LOG_FILES_SIZE": 1024}),),
        strategy=CompactionStrategy("org.apache.hudi.table.action.compact.LogCompactionExecutionHelper"),
        preserve_hoodie_metadata=True)
    data = encode_compaction_plan(plan)
    _, rec = read_avro(data)
    assert rec["version"] == 2 and rec["operations"][0]["metrics"]["TOTAL_LOG_FILES_SIZE"] == 1024.0
    assert decode_compaction_plan(data, "x") == plan
    assert decode_payload(Instant("20250102000000000", Action.LOG_COMPACTION, State.REQUESTED),
                          data, V1) == plan


def test_rollback_savepoint_restore_round_trip():
    rb = RollbackMetadata("20250105000000000", 3, 1, ("20250104000000000",),
                          {"": RollbackPartitionMetadata("", ("/t/x.parquet",), (), None, {"/t/.l.log.1_0-1-1": 10})},
                          1, (InstantInfo("20250104000000000", "deltacommit"),))
    assert decode_rollback_metadata(encode_rollback_metadata(rb), "x") == rb
    sp = SavepointMetadata("me", 1700000000, "keep", {"p=1": ("a.parquet", "b.parquet")})
    data = encode_savepoint_metadata(sp)
    assert decode_savepoint_metadata(data, "x") == sp
    assert decode_payload(Instant("20250106000000000", Action.SAVEPOINT, State.COMPLETED), data, V1) == sp
    assert decode_payload(Instant("20250106000000000", Action.SAVEPOINT, State.INFLIGHT), b"", V1) is None
    rp = RestorePlan((InstantInfo("20250104000000000", "deltacommit"),), 2, "20250103000000000")
    assert decode_restore_plan(encode_restore_plan(rp), "x") == rp
    rm = RestoreMetadata("20250107000000000", 5, ("20250104000000000",), {"20250104000000000": (rb,)},
                         1, (InstantInfo("20250104000000000", "deltacommit"),), None)
    data = encode_restore_metadata(rm)
    assert decode_restore_metadata(data, "x") == rm
    assert decode_payload(Instant("20250107000000000", Action.RESTORE, State.COMPLETED), data, V1) == rm


def test_commit_metadata_both_layouts_and_empty():
    stat = WriteStat(file_id="fg-0", path="p/.fg-0_20250101000000000.log.1_0-1-1", prev_commit="20250101000000000",
                     partition_path="p", num_writes=2, num_update_writes=2, total_write_bytes=100,
                     file_size_in_bytes=100, log_version=1, log_offset=0, base_file="fg-0_0-1-1_20250101000000000.parquet",
                     log_files=(".fg-0_20250101000000000.log.1_0-1-1",),
                     runtime_stats={"totalScanTime": 0, "totalUpsertTime": 5, "totalCreateTime": 0},
                     extra={"minEventTime": 7, "someFutureField": "x"})
    md = CommitMetadata({"p": (stat,)}, False, {"schema": '{"type":"record","name":"r","fields":[]}'}, "UPSERT")
    text = encode_commit_metadata(md, V1).decode()
    keys = list(json.loads(text)["partitionToWriteStats"]["p"][0])
    assert keys[:4] == ["fileId", "path", "cdcStats", "prevCommit"]
    assert keys[-6:] == ["logVersion", "logOffset", "baseFile", "logFiles", "recordsStats", "someFutureField"]
    assert '"recordsStats" : {\n        "val" : null\n      }' in text
    assert decode_commit_metadata(text.encode(), V1, "x") == md
    avro = encode_commit_metadata(md, V2)
    back = decode_commit_metadata(avro, V2, "x")
    assert back.schema == md.schema and list(back.write_stats())[0].get("minEventTime") == 7
    assert decode_commit_metadata(b"", V1, "x") == CommitMetadata()
    assert decode_commit_metadata(b"", V2, "x") == CommitMetadata()
    assert decode_payload(Instant("20250101000000000", Action.DELTA_COMMIT, State.INFLIGHT), b"", V2) is None
    rep = CommitMetadata({}, False, {}, "INSERT_OVERWRITE", {"p": ("fg-1",)})
    assert read_avro(encode_commit_metadata(rep, V2))[0]["name"].endswith("HoodieReplaceCommitMetadata")
    assert decode_commit_metadata(encode_commit_metadata(rep, V1), V1, "x") == rep


def test_raw_payload_for_schemacommit():
    inst = Instant("20250101000000000", Action.SCHEMA_COMMIT, State.COMPLETED)
    p = decode_payload(inst, b'{"latest_schema": 1}', V1)
    assert p == RawPayload(b'{"latest_schema": 1}') and encode_payload(p, V1) == p.data


# -- errors -------------------------------------------------------------------------------------------
def test_errors_name_the_file():
    inst = Instant("20250101000000000", Action.COMPACTION, State.REQUESTED)
    with pytest.raises(PayloadError, match=r"^20250101000000000\.compaction\.requested: cannot decode compaction plan"):
        decode_payload(inst, b"", V2)
    with pytest.raises(PayloadError, match=r"^/x/y\.compaction\.requested: cannot decode compaction plan: not an Avro"):
        decode_payload(inst, b"garbage", V2, "/x/y.compaction.requested")
    with pytest.raises(PayloadError, match="holds org.apache.hudi.avro.model.HoodieCleanerPlan"):
        decode_payload(inst, encode_cleaner_plan(_cleaner_plan()), V2)
    with pytest.raises(PayloadError, match=r"^f\.deltacommit: cannot decode commit metadata"):
        decode_commit_metadata(b"{not json", V1, "f.deltacommit")
    with pytest.raises(PayloadError, match=r"^f: cannot decode compaction plan: corrupt"):
        decode_compaction_plan(encode_compaction_plan(CompactionPlan())[:-20], "f")


# -- schemas and layering ---------------------------------------------------------------------------------
def test_schemas_are_full_superset():
    for avsc in SCHEMA_DIR.glob("*.avsc"):
        s = json.loads(avsc.read_text())
        assert s["namespace"] == "org.apache.hudi.avro.model" and s["name"] == avsc.stem
        fastavro.parse_schema(json.loads(schema_json(avsc.stem)))
    rb = schema_json("HoodieRollbackMetadata")
    assert "logFilesFromFailedCommit" in rb and "rollbackLogFiles" in rb and "instantsRollback" in rb
    ws = json.loads(schema_json("HoodieCommitMetadata"))
    stat = ws["fields"][0]["type"][1]["values"]["items"]
    assert [f["name"] for f in stat["fields"]][-6:] == [
        "runtimeStats", "totalLogFilesCompacted", "totalLogReadTimeMs", "totalLogSizeCompacted",
        "tempPath", "numUpdates"]
    names = {f["name"] for f in json.loads(schema_json("HoodieCleanMetadata"))["fields"]}
    assert {"lastCompletedCommitTimestamp", "bootstrapPartitionMetadata", "extraMetadata", "version"} <= names


def test_timeline_payloads_import_no_upper_floor():
    code = ("import sys, timeline.payloads; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('tablesvc', 'pyspark', 'pyarrow')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
