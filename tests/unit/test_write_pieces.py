"""The per-file-group write pieces (tablesvc.write), end to end through hudi-rs and unit by unit."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from helpers import data_files, dictionary_encoded_columns
from oracles.hudi_rs import read_table

from tablesvc.errors import InvalidInputError
from tablesvc.fsview.names import PARTITION_METAFILE, BaseFileName, LogFileName
from tablesvc.logformat import BlockType, block_deletes, block_records, read_log_file
from tablesvc.storage import LocalStorage
from tablesvc.api import Table, TableSpec
from tablesvc.write import (
    BucketSpec, FileGroupTarget, KeySpec, WriteContext, add_key_columns, align_to_schema, arrow_to_avro_schema,
    bucket_file_id, bucket_id, bucket_ids, bucket_of_file_id, combine_in_batch, create_marker, delete_markers,
    ensure_partition_metadata, java_list_hash, java_string_hash, list_markers, marker_path, reconcile_schema,
    with_meta_fields, write_file_group,
)
from tablesvc.write.bucket_index import hash_values
from tablesvc.write.keys import PARTITION_PATH_COLUMN, RECORD_KEY_COLUMN
from timeline.instant import Action
from timeline.payloads import CommitMetadata, encode_commit_metadata

CITIES = ("chennai", "san_francisco", "sao_paulo")


# =============================================================================================
# End to end: several delta commits through the pieces, read back by hudi-rs after each one
# =============================================================================================

class Harness:
    """Drives the pieces the way the Spark side will: one call per file group per commit."""

    def __init__(self, path: Path, version: int, log_block_format: str = "avro"):
        self.table = Table.create(str(path), TableSpec("trips", ("uuid",), "ts", ("city",), table_version=version))
        self.path = path
        self.log_block_format = log_block_format
        cfg = self.table.config
        self.keys = KeySpec.from_config(cfg)
        self.buckets = BucketSpec.from_props(cfg.props) or BucketSpec(4, cfg.record_key_fields)
        self.model: dict[str, dict] = {}
        self.columns: list[str] = []
        self.stage = 0

    # -- the writer ----------------------------------------------------------------------------
    def commit(self, batch: pa.Table, operation: str) -> CommitMetadata:
        table, cfg = self.table, self.table.config
        writer = table.timeline_writer
        instant = writer.request(Action.DELTA_COMMIT)
        writer.start(instant)
        old_schema = table.schema()
        if operation == "delete":
            schema = old_schema
        else:
            schema = reconcile_schema(old_schema, batch.schema, cfg.record_key_fields, cfg.ordering_field,
                                      cfg.partition_fields, table_name=cfg.name)
        keyed = add_key_columns(batch, self.keys)
        keyed = combine_in_batch(keyed, None if operation == "delete" else cfg.ordering_field)
        buckets = self.buckets.bucket_ids(keyed.column(RECORD_KEY_COLUMN), cfg.record_key_fields)
        keyed = keyed.append_column("__bucket", buckets)
        slices = {(s.partition, bucket_of_file_id(s.file_id)): s for s in table.latest_file_slices()}
        self.stage += 1
        ctx = WriteContext(table.base_path, cfg.name, cfg.version, instant.timestamp, schema, cfg.ordering_field,
                           log_block_format=self.log_block_format, operation=operation, stage_id=self.stage)
        before = data_files(self.path)
        groups = sorted(set(zip(keyed.column(PARTITION_PATH_COLUMN).to_pylist(), buckets.to_pylist())))
        stats: dict[str, list] = {}
        for task, (partition, bucket) in enumerate(groups):
            mask = pc.and_(pc.equal(keyed.column(PARTITION_PATH_COLUMN), partition),
                           pc.equal(keyed.column("__bucket"), bucket))
            records = keyed.filter(mask).drop_columns(["__bucket"])
            existing = slices.get((partition, bucket))
            target = FileGroupTarget.from_slice(existing) if existing else \
                FileGroupTarget.new(partition, bucket_file_id(bucket))
            for st in write_file_group(table.storage, ctx, target, records, task_partition=task, attempt=0):
                stats.setdefault(partition, []).append(st)
        written = data_files(self.path) - before
        # every file written has a marker and a write stat, and nothing else does
        marked = {f"{p}/{name}" if p else name for p, name, _ in list_markers(table.storage, table.base_path,
                                                                            instant.timestamp)}
        stated = {st.path for sts in stats.values() for st in sts}
        assert written == marked == stated
        md = CommitMetadata(partition_to_write_stats={p: tuple(v) for p, v in stats.items()},
                            extra_metadata={"schema": schema}, operation_type=operation.upper())
        writer.complete(instant, encode_commit_metadata(md, cfg.layout))
        delete_markers(table.storage, table.base_path, instant.timestamp)
        assert not (self.path / ".hoodie" / ".temp" / instant.timestamp).exists()
        self.columns = [f["name"] for f in json.loads(schema)["fields"]] if schema else self.columns
        self._apply(batch, operation)
        return md

    # -- the independent model ---------------------------------------------------------------------
    def _apply(self, batch: pa.Table, operation: str) -> None:
        for row in batch.to_pylist():
            key = row["uuid"]
            if operation == "delete":
                self.model.pop(key, None)
                continue
            current = self.model.get(key)
            if current is None or row["ts"] >= current["ts"]:  # greater wins, ties -> later
                self.model[key] = row

    def check(self) -> list[dict]:
        got = read_table(self.path)
        rows = sorted(({c: r.get(c) for c in self.columns} for r in got.to_pylist()), key=lambda r: r["uuid"])
        want = sorted(({c: r.get(c) for c in self.columns} for r in self.model.values()), key=lambda r: r["uuid"])
        assert rows == want
        return got.to_pylist()


def _rows(keys, ts, *, fare=1.0, extra=None):
    out = []
    for k, t in zip(keys, ts):
        city = CITIES[int(k.split("-")[1]) % 3]
        row = {"ts": t, "uuid": k, "rider": f"rider-{k}", "fare": fare, "city": city}
        row.update(extra or {})
        out.append(row)
    return out


BASE_SCHEMA = pa.schema([("ts", pa.int64()), ("uuid", pa.string()), ("rider", pa.string()),
                         ("fare", pa.float64()), ("city", pa.string())])


@pytest.mark.parametrize("version,block_format", [(6, "avro"), (8, "avro"), (8, "parquet"), (9, "avro")])
def test_batches_read_back_through_hudi_rs(tmp_path, version, block_format):
    h = Harness(tmp_path / "trips", version, block_format)
    keys = [f"k-{i:03d}" for i in range(40)]

    # 1. inserts: new base files, one per (partition, bucket)
    md = h.commit(pa.Table.from_pylist(_rows(keys, [100] * 40), schema=BASE_SCHEMA), "upsert")
    assert all(not st.is_log_write and st.prev_commit == "null" for st in md.write_stats())
    assert sum(st.num_inserts for st in md.write_stats()) == 40
    h.check()

    # 2. upserts: higher ordering values win, lower ones lose (event time)
    up = _rows(keys[:10], [200] * 10, fare=2.0) + _rows(keys[10:20], [50] * 10, fare=3.0)
    md = h.commit(pa.Table.from_pylist(up, schema=BASE_SCHEMA), "upsert")
    assert all(st.is_log_write and st.base_file and st.path.rsplit("/", 1)[1] in st.log_files
               for st in md.write_stats())
    if block_format == "parquet":   # a dictionary for repeated columns only, as for base files
        judged = [st for st in md.write_stats() if st.num_writes >= 2]  # one row is all distinct
        assert judged
        for st in judged:
            (block,) = read_log_file(h.table.storage, str(h.path / st.path)).blocks
            assert block.block_type is BlockType.PARQUET_DATA
            encoded = dictionary_encoded_columns(block.content)
            assert {"_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name"} <= encoded
            assert not {"_hoodie_record_key", "_hoodie_commit_seqno"} & encoded
    h.check()

    # 3. in-batch duplicates, including ties (the later row wins) and a brand-new key
    dup = (_rows(["k-000"], [300], fare=4.0) + _rows(["k-000"], [250], fare=5.0)
           + _rows(["k-001"], [300], fare=6.0) + _rows(["k-001"], [300], fare=7.0)
           + _rows(["k-100"], [10], fare=8.0) + _rows(["k-100"], [10], fare=9.0))
    h.commit(pa.Table.from_pylist(dup, schema=BASE_SCHEMA), "upsert")
    got = {r["uuid"]: r for r in h.check()}
    assert got["k-000"]["fare"] == 4.0 and got["k-001"]["fare"] == 7.0 and got["k-100"]["fare"] == 9.0

    # 4. deletes of present and absent keys (absent: in existing groups and in groups never made)
    gone = pa.Table.from_pylist(_rows(["k-002", "k-011", "k-030", "k-500", "k-777"], [0] * 5), schema=BASE_SCHEMA)
    md = h.commit(gone, "delete")
    assert md.operation_type == "DELETE"
    assert all(st.num_deletes > 0 and st.num_writes == 0 for st in md.write_stats())
    got = {r["uuid"] for r in h.check()}
    assert not {"k-002", "k-011", "k-030"} & got

    # 5. re-insert of a deleted key (with a later ordering value)
    h.commit(pa.Table.from_pylist(_rows(["k-002"], [400], fare=10.0), schema=BASE_SCHEMA), "upsert")
    assert {r["uuid"]: r for r in h.check()}["k-002"]["fare"] == 10.0

    # 6. a new nullable column; older rows read it as null
    wide = BASE_SCHEMA.append(pa.field("note", pa.string()))
    h.commit(pa.Table.from_pylist(_rows(["k-003", "k-200"], [500, 500], extra={"note": "hi"}), schema=wide), "upsert")
    assert h.columns[-1] == "note"
    got = {r["uuid"]: r for r in h.check()}
    assert got["k-003"]["note"] == "hi" and got["k-004"]["note"] is None

    # 7. a batch without the new column still writes (the column is filled with nulls)
    h.commit(pa.Table.from_pylist(_rows(["k-003"], [600], fare=11.0), schema=BASE_SCHEMA), "upsert")
    got = {r["uuid"]: r for r in h.check()}
    assert got["k-003"]["note"] is None and got["k-003"]["fare"] == 11.0

    # file layout: v6 logs carry the slice's base instant and growing versions, v8/9 their own instant
    table = Table.open(str(h.path))
    completed = [i.timestamp for i in table.timeline().completed_writes()]
    for s in table.latest_file_slices():
        assert bucket_of_file_id(s.file_id) is not None
        names = [LogFileName.parse(lf.file_name) for lf in s.log_files]
        if version == 6:
            assert all(n.instant == s.base_instant for n in names)
            assert sorted(n.version for n in names) == list(range(1, len(names) + 1))
        else:
            assert all(n.instant in completed and n.version == 1 for n in names)
        assert (h.path / s.partition / PARTITION_METAFILE).exists()


def test_base_and_log_contents(tmp_path):
    """Meta columns of a base file and of a log block, and the write stats next to them."""
    h = Harness(tmp_path / "trips", 8)
    # a second chennai key in the same bucket as k-000
    other = next(k for k in (f"k-{i:03d}" for i in range(3, 300, 3))
                 if bucket_id(k, ["uuid"], h.buckets.num_buckets) == bucket_id("k-000", ["uuid"], h.buckets.num_buckets))
    h.commit(pa.Table.from_pylist(_rows(["k-000", other], [1, 2]), schema=BASE_SCHEMA), "upsert")
    (s,) = Table.open(str(h.path)).latest_file_slices()
    base = pq.read_table(h.path / s.partition / s.base_file.file_name)
    assert base.schema.names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                     "_hoodie_partition_path", "_hoodie_file_name"]
    assert base.schema.names[5:] == ["ts", "uuid", "rider", "fare", "city"]
    rows = base.to_pylist()
    name = BaseFileName.parse(s.base_file.file_name)
    assert {r["_hoodie_file_name"] for r in rows} == {s.base_file.file_name}
    assert [r["_hoodie_commit_seqno"] for r in rows] == [f"{name.instant}_0_0", f"{name.instant}_0_1"]
    assert {r["_hoodie_partition_path"] for r in rows} == {"city=chennai"}
    meta = pq.ParquetFile(h.path / s.partition / s.base_file.file_name).metadata
    assert meta.row_group(0).column(0).compression == "SNAPPY"

    md = h.commit(pa.Table.from_pylist(_rows(["k-000"], [5]), schema=BASE_SCHEMA), "upsert")
    (st,) = md.write_stats()
    instant = LogFileName.parse(st.path.rsplit("/", 1)[1]).instant
    assert st.prev_commit == instant and st.log_version == 1 and st.log_offset == 0
    assert st.base_file == s.base_file.file_name and st.total_log_blocks == 1
    assert st.num_writes == st.num_update_writes == 1 and st.file_size_in_bytes == st.total_write_bytes > 0
    contents = read_log_file(LocalStorage(), str(h.path / st.path), raise_on_corrupt=True)
    (block,) = contents.blocks
    assert block.block_type is BlockType.AVRO_DATA
    schema = json.loads(block.schema)
    assert [f["name"] for f in schema["fields"]][:5] == [f["name"] for f in json.loads(
        with_meta_fields(md.schema))["fields"]][:5]
    (rec,) = block_records(block, st.path)
    assert rec["_hoodie_file_name"] == s.file_id and rec["_hoodie_commit_time"] == instant
    assert rec["_hoodie_commit_seqno"] == f"{instant}_0_0"

    md = h.commit(pa.Table.from_pylist(_rows([other], [0]), schema=BASE_SCHEMA), "delete")
    (st,) = md.write_stats()
    (block,) = read_log_file(LocalStorage(), str(h.path / st.path)).blocks
    (d,) = block_deletes(block)
    assert (d.record_key, d.partition_path, d.ordering_index, d.ordering_value) == (other, "city=chennai", 2, 0)
    h.check()


def test_v6_log_stats_and_versions(tmp_path):
    h = Harness(tmp_path / "trips", 6)
    h.commit(pa.Table.from_pylist(_rows(["k-000"], [1]), schema=BASE_SCHEMA), "upsert")
    (s,) = Table.open(str(h.path)).latest_file_slices()
    for version in (1, 2):
        md = h.commit(pa.Table.from_pylist(_rows(["k-000"], [1 + version]), schema=BASE_SCHEMA), "upsert")
        (st,) = md.write_stats()
        name = LogFileName.parse(st.path.rsplit("/", 1)[1])
        assert (name.instant, name.version, st.log_version) == (s.base_instant, version, version)
        assert st.prev_commit == s.base_instant and st.base_file == s.base_file.file_name
        assert len(st.log_files) == version
    h.check()


def test_write_retries_and_empty_inputs(tmp_path):
    """A second write into the same group in one commit takes the next log version; empty input
    writes nothing; a delete into a group that does not exist writes nothing."""
    h = Harness(tmp_path / "trips", 8)
    h.commit(pa.Table.from_pylist(_rows(["k-000"], [1]), schema=BASE_SCHEMA), "upsert")
    table = h.table
    (s,) = table.latest_file_slices()
    schema = table.schema()
    keyed = add_key_columns(pa.Table.from_pylist(_rows(["k-000"], [9]), schema=BASE_SCHEMA), h.keys)
    ctx = WriteContext(table.base_path, "trips", 8, "20990101000000000", schema, "ts")
    target = FileGroupTarget.from_slice(s)
    (a,) = write_file_group(table.storage, ctx, target, keyed, 3, 0)
    (b,) = write_file_group(table.storage, ctx, target, keyed, 3, 0)
    assert (a.log_version, b.log_version) == (1, 2)
    assert write_file_group(table.storage, ctx, target, keyed.slice(0, 0), 3, 0) == []
    dctx = WriteContext(table.base_path, "trips", 8, "20990101000000000", schema, "ts", operation="delete")
    assert write_file_group(table.storage, dctx, FileGroupTarget.new("city=chennai", bucket_file_id(1)), keyed,
                            0, 0) == []
    with pytest.raises(InvalidInputError, match="partition path differs"):
        write_file_group(table.storage, ctx, FileGroupTarget.new("city=other", bucket_file_id(1)), keyed, 0, 0)
    with pytest.raises(InvalidInputError, match="operation"):
        WriteContext(table.base_path, "trips", 8, "20990101000000000", schema, "ts", operation="merge")


def test_contexts_are_frozen_and_picklable():
    import pickle
    ctx = WriteContext("/t", "trips", 8, "20240101000000000", "{}", "ts")
    target = FileGroupTarget("p=1", "00000001-aaaa-0", True, "20240101000000000", "b.parquet", [".x.log.1_0-0-0"])
    key_spec = KeySpec(("a",), ("p",), True)
    for obj in (ctx, target, key_spec, BucketSpec(4, ("a",))):
        assert pickle.loads(pickle.dumps(obj)) == obj
        with pytest.raises(AttributeError):
            obj.__setattr__("x", 1)
    assert target.log_file_names == (".x.log.1_0-0-0",)


# =============================================================================================
# keys
# =============================================================================================

def test_single_key_and_hive_partition():
    t = pa.table({"id": [1, 22], "city": ["a", "b"]})
    out = add_key_columns(t, KeySpec(("id",), ("city",), True))
    assert out.column(RECORD_KEY_COLUMN).to_pylist() == ["1", "22"]
    assert out.column(PARTITION_PATH_COLUMN).to_pylist() == ["city=a", "city=b"]
    assert out.schema.field(RECORD_KEY_COLUMN).type == pa.string()
    batch = add_key_columns(t.to_batches()[0], KeySpec(("id",), ("city",), False))
    assert isinstance(batch, pa.RecordBatch)
    assert batch.column(batch.schema.get_field_index(PARTITION_PATH_COLUMN)).to_pylist() == ["a", "b"]


def test_complex_keys_and_several_partition_fields():
    t = pa.table({"id": [1, 2, 3], "name": ["Bob", None, ""], "y": [2024, None, 2023], "m": ["01", "", "12"],
                  "ok": [True, False, None]})
    out = add_key_columns(t, KeySpec(("id", "name"), ("y", "m"), True))
    assert out.column(RECORD_KEY_COLUMN).to_pylist() == ["id:1,name:Bob", "id:2,name:__null__", "id:3,name:__empty__"]
    assert out.column(PARTITION_PATH_COLUMN).to_pylist() == [
        "y=2024/m=01", "y=__HIVE_DEFAULT_PARTITION__/m=__HIVE_DEFAULT_PARTITION__", "y=2023/m=12"]
    out = add_key_columns(t, KeySpec(("id",), ("y", "ok"), False))
    assert out.column(PARTITION_PATH_COLUMN).to_pylist() == ["2024/true", "__HIVE_DEFAULT_PARTITION__/false",
                                                             "2023/__HIVE_DEFAULT_PARTITION__"]
    # Hudi 1.1 (v9) complex key generator names even a single field
    out = add_key_columns(t, KeySpec(("id",), (), False, encode_single_key_field_name=True))
    assert out.column(RECORD_KEY_COLUMN).to_pylist() == ["id:1", "id:2", "id:3"]


def test_non_partitioned_url_encoding_and_value_formats():
    import datetime
    import decimal
    t = pa.table({"k": pa.array([1.0, 1e7, 0.0001], pa.float64()), "p": ["a/b:c", "x%y", "plain"],
                  "d": [datetime.date(2024, 1, 2)] * 3, "n": pa.array([decimal.Decimal("1.50")] * 3,
                                                                       pa.decimal128(5, 2))})
    out = add_key_columns(t, KeySpec(("k",), (), True))
    assert out.column(RECORD_KEY_COLUMN).to_pylist() == ["1.0", "1.0E7", "1.0E-4"]
    assert out.column(PARTITION_PATH_COLUMN).to_pylist() == ["", "", ""]
    out = add_key_columns(t, KeySpec(("d", "n"), ("p",), False, url_encode=True))
    assert out.column(RECORD_KEY_COLUMN).to_pylist()[0] == "d:2024-01-02,n:1.50"
    assert out.column(PARTITION_PATH_COLUMN).to_pylist() == ["a%2Fb%3Ac", "x%25y", "plain"]


def test_key_errors_name_the_field_not_the_data():
    t = pa.table({"id": ["a", None, "secret"], "p": ["x", "y", "z"]})
    with pytest.raises(InvalidInputError, match=r"record key field 'id' is null or empty at row 1") as e:
        add_key_columns(t, KeySpec(("id",), ("p",), True))
    assert "secret" not in str(e.value)
    with pytest.raises(InvalidInputError, match="row 0"):
        add_key_columns(pa.table({"id": [""]}), KeySpec(("id",), (), True))
    with pytest.raises(InvalidInputError, match="all null or empty at row 0"):
        add_key_columns(pa.table({"a": [None], "b": [""]}), KeySpec(("a", "b"), (), True))
    with pytest.raises(InvalidInputError, match="'nope' is missing"):
        add_key_columns(t, KeySpec(("nope",), (), True))
    with pytest.raises(InvalidInputError, match="'q' is missing"):
        add_key_columns(t, KeySpec(("id",), ("q",), True))
    with pytest.raises(InvalidInputError, match="cannot be a record key"):
        add_key_columns(pa.table({"b": [b"x"]}), KeySpec(("b",), (), True))


def test_key_spec_from_table_config(tmp_path):
    t6 = Table.create(str(tmp_path / "a"), TableSpec("a", ("id",), "ts", ("y", "m"), table_version=6))
    spec = KeySpec.from_config(t6.config)
    assert spec == KeySpec(("id",), ("y", "m"), True, False, False)
    t9 = Table.create(str(tmp_path / "b"), TableSpec("b", ("id",), "ts", ("y", "m"), table_version=9,
                                                     hive_style_partitioning=False))
    spec = KeySpec.from_config(t9.config)
    assert spec.encode_single_key_field_name and not spec.hive_style


def test_nested_key_field():
    t = pa.table({"s": pa.array([{"id": 5}, {"id": 6}])})
    out = add_key_columns(t, KeySpec(("s.id",), (), True))
    assert out.column(RECORD_KEY_COLUMN).to_pylist() == ["5", "6"]


# =============================================================================================
# bucket index
# =============================================================================================

def test_java_hash_codes():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("ab") == 97 * 31 + 98
    assert java_string_hash("é") == 233
    assert java_string_hash("ключ") == ((0x43A * 31 + 0x43B) * 31 + 0x44E) * 31 + 0x447
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two UTF-16 units
    assert java_string_hash("polygenelubricants") == -2147483648  # the famous Integer.MIN_VALUE one
    assert java_list_hash([]) == 1
    assert java_list_hash(["hello"]) == 31 + 99162322
    assert java_list_hash([None, "a"]) == 31 * 31 + 97


def test_bucket_ids_match_java_and_the_scalar_port():
    # [hello].hashCode() = 99162353; & MAX_VALUE % 7 = 3
    assert bucket_id("hello", ["id"], 7) == 3
    # "polygenelubricants": list hash = 31 + MIN_VALUE -> masked 31
    assert bucket_id("polygenelubricants", ["id"], 10) == 1
    rng = random.Random(3)
    keys = ["".join(rng.choice("abcXYZ019-_ ") for _ in range(rng.randrange(0, 30))) for _ in range(3000)]
    keys += ["héllo", "ключ", "\U0001F600x", "id:1,name:Bob", "a:10:30,b:x", "time:10:30"]
    arr = pa.chunked_array([keys[:1000], keys[1000:]])
    got = bucket_ids(arr, ["id"], ["id", "name"], 64).to_pylist()
    assert got == [bucket_id(k, ["id"], 64) for k in keys]
    assert all(0 <= b < 64 for b in got)
    with pytest.raises(InvalidInputError, match="not record key fields"):
        bucket_ids(arr, ["zz"], ["id"], 4)


def _bucket_test_keys(rng: random.Random) -> list[str]:
    """Keys for every path of the vectorised hash: one length (a matrix), a few lengths, many
    lengths and long keys (running sums), non-ASCII (2-, 3- and 4-byte UTF-8, surrogate pairs),
    empty keys, and compound keys plain and odd (values holding ':' or ',')."""
    def text(alphabet, length):
        return "".join(rng.choice(alphabet) for _ in range(length))

    ascii_ = "abcXYZ019-_ ./"
    wide = "é€ключ中文\U0001F600\U00010348"
    keys = [f"trip-{i:07d}" for i in range(0, 500_000, 997)]                    # one length
    keys += [text(ascii_, rng.choice((3, 8, 12))) for _ in range(600)]          # a few lengths
    keys += [text(ascii_, rng.randrange(0, 41)) for _ in range(2000)]           # many lengths, some empty
    keys += [text(ascii_ + wide, rng.randrange(0, 25)) for _ in range(2000)]    # non-ASCII
    keys += [text(wide, 9) for _ in range(300)]                                  # non-ASCII, one length
    keys += [text(ascii_ + wide, rng.randrange(250, 3000)) for _ in range(40)]  # long
    keys += ["", "\U0001F600", "é", "polygenelubricants", "10:30", "a,b", "2014-10-22 13:50:42"]
    for _ in range(1500):                                                        # field:value keys
        parts = [f"{f}:{rng.choice(['1', 'Bob', '__null__', '__empty__', '', 'é€', text(ascii_, 5)])}"
                 for f in rng.sample(["id", "name", "zz"], rng.randrange(1, 4))]
        keys.append(",".join(parts))
    keys += ["id:10:30,name:x", "id:a,b,name:c", "id:1,name:Bob,", ",id:1", "id:1,,name:2", "zz:1,yy:2",
             "id:__null__,name:__empty__", "name:Bob,id:1", "id:,name:", "id:1,name:Bob:x,zz:q,r"]
    return keys


def test_vectorised_bucket_ids_equal_the_per_key_port():
    """``bucket_ids`` (numpy) against ``bucket_id`` (the per-key Java port the hash-code tests pin),
    key for key: this fails if any key's hash differs."""
    keys = _bucket_test_keys(random.Random(11))
    for hash_fields in (["id"], ["id", "name"], ["name"]):
        for num_buckets in (1, 7, 64, 99_999_989):  # the large prime compares nearly all 31 hash bits
            want = [bucket_id(k, hash_fields, num_buckets) for k in keys]
            got = bucket_ids(pa.array(keys), hash_fields, ["id", "name", "zz"], num_buckets).to_pylist()
            diff = [(k, g, w) for k, g, w in zip(keys, got, want) if g != w]
            assert not diff, f"{len(diff)} keys hash differently, e.g. {diff[:3]}"


