"""The bad-input matrix (issue #7): every kind of bad input, each with its exit code and one line.

The standard, checked for every row: the documented exit code (0 done or nothing to do, 1 runtime
failure, 2 invalid usage or input, 3 conflict); stderr is exactly one line, no traceback, naming the
file, key, instant or offset; the table's files are unchanged (digest of every file); and where the
table is readable, hudi-rs reads the same rows after the command as before it.  Rows whose bad input
is tolerated (exit 0: a torn append of a failed write, a stray folder) also check that tablesvc's own
reader and hudi-rs return exactly the expected rows.

The CLI runs in-process (``tablesvc.cli.main.main``).  Commands that would start Spark find
``get_spark`` replaced by a tripwire: bad input must be refused before Spark starts (the few rows
that need Spark to see the damage, a data file read in a task, are marked and use the shared session).
Tables are built once per module without Spark and copied per case.
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import sorted_rows

from table_builders import compact_by_hand, tablesvc_rows, tree
from tablesvc.cli.main import main
from tablesvc.demo.sample_table import build_sample_table
from tablesvc.logformat import avro_data_block, encode_block, read_log_file
from tablesvc.api import Table, TableSpec

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# -- the tables, built once -------------------------------------------------------------------------

@dataclass
class Built:
    path: Path
    expected: dict[str, tuple]          # uuid -> (uuid, ts, fare): the rows a reader must return
    t1: str                             # first delta commit (inserts: base files)
    t2: str                             # second delta commit (updates in san_francisco, deletes in sao_paulo)
    compaction: str | None = None       # a completed compaction (table "v8c")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Built]:
    root = tmp_path_factory.mktemp("bad-input-tables")
    out = {}
    for name, version in (("v6", 6), ("v8", 8), ("v8c", 8)):
        sample = build_sample_table(str(root / name), rows=60, table_version=version)
        t1, t2 = [i.timestamp for i in sample.table.timeline().completed()]
        expected = {k: (k, r["ts"], r["fare"]) for k, r in sample.expected.items()}
        out[name] = Built(root / name, expected, t1, t2)
    out["v8c"].compaction = compact_by_hand(Table.open(str(root / "v8c")))
    empty = root / "empty"
    Table.create(str(empty), TableSpec("empty", ("uuid",), "ts", ("city",), table_version=8))
    out["empty"] = Built(empty, {}, "", "")
    return out


# -- reading rows -----------------------------------------------------------------------------------

def our_rows(path: Path) -> list[tuple]:
    """tablesvc's own merge reader, slice by slice (no Spark)."""
    return tablesvc_rows(Table.open(str(path)))


# -- damage -----------------------------------------------------------------------------------------

@dataclass
class Ctx:
    """What a case's preparation sees and fills in: ``values`` replace ``{name}`` in argv and needles."""

    table: Path
    tmp: Path
    b: Built
    values: dict[str, str] = field(default_factory=dict)

    def file_in(self, partition: str, suffix: str) -> Path:
        (found,) = [p for p in (self.table / partition).iterdir() if p.name.endswith(suffix) or suffix in p.name]
        return found

    @property
    def update_log(self) -> Path:
        """The log file of t2's updates (one complete AVRO_DATA block)."""
        return self.file_in("city=san_francisco", ".log.")

    def timeline_dir(self) -> Path:
        t = self.table / ".hoodie"
        return t / "timeline" if (t / "timeline").is_dir() else t


def _props(ctx: Ctx) -> Path:
    return ctx.table / ".hoodie" / "hoodie.properties"


def props_garbage(ctx: Ctx) -> None:
    _props(ctx).write_bytes(b"\x00\xff\xfe garbage \x81\x82\n")
    ctx.values["file"] = str(_props(ctx))


def props_text_garbage(ctx: Ctx) -> None:
    _props(ctx).write_text("this is not a properties file\n")
    ctx.values["file"] = str(_props(ctx))


def props_empty(ctx: Ctx) -> None:
    _props(ctx).write_bytes(b"")
    ctx.values["file"] = str(_props(ctx))


