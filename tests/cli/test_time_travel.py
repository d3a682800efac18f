"""Time travel (issue #24, item 4): ``--as-of`` in every form Hudi's ``as.of.instant`` takes, and
never an empty answer for a time the table cannot show.

Hudi's datasource reads ``as.of.instant`` through ``HoodieSqlCommonUtils.formatQueryInstant``
(``yyyy-MM-dd``, ``yyyy-MM-dd HH:mm:ss[.SSS]``, 14 or 17 digits) and refuses a time older than what
the last clean kept (``TimelineUtils.validateTimestampAsOf``).  The table here has commits on three
days, two of them in the same second, so each form's meaning (start of the day, end of the second,
the exact millisecond) shows in the rows.  Rows are compared with hudi-rs's time-travel read at the
equivalent 17-digit instant; refusals are checked to change nothing and to start no Spark.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.hudi_rs import sorted_rows

from table_builders import compact_by_hand, tree, write_without_spark
from tablesvc.cli.main import main
from tablesvc.config import build_config
from tablesvc.services.clean import run_clean
from tablesvc.services.result import Status
from tablesvc.api import Table, TableSpec
from timeline.clock import ManualClock
from timeline.errors import InvalidInputError

SCHEMA = pa.schema([("uuid", pa.string()), ("ts", pa.int64()), ("fare", pa.float64()), ("city", pa.string())])

# When each commit is requested (the table's timezone is UTC).  W2 and W3 share a second.
W1 = "2025-03-01 10:00:00.250"
W2 = "2025-03-02 09:30:15.500"
W3 = "2025-03-02 09:30:15.800"
C1 = "2025-03-03 12:00:00.000"     # a compaction: old slices the cleaner can delete
W4 = "2025-03-04 08:00:00.000"

# (form given to --as-of, the 17-digit instant it stands for)
FORMS = [
    ("2025-03-02", "20250302000000000"),               # a date: the start of that day
    ("2025-03-02 09:30:15", "20250302093015999"),      # seconds: the end of that second (Hudi appends .999)
    ("20250302093015", "20250302093015999"),           # 14 digits: the same second, the same end
    ("2025-03-02 09:30:15.600", "20250302093015600"),  # milliseconds: exactly
    ("20250302093015500", "20250302093015500"),        # 17 digits: itself
    ("2025-03-03 23:59:59.999", "20250303235959999"),
]


def instant(text: str) -> str:
    return text.replace("-", "").replace(" ", "").replace(":", "").replace(".", "")


def epoch_ms(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp() * 1000)


def write(table: Table, rows: list[dict]) -> str:
    t, _ = write_without_spark(table, pa.Table.from_pylist(rows, schema=SCHEMA), "upsert", stage=1)
    return t


def build(path: Path, version: int) -> Table:
    """W1 inserts six rows in two partitions, W2 and W3 update one row each, C1 compacts every
    file group, W4 updates a third row."""
    clock = ManualClock(epoch_ms(W1))
    table = Table.create(str(path), TableSpec("trips", ("uuid",), "ts", ("city",), table_version=version,
                                              num_buckets=1), clock=clock)
    rows = [{"uuid": f"k{i}", "ts": 100 + i, "fare": 10.0 + i, "city": "sf" if i % 2 else "nyc"} for i in range(6)]
    write(table, rows)
    clock.set(epoch_ms(W2))
    write(table, [dict(rows[0], ts=200, fare=20.0)])
    clock.set(epoch_ms(W3))
    write(table, [dict(rows[1], ts=300, fare=30.0)])
    clock.set(epoch_ms(C1))
    compact_by_hand(table)
    clock.set(epoch_ms(W4))
    write(table, [dict(rows[2], ts=400, fare=40.0)])
    table = Table.open(str(path))
    assert [i.timestamp for i in table.timeline().completed_writes()] == [instant(t) for t in (W1, W2, W3, C1, W4)]
    return table


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("time-travel")
    paths = {v: root / f"v{v}" for v in (6, 8)}
    for version, path in paths.items():
        build(path, version)
    return paths


def copy(src: Path, tmp_path: Path) -> Path:
    import shutil

    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def no_spark(monkeypatch):
    """A refused as-of is refused before Spark starts."""
    import tablesvc.spark.session as session

    def tripwire(*_a, **_k):
        raise AssertionError("Spark was started for an as-of that should have been refused first")
    monkeypatch.setattr(session, "get_spark", tripwire)


def clean_keeping_two_commits(path: Path) -> str:
    """A clean retaining 2 commits: its earliest commit to retain is C1, and the W1 slices go."""
    results = run_clean(Table.open(str(path)), build_config(conf={"hoodie.cleaner.commits.retained": "2"}))
    assert results[-1].status is Status.DONE, results
    assert results[-1].metrics["earliest_commit_to_retain"] == instant(C1)
    return instant(C1)


# -- the forms ------------------------------------------------------------------------------------

def test_parse_as_of_follows_hudis_format_query_instant():
    from timeline.instant_time import parse_as_of

    for form, expected in FORMS:
        assert parse_as_of(form) == expected, form
    # Hudi's bootstrap instants are taken as they are (formatQueryInstant's validateInstant)
    assert parse_as_of("00000000000000") == "00000000000000"


@pytest.mark.parametrize("bad", [
    "2025/03/02", "2025-03-02T09:30:15", "2025-03-02 09:30:15.5", "2025-02-30", "2025-02-30 10:00:00",
    "20250230100000000", "2025030209301", "1741000000", "yesterday", " 20250302093015500",
])
def test_parse_as_of_refuses_other_forms_naming_them(bad):
    from timeline.instant_time import parse_as_of

    with pytest.raises(InvalidInputError) as e:
        parse_as_of(bad)
    assert repr(bad) in str(e.value) and "yyyy-MM-dd" in str(e.value)


@pytest.mark.parametrize("command", [["read"], ["fsview", "--json"]])
def test_a_bad_form_is_exit_2_naming_it(built, capsys, no_spark, command):
    for bad in ("2025/03/02", "2025-02-30 10:00:00", "20250230100000000"):
        code, out, err = run(capsys, command[0], str(built[8]), "--as-of", bad, *command[1:])
        assert code == 2 and out == "" and len(err.splitlines()) == 1, (bad, out, err)
        assert repr(bad) in err and "yyyy-MM-dd" in err, err


@pytest.mark.spark
@pytest.mark.parametrize("version", [6, 8])
def test_each_form_reads_the_rows_of_its_17_digit_instant(built, spark, tmp_path, capsys, version):
    path = built[version]
    seen = set()
    for form, equivalent in FORMS:
        out_file = tmp_path / f"{instant(form)}.parquet"
        code, out, err = run(capsys, "read", str(path), "--as-of", form, "--output", str(out_file))
        assert code == 0, (form, out, err)
        ours = sorted((r["uuid"], r["ts"], r["fare"]) for r in pq.read_table(out_file).to_pylist())
        theirs = sorted_rows(path, ("uuid", "ts", "fare"), equivalent)
        assert ours == theirs, form
        seen.add(tuple(theirs))
    # the forms are told apart: before W2, W2 without W3 (same second), W3, and the compaction
    fares = [dict((k, f) for k, _ts, f in rows) for rows in seen]
    assert sorted((f["k0"], f["k1"]) for f in fares) == [(10.0, 11.0), (20.0, 11.0), (20.0, 30.0)]
    # the Python API takes the same forms
    table = Table.open(str(path))
    for form, equivalent in FORMS[:3]:
        rows = sorted((r["uuid"], r["ts"], r["fare"]) for r in table.read(as_of=form, spark=spark).collect())
        assert rows == sorted_rows(path, ("uuid", "ts", "fare"), equivalent), form


@pytest.mark.parametrize("version", [6, 8])
def test_fsview_takes_each_form_as_its_17_digit_instant(built, capsys, no_spark, version):
    for form, equivalent in FORMS:
        code, out, err = run(capsys, "fsview", str(built[version]), "--as-of", form, "--json")
        assert code == 0, (form, err)
        code2, out2, _ = run(capsys, "fsview", str(built[version]), "--as-of", equivalent, "--json")
        assert code2 == 0 and json.loads(out) == json.loads(out2), form


# -- what cannot be seen is refused -----------------------------------------------------------------

@pytest.mark.parametrize("version", [6, 8])
def test_as_of_a_cleaned_instant_is_exit_2_naming_it_and_the_earliest_readable(built, tmp_path, capsys, no_spark,
                                                                               version):
    path = copy(built[version], tmp_path)
    earliest = clean_keeping_two_commits(path)
    before = tree(path)
    for form in (instant(W1), instant(W3), "2025-03-02 09:30:15", "2025-03-03"):
        for command in (["read"], ["fsview", "--json"]):
            code, out, err = run(capsys, command[0], str(path), "--as-of", form, *command[1:])
            assert code == 2 and out == "" and len(err.splitlines()) == 1, (form, out, err)
            assert form in err and earliest in err and "clean" in err, err
    assert tree(path) == before
    # the Python API refuses too (planning, before any Spark work)
    from tablesvc.spark.read_job import plan_read

    with pytest.raises(InvalidInputError) as e:
        plan_read(Table.open(str(path)), instant(W3))
    assert instant(W3) in str(e.value) and earliest in str(e.value)
    # from the earliest commit to retain on, the table can be read (rows: the Spark test below)
    assert plan_read(Table.open(str(path)), earliest).context.as_of == earliest
    code, out, err = run(capsys, "fsview", str(path), "--as-of", earliest, "--json")
    assert code == 0 and json.loads(out), err


def test_a_pending_clean_counts_too(built, tmp_path, capsys, no_spark):
    """A clean killed after its deletes stays pending: its plan's ECTR bounds time travel already."""
    from tablesvc.services.clean import schedule_clean

    path = copy(built[8], tmp_path)
    scheduled = schedule_clean(Table.open(str(path)), build_config(conf={"hoodie.cleaner.commits.retained": "2"}))
    assert scheduled.status is Status.SCHEDULED
    code, out, err = run(capsys, "fsview", str(path), "--as-of", instant(W3), "--json")
    assert code == 2 and instant(C1) in err and f"pending clean {scheduled.instant}" in err, err