def test_bucket_ids_take_any_string_array_layout():
    keys = _bucket_test_keys(random.Random(12))
    want = [bucket_id(k, ["id"], 97) for k in keys]
    layouts = {
        "chunked": pa.chunked_array([keys[:1000], keys[1000:3000], keys[3000:]]),
        "sliced": pa.array(["x"] * 5 + keys + ["y"] * 5).slice(5, len(keys)),
        "large_string": pa.array(keys, pa.large_string()),
        "dictionary": pa.array(keys).dictionary_encode(),
    }
    for name, arr in layouts.items():
        assert bucket_ids(arr, ["id"], ["id"], 97).to_pylist() == want, name
    assert bucket_ids(pa.array([], pa.string()), ["id"], ["id"], 4).to_pylist() == []
    with pytest.raises(InvalidInputError, match="null"):
        bucket_ids(pa.array(["a", None]), ["id"], ["id"], 4)


def test_complex_key_hash_values():
    assert hash_values("id:1,name:Bob", ["name"]) == ["Bob"]
    assert hash_values("id:1,name:Bob", ["id", "name"]) == ["1", "Bob"]
    assert hash_values("a:__null__,b:__empty__", ["a", "b"]) == [None, ""]
    assert hash_values("col1:v1,col2:2014-10-22 13:50:42,col3:v3", ["col2"]) == ["2014-10-22 13:50:42"]
    assert hash_values("10:30", ["id"]) == ["10:30"]  # no ',': the whole key
    assert bucket_id("id:1,name:Bob", ["id", "name"], 1000) == (java_list_hash(["1", "Bob"]) & 0x7FFFFFFF) % 1000


