"""The file-slice merge reader (tablesvc.merge) against hudi-rs and on synthetic slices.

Fixture tests: every shared table, latest and as of the first completed write, must
give the same rows as ``hudi.HudiTable.read`` (reader v2).  Synthetic tests build
small MOR tables with tablesvc's own pieces and check one rule each; many of them
also ask hudi-rs to read the same table.
"""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import read_table

from fixture_tables import all_fixture_names
from tablesvc.errors import CorruptLogBlockError, InvalidInputError, UnsupportedTableError
from tablesvc.fsview.names import PARTITION_METAFILE, BaseFileName, LogFileName
from tablesvc.logformat import (
    BlockType,
    DeleteRecord,
    HeaderKey,
    LogBlock,
    avro_data_block,
    delete_block,
    encode_block,
    encode_delete_records,
    new_header,
    parquet_data_block,
    parse_log_bytes,
    rollback_block,
    with_compacted_block_times,
    write_log_file,
)
from tablesvc.merge import (
    COMMIT_TIME_ORDERING,
    EVENT_TIME_ORDERING,
    LogDeletes,
    ReadContext,
    SliceReadMetrics,
    SliceSpec,
    iter_file_slice,
    merge_records,
    output_schema,
    read_file_slice_with_metrics,
    select_from_contents,
)
from tablesvc.api import MergeMode, Table, TableSpec
from tablesvc.table.meta_fields import META_FIELDS
from timeline.instant import Action, TimelineLayout
from timeline.payloads import CommitMetadata, WriteStat, encode_commit_metadata
from timeline.storage import join

COMPARE_META = ("_hoodie_record_key", "_hoodie_commit_time")


# -- helpers -------------------------------------------------------------------------------

def read_ours(table: Table, as_of: str | None = None, columns=None) -> tuple[pa.Table, SliceReadMetrics]:
    timeline = table.timeline()
    ctx = ReadContext.for_table(table, timeline, as_of=as_of, columns=columns)
    parts, total = [], SliceReadMetrics()
    for s in table.latest_file_slices(as_of):
        got, metrics = read_file_slice_with_metrics(table.storage, SliceSpec.from_file_slice(s), ctx)
        assert got.schema == output_schema(ctx)
        parts.append(got)
        total = total + metrics
    return (pa.concat_tables(parts) if parts else output_schema(ctx).empty_table()), total


def rows_of(table: pa.Table, columns: list[str]) -> list[tuple]:
    """Rows as a sorted multiset (repr makes Decimal/datetime/None comparable)."""
    return sorted(tuple(repr(r[c]) for c in columns) for r in table.select(columns).to_pylist())


def assert_same_as_hudi(table: Table, as_of: str | None = None) -> pa.Table:
    ours, _ = read_ours(table, as_of)
    theirs = read_table(table.base_path, as_of)
    if theirs is None:
        assert ours.num_rows == 0
        return ours
    columns = [c for c in theirs.column_names if not c.startswith("_hoodie_") or c in COMPARE_META]
    assert "_hoodie_record_key" in columns or not table.config.populate_meta_fields
    # the key first, so a mismatch shows up next to its key
    columns.sort(key=lambda c: (c != "_hoodie_record_key", c != "_hoodie_commit_time"))
    assert rows_of(ours, columns) == rows_of(theirs, columns)
    return ours


def by_key(table: pa.Table, key: str = "_hoodie_record_key") -> dict[str, dict]:
    out = {}
    for row in table.to_pylist():
        assert row[key] not in out, f"duplicate key {row[key]}"
        out[row[key]] = row
    return out


# -- fixture tables against hudi-rs ---------------------------------------------------------

@pytest.mark.parametrize("name", all_fixture_names())
def test_fixture_snapshot_and_first_instant_match_hudi_rs(fixture_root, name):
    table = Table.open(str(fixture_root.path(name)))
    writes = table.timeline().completed_writes()
    assert_same_as_hudi(table)
    if writes:
        assert_same_as_hudi(table, writes[0].timestamp)


def _fixture(fixture_root, name: str) -> Table:
    return Table.open(str(fixture_root.path(name)))


def test_oracle_values_v6_trips_8i1u(fixture_root):
    table = _fixture(fixture_root, "v6_trips_8i1u")
    latest = {r["rider"]: r["fare"] for r in read_ours(table)[0].to_pylist()}
    first = table.timeline().completed_writes()[0].timestamp
    old = {r["rider"]: r["fare"] for r in read_ours(table, first)[0].to_pylist()}
    assert latest["rider-D"] == 25.0 and old["rider-D"] == 33.9
    assert len(latest) == 8


def test_oracle_values_v6_trips_8i3d(fixture_root):
    table = _fixture(fixture_root, "v6_trips_8i3d")
    got, metrics = read_ours(table)
    riders = {r["rider"] for r in got.to_pylist()}
    assert riders == {"rider-E", "rider-F", "rider-G", "rider-I", "rider-J"}
    assert metrics.log_deletes == 3 and metrics.output_rows == 5


def test_oracle_values_v8_trips_8i3u1d(fixture_root):
    table = _fixture(fixture_root, "v8_trips_8i3u1d")
    got = {r["rider"]: r["fare"] for r in read_ours(table)[0].to_pylist()}
    assert len(got) == 6 and got["rider-A"] == 0.0 and got["rider-G"] == 0.0
    assert "rider-F" not in got and "rider-J" not in got
    first = table.timeline().completed_writes()[0].timestamp
    old = {r["rider"]: r["fare"] for r in read_ours(table, first)[0].to_pylist()}
    assert old["rider-F"] == 34.15 and old["rider-J"] == 17.85


def test_oracle_values_v6_nonpartitioned_rollback(fixture_root):
    table = _fixture(fixture_root, "v6_nonpartitioned_rollback")
    got, metrics = read_ours(table)
    assert {r["name"]: r["isActive"] for r in got.to_pylist()} == {"Alice": True, "Bob": True, "Carol": True}
    assert metrics.log_blocks_rolled_back == 1 and metrics.command_blocks == 1


