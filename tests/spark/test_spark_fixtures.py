"""The Spark reader on every table Apache Hudi wrote, and writes into such tables (lookup index)."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from oracles.hudi_rs import read_table

from fixture_tables import TABLES_DIR, all_fixture_names, copy_table
from tablesvc.api import Table

pytestmark = [pytest.mark.spark]


def rows(tbl: pa.Table | None, columns) -> list[tuple]:
    if tbl is None:
        return []
    return sorted((tuple(str(r.get(c)) for c in columns) for r in tbl.to_pylist()))


def data_columns(table: Table) -> list[str]:
    import json

    schema = table.schema()
    return [f["name"] for f in json.loads(schema)["fields"]] if schema else []


@pytest.mark.parametrize("name", all_fixture_names())
def test_spark_read_equals_hudi_rs_snapshot_and_first_instant(fixture_root, spark, name):
    path = fixture_root.path(name)
    table = Table.open(str(path))
    columns = data_columns(table) + (["_hoodie_record_key"] if table.config.populate_meta_fields else [])
    instants = [i.timestamp for i in table.timeline().completed_writes()]
    for as_of in [None] + instants[:1]:
        ours = table.read(as_of=as_of, spark=spark).toArrow()
        theirs = read_table(path, as_of)
        assert rows(ours, columns) == rows(theirs, columns), f"{name} as of {as_of}"


def test_spark_read_projection_and_known_values(spark):
    table = Table.open(str(TABLES_DIR / "v6_trips_8i1u"))
    df = table.read(columns=["rider", "fare"], spark=spark)
    assert df.columns == ["rider", "fare"]
    fares = {r["rider"]: r["fare"] for r in df.collect()}
    assert fares["rider-D"] == 25.0
    first = table.timeline().completed_writes()[0].timestamp
    old = {r["rider"]: r["fare"] for r in table.read(as_of=first, columns=["rider", "fare"], spark=spark).collect()}
    assert old["rider-D"] == 33.9


def test_upsert_and_delete_into_a_table_hudi_wrote(tmp_path, spark):
    """v6, no bucket index: keys are looked up in the latest slices, so updates land in their file group."""
    path = copy_table(TABLES_DIR / "v6_trips_8i1u", tmp_path)
    table = Table.open(str(path))
    before = {r["rider"]: r for r in read_table(path).to_pylist()}
    d, e = before["rider-D"], before["rider-E"]
    upd = dict(d, fare=11.5, ts=d["ts"] + 1)
    new = dict(e, uuid="new-uuid-0001", rider="rider-Z", fare=7.0)
    cols = ["ts", "uuid", "rider", "driver", "fare", "city"]
    df = spark.createDataFrame([tuple(r[c] for c in cols) for r in (upd, new)],
                               "ts long, uuid string, rider string, driver string, fare double, city string")
    result = table.upsert(df)
    assert result.updates == 1 and result.inserts == 1
    after = {r["rider"]: r for r in read_table(path).to_pylist()}
    assert after["rider-D"]["fare"] == 11.5 and after["rider-Z"]["fare"] == 7.0
    assert len(after) == 9
    # The update went into rider-D's existing file group (a log file), not a new one.
    d_group = [s for s in table.latest_file_slices() if s.file_id == d["_hoodie_file_name"].split("_")[0]][0]
    assert any(result.instant in lf.file_name or lf.name.instant == d_group.base_instant for lf in d_group.log_files)
    table.delete(spark.createDataFrame([(e["uuid"], e["city"])], "uuid string, city string"))
    final = {r["rider"] for r in read_table(path).to_pylist()}
    assert "rider-E" not in final and len(final) == 8
    ours = {r["rider"] for r in table.read(spark=spark).collect()}
    assert ours == final


def test_colliding_group_hashes_in_a_table_hudi_wrote(tmp_path, spark, monkeypatch):
    """Lookup index, with one group hash for every row (as if all file groups collided): updates
    of keys in several file groups and new keys in several partitions are split again per file
    group; hudi-rs reads every update and insert, and the updates went into their file groups."""
    from pyspark.sql import functions as F

    from tablesvc.spark import write_job

    monkeypatch.setattr(write_job, "group_column", lambda *columns: F.lit(0).cast("long"))
    path = copy_table(TABLES_DIR / "v6_trips_8i1u", tmp_path)
    table = Table.open(str(path))
    before = {r["uuid"]: r for r in read_table(path).to_pylist()}
    groups_before = {s.file_id for s in table.latest_file_slices()}
    cols = ["ts", "uuid", "rider", "driver", "fare", "city"]
    updates = [dict(r, fare=r["fare"] + 100, ts=r["ts"] + 1) for r in before.values()]
    cities = sorted({r["city"] for r in before.values()})
    news = [dict(updates[0], uuid=f"new-{c}", rider=f"rider-new-{c}", city=c, fare=1.0) for c in cities]
    assert len(cities) > 1 and len({r["_hoodie_file_name"].split("_")[0] for r in before.values()}) > 1
    df = spark.createDataFrame([tuple(r[c] for c in cols) for r in updates + news],
                               "ts long, uuid string, rider string, driver string, fare double, city string")
    result = table.upsert(df)
    assert result.updates == len(updates) and result.inserts == len(news)
    after = {r["uuid"]: r for r in read_table(path).to_pylist()}
    assert {k: (r["fare"], r["city"]) for k, r in after.items()} == \
        {r["uuid"]: (r["fare"], r["city"]) for r in updates + news}
    # every old key is still in its file group; each new key's group holds keys of its city only
    for key, r in before.items():
        assert after[key]["_hoodie_file_name"].split("_")[0] == r["_hoodie_file_name"].split("_")[0], key
    new_groups = {s.file_id: s.partition for s in table.latest_file_slices()}
    assert len(set(new_groups) - groups_before) == len(cities)
    for c in cities:
        assert new_groups[after[f"new-{c}"]["_hoodie_file_name"].split("_")[0]].endswith(c)


def test_a_null_key_into_a_table_hudi_wrote_changes_nothing(tmp_path, spark):
    """Lookup index: the tag pass refuses a null record key before anything is written (the
    job that lists the batch's partitions runs it); the pending instant is removed again and
    the files and hudi-rs's rows are as before."""
    from tablesvc.errors import InvalidInputError

    path = copy_table(TABLES_DIR / "v6_trips_8i1u", tmp_path)
    table = Table.open(str(path))
    before_rows = rows(read_table(path), ["uuid", "rider", "fare"])
    before_files = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    cols = ["ts", "uuid", "rider", "driver", "fare", "city"]
    df = spark.createDataFrame([(1, "u-1", "r", "d", 1.0, "chennai"), (2, None, "r", "d", 2.0, "chennai")],
                               "ts long, uuid string, rider string, driver string, fare double, city string")
    with pytest.raises(InvalidInputError, match="uuid"):
        table.upsert(df.select(*cols))
    assert sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()
                  and ".heartbeat" not in p.parts) == [f for f in before_files if ".heartbeat" not in f]
    assert rows(read_table(path), ["uuid", "rider", "fare"]) == before_rows


def test_upsert_into_v9_table_with_decimals_dates_timestamps(tmp_path, spark):
    path = copy_table(TABLES_DIR / "v9_txns_simple_nometa", tmp_path)
    table = Table.open(str(path))
    before = {r["txn_id"]: r for r in read_table(path).to_pylist()}
    row = dict(before["TXN-007"], fee_amount=Decimal("80.25"), txn_ts=before["TXN-007"]["txn_ts"] + 10)
    df = spark.createDataFrame([row], table.read(spark=spark).drop(
        "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name").schema)
    table.upsert(df)
    after = {r["txn_id"]: r for r in read_table(path).to_pylist()}
    assert after["TXN-007"]["fee_amount"] == Decimal("80.25")
    assert {k: v for k, v in after.items() if k != "TXN-007"} == {k: v for k, v in before.items() if k != "TXN-007"}
    ours = {r["txn_id"]: r for r in table.read(spark=spark).collect()}
    assert ours["TXN-007"]["fee_amount"] == Decimal("80.25")
    assert set(ours) == set(after)