def test_bucket_file_ids_and_props():
    fid = bucket_file_id(12)
    assert fid[:9] == "00000012-" and fid.endswith("-0") and len(fid) == 38 and "_" not in fid
    assert bucket_of_file_id(fid) == 12
    assert bucket_of_file_id("d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0") is None
    assert bucket_of_file_id("00000007") == 7
    assert BucketSpec.from_props({"hoodie.index.type": "BLOOM"}) is None
    assert BucketSpec.from_props({}) is None
    spec = BucketSpec.from_props({"hoodie.index.type": "bucket", "hoodie.bucket.index.num.buckets": "8",
                                  "hoodie.table.recordkey.fields": "a,b"})
    assert spec == BucketSpec(8, ("a", "b"))
    spec = BucketSpec.from_props({"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2",
                                  "hoodie.bucket.index.hash.field": "b", "hoodie.table.recordkey.fields": "a,b"})
    assert spec == BucketSpec(2, ("b",))
    with pytest.raises(InvalidInputError, match="num.buckets"):
        BucketSpec.from_props({"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "x"})


# =============================================================================================
# schema
# =============================================================================================

def test_arrow_to_avro_schema_types():
    schema = pa.schema([
        ("i", pa.int32()), ("l", pa.int64()), ("f", pa.float32()), ("d", pa.float64()), ("b", pa.bool_()),
        ("s", pa.string()), ("bin", pa.binary()), ("dt", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(10, 2)), ("dec2", pa.decimal128(20, 4)), ("arr", pa.list_(pa.int64())),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])), ("m", pa.map_(pa.string(), pa.float64())),
    ])
    avro = json.loads(arrow_to_avro_schema(schema, "trips"))
    assert (avro["name"], avro["namespace"], avro["type"]) == ("trips_record", "hoodie.trips", "record")
    types = {f["name"]: f["type"] for f in avro["fields"]}
    assert all(t[1] == "null" for t in types.values())
    assert [types[n][0] for n in ("i", "l", "f", "d", "b", "s", "bin")] == [
        "int", "long", "float", "double", "boolean", "string", "bytes"]
    assert types["dt"][0] == {"type": "int", "logicalType": "date"}
    assert types["ts"][0] == {"type": "long", "logicalType": "timestamp-micros"}
    dec, dec2 = types["dec"][0], types["dec2"][0]
    assert (dec["type"], dec["size"], dec["precision"], dec["scale"]) == ("fixed", 5, 10, 2)
    assert dec2["size"] == 9
    assert f"{dec['namespace']}.{dec['name']}" != f"{dec2['namespace']}.{dec2['name']}"
    assert types["arr"][0]["type"] == "array" and types["m"][0]["type"] == "map"
    assert types["st"][0]["type"] == "record"
    # the whole schema (with meta fields) parses and maps back to Arrow; data round-trips through it
    full = with_meta_fields(json.dumps(avro))
    rows = [{"i": 1, "l": 2, "f": 1.5, "d": 2.5, "b": True, "s": "x", "bin": b"\x00", "dt": None, "ts": None,
             "dec": None, "dec2": None, "arr": [1, 2], "st": {"x": 1, "y": "z"}, "m": [("k", 1.0)]}]
    aligned = align_to_schema(pa.Table.from_pylist(rows, schema=schema), full)
    assert aligned.schema.names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                        "_hoodie_partition_path", "_hoodie_file_name"]
    assert aligned.column("arr").to_pylist() == [[1, 2]]