def test_no_meta_fields_table_reads_append_only(fixture_root):
    table = _fixture(fixture_root, "zips:mor_parquet_v6_simplekeygen_hivestyle_no_metafields")
    got, _ = read_ours(table)
    assert sorted(r["name"] for r in got.to_pylist()) == ["Alice", "Bob", "Carol", "Diana"]
    assert got.column("_hoodie_record_key").null_count == got.num_rows


def test_projection_and_batches(fixture_root):
    table = _fixture(fixture_root, "v8_trips_8i3u1d")
    ctx = ReadContext.for_table(table, columns=["rider", "fare"])
    assert output_schema(ctx).names == ["rider", "fare"]
    slices = [SliceSpec.from_file_slice(s) for s in table.latest_file_slices()]
    rows = []
    for spec in slices:
        batches = list(iter_file_slice(table.storage, spec, ctx, batch_size=1))
        assert all(b.num_rows == 1 and b.schema == output_schema(ctx) for b in batches)
        rows += [r for b in batches for r in b.to_pylist()]
    assert sorted((r["rider"], r["fare"]) for r in rows) == sorted(
        (r["rider"], r["fare"]) for r in read_ours(table)[0].to_pylist())
    with pytest.raises(InvalidInputError, match="nope"):
        output_schema(ReadContext.for_table(table, columns=["nope"]))


def test_context_and_spec_pickle(fixture_root):
    table = _fixture(fixture_root, "v8_trips_8i3u1d")
    ctx = ReadContext.for_table(table, as_of=table.timeline().completed_writes()[0].timestamp)
    spec = SliceSpec.from_file_slice(table.latest_file_slices()[0])
    assert pickle.loads(pickle.dumps(ctx)) == ctx and pickle.loads(pickle.dumps(spec)) == spec
    assert ctx.merge_mode == EVENT_TIME_ORDERING and ctx.ordering_field == "ts"
    assert output_schema(ctx).names[:5] == list(META_FIELDS)


# -- synthetic tables -----------------------------------------------------------------------

SCHEMA = {"type": "record", "name": "t_record", "namespace": "hoodie.t",
          "fields": [{"name": "id", "type": ["null", "string"], "default": None},
                     {"name": "ts", "type": ["null", "long"], "default": None},
                     {"name": "val", "type": ["null", "string"], "default": None}]}
SCHEMA_V2 = dict(SCHEMA, fields=SCHEMA["fields"] + [{"name": "extra", "type": ["null", "string"],
                                                     "default": None}])


def with_meta(schema: dict) -> dict:
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in META_FIELDS]
    return dict(schema, fields=meta + list(schema["fields"]))


class Synthetic:
    """One non-partitioned MOR table with a single file group, written step by step."""

    FILE_ID = "0b5e6c7a-1111-4222-8333-944455556666-0"

    def __init__(self, root: Path, *, version: int = 8, merge_mode: MergeMode | None = None):
        self.table = Table.create(str(root / "t"), TableSpec("t", ("id",), "ts", (), table_version=version,
                                                            merge_mode=merge_mode))
        self.writer = self.table.timeline_writer
        self.layout = self.table.config.layout
        self.base_instant: str | None = None
        self.versions = 0
        self.table.storage.write_new(join(self.table.base_path, PARTITION_METAFILE),
                                     b"#partition metadata\ncommitTime=0\npartitionDepth=0\n")

    @property
    def path(self) -> str:
        return self.table.base_path

    # instants
    def begin(self, action: Action = Action.DELTA_COMMIT):
        instant = self.writer.request(action)
        return self.writer.start(instant)

    def complete(self, instant, schema: dict = SCHEMA, stats: list[WriteStat] | None = None):
        md = CommitMetadata(partition_to_write_stats={"": tuple(stats or [])},
                            extra_metadata={"schema": json.dumps(schema)}, operation_type="UPSERT")
        return self.writer.complete(instant, encode_commit_metadata(md, self.layout))

    # records
    @staticmethod
    def record(instant: str, key: str, ts: int | None, val: str, seq: int = 0, **extra) -> dict:
        return {"_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_{seq}",
                "_hoodie_record_key": key, "_hoodie_partition_path": "", "_hoodie_file_name": Synthetic.FILE_ID,
                "id": key, "ts": ts, "val": val, **extra}

    # files
    def base(self, instant: str, rows: list[tuple[str, int | None, str]], row_group_size: int | None = None) -> str:
        name = BaseFileName(self.FILE_ID, "0-1-0", instant).name
        records = [dict(self.record(instant, k, ts, v, i), _hoodie_file_name=name) for i, (k, ts, v) in enumerate(rows)]
        from tablesvc.logformat import avro_schema_to_arrow
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(records, schema=avro_schema_to_arrow(json.dumps(with_meta(SCHEMA)))), sink,
                       row_group_size=row_group_size)
        self.table.storage.write_new(join(self.path, name), sink.getvalue())
        self.base_instant = instant
        return name

    def log(self, instant: str, blocks: list[LogBlock], *, raw_tail: bytes = b"", raw: bytes | None = None) -> str:
        self.versions += 1
        name_instant = self.base_instant if self.layout is TimelineLayout.V1 else instant
        name = LogFileName(self.FILE_ID, name_instant, self.versions, "0-1-0").name
        path = join(self.path, name)
        if raw is not None:
            self.table.storage.write_new(path, raw)
        elif raw_tail:
            self.table.storage.write_new(path, b"".join(encode_block(b) for b in blocks) + raw_tail)
        else:
            write_log_file(self.table.storage, path, blocks)
        return path

    @staticmethod
    def data_block(instant: str, rows: list[tuple], schema: dict = SCHEMA) -> LogBlock:
        records = [Synthetic.record(instant, r[0], r[1], r[2], i, **(r[3] if len(r) > 3 else {}))
                   for i, r in enumerate(rows)]
        return avro_data_block(instant, json.dumps(with_meta(schema)), records)

    def delete(self, instant: str, keys: list[str]) -> LogBlock:
        return delete_block(instant, json.dumps(with_meta(SCHEMA)), [(k, "") for k in keys])

    # one-call writes
    def write_base(self, rows, row_group_size: int | None = None) -> str:
        inst = self.begin()
        self.base(inst.timestamp, rows, row_group_size)
        return self.complete(inst).timestamp

    def write_log(self, make_blocks, schema: dict = SCHEMA, complete: bool = True, action=Action.DELTA_COMMIT) -> str:
        inst = self.begin(action)
        self.log(inst.timestamp, make_blocks(inst.timestamp))
        if complete:
            self.complete(inst, schema)
        return inst.timestamp