def props_edit(key: str, value: str | None) -> Callable[[Ctx], None]:
    def damage(ctx: Ctx) -> None:
        lines = [ln for ln in _props(ctx).read_text().splitlines() if not ln.startswith(key + "=")]
        if value is not None:
            lines.append(f"{key}={value}")
        _props(ctx).write_text("\n".join(lines) + "\n")
    return damage


def completed_commit_garbage(ctx: Ctx) -> None:
    (f,) = [p for p in ctx.timeline_dir().iterdir() if p.name.startswith(ctx.b.t2) and p.name.endswith(".deltacommit")]
    f.write_bytes(b"\x07this is not commit metadata\x00")
    ctx.values["file"] = f.name


def completed_commit_empty(ctx: Ctx) -> None:
    (f,) = [p for p in ctx.timeline_dir().iterdir() if p.name.startswith(ctx.b.t2) and p.name.endswith(".deltacommit")]
    f.write_bytes(b"")


def compaction_plan_garbage(ctx: Ctx) -> None:
    instant = "20300101000000000"
    (ctx.timeline_dir() / f"{instant}.compaction.requested").write_bytes(b"Obj\x01 not an avro plan")
    ctx.values["instant"] = instant


def table_yaml_garbage(ctx: Ctx) -> None:
    f = ctx.table / ".hoodie" / "tablesvc.yaml"
    f.write_text("hoodie.cleaner.policy: [unclosed\n")
    ctx.values["file"] = str(f)


def not_a_table(ctx: Ctx) -> None:
    ctx.values["table"] = str(ctx.tmp / "plain")
    (ctx.tmp / "plain").mkdir()
    (ctx.tmp / "plain" / "data.csv").write_text("a,b\n1,2\n")


def missing_table(ctx: Ctx) -> None:
    ctx.values["table"] = str(ctx.tmp / "no-such-table")


def file_as_table(ctx: Ctx) -> None:
    (ctx.tmp / "a-file").write_text("not a folder\n")
    ctx.values["table"] = str(ctx.tmp / "a-file")


def stray_dir(ctx: Ctx) -> None:
    stray = ctx.table / "city=chennai" / "stray-folder"
    stray.mkdir()
    (stray / "notes.txt").write_text("left here by hand\n")
    (stray / "nested").mkdir()


def zero_length_base(ctx: Ctx) -> None:
    base = ctx.file_in("city=chennai", ".parquet")
    base.write_bytes(b"")
    ctx.values["file"] = base.name


# Log blocks.  The update log holds one complete block of t2 (completed).
def _extra_block(instant: str) -> bytes:
    row = {"_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_0", "_hoodie_record_key": "zzz",
           "_hoodie_partition_path": "city=san_francisco", "_hoodie_file_name": "x", "ts": 1, "uuid": "zzz",
           "rider": "r", "fare": 1.0, "city": "san_francisco"}
    return encode_block(avro_data_block(instant, _schema(), [row]))


def _schema() -> str:
    import json

    from tablesvc.demo.sample_table import DATA_SCHEMA, with_meta_fields

    return json.dumps(with_meta_fields(DATA_SCHEMA))


FAILED_INSTANT = "20990101000000000"   # newer than anything on the timeline and never completed


def log_rewrite(make: Callable[[bytes, Ctx], bytes], offset: Callable[[bytes, Ctx], int] | None = None):
    def damage(ctx: Ctx) -> None:
        log = ctx.update_log
        data = log.read_bytes()
        log.write_bytes(make(data, ctx))
        ctx.values["file"] = str(log)
        if offset is not None:
            ctx.values["offset"] = f"offset {offset(data, ctx)}"
    return damage


def _bad_length(block: bytes) -> bytes:
    bad = bytearray(block)
    struct.pack_into(">q", bad, 6, 10 ** 6)    # the block length now runs past the file
    return bytes(bad)