def test_with_meta_fields_shape():
    full = json.loads(with_meta_fields(arrow_to_avro_schema(BASE_SCHEMA, "trips")))
    assert full["fields"][0] == {"name": "_hoodie_commit_time", "type": ["null", "string"], "doc": "",
                                 "default": None}
    assert [f["name"] for f in full["fields"]][5:] == BASE_SCHEMA.names
    again = json.loads(with_meta_fields(json.dumps(full)))
    assert again == full


def test_reconcile_schema():
    first = reconcile_schema(None, BASE_SCHEMA, ("uuid",), "ts", ("city",), table_name="trips")
    assert [f["name"] for f in json.loads(first)["fields"]] == BASE_SCHEMA.names
    # new nullable columns are appended in incoming order; missing columns are kept
    incoming = pa.schema([("uuid", pa.string()), ("zeta", pa.int32()), ("ts", pa.int64()), ("city", pa.string()),
                          ("alpha", pa.string())])
    second = json.loads(reconcile_schema(first, incoming, ("uuid",), "ts", ("city",)))
    assert [f["name"] for f in second["fields"]] == BASE_SCHEMA.names + ["zeta", "alpha"]
    assert second["fields"][-2]["type"] == ["int", "null"]
    assert second["name"] == "trips_record"
    # int data into a long column is accepted; the table keeps long
    narrow = pa.schema([("uuid", pa.string()), ("ts", pa.int32()), ("city", pa.string())])
    assert json.loads(reconcile_schema(first, narrow, ("uuid",), "ts", ("city",)))["fields"][0]["type"][0] == "long"