def vals(table: pa.Table) -> dict[str, str]:
    return {r["id"]: r["val"] for r in table.to_pylist()}


@pytest.mark.parametrize("mode, expected", [(MergeMode.EVENT_TIME_ORDERING, "base"),
                                            (MergeMode.COMMIT_TIME_ORDERING, "log")])
def test_lower_ordering_log_record_event_vs_commit_time(tmp_path, mode, expected):
    t = Synthetic(tmp_path, merge_mode=mode)
    t.write_base([("a", 100, "base"), ("b", 100, "base-b")])
    t.write_log(lambda i: [t.data_block(i, [("a", 50, "log"), ("b", 150, "log-b")])])
    got = assert_same_as_hudi(t.table)
    assert vals(got) == {"a": expected, "b": "log-b"}


def test_equal_ordering_goes_to_later_arrival_and_nulls_are_lowest(tmp_path):
    t = Synthetic(tmp_path)
    t.write_base([("a", 100, "base"), ("n", None, "base-n"), ("m", 5, "base-m")])
    t.write_log(lambda i: [t.data_block(i, [("a", 100, "log"), ("n", 1, "log-n"), ("m", None, "log-m")])])
    got = assert_same_as_hudi(t.table)
    assert vals(got) == {"a": "log", "n": "log-n", "m": "base-m"}


def test_duplicates_inside_and_across_log_blocks(tmp_path):
    t = Synthetic(tmp_path)
    t.write_base([("a", 1, "base")])
    t.write_log(lambda i: [t.data_block(i, [("a", 5, "x1"), ("a", 9, "x2"), ("a", 7, "x3"), ("b", 1, "b1"),
                                            ("b", 1, "b2")])])
    t.write_log(lambda i: [t.data_block(i, [("a", 8, "y1"), ("c", 3, "c1")])])
    got = assert_same_as_hudi(t.table)
    assert vals(got) == {"a": "x2", "b": "b2", "c": "c1"}


@pytest.mark.parametrize("mode", [MergeMode.EVENT_TIME_ORDERING, MergeMode.COMMIT_TIME_ORDERING])
def test_natural_delete_then_reinsert_and_delete_of_absent_key(tmp_path, mode):
    t = Synthetic(tmp_path, merge_mode=mode)
    t.write_base([("a", 100, "base-a"), ("b", 100, "base-b"), ("c", 100, "base-c")])
    t.write_log(lambda i: [t.delete(i, ["a", "b", "zz"])])
    t.write_log(lambda i: [t.data_block(i, [("a", 200, "again")])])
    got, metrics = read_ours(t.table)
    assert vals(got) == {"a": "again", "c": "base-c"}
    assert metrics.log_deletes == 3 and metrics.log_records == 1
    assert_same_as_hudi(t.table)


def _ordered_delete(instant: str, pairs: list[tuple[str, int]]) -> LogBlock:
    """A delete block whose records carry real ordering values (branch 2: Java int, hudi-rs long)."""
    header = new_header([(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, json.dumps(with_meta(SCHEMA)))])
    return LogBlock(BlockType.DELETE, header, encode_delete_records([DeleteRecord(k, "", 2, v) for k, v in pairs]))


@pytest.mark.parametrize("mode, expected", [
    # Java/hudi-rs fold the log first, then merge the base row once: under event time the
    # base row (ts 100) beats the re-inserted lower versions, so it comes back.
    (MergeMode.EVENT_TIME_ORDERING, {"a": "base-a", "b": "base-b", "c": "base-c"}),
    (MergeMode.COMMIT_TIME_ORDERING, {"a": "low", "b": "null-ts", "c": "low-c"}),
])
def test_natural_delete_then_lower_reinsert(tmp_path, mode, expected):
    t = Synthetic(tmp_path, merge_mode=mode)
    t.write_base([("a", 100, "base-a"), ("b", 100, "base-b"), ("c", 100, "base-c")])
    t.write_log(lambda i: [t.data_block(i, [("c", 300, "high-c")])])
    t.write_log(lambda i: [t.delete(i, ["a", "b", "c"])])
    t.write_log(lambda i: [t.data_block(i, [("a", 50, "low"), ("b", None, "null-ts"), ("c", 10, "low-c")])])
    got = assert_same_as_hudi(t.table)
    assert vals(got) == expected


@pytest.mark.parametrize("mode", [MergeMode.EVENT_TIME_ORDERING, MergeMode.COMMIT_TIME_ORDERING])
def test_deletes_with_real_ordering_values(tmp_path, mode):
    t = Synthetic(tmp_path, merge_mode=mode)
    t.write_base([("a", 100, "base-a"), ("b", 100, "base-b"), ("c", 100, "base-c"), ("e", 100, "base-e"),
                  ("f", 100, "base-f"), ("g", 100, "base-g")])
    t.write_log(lambda i: [_ordered_delete(i, [("a", 101), ("b", 100), ("c", 99), ("zz", 5)])])
    t.write_log(lambda i: [t.data_block(i, [("e", 90, "e-log")])])
    t.write_log(lambda i: [_ordered_delete(i, [("e", 95), ("f", 150), ("g", 150)])])
    t.write_log(lambda i: [t.data_block(i, [("f", 120, "f-lower"), ("g", 150, "g-equal")])])
    got = assert_same_as_hudi(t.table)
    if mode is MergeMode.EVENT_TIME_ORDERING:
        # a: 101 > 100; b: equal value, later instant; c: 99 < 100 kept; e: tombstone 95 < base 100;
        # f: the record after the delete is lower than it; g: equal record after the delete wins
        assert vals(got) == {"c": "base-c", "e": "base-e", "g": "g-equal"}
    else:
        assert vals(got) == {"f": "f-lower", "g": "g-equal"}