LOG_DAMAGE = {
    # a failed append (its instant never completed) torn after 60 bytes: ignored
    "torn_tail_failed_append": log_rewrite(lambda d, c: d + _extra_block(FAILED_INSTANT)[:60]),
    # bytes after the last block that do not even start with the magic: ignored
    "trailing_garbage": log_rewrite(lambda d, c: d + b"\x00\x00garbage of a failed append"),
    # a partial magic at the end
    "partial_magic_tail": log_rewrite(lambda d, c: d + b"#HU"),
    # a block of the completed t2 cut short at the end of the file: t2's data would be lost
    "torn_tail_completed_instant": log_rewrite(lambda d, c: d + _extra_block(c.b.t2)[:70],
                                               lambda d, c: len(d)),
    # a bad block length in the middle: the valid block after it must not be dropped
    "bad_length_mid_file": log_rewrite(lambda d, c: _bad_length(d) + _extra_block(c.b.t2), lambda d, c: 0),
    # garbage (no magic) between two valid blocks, long enough to have been a block
    "bad_magic_mid_file": log_rewrite(lambda d, c: d + b"XXXXXX" + b"garbage" * 10 + _extra_block(c.b.t2),
                                      lambda d, c: len(d)),
    # a whole block of the completed t2 at the end, its magic alone overwritten: still t2's data
    "damaged_magic_completed_instant": log_rewrite(lambda d, c: d + b"XXXXXX" + _extra_block(c.b.t2)[6:],
                                                   lambda d, c: len(d)),
    # the same damage on a block of a failed append: the torn tail of a failed append, ignored
    "damaged_magic_failed_append": log_rewrite(lambda d, c: d + b"XXXXXX" + _extra_block(FAILED_INSTANT)[6:]),
    # the magic written twice before the (only) block: only 6 bytes, no block can hide there
    "duplicated_magic": log_rewrite(lambda d, c: b"#HUDI#" + d),
    # a zero-length log file (a writer that died before its first byte)
    "zero_length_log": log_rewrite(lambda d, c: b""),
}


# Inputs for `write`: a bad file in the case's tmp folder.
def make_input(kind: str) -> Callable[[Ctx], None]:
    def prepare(ctx: Ctx) -> None:
        good = {"uuid": ["che-00001"], "ts": [1_800_000_000_000], "rider": ["r"], "fare": [9.5], "city": ["chennai"]}
        target = ctx.tmp / "input.parquet"
        if kind == "missing":
            target = ctx.tmp / "missing.parquet"
        elif kind == "corrupt_parquet":
            target.write_bytes(b"PAR1 definitely not parquet")
        elif kind == "zero_length_parquet":
            target.write_bytes(b"")
        elif kind == "unreadable":
            pq.write_table(pa.table(good), target)
            target.chmod(0)
        elif kind == "corrupt_json":
            target = ctx.tmp / "input.json"
            target.write_text('{"uuid": "che-00001", "ts": 1\nthis is not json\n')
        elif kind in ("json_bad_later_line", "json_ordering_string"):
            target = ctx.tmp / "input.json"
            ts = '"yesterday"' if kind == "json_ordering_string" else "1800000000000"
            good_line = '{"uuid": "che-00001", "ts": %s, "rider": "r", "fare": 9.5, "city": "chennai"}' % ts
            target.write_text(good_line + "\n" + ("{not json\n" if kind == "json_bad_later_line" else ""))
        elif kind in ("json_null_key", "json_empty_key"):
            # read by Spark (no footer to check first): the write job's routing refuses the key
            target = ctx.tmp / "input.json"
            line = '{"uuid": %s, "ts": 1800000000000, "rider": "r", "fare": 9.5, "city": "chennai"}'
            target.write_text(line % '"che-00001"' + "\n" + line % ("null" if kind == "json_null_key" else '""') + "\n")
        elif kind == "corrupt_file_in_folder":
            target = ctx.tmp / "batch"
            target.mkdir()
            pq.write_table(pa.table(good), target / "part-0.parquet")
            (target / "part-1.parquet").write_bytes(b"garbage")
            ctx.values["file"] = "part-1.parquet"
        else:
            cols = dict(good)
            if kind == "no_key":
                del cols["uuid"]
            elif kind == "no_ordering":
                del cols["ts"]
            elif kind == "no_partition":
                del cols["city"]
            elif kind == "key_struct":
                cols["uuid"] = pa.array([{"a": "che-00001"}])
            elif kind == "key_list":
                cols["uuid"] = pa.array([["che-00001"]])
            elif kind == "ordering_string":
                cols["ts"] = ["yesterday"]
            elif kind == "null_key":
                cols["uuid"] = pa.array([None], pa.string())
            elif kind == "null_key_second_row_group":
                cols = {k: v * 2 for k, v in good.items()}
                cols["uuid"] = pa.array(["che-00001", None], pa.string())
            pq.write_table(pa.table(cols), target, row_group_size=1)
        ctx.values["input"] = str(target)
    return prepare