def test_reconcile_refusals_name_the_column():
    first = reconcile_schema(None, BASE_SCHEMA, ("uuid",), "ts", ("city",), table_name="trips")
    changed = pa.schema([("uuid", pa.string()), ("ts", pa.int64()), ("city", pa.string()), ("fare", pa.string())])
    with pytest.raises(InvalidInputError, match=r"column 'fare' changes type from double to string"):
        reconcile_schema(first, changed, ("uuid",), "ts", ("city",))
    widened = pa.schema([("uuid", pa.string()), ("ts", pa.int64()), ("city", pa.string())])
    int_table = reconcile_schema(None, pa.schema([("uuid", pa.string()), ("ts", pa.int64()), ("city", pa.string()),
                                                  ("n", pa.int32())]), ("uuid",), "ts", ("city",), table_name="t")
    with pytest.raises(InvalidInputError, match=r"column 'n' changes type from int to long"):
        reconcile_schema(int_table, widened.append(pa.field("n", pa.int64())), ("uuid",), "ts", ("city",))
    no_key = pa.schema([("ts", pa.int64()), ("city", pa.string())])
    with pytest.raises(InvalidInputError, match=r"record key field 'uuid' is missing"):
        reconcile_schema(first, no_key, ("uuid",), "ts", ("city",))
    with pytest.raises(InvalidInputError, match=r"record key field 'uuid' is missing"):
        reconcile_schema(None, no_key, ("uuid",), "ts", ("city",), table_name="t")
    with pytest.raises(InvalidInputError, match=r"ordering field 'ts' is missing"):
        reconcile_schema(first, pa.schema([("uuid", pa.string()), ("city", pa.string())]), ("uuid",), "ts",
                         ("city",))
    unnamed = json.loads(reconcile_schema(None, BASE_SCHEMA, ("uuid",), "ts", ("city",)))
    assert (unnamed["name"], unnamed["namespace"]) == ("hoodie_record", "hoodie.hoodie")