def test_rollback_command_block_removes_earlier_block(tmp_path):
    t = Synthetic(tmp_path, version=6)
    base = t.write_base([("a", 1, "base"), ("b", 1, "base-b")])
    bad = t.write_log(lambda i: [t.data_block(i, [("a", 5, "rolled-back")])])
    # the rollback targets a block whose instant is completed, so only the command block can drop it
    inst = t.begin(Action.ROLLBACK)
    t.log(inst.timestamp, [rollback_block(inst.timestamp, bad)])
    t.writer.complete(inst, b"")
    t.write_log(lambda i: [t.data_block(i, [("b", 5, "kept")])])
    got, metrics = read_ours(t.table)
    assert vals(got) == {"a": "base", "b": "kept"}
    assert metrics.log_blocks_rolled_back == 1 and metrics.command_blocks == 1
    assert base < bad
    assert_same_as_hudi(t.table)


def test_uncommitted_block_is_skipped(tmp_path):
    t = Synthetic(tmp_path, version=6)     # v6 names logs by base instant, so only the block tells
    t.write_base([("a", 1, "base"), ("b", 1, "base-b")])
    t.write_log(lambda i: [t.data_block(i, [("a", 5, "inflight")])], complete=False)
    t.write_log(lambda i: [t.data_block(i, [("b", 5, "done")])])
    got, metrics = read_ours(t.table)
    assert vals(got) == {"a": "base", "b": "done"}
    assert metrics.log_blocks_skipped == 1 and metrics.log_blocks_read == 1
    assert_same_as_hudi(t.table)


@pytest.mark.parametrize("version", [6, 8])
def test_as_of_excludes_later_blocks(tmp_path, version):
    t = Synthetic(tmp_path, version=version)
    first = t.write_base([("a", 1, "v1")])
    second = t.write_log(lambda i: [t.data_block(i, [("a", 2, "v2"), ("b", 2, "b2")])])
    t.write_log(lambda i: [t.delete(i, ["b"]), t.data_block(i, [("a", 3, "v3")])])
    assert vals(read_ours(t.table)[0]) == {"a": "v3"}
    assert vals(read_ours(t.table, second)[0]) == {"a": "v2", "b": "b2"}
    got, metrics = read_ours(t.table, first)
    assert vals(got) == {"a": "v1"}
    assert metrics.log_blocks_skipped == (3 if version == 6 else metrics.log_blocks_skipped)
    for as_of in (None, first, second):
        assert_same_as_hudi(t.table, as_of)


def _log_compaction(t: Synthetic, covered: list[str], rows: list[tuple], complete: bool) -> str:
    inst = t.begin(Action.LOG_COMPACTION)
    block = with_compacted_block_times(t.data_block(inst.timestamp, rows), list(reversed(covered)))
    t.log(inst.timestamp, [block])
    if complete:
        t.complete(inst)
    return inst.timestamp


@pytest.mark.parametrize("version", [6, 8])
@pytest.mark.parametrize("complete", [True, False])
def test_log_compacted_block_supersedes_listed_instants(tmp_path, version, complete):
    t = Synthetic(tmp_path, version=version)
    t.write_base([("a", 1, "base-a"), ("e", 1, "base-e")])
    u1 = t.write_log(lambda i: [t.data_block(i, [("a", 5, "upd-a")])])
    u2 = t.write_log(lambda i: [t.data_block(i, [("b", 5, "new-b")])])
    # the compacted block deliberately differs from what it replaces (hudi-rs probe P7)
    _log_compaction(t, [u1, u2], [("b", 5, "new-b"), ("e", 7, "compacted-e")], complete)
    got, metrics = read_ours(t.table)
    if complete:
        assert vals(got) == {"a": "base-a", "b": "new-b", "e": "compacted-e"}
        assert metrics.log_blocks_superseded == 2
    else:
        assert vals(got) == {"a": "upd-a", "b": "new-b", "e": "base-e"}
        assert metrics.log_blocks_superseded == 0
    assert_same_as_hudi(t.table)


def test_compaction_of_compactions_is_transitive(tmp_path):
    t = Synthetic(tmp_path)
    t.write_base([("a", 1, "base-a")])
    u1 = t.write_log(lambda i: [t.data_block(i, [("a", 5, "u1")])])
    c1 = _log_compaction(t, [u1], [("a", 5, "c1")], True)
    u2 = t.write_log(lambda i: [t.data_block(i, [("b", 5, "u2")])])
    _log_compaction(t, [c1, u2], [("a", 5, "c2"), ("b", 5, "c2-b")], True)
    got, metrics = read_ours(t.table)
    assert vals(got) == {"a": "c2", "b": "c2-b"}
    assert metrics.log_blocks_superseded == 3 and metrics.log_blocks_read == 1
    assert_same_as_hudi(t.table)


def test_torn_tail_of_a_failed_append_is_ignored(tmp_path):
    t = Synthetic(tmp_path, version=6)   # v6 names log files after the base instant: the file is in the slice
    t.write_base([("a", 1, "base")])
    inst = t.begin()
    t.log(inst.timestamp, [t.data_block(inst.timestamp, [("a", 2, "upd")])])
    t.complete(inst)
    failed = t.begin()          # dies mid-append: its block is cut short, the instant never completes
    torn = encode_block(t.data_block(failed.timestamp, [("b", 9, "lost")]))[:57]
    t.log(failed.timestamp, [], raw=torn)
    got, metrics = read_ours(t.table)
    assert vals(got) == {"a": "upd"}
    assert metrics.corrupt_spans == 1
    assert_same_as_hudi(t.table)


def test_torn_tail_of_a_completed_instant_raises_with_file_and_offset(tmp_path):
    """Java skips it and loses the block's records without a word; hudi-rs trusts the lengths."""
    t = Synthetic(tmp_path)
    t.write_base([("a", 1, "base")])
    inst = t.begin()
    first = encode_block(t.data_block(inst.timestamp, [("a", 2, "upd")]))
    torn = encode_block(t.data_block(inst.timestamp, [("b", 9, "lost")]))[:57]
    path = t.log(inst.timestamp, [], raw=first + torn)
    t.complete(inst)
    with pytest.raises(CorruptLogBlockError) as err:
        read_ours(t.table)
    assert path in str(err.value) and f"offset {len(first)}" in str(err.value)
    assert f"completed instant {inst.timestamp}" in str(err.value)