@pytest.mark.spark
def test_reads_from_the_earliest_commit_to_retain_on_match_hudi_rs_after_a_clean(built, tmp_path, spark):
    path = copy(built[8], tmp_path)
    before = {t: sorted_rows(path, ("uuid", "ts", "fare"), instant(t)) for t in (C1, W4)}
    earliest = clean_keeping_two_commits(path)
    table = Table.open(str(path))
    for t in (C1, W4):
        rows = sorted((r["uuid"], r["ts"], r["fare"]) for r in table.read(as_of=instant(t), spark=spark).collect())
        assert rows == sorted_rows(path, ("uuid", "ts", "fare"), instant(t)) == before[t], t
    assert earliest == instant(C1)


@pytest.mark.parametrize("version", [6, 8])
def test_as_of_before_the_first_commit_is_exit_2(built, capsys, no_spark, version):
    first = instant(W1)
    for form in ("2025-03-01", "2025-03-01 10:00:00.249", "20250301100000249", "20250301095959"):
        for command in (["read"], ["fsview", "--json"]):
            code, out, err = run(capsys, command[0], str(built[version]), "--as-of", form, *command[1:])
            assert code == 2 and out == "" and len(err.splitlines()) == 1, (form, out, err)
            assert form in err and first in err, err
    # the first commit itself is readable
    code, out, err = run(capsys, "fsview", str(built[version]), "--as-of", first, "--json")
    assert code == 0 and json.loads(out), err