# -- the matrix -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]                 # "{table}" and the values a preparation sets are filled in
    code: int
    needles: tuple[str, ...] = ()         # each appears in the one stderr line
    table: str = "v8"                     # a key of `built`
    prepare: Callable[[Ctx], None] | None = None
    readable: bool = True                 # hudi-rs reads the table (before and after the command)
    expect_rows: bool = False             # exit 0 rows: our reader (and hudi-rs) return the expected rows
    hudi_agrees: bool = True              # False: hudi-rs reads this damage differently (see the row)
    out_needles: tuple[str, ...] = ()     # exit 0 rows: each appears in stdout (the output says why)
    spark: bool = False                   # needs Spark to meet the damage (a data file read in a task)
    xfail: str | None = None
    skip_root: bool = False
    writes_started: bool = False          # a write refused inside its Spark job (its instant undone)


def C(id, argv, code, needles=(), **kw) -> Case:
    return Case(id, tuple(argv.split()) if isinstance(argv, str) else tuple(argv), code, tuple(needles), **kw)


INSTANT_UNKNOWN = "20200101000000000"

CASES = [
    # input files of `write`
    C("write-input-missing", "write {table} --input {input}", 2, ["{input}"], prepare=make_input("missing")),
    C("write-input-unreadable", "write {table} --input {input}", 2, ["{input}"], prepare=make_input("unreadable"),
      skip_root=True),
    C("write-input-corrupt-parquet", "write {table} --input {input}", 2, ["{input}"],
      prepare=make_input("corrupt_parquet")),
    C("write-input-zero-length-parquet", "write {table} --input {input}", 2, ["{input}"],
      prepare=make_input("zero_length_parquet")),
    C("write-input-folder-with-corrupt-file", "write {table} --input {input}", 2, ["{file}"],
      prepare=make_input("corrupt_file_in_folder")),
    C("write-input-corrupt-json", "write {table} --input {input}", 2, ["{input}"], prepare=make_input("corrupt_json")),
    C("write-input-json-malformed-later-line", "write {table} --input {input}", 2, ["{input}", "malformed"],
      prepare=make_input("json_bad_later_line"), spark=True),
    C("write-input-json-ordering-is-string", "write {table} --input {input}", 2, ["ts", "string"],
      prepare=make_input("json_ordering_string"), spark=True),
    # input schema and keys
    C("write-input-no-record-key", "write {table} --input {input}", 2, ["uuid"], prepare=make_input("no_key")),
    C("write-input-no-ordering-field", "write {table} --input {input}", 2, ["ts"], prepare=make_input("no_ordering")),
    C("write-input-no-partition-field", "write {table} --input {input}", 2, ["city"],
      prepare=make_input("no_partition")),
    C("write-input-key-is-struct", "write {table} --input {input}", 2, ["uuid"], prepare=make_input("key_struct")),
    C("write-input-key-is-list-new-table", "write {table} --input {input}", 2, ["uuid"], table="empty",
      prepare=make_input("key_list")),
    C("write-input-ordering-is-string", "write {table} --input {input}", 2, ["ts", "string"],
      prepare=make_input("ordering_string")),
    C("write-input-null-record-key", "write {table} --input {input}", 2, ["null record key", "{input}"],
      prepare=make_input("null_key")),
    C("write-input-null-key-in-later-row-group", "write {table} --input {input}", 2, ["null record key"],
      prepare=make_input("null_key_second_row_group")),
    C("write-input-json-null-record-key", "write {table} --input {input}", 2, ["null record key", "uuid"],
      prepare=make_input("json_null_key"), spark=True, writes_started=True),
    C("write-input-json-empty-record-key", "write {table} --input {input}", 2, ["an empty one", "uuid"],
      prepare=make_input("json_empty_key"), spark=True, writes_started=True),
    C("delete-input-no-record-key", "write {table} --input {input} --operation delete", 2, ["uuid"],
      prepare=make_input("no_key")),
    # usage
    C("write-unknown-operation", "write {table} --input x.parquet --operation merge", 2, ["--operation", "merge"]),
    C("compaction-unknown-verb", "compaction frobnicate {table}", 2, ["frobnicate"]),
    # configuration values
    C("clean-conf-not-a-number", "clean run {table} --conf hoodie.cleaner.commits.retained=abc", 2,
      ["hoodie.cleaner.commits.retained", "abc"]),
    C("clean-conf-negative", "clean run {table} --conf hoodie.cleaner.commits.retained=-1", 2,
      ["hoodie.cleaner.commits.retained", "-1"]),
    C("clean-conf-unknown-policy", "clean run {table} --conf hoodie.cleaner.policy=KEEP_NOTHING", 2,
      ["hoodie.cleaner.policy", "KEEP_NOTHING"]),
    C("compaction-conf-unknown-trigger", "compaction schedule {table} --conf "
      "hoodie.compact.inline.trigger.strategy=SOMETIMES", 2, ["hoodie.compact.inline.trigger.strategy"]),
    C("conf-contradictory-inline-and-schedule-inline", "status {table} --conf hoodie.compact.inline=true "
      "--conf hoodie.compact.schedule.inline=true", 2, ["hoodie.compact.inline", "hoodie.compact.schedule.inline"]),
    C("conf-not-key-value", "timeline {table} --conf hoodie.cleaner.policy", 2, ["hoodie.cleaner.policy"]),
    C("table-yaml-malformed", "clean run {table}", 2, ["{file}"], prepare=table_yaml_garbage),
    C("run-once-conf-malformed", "run --once {table} --conf hoodie.log.compaction.blocks.threshold=1", 2,
      ["hoodie.log.compaction.blocks.threshold"]),
    C("run-once-bad-lease", "run --once {table} --lease-seconds 0", 2, ["--lease-seconds"]),
    # instants
    C("compaction-run-unknown-instant", f"compaction run {{table}} --instant {INSTANT_UNKNOWN}", 2,
      [INSTANT_UNKNOWN]),
    # an already completed compaction: nothing to do (exit 0), so that a retried job succeeds
    C("compaction-run-completed-compaction", "compaction run {table} --instant {compaction}", 0, table="v8c",
      out_needles=("{compaction}", "already completed")),
    C("compaction-run-a-deltacommit", "compaction run {table} --instant {t2}", 2, ["{t2}"]),
    C("compaction-run-malformed-instant", "compaction run {table} --instant yesterday", 2, ["yesterday"]),
    C("compaction-schedule-before-last-commit", f"compaction schedule {{table}} --instant {INSTANT_UNKNOWN}", 2,
      [INSTANT_UNKNOWN]),
    C("logcompaction-run-unknown-instant", f"logcompaction run {{table}} --instant {INSTANT_UNKNOWN}", 2,
      [INSTANT_UNKNOWN]),
    C("logcompaction-run-a-deltacommit", "logcompaction run {table} --instant {t2}", 2, ["{t2}"]),
    C("rollback-unknown-instant", f"rollback {{table}} --instant {INSTANT_UNKNOWN}", 2, [INSTANT_UNKNOWN]),
    C("rollback-completed-without-allow", "rollback {table} --instant {t2}", 2, ["{t2}"]),
    C("rollback-completed-not-latest", "rollback {table} --instant {t1} --allow-completed", 2, ["{t1}"]),
    C("read-as-of-malformed", "read {table} --as-of yesterday", 2, ["yesterday"]),
    C("fsview-as-of-malformed", "fsview {table} --as-of 2025", 2, ["2025"]),
    # not a table
    C("timeline-not-a-table", "timeline {table}", 2, ["{table}", "not a Hudi table"], prepare=not_a_table,
      readable=False),
    C("status-missing-path", "status {table}", 2, ["{table}"], prepare=missing_table, readable=False),
    C("clean-not-a-table", "clean run {table}", 2, ["{table}"], prepare=not_a_table, readable=False),
    C("compaction-run-not-a-table", "compaction run {table}", 2, ["{table}"], prepare=not_a_table, readable=False),
    C("write-not-a-table", "write {table} --input {input}", 2, ["{table}"], prepare=lambda c: (
        not_a_table(c), make_input("missing")(c)), readable=False),
    C("read-not-a-table", "read {table}", 2, ["{table}"], prepare=not_a_table, readable=False),
    C("run-once-not-a-table", "run --once {table}", 2, ["{table}"], prepare=not_a_table, readable=False),
    C("status-path-is-a-file", "status {table}", 2, ["{table}", "is a file"], prepare=file_as_table, readable=False),
    C("rollback-path-is-a-file", "rollback {table}", 2, ["{table}", "is a file"], prepare=file_as_table,
      readable=False),
    C("init-under-a-file", "init {table}/sub --name t --record-key uuid", 2, ["{table}/sub", "is a file"],
      prepare=file_as_table, readable=False),
    # empty values are refused, not read as "not given" (an empty --instant would roll back every failed instant)
    C("rollback-empty-instant", ("rollback", "{table}", "--instant", ""), 2, ["--instant", "empty"]),
    C("read-empty-as-of", ("read", "{table}", "--as-of", ""), 2, ["--as-of", "empty"]),
    C("run-once-empty-path", ("run", "--once", "{table}", ""), 2, ["PATH", "empty"]),
    C("status-max-failures-negative", "status {table} --max-failures -3", 2, ["--max-failures", "-3"]),
    C("write-props-no-record-key", "write {table} --input x.parquet", 2, ["hoodie.table.recordkey.fields"],
      prepare=props_edit("hoodie.table.recordkey.fields", None), readable=False),
    # hoodie.properties
    C("props-binary-garbage", "timeline {table}", 2, ["{file}"], prepare=props_garbage, readable=False),
    C("props-text-garbage", "status {table}", 2, ["{file}"], prepare=props_text_garbage, readable=False),
    C("props-zero-length", "fsview {table}", 2, ["{file}"], prepare=props_empty, readable=False),
    C("props-missing-table-type", "clean run {table}", 2, ["hoodie.table.type"],
      prepare=props_edit("hoodie.table.type", None), readable=False),
    C("props-missing-version", "compaction schedule {table}", 2, ["hoodie.table.version"],
      prepare=props_edit("hoodie.table.version", None), readable=False),
    C("props-version-5", "timeline {table}", 2, ["version 5"], prepare=props_edit("hoodie.table.version", "5"),
      readable=False),
    C("props-version-10", "rollback {table}", 2, ["version 10"], prepare=props_edit("hoodie.table.version", "10"),
      readable=False),
    C("props-version-not-a-number", "write {table} --input x.parquet", 2, ["hoodie.table.version"],
      prepare=props_edit("hoodie.table.version", "eight"), readable=False),
    C("props-unknown-table-type", "status {table}", 2, ["hoodie.table.type", "hoodie.properties"],
      prepare=props_edit("hoodie.table.type", "MERGE_ON_WRITE"), readable=False),
    # timeline payloads
    C("timeline-commit-payload-garbage", "timeline {table}", 2, ["{file}"], table="v6",
      prepare=completed_commit_garbage, readable=False),
    C("status-commit-payload-garbage", "status {table}", 2, ["{file}"], prepare=completed_commit_garbage,
      readable=False),
    C("logcompaction-commit-payload-garbage", "logcompaction schedule {table} --force", 2, ["{file}"],
      prepare=completed_commit_garbage, readable=False),
    # the cleaner needs no commit metadata to see that nothing is due: it does not read the payload
    C("clean-dry-run-commit-payload-garbage", "clean run {table} --dry-run", 0, prepare=completed_commit_garbage,
      readable=False, out_needles=("nothing to clean",)),
    C("compaction-plan-garbage", "compaction run {table}", 2, ["{instant}"], prepare=compaction_plan_garbage),
    # listings show an unreadable plan as a pending job (its executor reports the error)
    C("status-compaction-plan-garbage", "status {table}", 0, prepare=compaction_plan_garbage,
      out_needles=("compaction-{instant}",)),
    C("commit-payload-zero-length", "timeline {table}", 0, prepare=completed_commit_empty, table="v6",
      readable=False),
    # log blocks (status and logcompaction schedule read every log block on the driver)
    C("log-torn-tail-of-failed-append", "status {table}", 0, prepare=LOG_DAMAGE["torn_tail_failed_append"],
      expect_rows=True),
    # hudi-rs (as Java) drops the complete block before the garbage; we keep it (docs/log-format.md)
    C("log-trailing-garbage", "status {table}", 0, prepare=LOG_DAMAGE["trailing_garbage"], expect_rows=True,
      table="v6", hudi_agrees=False),
    C("log-partial-magic-tail", "logcompaction schedule {table}", 0, prepare=LOG_DAMAGE["partial_magic_tail"],
      expect_rows=True),
    C("log-zero-length-file", "status {table}", 0, prepare=LOG_DAMAGE["zero_length_log"], readable=False),
    C("log-bad-length-mid-file", "status {table}", 1, ["{file}", "{offset}"],
      prepare=LOG_DAMAGE["bad_length_mid_file"], readable=False),
    C("log-bad-magic-mid-file", "logcompaction schedule {table} --force", 1, ["{file}", "{offset}"],
      prepare=LOG_DAMAGE["bad_magic_mid_file"], readable=False),
    C("log-duplicated-magic", "status {table}", 0, prepare=LOG_DAMAGE["duplicated_magic"], readable=False),
    C("log-torn-tail-of-completed-instant", "status {table}", 1, ["{file}", "{offset}"],
      prepare=LOG_DAMAGE["torn_tail_completed_instant"], readable=False),
    C("log-damaged-magic-of-completed-instant", "status {table}", 1, ["{file}", "{offset}", "{t2}"],
      prepare=LOG_DAMAGE["damaged_magic_completed_instant"], readable=False),
    # as with trailing garbage, hudi-rs drops the complete block before the damaged one; we keep it
    C("log-damaged-magic-of-failed-append", "status {table}", 0, prepare=LOG_DAMAGE["damaged_magic_failed_append"],
      expect_rows=True, hudi_agrees=False),
    C("read-log-bad-length-mid-file", "read {table} --output {tmp}/out.parquet", 1, ["{file}", "{offset}"],
      prepare=LOG_DAMAGE["bad_length_mid_file"], readable=False, spark=True),
    # data files and folders
    C("read-zero-length-base-file", "read {table} --output {tmp}/out.parquet", 1, ["{file}"],
      prepare=zero_length_base, readable=False, spark=True),   # Spark's own reader would skip it silently
    C("fsview-zero-length-base-file", "fsview {table}", 0, prepare=zero_length_base, readable=False),
    # a folder inside a partition is not a partition (it has no .hoodie_partition_metadata): ignored, as
    # Java Hudi does; hudi-rs instead takes the leaf folder for the partition and misses city=chennai
    C("stray-dir-fsview", "fsview {table} --all", 0, prepare=stray_dir, expect_rows=True, hudi_agrees=False,
      out_needles=("city=chennai",)),
    C("stray-dir-status", "status {table}", 0, prepare=stray_dir, expect_rows=True, hudi_agrees=False),
    C("stray-dir-clean-dry-run", "clean run {table} --dry-run", 0, prepare=stray_dir, expect_rows=True,
      hudi_agrees=False),
]