def test_corrupt_middle_block_raises_with_file_and_offset(tmp_path):
    t = Synthetic(tmp_path)
    t.write_base([("a", 1, "base")])
    inst = t.begin()
    first = encode_block(t.data_block(inst.timestamp, [("a", 2, "upd")]))
    middle = encode_block(t.data_block(inst.timestamp, [("c", 4, "damaged")]))
    damaged = middle[:6] + b"\xff" * 8 + middle[14:]        # its length field overwritten
    raw = first + damaged + encode_block(t.data_block(inst.timestamp, [("b", 3, "after")]))
    path = t.log(inst.timestamp, [], raw=raw)
    t.complete(inst)
    with pytest.raises(CorruptLogBlockError) as err:
        read_ours(t.table)
    assert path in str(err.value) and f"offset {len(first)}" in str(err.value)


def test_corrupt_span_followed_by_rollback_is_dropped_with_the_failed_write(tmp_path):
    t = Synthetic(tmp_path, version=6)
    t.write_base([("a", 1, "base")])
    failed = t.begin()   # never completes
    rb = t.begin(Action.ROLLBACK)
    torn = encode_block(t.data_block(failed.timestamp, [("a", 9, "lost")]))[:80]
    raw = torn + encode_block(rollback_block(rb.timestamp, failed.timestamp))
    t.log(rb.timestamp, [], raw=raw)
    t.writer.complete(rb, b"")
    got, metrics = read_ours(t.table)
    assert vals(got) == {"a": "base"} and metrics.corrupt_spans == 1


def test_zero_length_log_file_is_fine(tmp_path):
    t = Synthetic(tmp_path)
    t.write_base([("a", 1, "base")])
    inst = t.begin()
    t.log(inst.timestamp, [], raw=b"")
    t.complete(inst)
    got, metrics = read_ours(t.table)
    assert vals(got) == {"a": "base"} and metrics.log_files == 1 and metrics.log_blocks_read == 0


def test_new_nullable_column_in_later_log_block(tmp_path):
    t = Synthetic(tmp_path)
    t.write_base([("a", 1, "base-a"), ("b", 1, "base-b")])
    t.write_log(lambda i: [t.data_block(i, [("a", 2, "upd-a", {"extra": "x"})], schema=SCHEMA_V2)],
                schema=SCHEMA_V2)
    got = assert_same_as_hudi(t.table)
    assert {r["id"]: r["extra"] for r in got.to_pylist()} == {"a": "x", "b": None}
    assert got.schema.names[-1] == "extra"


def test_parquet_data_block_and_log_only_slice(tmp_path):
    t = Synthetic(tmp_path)
    inst = t.begin()
    rows = [t.record(inst.timestamp, "a", 1, "p1", 0), t.record(inst.timestamp, "a", 2, "p2", 1)]
    from tablesvc.logformat import avro_schema_to_arrow
    arrow = pa.Table.from_pylist(rows, schema=avro_schema_to_arrow(json.dumps(with_meta(SCHEMA))))
    t.log(inst.timestamp, [parquet_data_block(inst.timestamp, json.dumps(with_meta(SCHEMA)), arrow)])
    t.complete(inst)
    got = assert_same_as_hudi(t.table)
    assert vals(got) == {"a": "p2"}


# -- the pieces directly --------------------------------------------------------------------

def _ctx(**kw) -> ReadContext:
    base = dict(base_path="/x", table_version=8, ordering_field="ts", merge_mode=EVENT_TIME_ORDERING,
                as_of=None, completed_instants=frozenset({"001", "002", "003", "004"}), timeline_start="001",
                table_schema_json=json.dumps(SCHEMA))
    base.update(kw)
    return ReadContext(**base)


def _data(instant: str, rows: list[tuple]) -> LogBlock:
    return Synthetic.data_block(instant, rows)


def test_block_selection_rules():
    rb = rollback_block("004", "002")
    a = parse_log_bytes(encode_block(_data("001", [("a", 1, "x")])) + encode_block(_data("002", [("a", 1, "y")])),
                        "f1")
    b = parse_log_bytes(encode_block(_data("005", [("a", 1, "pending")])) + encode_block(rb)
                        + encode_block(_data("000", [("a", 1, "archived")])), "f2")
    sel = select_from_contents([a, b], _ctx())
    assert [s.block.instant_time for s in sel.blocks] == ["001", "000"]
    assert (sel.rolled_back, sel.skipped, sel.command_blocks) == (1, 1, 1)
    # the rollback is after as_of=003, so it does not apply yet
    sel = select_from_contents([a, b], _ctx(as_of="003"))
    assert [s.block.instant_time for s in sel.blocks] == ["001", "002", "000"]


def test_merge_records_real_ordering_deletes():
    schema = pa.schema([("_hoodie_commit_time", pa.utf8()), ("_hoodie_record_key", pa.utf8()), ("ts", pa.int64())])
    base = pa.table({"_hoodie_commit_time": ["001"] * 4, "_hoodie_record_key": ["a", "b", "c", "d"],
                     "ts": [10, 10, 10, None]}, schema=schema)
    dels = LogDeletes("002", [DeleteRecord("a", "", 3, 11), DeleteRecord("b", "", 3, 9),
                              DeleteRecord("c", "", 3, 10), DeleteRecord("d", "", 3, 1)])
    later = pa.table({"_hoodie_commit_time": ["003", "003"], "_hoodie_record_key": ["a", "b"], "ts": [11, 5]},
                     schema=schema)
    got = merge_records(base, [dels, later], merge_mode=EVENT_TIME_ORDERING, ordering_field="ts")
    # a: deleted (11 > 10) then re-inserted at 11 (ties go to the later arrival)
    # b: delete 9 < 10 ignored; later ts 5 loses; c: equal value, later instant -> deleted; d: null is lowest
    assert sorted(zip(got.column("_hoodie_record_key").to_pylist(), got.column("ts").to_pylist())) == \
        [("a", 11), ("b", 10)]
    got = merge_records(base, [dels, later], merge_mode=COMMIT_TIME_ORDERING, ordering_field="ts")
    assert sorted(got.column("_hoodie_record_key").to_pylist()) == ["a", "b"]
    assert got.column("ts").to_pylist() == [11, 5]