def test_as_of_on_a_table_without_a_completed_commit_is_exit_2(tmp_path, capsys, no_spark):
    path = tmp_path / "empty"
    clock = ManualClock(epoch_ms(W1))
    table = Table.create(str(path), TableSpec("trips", ("uuid",), "ts", ("city",), num_buckets=1), clock=clock)
    for setup in ("no instant at all", "a write that never completed"):
        if setup == "a write that never completed":
            write_without_spark(table, pa.Table.from_pylist([{"uuid": "k", "ts": 1, "fare": 1.0, "city": "sf"}],
                                                            schema=SCHEMA), "upsert", stage=1, complete=False)
        for command in (["read"], ["fsview", "--json"]):
            code, out, err = run(capsys, command[0], str(path), "--as-of", "2030-01-01", *command[1:])
            assert code == 2 and out == "" and len(err.splitlines()) == 1, (setup, out, err)
            assert "2030-01-01" in err and "no completed commit" in err, err


# -- the decision, as a function of the timeline and the last clean ----------------------------------

def test_earliest_readable_instant_from_the_timeline_and_the_last_clean():
    from timeline.active import Timeline
    from timeline.instant import Instant, TimelineLayout
    from timeline.payloads import ActionInstant, CleanerPlan, CleanMetadata
    from timeline.time_travel import earliest_readable

    def timeline(*names: str) -> Timeline:
        return Timeline("/t", TimelineLayout.V2, tuple(Instant.parse(n, TimelineLayout.V2) for n in names))

    def clean(ectr: str, last: str = "", policy: str = "KEEP_LATEST_COMMITS") -> CleanMetadata:
        return CleanMetadata("20250105000000000", 0, 1, ectr, {}, last, policy)

    empty = timeline("20250101000000000.deltacommit.requested", "20250101000000000.deltacommit.inflight")
    assert earliest_readable(empty, None).instant is None
    writes = timeline("20250101000000000_20250101000000100.deltacommit",
                      "20250102000000000_20250102000000100.commit",
                      "20250103000000000_20250103000000100.deltacommit",
                      "20250105000000000_20250105000000100.clean")
    assert earliest_readable(writes, None).instant == "20250101000000000"
    assert earliest_readable(writes, clean("20250102000000000")).instant == "20250102000000000"
    # an earliest commit to retain older than the active timeline (archived): its start is the bound
    assert earliest_readable(writes, clean("20241231000000000")).instant == "20250101000000000"
    # KEEP_LATEST_FILE_VERSIONS keeps versions, not a time: only the commits it saw the end of are sure
    files = clean("", "20250103000000000", "KEEP_LATEST_FILE_VERSIONS")
    assert earliest_readable(writes, files).instant == "20250103000000000"
    # a pending clean's plan counts as well (it may have deleted files already)
    plan = CleanerPlan("KEEP_LATEST_COMMITS", ActionInstant("20250103000000000", "deltacommit", "COMPLETED"))
    found = earliest_readable(writes, clean("20250102000000000"), "20250105000000000", [("20250106000000000", plan)])
    assert found.instant == "20250103000000000" and "pending clean 20250106000000000" in found.reason