def test_align_to_schema_fills_casts_and_orders():
    schema = reconcile_schema(None, BASE_SCHEMA.append(pa.field("note", pa.string())), ("uuid",), "ts", ("city",),
                              table_name="trips")
    t = pa.table({"city": ["c"], "uuid": ["k"], "ts": pa.array([5], pa.int32()), "junk": [1]})
    out = align_to_schema(t, schema)
    assert out.schema.names == ["ts", "uuid", "rider", "fare", "city", "note"]
    assert out.schema.field("ts").type == pa.int64()
    assert out.to_pylist() == [{"ts": 5, "uuid": "k", "rider": None, "fare": None, "city": "c", "note": None}]
    with pytest.raises(InvalidInputError, match="'ts'"):
        align_to_schema(pa.table({"ts": ["not a number"]}), schema)


# =============================================================================================
# dedupe
# =============================================================================================

def _keyed(keys, ts, vals):
    return pa.table({RECORD_KEY_COLUMN: keys, "ts": ts, "v": vals})


def test_combine_keeps_greatest_ordering_and_later_on_ties():
    t = _keyed(["a", "b", "a", "a", "b", "c"], [1, 5, 3, 3, 4, 0], [1, 2, 3, 4, 5, 6])
    out = combine_in_batch(t, "ts")
    assert out.to_pylist() == [{RECORD_KEY_COLUMN: "b", "ts": 5, "v": 2}, {RECORD_KEY_COLUMN: "a", "ts": 3, "v": 4},
                               {RECORD_KEY_COLUMN: "c", "ts": 0, "v": 6}]