def test_fold_log_keeps_the_delete_record_behind_each_tombstone():
    """The log side names each tombstone's delete record (what log compaction writes): the key's
    last natural delete, or its greatest real-valued delete after it; none for a key whose log
    record survives; natural ones first, as in ``lookup``."""
    from tablesvc.merge import fold_log

    schema = pa.schema([("_hoodie_commit_time", pa.utf8()), ("_hoodie_record_key", pa.utf8()), ("ts", pa.int64())])
    data = pa.table({"_hoodie_commit_time": ["001"] * 3, "_hoodie_record_key": ["a", "b", "c"], "ts": [5, 5, 5]},
                    schema=schema)
    first = LogDeletes("002", [DeleteRecord("a", "p1", 2, 0), DeleteRecord("b", "p", 3, 7),
                               DeleteRecord("x", "p", 3, 4), DeleteRecord("c", "p", 3, 2)])
    second = LogDeletes("003", [DeleteRecord("a", "p2", 0, None), DeleteRecord("x", "p", 3, 9),
                                DeleteRecord("x", "p", 3, 6)])
    log = fold_log([data, first, second], merge_mode=EVENT_TIME_ORDERING, ordering_field="ts", schema=schema)
    # a: natural deletes, the last one stays; b: 7 beats the record's 5; x: no record, greatest value 9;
    # c: 2 loses to the record, which survives
    assert log.tombstones == (DeleteRecord("a", "p2", 0, None), DeleteRecord("b", "p", 3, 7),
                              DeleteRecord("x", "p", 3, 9))
    assert log.lookup.to_pylist()[log.num_records:] == ["a", "b", "x"]
    assert log.records.column("_hoodie_record_key").to_pylist() == ["c"]
    log = fold_log([data, first, second], merge_mode=COMMIT_TIME_ORDERING, ordering_field="ts", schema=schema)
    # commit time: every delete is a natural one, the last per key stays; every key's record is cut off
    assert log.tombstones == (DeleteRecord("a", "p2", 0, None), DeleteRecord("b", "p", 3, 7),
                              DeleteRecord("x", "p", 3, 6), DeleteRecord("c", "p", 3, 2))


def test_context_rejects_custom_merge_mode():
    with pytest.raises(UnsupportedTableError):
        _ctx(merge_mode="CUSTOM")


# -- streaming: the base file a batch at a time against the whole-table merge ----------------------
#
# The slice reader folds the log blocks first, then merges the base file batch by batch
# (``fold_log`` + ``BaseMerge``).  These tests check it against ``merge_records`` over the whole
# base table and against a row-by-row reading of docs/merge-semantics.md §2, on random slices:
# several row groups and batches, keys updated, deleted (natural and real-valued deletes) and
# re-inserted across blocks, both orderings.

def _ts_order(ts):
    return (ts is not None, ts if ts is not None else 0)


def _delete_removes(value, instant, record: dict) -> bool:
    """A real-valued delete arriving after ``record`` (event time) replaces it."""
    if record["ts"] is None:
        return True
    return value > record["ts"] or (value == record["ts"] and instant > record["_hoodie_commit_time"])


def _fold_reference(arrivals: list[tuple], event_time: bool) -> dict[str, tuple]:
    """Step A one arrival at a time: key -> ("record", row, arrival) | ("natural",) | ("real", value, instant)."""
    state: dict[str, tuple] = {}
    arrival = 0
    for item in arrivals:
        if item[0] == "record":
            row = item[1]
            cur = state.get(row["_hoodie_record_key"])
            if (not event_time or cur is None or cur[0] == "natural"
                    or (cur[0] == "record" and _ts_order(row["ts"]) >= _ts_order(cur[1]["ts"]))
                    or (cur[0] == "real" and row["ts"] is not None and row["ts"] >= cur[1])):
                state[row["_hoodie_record_key"]] = ("record", row, arrival)
            arrival += 1
            continue
        _, key, value, instant = item
        cur = state.get(key)
        if not event_time or value is None or value == 0:
            state[key] = ("natural",)
        elif (cur is None or cur[0] == "natural" or (cur[0] == "record" and _delete_removes(value, instant, cur[1]))
              or (cur[0] == "real" and value >= cur[1])):
            state[key] = ("real", value, instant)
    return state


def _merge_reference(base_rows: list[dict], arrivals: list[tuple], event_time: bool) -> list[dict]:
    """docs/merge-semantics.md §2 without vectorisation: surviving base rows in file order, then
    the surviving log records in arrival order."""
    state = _fold_reference(arrivals, event_time)
    out, beaten = [], set()
    for row in base_rows:
        result = state.get(row["_hoodie_record_key"])
        if result is None:
            out.append(row)
        elif result[0] == "record":
            log_ts = result[1]["ts"]
            if event_time and row["ts"] is not None and (log_ts is None or row["ts"] > log_ts):
                out.append(row)
                beaten.add(row["_hoodie_record_key"])
        elif result[0] == "real" and not _delete_removes(result[1], result[2], row):
            out.append(row)
    records = sorted((r for k, r in state.items() if r[0] == "record" and k not in beaten), key=lambda r: r[2])
    return out + [r[1] for r in records]


def _random_ts(rng) -> int | None:
    roll = rng.random()
    return None if roll < 0.08 else rng.randint(1, 9)