def _param(case: Case):
    marks = []
    if case.xfail:
        marks.append(pytest.mark.xfail(strict=True, reason=case.xfail))
    if case.spark:
        marks.append(pytest.mark.spark)
    if case.skip_root and IS_ROOT:
        marks.append(pytest.mark.skip(reason="running as root: chmod 000 does not stop root from reading"))
    return pytest.param(case, id=case.id, marks=marks)


def _fill(text: str, values: dict[str, str]) -> str:
    for k, v in values.items():
        text = text.replace("{" + k + "}", v)
    return text


@pytest.fixture
def no_spark(monkeypatch):
    """Commands of non-Spark rows must refuse bad input before Spark starts."""
    import tablesvc.spark.session as session

    def tripwire(*_a, **_k):
        raise AssertionError("Spark was started for input that should have been refused first")
    monkeypatch.setattr(session, "get_spark", tripwire)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_input(case: Case, built, tmp_path, capsys, request):
    b = built[case.table]
    table = tmp_path / "table"
    shutil.copytree(b.path, table)
    ctx = Ctx(table, tmp_path, b)
    ctx.values.update(tmp=str(tmp_path), table=str(table), t1=b.t1, t2=b.t2, compaction=b.compaction or "")
    if case.prepare:
        case.prepare(ctx)
    if case.spark:
        request.getfixturevalue("spark")  # the shared session: the CLI reuses it (and leaves stderr alone)
    else:
        request.getfixturevalue("no_spark")
    rows_before = sorted_rows(table, ("uuid", "ts", "fare")) if case.readable else None
    before = tree(table)

    argv = [_fill(a, ctx.values) for a in case.argv]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse
        code = e.code
    out, err = capsys.readouterr()

    assert code == case.code, (argv, out, err)
    lines = err.splitlines()
    assert "Traceback" not in err
    if case.code == 0:
        assert lines == [], err
        for needle in case.out_needles:
            assert _fill(needle, ctx.values) in out, (needle, out)
    else:
        assert len(lines) == 1, err
        assert lines[0].startswith("tablesvc"), lines[0]
        for needle in case.needles:
            assert _fill(needle, ctx.values) in lines[0], (needle, lines[0])
    # Nothing of the table changed (the table lock, if taken, is released and gone again).
    after = tree(table)
    if case.writes_started:
        # The write began (heartbeat, instant) before its job refused the rows, then undid itself:
        # what stays is the heartbeat folder, empty (every table a Spark write touched has one;
        # these tables were built without Spark).  A file left in it would still show.
        after.pop(".hoodie/.heartbeat/", None)
    assert after == before
    if case.readable:
        assert sorted_rows(table, ("uuid", "ts", "fare")) == rows_before
    if case.expect_rows:
        expected = sorted(b.expected.values())
        assert our_rows(table) == expected
        if case.hudi_agrees:
            assert sorted_rows(table, ("uuid", "ts", "fare")) == expected