def test_combine_without_ordering_keeps_last_and_nulls_lose():
    t = _keyed(["a", "b", "a"], [9, 1, 1], [1, 2, 3])
    assert combine_in_batch(t, None).column("v").to_pylist() == [2, 3]
    t = _keyed(["a", "a", "b", "b", "c", "c"], [None, 1, 2, None, None, None], [1, 2, 3, 4, 5, 6])
    assert combine_in_batch(t, "ts").column("v").to_pylist() == [2, 3, 6]
    with pytest.raises(InvalidInputError, match="ordering field 'zz'"):
        combine_in_batch(t, "zz")
    with pytest.raises(InvalidInputError, match=RECORD_KEY_COLUMN):
        combine_in_batch(pa.table({"x": [1]}), None)
    assert combine_in_batch(t.slice(0, 0), "ts").num_rows == 0


def test_combine_string_ordering_and_chunked_input():
    t = pa.concat_tables([_keyed(["a", "b"], ["x", "m"], [1, 2]), _keyed(["a", "b"], ["y", "a"], [3, 4])])
    assert combine_in_batch(t, "ts").column("v").to_pylist() == [2, 3]


def test_combine_without_duplicates_returns_the_batch_and_still_checks_the_ordering_type():
    t = pa.concat_tables([_keyed(["c", "a"], [5, 1], [1, 2]), _keyed(["b"], [3], [3])])
    assert combine_in_batch(t, "ts") is t
    nested = t.append_column("o", pa.array([{"x": 1}] * 3))
    with pytest.raises(InvalidInputError, match="cannot be compared"):
        combine_in_batch(nested, "o")


# =============================================================================================
# markers and partition metadata
# =============================================================================================

def test_markers(tmp_path):
    storage, base = LocalStorage(), str(tmp_path)
    assert marker_path(base, "20240101000000000", "city=a", "f_1-0-1_20240101000000000.parquet", "CREATE") == \
        f"{base}/.hoodie/.temp/20240101000000000/city=a/f_1-0-1_20240101000000000.parquet.marker.CREATE"
    assert marker_path(base, "1", "", ".f_1.log.1_0-0-0", "APPEND") == f"{base}/.hoodie/.temp/1/.f_1.log.1_0-0-0.marker.APPEND"
    create_marker(storage, base, "1", "y=2024/m=01", "a.parquet", "CREATE")
    create_marker(storage, base, "1", "y=2024/m=01", "a.parquet", "CREATE")  # idempotent
    create_marker(storage, base, "1", "", ".f_1.log.1_0-0-0", "APPEND")
    create_marker(storage, base, "2", "p", "b.parquet", "MERGE")
    assert list_markers(storage, base, "1") == [("", ".f_1.log.1_0-0-0", "APPEND"),
                                                ("y=2024/m=01", "a.parquet", "CREATE")]
    assert list_markers(storage, base, "3") == []
    delete_markers(storage, base, "1")
    assert list_markers(storage, base, "1") == [] and list_markers(storage, base, "2") == [("p", "b.parquet", "MERGE")]
    delete_markers(storage, base, "1")  # absent is fine
    with pytest.raises(InvalidInputError, match="CREATE, MERGE or APPEND"):
        marker_path(base, "1", "p", "x", "WRITE")