def _random_log(rng, keys: list[str], instants: list[str]) -> list[tuple[str, list]]:
    """Per instant: ("data", [(key, ts, val)]) or ("delete", [(key, value)]) with natural (0) and
    real-valued deletes; keys are drawn again and again, so they are updated, deleted and
    re-inserted across blocks."""
    blocks = []
    for n, instant in enumerate(instants):
        picked = rng.sample(keys, rng.randint(1, max(1, len(keys) // 3)))
        if rng.random() < 0.35:
            blocks.append(("delete", [(k, rng.choice([0, 0, rng.randint(1, 9)])) for k in picked]))
        else:
            blocks.append(("data", [(k, _random_ts(rng), f"{instant}-{k}-{n}") for k in picked]))
    return blocks


@pytest.mark.parametrize("mode", [EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING])
@pytest.mark.parametrize("seed", range(4))
def test_merge_streamed_in_batches_equals_whole_table_and_reference(mode, seed):
    import random

    from tablesvc.merge import BaseMerge, fold_log

    rng = random.Random(seed)
    schema = output_schema(_ctx())
    event_time = mode == EVENT_TIME_ORDERING
    for case in range(60):
        keys = [f"k{i:02d}" for i in range(rng.randint(1, 40))]
        base_keys = [k for k in keys if rng.random() < 0.6]
        if case % 5 == 0 and base_keys:     # duplicate keys inside the base file, as readers tolerate them
            base_keys += rng.choices(base_keys, k=2)
        base_rows = [Synthetic.record("001", k, _random_ts(rng), f"base-{i}", i) for i, k in enumerate(base_keys)]
        instants = [f"{n + 2:03d}" for n in range(rng.randint(0, 6))]
        inputs, arrivals = [], []
        for instant, (kind, rows) in zip(instants, _random_log(rng, keys, instants)):
            if kind == "delete":
                inputs.append(LogDeletes(instant, tuple(DeleteRecord(k, "", 2, v) for k, v in rows)))
                arrivals += [("delete", k, v, instant) for k, v in rows]
            else:
                records = [Synthetic.record(instant, k, ts, v, i) for i, (k, ts, v) in enumerate(rows)]
                inputs.append(pa.Table.from_pylist(records, schema=schema))
                arrivals += [("record", r) for r in records]
        base = pa.Table.from_pylist(base_rows, schema=schema)
        whole = merge_records(base, inputs, merge_mode=mode, ordering_field="ts", schema=schema)
        log = fold_log(inputs, merge_mode=mode, ordering_field="ts", schema=schema)
        merge, parts, at = BaseMerge(log), [], 0
        while at < base.num_rows:
            size = rng.randint(1, 7)
            parts.append(merge.merge(base.slice(at, size)))
            at += size
        streamed = pa.concat_tables(parts + [merge.tail()])
        expected = _merge_reference(base_rows, arrivals, event_time)
        assert whole.to_pylist() == expected, (case, arrivals)
        assert streamed.to_pylist() == expected, (case, arrivals)


@pytest.fixture
def small_batches(monkeypatch):
    """Batches, key lookups and row groups that never line up: a few rows each."""
    from tablesvc.merge import slice_reader

    monkeypatch.setattr(slice_reader, "MERGE_BATCH_ROWS", 5)
    monkeypatch.setattr(slice_reader, "READ_MERGE_BATCH_ROWS", 5)
    monkeypatch.setattr(slice_reader, "KEY_CHUNK_ROWS", 8)
    monkeypatch.setattr(slice_reader, "LOOKUP_CHUNK_FACTOR", 1)
    monkeypatch.setattr(slice_reader, "RELEASE_EVERY_ROWS", 16)
    monkeypatch.setattr(slice_reader, "RELEASE_AFTER_RECORDS", 1)


def _whole_table_read(table: Table, as_of: str | None = None) -> pa.Table:
    """The slice merged with the base file read whole and ``merge_records``: the pre-streaming reader."""
    from tablesvc.merge import log_inputs, select_blocks
    from tablesvc.merge.schema import align_table, work_schema

    ctx = ReadContext.for_table(table, as_of=as_of)
    (s,) = table.latest_file_slices(as_of)
    work = work_schema(ctx)
    base = align_table(pq.read_table(s.base_file.path), work) if s.base_file else None
    inputs, _, _ = log_inputs(select_blocks(table.storage, [lf.path for lf in s.log_files], ctx), work)
    merged = merge_records(base, inputs, merge_mode=ctx.effective_merge_mode, ordering_field=ctx.ordering_field,
                           schema=work)
    return merged.select(output_schema(ctx).names)


@pytest.mark.parametrize("mode", [MergeMode.EVENT_TIME_ORDERING, MergeMode.COMMIT_TIME_ORDERING])
@pytest.mark.parametrize("seed", range(3))
def test_slice_streamed_by_row_group_and_batch_equals_whole_table_merge(tmp_path, small_batches, mode, seed):
    import random

    rng = random.Random(seed)
    t = Synthetic(tmp_path, merge_mode=mode)
    keys = [f"key-{i:03d}" for i in range(60)]
    base_rows = [(k, _random_ts(rng), f"base-{k}") for k in keys if rng.random() < 0.7]
    t.write_base(base_rows, row_group_size=7)
    assert pq.ParquetFile(t.table.latest_file_slices()[0].base_file.path).num_row_groups > 3
    instants = []
    for kind, rows in _random_log(rng, keys + [f"new-{i}" for i in range(10)], ["?"] * 6):
        if kind == "delete":
            instants.append(t.write_log(lambda i: [_ordered_delete(i, rows)]))
        else:
            instants.append(t.write_log(lambda i: [t.data_block(i, rows)]))
    for as_of in (None, instants[2]):
        ctx = ReadContext.for_table(t.table, as_of=as_of)
        (s,) = t.table.latest_file_slices(as_of)
        batches = list(iter_file_slice(t.table.storage, SliceSpec.from_file_slice(s), ctx, batch_size=3))
        assert all(0 < b.num_rows <= 3 and b.schema == output_schema(ctx) for b in batches)
        streamed = pa.Table.from_batches(batches, output_schema(ctx))
        whole = _whole_table_read(t.table, as_of)
        assert streamed.to_pylist() == whole.to_pylist()
        assert read_ours(t.table, as_of)[0].to_pylist() == whole.to_pylist()
        assert_same_as_hudi(t.table, as_of)


def test_read_counts_base_rows_and_output_rows_when_streamed(tmp_path, small_batches):
    t = Synthetic(tmp_path)
    t.write_base([(f"k{i:02d}", 5, "base") for i in range(23)], row_group_size=4)
    t.write_log(lambda i: [t.data_block(i, [("k01", 9, "upd"), ("new", 1, "ins")]), t.delete(i, ["k02", "k03"])])
    got, metrics = read_ours(t.table)
    assert got.num_rows == 23 - 2 + 1 == metrics.output_rows
    assert (metrics.base_rows, metrics.log_records, metrics.log_deletes, metrics.log_blocks_read) == (23, 2, 2, 2)


def test_base_file_that_is_not_parquet_is_reported(tmp_path):
    from tablesvc.errors import LogFormatError

    t = Synthetic(tmp_path)
    t.write_base([("a", 1, "base")])
    t.write_log(lambda i: [t.data_block(i, [("a", 2, "upd")])])
    base = t.table.latest_file_slices()[0].base_file.path
    Path(base).write_bytes(b"not a parquet file at all")
    with pytest.raises(LogFormatError, match=f"{base}: base file does not read as parquet"):
        read_ours(t.table)


def test_iterating_stops_early_and_closes_the_base_file(tmp_path, small_batches):
    t = Synthetic(tmp_path)
    t.write_base([(f"k{i:02d}", 5, "base") for i in range(40)], row_group_size=10)
    t.write_log(lambda i: [t.data_block(i, [("k01", 9, "upd")])])
    ctx = ReadContext.for_table(t.table)
    batches = iter_file_slice(t.table.storage, SliceSpec.from_file_slice(t.table.latest_file_slices()[0]), ctx, 4)
    assert 0 < next(batches).num_rows <= 4
    batches.close()            # a consumer that stops early (a Spark limit) leaves no open handle
    fds = Path("/proc/self/fd")
    if fds.is_dir():
        base = t.table.latest_file_slices()[0].base_file.path
        assert not [p for p in fds.iterdir() if p.exists() and str(p.resolve()) == base]


# -- low-cardinality string columns read through their dictionary ----------------------------------

def test_dictionary_read_picks_low_cardinality_strings_only(tmp_path):
    from tablesvc.merge.slice_reader import dictionary_read_columns

    n = 20_000
    table = pa.table({"const": ["city=london"] * n, "few": [f"rider-{i % 7}" for i in range(n)],
                      "unique": [f"key-{i:08d}" for i in range(n)], "num": list(range(n))})
    # a small dictionary page limit: the unique column outgrows it and falls back to plain pages
    pq.write_table(table, tmp_path / "dict.parquet", row_group_size=5_000, dictionary_pagesize_limit=16_384)
    pf = pq.ParquetFile(tmp_path / "dict.parquet")
    assert dictionary_read_columns(pf, table.column_names) == ["const", "few"]
    assert dictionary_read_columns(pf, ["few", "missing"]) == ["few"]
    pq.write_table(table, tmp_path / "plain.parquet", use_dictionary=False)
    assert dictionary_read_columns(pq.ParquetFile(tmp_path / "plain.parquet"), table.column_names) == []


def test_a_slice_read_through_dictionaries_equals_the_dense_read_and_hudi_rs(tmp_path, small_batches, monkeypatch):
    from tablesvc.merge import slice_reader

    t = Synthetic(tmp_path)
    t.write_base([(f"k{i:02d}", 5, "base" if i % 3 else "other") for i in range(40)], row_group_size=10)
    t.write_log(lambda i: [t.data_block(i, [("k01", 9, "upd"), ("k06", 1, "low"), ("new", 1, "ins")]),
                           t.delete(i, ["k02", "k03"])])
    base = pq.ParquetFile(t.table.latest_file_slices()[0].base_file.path)
    picked = slice_reader.dictionary_read_columns(base, base.schema_arrow.names)
    assert {"val", "_hoodie_partition_path", "_hoodie_commit_time"} <= set(picked)
    assert "id" in picked           # the key column is read plain all the same (excluded by the reader)

    through_dictionaries = assert_same_as_hudi(t.table)       # also checks the output schema
    monkeypatch.setattr(slice_reader, "dictionary_read_columns", lambda pf, columns: [])
    dense, _ = read_ours(t.table)
    assert through_dictionaries.equals(dense)
    assert vals(dense)["k01"] == "upd" and vals(dense)["k06"] == "other" and "k02" not in vals(dense)


def test_nullable_everywhere_reaches_every_depth_but_map_keys():
    from tablesvc.merge.schema import nullable_everywhere

    req = lambda name, t: pa.field(name, t, nullable=False)   # noqa: E731
    point = pa.struct([req("x", pa.float64()), req("tags", pa.list_(req("item", pa.string())))])
    schema = pa.schema([req("id", pa.string()), req("p", point),
                        req("m", pa.map_(pa.string(), req("value", pa.int64()))),
                        req("big", pa.large_list(req("item", point))), req("fixed", pa.list_(req("item", pa.int32()), 2))],
                       metadata={b"k": b"v"})
    out = nullable_everywhere(schema)

    def required(t: pa.DataType, path: str) -> list[str]:
        """Paths of the required fields under ``t`` (map keys listed as such)."""
        found = []
        if pa.types.is_struct(t):
            children = [t.field(i) for i in range(t.num_fields)]
        elif pa.types.is_map(t):
            children = [t.item_field]
            found += [f"{path}.key"] if not t.key_field.nullable else []
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            children = [t.value_field]
        else:
            children = []
        for c in children:
            found += ([f"{path}.{c.name}"] if not c.nullable else []) + required(c.type, f"{path}.{c.name}")
        return found

    assert sum((required(f.type, f.name) for f in schema), []) != []
    assert [f.name for f in out if not f.nullable] == []
    assert sum((required(f.type, f.name) for f in out), []) == ["m.key"]
    assert [f.name for f in out] == schema.names and out.metadata == schema.metadata
    assert out.field("fixed").type.list_size == 2 and pa.types.is_large_list(out.field("big").type)