def test_every_issue_item_has_a_row():
    """The issue's list, item by item, against the matrix ids (a renamed row must keep its item covered)."""
    ids = " ".join(c.id for c in CASES)
    for item in ("input-missing", "input-unreadable", "corrupt-parquet", "corrupt-json", "no-record-key",
                 "no-ordering-field", "key-is-struct", "ordering-is-string", "null-record-key", "unknown-operation",
                 "conf-not-a-number", "contradictory", "unknown-instant", "completed", "not-a-table",
                 "props-binary-garbage", "props-missing", "version-5", "version-10", "payload-garbage",
                 "plan-garbage", "log-torn-tail", "log-bad-length-mid-file", "log-bad-magic-mid-file",
                 "duplicated-magic", "trailing-garbage", "log-zero-length", "zero-length-base", "stray-dir"):
        assert item in ids, item


def test_corrupt_log_block_with_debug_shows_the_traceback(built, tmp_path, capsys):
    table = tmp_path / "t"
    shutil.copytree(built["v8"].path, table)
    ctx = Ctx(table, tmp_path, built["v8"])
    LOG_DAMAGE["bad_length_mid_file"](ctx)
    assert main(["status", str(table), "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("tablesvc: error: ")
    # and the file is framed as the matrix row says: the good block after the bad one is still there
    contents = read_log_file(Table.open(str(table)).storage, ctx.values["file"])
    assert [c.offset for c in contents.corrupt] == [0] and len(contents.blocks) == 1


@pytest.mark.parametrize("damage,instant,can_hold", [
    ("torn_tail_completed_instant", "t2", True),   # header survived: the torn block names its instant
    ("torn_tail_failed_append", FAILED_INSTANT, True),
    ("trailing_garbage", None, False),
    ("duplicated_magic", None, False),             # 6 bytes: no block fits
    ("bad_length_mid_file", "t2", True),
])
def test_corrupt_spans_say_what_they_could_hide(built, tmp_path, damage, instant, can_hold):
    """What the merge layer needs to tell a failed append from a damaged block of a completed instant."""
    table = tmp_path / "t"
    shutil.copytree(built["v8"].path, table)
    ctx = Ctx(table, tmp_path, built["v8"])
    LOG_DAMAGE[damage](ctx)
    (span,) = read_log_file(Table.open(str(table)).storage, ctx.values["file"]).corrupt
    assert span.instant_time == (built["v8"].t2 if instant == "t2" else instant)
    assert span.can_hold_block is can_hold