def test_timeline_server_markers_are_listed(tmp_path):
    folder = tmp_path / ".hoodie" / ".temp" / "5"
    folder.mkdir(parents=True)
    (folder / "MARKERS.type").write_text("TIMELINE_SERVER_BASED")
    (folder / "MARKERS0").write_text("city=a/x_0-1-0_5.parquet.marker.CREATE\ncity=b/.y_5.log.1_0-1-0.marker.APPEND\n")
    assert list_markers(LocalStorage(), str(tmp_path), "5") == [("city=a", "x_0-1-0_5.parquet", "CREATE"),
                                                                 ("city=b", ".y_5.log.1_0-1-0", "APPEND")]


def test_partition_metadata(tmp_path):
    storage = LocalStorage()
    assert ensure_partition_metadata(storage, str(tmp_path), "y=2024/m=01", "20240101000000000")
    assert not ensure_partition_metadata(storage, str(tmp_path), "y=2024/m=01", "20250101000000000")
    text = (tmp_path / "y=2024" / "m=01" / PARTITION_METAFILE).read_text()
    assert text.splitlines() == ["#partition metadata", "commitTime=20240101000000000", "partitionDepth=2"]
    assert ensure_partition_metadata(storage, str(tmp_path), "", "1")
    assert "partitionDepth=0" in (tmp_path / PARTITION_METAFILE).read_text()


def test_the_base_file_writer_marks_first_splits_row_groups_and_never_overwrites(tmp_path, monkeypatch):
    """The one writer of base files (a write's new file group and compaction): the CREATE marker,
    then the partition metadata when asked, then the file, in row groups of ROW_GROUP_ROWS with
    the Arrow schema stored; an existing name is a ConflictError and stays as it was."""
    from tablesvc.errors import ConflictError
    from tablesvc.write import base_file_writer

    monkeypatch.setattr(base_file_writer, "ROW_GROUP_ROWS", 40)
    storage, instant = LocalStorage(), "20240101000000000"
    rows = pa.table({"_hoodie_record_key": [f"k{i:03d}" for i in range(100)], "city": ["sf"] * 100})
    name = BaseFileName("fid-0", "0-0-0", instant).name
    written = base_file_writer.write_base_file(storage, str(tmp_path), instant, "city=sf", name, rows.schema,
                                               [rows.slice(0, 30), rows.slice(30)], new_partition=True)
    path = tmp_path / "city=sf" / name
    assert written == (100, path.stat().st_size)
    assert list_markers(storage, str(tmp_path), instant) == [("city=sf", name, "CREATE")]
    assert (tmp_path / "city=sf" / PARTITION_METAFILE).exists()
    meta = pq.read_metadata(path)
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [30, 40, 30]
    assert b"ARROW:schema" in meta.metadata and pq.read_table(path).equals(rows)
    with pytest.raises(ConflictError, match="already exists"):
        base_file_writer.write_base_file(storage, str(tmp_path), instant, "city=sf", name, rows.schema, [rows])
    assert pq.read_table(path).equals(rows)


# =============================================================================================
# hudi-rs with typed columns, and a known hudi-rs divergence
# =============================================================================================

@pytest.mark.parametrize("version,block_format", [(6, "avro"), (8, "parquet")])
def test_date_timestamp_decimal_columns_read_back(tmp_path, version, block_format):
    import datetime
    import decimal
    schema = (BASE_SCHEMA.append(pa.field("d", pa.date32())).append(pa.field("t", pa.timestamp("us", tz="UTC")))
              .append(pa.field("n", pa.decimal128(10, 2))))
    h = Harness(tmp_path / "trips", version, block_format)
    extra = {"d": datetime.date(2024, 1, 2), "n": decimal.Decimal("12.34"),
             "t": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)}
    h.commit(pa.Table.from_pylist(_rows(["k-000", "k-003"], [1, 1], extra=extra), schema=schema), "upsert")
    h.commit(pa.Table.from_pylist(_rows(["k-000"], [2], extra=dict(extra, n=decimal.Decimal("-0.05"))),
                                  schema=schema), "upsert")
    got = {r["uuid"]: r for r in h.check()}
    assert got["k-000"]["n"] == decimal.Decimal("-0.05") and got["k-003"]["d"] == datetime.date(2024, 1, 2)


@pytest.mark.parametrize("version", [6, 8])
def test_reinsert_after_delete_with_lower_ordering_value_follows_hudi(tmp_path, version):
    """Event time: log records fold first (the re-insert beats the natural delete), then meet the
    base row once, and the base row's greater ordering value wins: the deleted row comes back.
    hudi-rs reads it so, and so does tablesvc (docs/merge-semantics.md §2)."""
    from tablesvc.merge import ReadContext, SliceSpec, read_file_slice

    h = Harness(tmp_path / "trips", version)
    h.commit(pa.Table.from_pylist(_rows(["k-000"], [100]), schema=BASE_SCHEMA), "upsert")
    h.commit(pa.Table.from_pylist(_rows(["k-000"], [0]), schema=BASE_SCHEMA), "delete")
    h.commit(pa.Table.from_pylist(_rows(["k-000"], [50], fare=9.0), schema=BASE_SCHEMA), "upsert")
    theirs = read_table(h.path)
    table = Table.open(str(h.path))
    ctx = ReadContext.for_table(table)
    ours = pa.concat_tables([read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx)
                             for s in table.latest_file_slices()])
    assert theirs.column("ts").to_pylist() == [100]
    assert ours.column("ts").to_pylist() == [100]
