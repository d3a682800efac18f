"""The write path and the Spark reader, batch after batch, against an independent model and hudi-rs.

Each scenario writes many batches (inserts, upserts with higher and lower ordering
values, in-batch duplicates, deletes of present and absent keys, re-inserts, a new
column) through Spark, and after every batch compares three things sorted by key:
the in-test model, tablesvc's read, and hudi-rs's read.  Time travel to every earlier
instant must equal the model as it was then.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pyarrow as pa
import pytest
from oracles.hudi_rs import sorted_rows

from tablesvc.api import Table, TableSpec

pytestmark = pytest.mark.spark
CITIES = ("chennai", "san_francisco", "sao_paulo")
BASE_COLUMNS = ("uuid", "ts", "rider", "fare", "city")


class Model:
    """Event-time semantics: the greater ts wins, ties go to the later write; deletes remove."""

    def __init__(self):
        self.rows: dict[str, dict] = {}

    def upsert(self, batch: list[dict]) -> None:
        combined: dict[str, dict] = {}
        for r in batch:  # in-batch duplicates: greatest ts, ties to the later row
            cur = combined.get(r["uuid"])
            if cur is None or r["ts"] >= cur["ts"]:
                combined[r["uuid"]] = r
        for key, r in combined.items():
            cur = self.rows.get(key)
            if cur is None or r["ts"] >= cur["ts"]:
                self.rows[key] = r

    def delete(self, keys: list[str]) -> None:
        for k in keys:
            self.rows.pop(k, None)

    def snapshot(self, columns) -> list[tuple]:
        return sorted(tuple(r.get(c) for c in columns) for r in self.rows.values())


def our_rows(table: Table, spark, columns, as_of: str | None = None) -> list[tuple]:
    df = table.read(as_of=as_of, spark=spark)
    present = [c for c in columns if c in df.columns]
    return sorted(tuple(r[c] if c in present else None for c in columns) for r in df.select(*present).collect())


def check(table, spark, model, columns, label):
    expected = model.snapshot(columns)
    assert our_rows(table, spark, columns) == expected, f"tablesvc read after {label}"
    assert sorted_rows(table.base_path, columns) == expected, f"hudi-rs read after {label}"


def make_rows(rng, keys, ts, with_tip=False):
    rows = []
    for k in keys:
        r = {"uuid": k, "ts": ts + rng.randrange(100), "rider": f"rider-{rng.randrange(50)}",
             "fare": round(rng.uniform(1, 99), 2), "city": CITIES[int(k[1:]) % 3]}
        if with_tip:
            r["tip"] = round(rng.uniform(0, 9), 2) if rng.random() < 0.8 else None
        rows.append(r)
    return rows


def df_of(spark, rows, with_tip=False):
    schema = "uuid string, ts long, rider string, fare double, city string" + (", tip double" if with_tip else "")
    cols = list(BASE_COLUMNS) + (["tip"] if with_tip else [])
    return spark.createDataFrame([tuple(r.get(c) for c in cols) for r in rows], schema)


@pytest.mark.parametrize("version", [6, 8])
def test_many_batches_match_model_tablesvc_and_hudi_rs(tmp_path, spark, version):
    rng = random.Random(version)
    table = Table.create(str(tmp_path / "trips"), TableSpec("trips", ("uuid",), "ts", ("city",),
                                                            table_version=version, num_buckets=2))
    model = Model()
    history: list[tuple[str, dict]] = []
    columns = BASE_COLUMNS

    def committed(result):
        assert result is not None
        history.append((result.instant, copy.deepcopy(model.rows)))

    # 1. inserts
    batch = make_rows(rng, [f"k{i:03d}" for i in range(120)], 1_000)
    model.upsert(batch)
    committed(table.insert(df_of(spark, batch)))
    check(table, spark, model, columns, "insert")

    # 2. upserts: higher ts, lower ts (ignored under event time), new keys, in-batch duplicates
    higher = make_rows(rng, [f"k{i:03d}" for i in range(0, 30)], 5_000)
    lower = make_rows(rng, [f"k{i:03d}" for i in range(30, 40)], 0)
    new = make_rows(rng, [f"k{i:03d}" for i in range(120, 140)], 5_000)
    dups = make_rows(rng, ["k050", "k050", "k051", "k051"], 6_000)
    dups[1]["ts"] = dups[0]["ts"] + 1          # the later, greater one wins
    dups[3]["ts"] = dups[2]["ts"]              # a tie: the later row wins
    batch = higher + lower + new + dups
    model.upsert(batch)
    committed(table.upsert(df_of(spark, batch)))
    check(table, spark, model, columns, "upserts")

    # 3. deletes of present and absent keys
    gone = [f"k{i:03d}" for i in range(60, 75)] + ["k900", "k901"]
    model.delete(gone)
    committed(table.delete(df_of(spark, make_rows(rng, gone, 0))))
    check(table, spark, model, columns, "deletes")

    # 4. re-insert some deleted keys, update others, with a new nullable column
    back = make_rows(rng, [f"k{i:03d}" for i in range(60, 65)] + [f"k{i:03d}" for i in range(90, 100)],
                     9_000, with_tip=True)
    model.upsert(back)
    committed(table.upsert(df_of(spark, back, with_tip=True)))
    columns = BASE_COLUMNS + ("tip",)
    check(table, spark, model, columns, "re-insert with new column")

    # 5. a batch without the new column: it reads as null for those rows
    later = make_rows(rng, [f"k{i:03d}" for i in range(100, 110)], 12_000)
    model.upsert(later)
    committed(table.upsert(df_of(spark, later)))
    check(table, spark, model, columns, "batch without the new column")

    # Time travel to every instant equals the model at that point.
    for instant, rows in history:
        then = Model()
        then.rows = rows
        expected = then.snapshot(columns)
        assert our_rows(table, spark, columns, as_of=instant) == expected, f"tablesvc as of {instant}"
        assert sorted_rows(table.base_path, columns, as_of=instant) == expected, f"hudi-rs as of {instant}"

    timeline = table.timeline()
    assert [i.timestamp for i in timeline.completed_writes()] == [h[0] for h in history]
    assert timeline.pending() == ()
    assert not list((tmp_path / "trips" / ".hoodie" / ".temp").glob("*/**/*.marker.*"))


# -- routing: which file group a row goes to -------------------------------------------------------

ODD_KEYS = ["a:1,b", "10:30", "x,y", "id:1,name:Bob", "é€ключ", "\U0001F600", "__null__", "__empty__", "k,:"]


def routing_frame(spark, rng):
    """Rows with every kind of key and partition value the JVM routing must spell as keys.py does."""
    rows = []
    for i in range(400):
        s = rng.choice(ODD_KEYS + [f"k{i:04d}", f"key-{rng.randrange(10**6)}", None, ""])
        rows.append((s, rng.choice([i, -i, None, 2**31 - 1]), rng.choice([True, False, None]),
                     (rng.choice([f"id{i}", "a:b", None]),), rng.choice(list(CITIES) + [None, "", "a/b"]),
                     rng.choice(["north", "south", None]), rng.uniform(0, 9)))
    return spark.createDataFrame(rows, "s string, n int, flag boolean, st struct<id: string>, city string, "
                                       "region string, amount double")


def test_jvm_routing_equals_python_routing(spark):
    """Spark-side partition paths and buckets equal keys.py + bucket_ids row for row wherever the
    routing calls them exact, and only keys Hudi parses as field:value pairs are not exact."""
    from pyspark.sql import functions as F

    from tablesvc.spark.write_job import _jvm_route
    from tablesvc.write import BucketSpec, KeySpec, add_key_columns
    from tablesvc.write.keys import PARTITION_PATH_COLUMN, RECORD_KEY_COLUMN

    df = routing_frame(spark, random.Random(5))
    cases = [
        (KeySpec(("s",), ("city",), True), BucketSpec(8, ("s",)), F.col("s") != ""),
        (KeySpec(("n",), ("city", "region"), False), BucketSpec(5, ("n",)), F.col("n").isNotNull()),
        (KeySpec(("s", "n"), ("city",), True), BucketSpec(16, ("s", "n")), None),
        (KeySpec(("s", "n", "flag"), (), False), BucketSpec(7, ("n",)), None),
        (KeySpec(("s",), ("region",), True, encode_single_key_field_name=True), BucketSpec(4, ("s",)), None),
        (KeySpec(("st.id",), ("region",), True), BucketSpec(3, ("st.id",)), F.col("st.id") != ""),
        (KeySpec(("s",), ("city", "region"), True), None, F.col("s") != ""),
    ]
    for spec, bucket, valid in cases:
        rows = df.where(valid) if valid is not None else df
        if len(spec.record_key_fields) > 1 or spec.encode_single_key_field_name:
            rows = rows.where(F.coalesce(*[F.col(f).cast("string") for f in spec.record_key_fields]) != "")
        route = _jvm_route(rows.schema, spec, bucket)
        assert route is not None, spec
        got = rows.select("*", route.partition.alias("_p"), route.file_group.alias("_fg"),
                          route.exact.alias("_exact")).toArrow()
        keyed = add_key_columns(got, spec)
        assert keyed.column(PARTITION_PATH_COLUMN).to_pylist() == got.column("_p").to_pylist(), spec
        exact, keys = got.column("_exact").to_pylist(), keyed.column(RECORD_KEY_COLUMN).to_pylist()
        assert all(e or ("," in k and ":" in k) for e, k in zip(exact, keys)), spec
        if bucket is None:
            assert got.column("_fg").null_count == got.num_rows
            continue
        want = bucket.bucket_ids(keyed.column(RECORD_KEY_COLUMN), spec.record_key_fields).to_pylist()
        fgs = got.column("_fg").to_pylist()
        wrong = [(k, f, w) for k, f, w, e in zip(keys, fgs, want, exact) if e and f != str(w)]
        assert not wrong, (spec, wrong[:3])
        if spec.record_key_fields in (("s",), ("s", "n")) and not spec.encode_single_key_field_name:
            assert not all(exact), f"{spec}: the odd keys should not be exact"
    # Types Spark spells otherwise (floating point) and URL-encoded partitions go through Python.
    assert _jvm_route(df.schema, KeySpec(("amount",), ("city",), True), BucketSpec(4, ("amount",))) is None
    assert _jvm_route(df.schema, KeySpec(("s",), ("city",), True, url_encode=True), BucketSpec(4, ("s",))) is None


def test_jvm_blank_key_is_what_python_refuses(spark):
    """The routing's blank-key expression (what the write job refuses before its shuffle) is true
    for exactly the rows whose key keys.record_keys refuses, for plain, compound, name-encoded
    and non-string keys."""
    from pyspark.sql import functions as F

    from tablesvc.errors import InvalidInputError
    from tablesvc.spark.write_job import _jvm_blank_key
    from tablesvc.write import KeySpec, add_key_columns

    df = routing_frame(spark, random.Random(6))
    # a floating-point key with nulls: blank is null alone (a number is never empty)
    df = df.withColumn("amount", F.when(F.col("n").isNull(), F.lit(None)).otherwise(F.col("amount")))
    specs = [KeySpec(("s",), ("city",), True), KeySpec(("n",), (), True), KeySpec(("s", "n"), ("city",), True),
             KeySpec(("s",), (), True, encode_single_key_field_name=True), KeySpec(("st.id",), (), True),
             KeySpec(("amount",), (), True)]
    for spec in specs:
        got = df.select("*", F.expr(_jvm_blank_key(df.schema, spec)).alias("_blank")).toArrow()
        refused = []
        for i in range(got.num_rows):
            try:
                add_key_columns(got.slice(i, 1), spec)
                refused.append(False)
            except InvalidInputError:
                refused.append(True)
        assert got.column("_blank").to_pylist() == refused, spec
        assert any(refused) and not all(refused), spec   # the frame holds blank keys and others


def file_keys(path) -> dict[str, list[str]]:
    """Record keys of every data file of a table (base files and log data blocks), by file id."""
    import pyarrow.parquet as pq

    from tablesvc.fsview.names import BaseFileName, LogFileName
    from tablesvc.logformat import block_table, read_log_file
    from tablesvc.storage import LocalStorage

    out: dict[str, list[str]] = {}
    for f in path.rglob("*"):
        if ".hoodie" in f.parts or not f.is_file() or f.name.startswith(".hoodie_partition"):
            continue
        if f.suffix == ".parquet":
            keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()
            out.setdefault(BaseFileName.parse(f.name).file_id, []).extend(keys)
        elif ".log." in f.name:
            for block in read_log_file(LocalStorage(), str(f)).blocks:
                keys = block_table(block, str(f)).column("_hoodie_record_key").to_pylist()
                out.setdefault(LogFileName.parse(f.name).file_id, []).extend(keys)
    return out


def test_compound_and_odd_keys_land_in_their_buckets(tmp_path, spark):
    """Keys Hudi reads as field:value pairs with values holding ':' or ',' (the Python routing),
    through insert and upsert: every file holds only keys of its bucket, and tablesvc and hudi-rs
    read the model."""
    from tablesvc.write import BucketSpec, bucket_of_file_id

    rng = random.Random(9)
    path = tmp_path / "odd"
    table = Table.create(str(path), TableSpec("odd", ("uuid", "n"), "ts", ("city",), num_buckets=4))
    uuids = [f"k{i:03d}" for i in range(60)] + ["10:30", "a,b", "x:1,y:2", "é:ю", "id:1,n:2", "q,:"]
    city = {u: CITIES[i % 3] for i, u in enumerate(uuids)}
    model: dict[tuple, tuple] = {}
    for ts, picked in ((1_000, uuids), (2_000, rng.sample(uuids, 30))):
        rows = [(u, i % 3, ts + rng.randrange(100), city[u]) for i, u in enumerate(picked)]
        for row in rows:
            if row[:2] not in model or row[2] >= model[row[:2]][2]:
                model[row[:2]] = row
        table.upsert(spark.createDataFrame(rows, "uuid string, n long, ts long, city string"))
    cols = ("uuid", "n", "ts", "city")
    assert sorted_rows(table.base_path, cols) == sorted(model.values())
    assert our_rows(table, spark, cols) == sorted(model.values())
    buckets = BucketSpec.from_props(table.config.props)
    groups = file_keys(path)
    assert len(groups) > 1
    for file_id, keys in groups.items():
        ids = set(buckets.bucket_ids(pa.array(keys, pa.string()), ("uuid", "n")).to_pylist())
        assert ids == {bucket_of_file_id(file_id)}, file_id


def test_write_task_refuses_a_row_routed_to_another_file_group():
    """The write task recomputes partition path and bucket in Python: a row the Spark side sent to
    the wrong file group fails the write instead of splitting a file group over two tasks."""
    from tablesvc.errors import TablesvcError
    from tablesvc.spark.write_job import _check_routing
    from tablesvc.write import BucketSpec, KeySpec, add_key_columns

    spec, buckets = KeySpec(("uuid",), ("city",), True), BucketSpec(4, ("uuid",))
    keyed = add_key_columns(pa.table({"uuid": [f"k{i}" for i in range(40)], "city": ["chennai"] * 40}), spec)
    ids = buckets.bucket_ids(keyed.column("_hoodie_record_key"), ("uuid",)).to_pylist()
    mine = keyed.filter(pa.array([b == ids[0] for b in ids]))
    _check_routing(mine, "city=chennai", str(ids[0]), buckets, spec)  # all of its bucket: fine
    with pytest.raises(TablesvcError, match="routed to file group"):
        _check_routing(keyed, "city=chennai", str(ids[0]), buckets, spec)
    with pytest.raises(TablesvcError, match="routed to file group"):
        _check_routing(mine, "city=sao_paulo", str(ids[0]), buckets, spec)


def test_a_write_task_takes_each_run_of_its_sorted_rows_as_one_group():
    """The write job's tasks get their rows sorted by the group hash, in batches that cut runs
    anywhere: each run comes out whole, in order, across batch boundaries and empty batches."""
    from tablesvc.spark.write_groups import GROUP_COLUMN, consecutive_groups

    ids = [7, 7, 7, -3, -3, 5, 9, 9, 9, 9, 2]
    rows = pa.table({GROUP_COLUMN: pa.array(ids, pa.int64()), "n": list(range(len(ids)))})
    for cuts in ([], [3], [1, 2, 6], [4, 5, 10], list(range(1, len(ids)))):
        bounds = [0, *cuts, len(ids)]
        batches = [rows.slice(a, b - a).combine_chunks().to_batches()[0] if b > a
                   else pa.RecordBatch.from_pylist([], schema=rows.schema)
                   for a, b in zip(bounds, bounds[1:])]
        batches.insert(1, pa.RecordBatch.from_pylist([], schema=rows.schema))   # an empty batch too
        groups = list(consecutive_groups(iter(batches)))
        assert [g.column(GROUP_COLUMN).to_pylist() for g in groups] == [[7] * 3, [-3] * 2, [5], [9] * 4, [2]], cuts
        assert [n for g in groups for n in g.column("n").to_pylist()] == list(range(len(ids)))
    assert list(consecutive_groups(iter([]))) == []
    # rows that were not sorted: a group met again would be written twice, so the task fails
    from tablesvc.errors import TablesvcError

    from tablesvc.spark.write_groups import FG_COLUMN, PARTITION

    unsorted = pa.table({GROUP_COLUMN: pa.array([7, 7, 3, 7], pa.int64()), "n": [0, 1, 2, 3],
                         PARTITION: ["city=a", "city=a", "city=b", "city=a"], FG_COLUMN: ["2", "2", "0", "2"]})
    for batches in (unsorted.to_batches(), [unsorted.slice(0, 2).to_batches()[0], unsorted.slice(2).to_batches()[0]]):
        with pytest.raises(TablesvcError, match="file group '2' of partition 'city=a' arrived in two runs"):
            list(consecutive_groups(iter(batches)))
        # rows routed in the JVM carry the hash alone (and perhaps an input column named like
        # the partition path column): the error names the hash
        for dropped in ([PARTITION, FG_COLUMN], [FG_COLUMN]):
            with pytest.raises(TablesvcError, match="group hash 7 arrived in two runs"):
                list(consecutive_groups(iter([b.drop_columns(dropped) for b in batches])))


def test_file_groups_sharing_a_group_hash_are_split_again():
    """Two file groups whose hashes collide arrive as one run: the task splits it per (partition
    path, file group), null file groups (new groups of an insert) included, rows in order."""
    from tablesvc.spark.write_groups import FG_COLUMN, PARTITION, split_file_groups

    rows = pa.table({PARTITION: ["a", "b", "a", "a", "b", "a"], FG_COLUMN: ["1", "1", None, "1", "1", None],
                     "n": [0, 1, 2, 3, 4, 5]})
    parts = split_file_groups(rows)
    assert [(p.column(PARTITION)[0].as_py(), p.column(FG_COLUMN)[0].as_py(), p.column("n").to_pylist())
            for p in parts] == [("a", "1", [0, 3]), ("b", "1", [1, 4]), ("a", None, [2, 5])]
    one = rows.filter(pa.array([True, False, False, True, False, False]))
    assert split_file_groups(one) == [one]


def bucketed_table(tmp_path, spark, rng, buckets: int, keys: int):
    """A bucket-index table at ``tmp_path/t`` holding one insert of keys k000.. (ts 1,000), its
    model, and the rows inserted."""
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), num_buckets=buckets))
    model = Model()
    first = make_rows(rng, [f"k{i:03d}" for i in range(keys)], 1_000)
    model.upsert(first)
    table.insert(df_of(spark, first))
    return table, model, first


def test_a_hash_collision_of_every_file_group_still_writes_each_alone(tmp_path, spark, monkeypatch):
    """The write job with one group hash for all rows (as if every file group collided): each file
    group is still written alone, and tablesvc and hudi-rs read the model (the lookup index:
    test_spark_fixtures.py)."""
    from pyspark.sql import functions as F

    from tablesvc.spark import write_job
    from tablesvc.write import BucketSpec, bucket_of_file_id

    monkeypatch.setattr(write_job, "group_column", lambda *columns: F.lit(0).cast("long"))
    rng = random.Random(11)
    table, model, first = bucketed_table(tmp_path, spark, rng, buckets=4, keys=90)
    second = make_rows(rng, [f"k{i:03d}" for i in range(0, 120, 2)], 5_000)   # all 3 cities, new keys too
    model.upsert(second)
    result = table.upsert(df_of(spark, second))
    check(table, spark, model, BASE_COLUMNS, "upsert with colliding group hashes")
    groups = file_keys(tmp_path / "t")
    assert len(groups) == 12 and result.files_written == 12    # 3 cities x 4 buckets, a log file each
    spec = BucketSpec.from_props(table.config.props)
    city_of = {r["uuid"]: r["city"] for r in first + second}
    for file_id, keys in groups.items():
        assert set(spec.bucket_ids(pa.array(keys, pa.string()), ("uuid",)).to_pylist()) == \
            {bucket_of_file_id(file_id)}, file_id
        assert len({city_of[k] for k in keys}) == 1, file_id


def test_a_file_group_whose_rows_reach_two_groups_of_the_write_job_fails_the_write(tmp_path, spark, monkeypatch):
    """With routing in the JVM the rows carry only the group hash, and each write task finds
    partition and bucket again.  Should Spark's grouping and tablesvc's ever disagree (here: a
    group hash per key, so every bucket's rows arrive in many runs), a file group would get
    several files in one commit: the driver refuses the commit, and the write undoes itself."""
    from pyspark.sql import functions as F

    from tablesvc.errors import TablesvcError
    from tablesvc.spark import write_job

    rng = random.Random(5)
    table, model, _ = bucketed_table(tmp_path, spark, rng, buckets=2, keys=40)

    def listing() -> set[str]:
        return {str(p.relative_to(tmp_path)) for p in (tmp_path / "t").rglob("*")
                if p.is_file() and ".heartbeat" not in p.parts and ".temp" not in p.parts}

    before = listing()
    monkeypatch.setattr(write_job, "group_column", lambda *columns: F.xxhash64(F.col("uuid")))
    second = make_rows(rng, [f"k{i:03d}" for i in range(0, 40, 3)], 2_000)
    with pytest.raises(TablesvcError, match=r"write \d{17}: bucket \d+ of partition 'city=\w+' was written by two "):
        table.upsert(df_of(spark, second))
    assert listing() == before                     # no file of the failed write, no pending instant
    assert [i.state.value for i in table.timeline().instants] == ["completed"]
    check(table, spark, model, BASE_COLUMNS, "after the refused write")


class _Conf:
    """Spark SQL settings changed for a block, restored after it."""

    def __init__(self, spark, settings: dict[str, str]):
        self.spark, self.settings, self.before = spark, settings, {}

    def __enter__(self):
        for key, value in self.settings.items():
            self.before[key] = self.spark.conf.get(key, None)
            self.spark.conf.set(key, value)

    def __exit__(self, *exc):
        for key, value in self.before.items():
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)


def test_the_write_job_asks_for_few_partitions_where_nothing_coalesces_them(spark):
    """mapInArrow runs a Python task for every shuffle partition, empty ones too: without adaptive
    coalescing the write asks for the default parallelism (at most the shuffle partitions)."""
    from tablesvc.spark.write_groups import write_partitions

    cores = spark.sparkContext.defaultParallelism
    assert write_partitions(spark) is None     # the fixture's session: AQE on
    aqe, coalesce, shuffle = ("spark.sql.adaptive.enabled", "spark.sql.adaptive.coalescePartitions.enabled",
                              "spark.sql.shuffle.partitions")
    for settings, expected in (({aqe: "false", shuffle: "200"}, cores), ({coalesce: "false", shuffle: "200"}, cores),
                               ({aqe: "false", shuffle: "1"}, 1), ({aqe: "true", shuffle: "200"}, None)):
        with _Conf(spark, settings):
            assert write_partitions(spark) == expected, settings


def test_file_groups_crossing_batches_in_one_task_are_written_whole(tmp_path, spark):
    """The real group hash and its sort, with tiny Arrow batches (7 rows) and AQE off (4 write
    tasks for 12 file groups): each task meets several file groups whose rows span batches, and
    each is written once, whole; tablesvc and hudi-rs read the model."""
    from tablesvc.write import BucketSpec, bucket_of_file_id

    rng = random.Random(5)
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), num_buckets=4))
    model = Model()
    with _Conf(spark, {"spark.sql.execution.arrow.maxRecordsPerBatch": "7", "spark.sql.adaptive.enabled": "false"}):
        for ts, keys in ((1_000, range(150)), (5_000, range(0, 200, 2))):
            batch = make_rows(rng, [f"k{i:03d}" for i in keys], ts)
            model.upsert(batch)
            result = table.upsert(df_of(spark, batch))
            assert result.files_written == 12, result      # 3 cities x 4 buckets, one file each
    check(table, spark, model, BASE_COLUMNS, "writes in 7-row batches")
    spec = BucketSpec.from_props(table.config.props)
    for file_id, keys in file_keys(tmp_path / "t").items():
        assert set(spec.bucket_ids(pa.array(keys, pa.string()), ("uuid",)).to_pylist()) == \
            {bucket_of_file_id(file_id)}, file_id


def _blocks_of(path, instant: str) -> set:
    """Block types of the log files of the table at ``path`` that hold blocks of ``instant``."""
    from tablesvc.logformat import read_log_file
    from tablesvc.storage import LocalStorage

    types = set()
    for f in path.rglob(".*.log.*"):
        for block in read_log_file(LocalStorage(), str(f)).blocks:
            if block.instant_time == instant:
                types.add(block.block_type.name)
    return types


def test_the_log_block_format_follows_hoodie_logfile_data_block_format(tmp_path, spark):
    """``hoodie.logfile.data.block.format`` (Hudi's key) picks the data block format of a write's
    log files, from the write's config or the table's .hoodie/tablesvc.yaml; an explicit
    ``log_block_format`` wins; hudi-rs reads every write; a malformed value names the key."""
    from tablesvc.config import build_config
    from tablesvc.errors import ConfigError

    rng = random.Random(3)
    path = tmp_path / "t"
    table = Table.create(str(path), TableSpec("t", ("uuid",), "ts", ("city",), num_buckets=2))
    model = Model()
    first = make_rows(rng, [f"k{i:03d}" for i in range(30)], 1_000)
    model.upsert(first)
    table.insert(df_of(spark, first))
    parquet = build_config(conf={"hoodie.logfile.data.block.format": "PARQUET"})

    def upsert(ts, **options):
        batch = make_rows(rng, [f"k{i:03d}" for i in range(0, 30, 2)], ts)
        model.upsert(batch)
        result = table.upsert(df_of(spark, batch), **options)
        check(table, spark, model, BASE_COLUMNS, f"upsert at {ts} with {options}")
        return _blocks_of(path, result.instant)

    assert upsert(2_000) == {"AVRO_DATA"}                                   # Hudi's default
    assert upsert(3_000, config=parquet) == {"PARQUET_DATA"}
    assert upsert(4_000, config=parquet, log_block_format="avro") == {"AVRO_DATA"}
    (path / ".hoodie" / "tablesvc.yaml").write_text("hoodie.logfile.data.block.format: parquet\n")
    assert upsert(5_000) == {"PARQUET_DATA"}                                 # the table's own config
    with pytest.raises(ConfigError, match="hoodie.logfile.data.block.format"):
        build_config(conf={"hoodie.logfile.data.block.format": "orc"})


def test_sql_literals_of_the_jvm_routing_keep_every_character(spark):
    """The routing expressions are SQL text: names and values with quotes, backslashes and
    non-ASCII characters must come out of Spark's parser unchanged."""
    from pyspark.sql import functions as F

    from tablesvc.spark.write_job import _sql_string

    texts = ["plain", "it's", "back\\slash", "both\\'", "new\nline", "tab\t", "é ü 中", "%_*", "=/:,", ""]
    row = spark.range(1).select(*[F.expr(_sql_string(t)).alias(f"c{i}") for i, t in enumerate(texts)]).first()
    assert [row[f"c{i}"] for i in range(len(texts))] == texts


# -- input the write refuses, or has nothing to do with: the table stays as it was ---------------------
def table_state(table: Table) -> tuple:
    """Every instant file of the timeline (any state) and every data file, with its size."""
    files = sorted((str(p.relative_to(table.base_path)), p.stat().st_size)
                   for p in Path(table.base_path).rglob("*") if p.is_file() and ".hoodie" not in p.parts)
    instants = sorted((i.timestamp, i.action.value, i.state.value) for i in table.timeline().files)
    return instants, files


BLANK_KEY_CASES = [
    # (record key fields, rows of (uuid, n, ts, city), refused): a plain key null or empty; a
    # compound key with every field blank (one blank field is the placeholder, not an error)
    (("uuid",), [("k1", 1, 5, "chennai"), (None, 2, 5, "chennai")], True),
    (("uuid",), [("k1", 1, 5, "chennai"), ("", 2, 5, "sao_paulo")], True),
    (("uuid", "n"), [("k1", 1, 5, "chennai"), (None, None, 5, "chennai")], True),
    (("uuid", "n"), [("k1", 1, 5, "chennai"), ("", None, 5, "chennai")], True),
    (("uuid", "n"), [("k1", 1, 5, "chennai"), (None, 3, 5, "chennai")], False),
]


@pytest.mark.parametrize("fields,rows,refused", BLANK_KEY_CASES)
def test_a_blank_record_key_fails_the_write_and_changes_nothing(tmp_path, spark, fields, rows, refused):
    """The routing columns refuse a null or empty key in the write job's map stage (there is no
    scan of the input before it): the write fails with InvalidInputError naming the key field,
    and the timeline, the files and what hudi-rs reads are as before."""
    from tablesvc.errors import InvalidInputError

    schema = "uuid string, n long, ts long, city string"
    table = Table.create(str(tmp_path / "t"), TableSpec("t", fields, "ts", ("city",), num_buckets=2))
    first = [("a1", 1, 1, "chennai"), ("a2", 2, 1, "sao_paulo")]
    table.upsert(spark.createDataFrame(first, schema))
    before = table_state(table)
    cols = ("uuid", "n", "ts", "city")
    if not refused:  # one blank field of a compound key: Hudi's placeholder stands in for it
        table.upsert(spark.createDataFrame(rows, schema))
        assert sorted_rows(table.base_path, ("_hoodie_record_key", "ts")) == sorted(
            [("uuid:a1,n:1", 1), ("uuid:a2,n:2", 1), ("uuid:k1,n:1", 5), ("uuid:__null__,n:3", 5)])
        return
    with pytest.raises(InvalidInputError, match=r"null record key or an empty one \(" + ", ".join(fields)):
        table.upsert(spark.createDataFrame(rows, schema))
    assert table_state(Table.open(table.base_path)) == before
    assert sorted_rows(table.base_path, cols) == sorted(first)


def test_an_input_without_rows_leaves_no_instant(tmp_path, spark):
    """Insert, upsert and delete of an empty DataFrame: nothing to do (None), no instant left on
    the timeline (the write's instant is removed again), no file written."""
    table = Table.create(str(tmp_path / "t"), TableSpec("t", ("uuid",), "ts", ("city",), num_buckets=2))
    schema = "uuid string, ts long, city string"
    assert table.insert(spark.createDataFrame([], schema)) is None
    assert table.timeline().files == ()
    table.upsert(spark.createDataFrame([("a", 1, "chennai")], schema))
    before = table_state(table)
    for op in (table.insert, table.upsert, table.delete):
        assert op(spark.createDataFrame([], schema)) is None, op.__name__
        assert table_state(Table.open(table.base_path)) == before, op.__name__
    assert sorted_rows(table.base_path, ("uuid", "ts", "city")) == [("a", 1, "chennai")]
