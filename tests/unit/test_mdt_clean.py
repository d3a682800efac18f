"""The metadata table's own clean (``tablesvc.metadata.mdt_clean``, ``mdt_clean_plan``): the policy
Java 1.2 derives from the data table's cleaner keys, the gate of ``cleanIfNecessary``, and the plan
and its execution on copies of the three Java-written fixtures whose metadata table Java compacted
(the slices before Java's compaction are what a clean may take).  The expected files come from
the folder listing and Java's compaction commit, not from the planner; after the clean the
metadata table's records are unchanged, and tablesvc (through the metadata table), hudi-rs and a
storage listing agree on the data table's slices.  A clean killed half-way is pending, invisible to
readers, and the next commit's services finish it from its plan."""

from __future__ import annotations

import pytest
from fixture_tables import copy_table
from metadata_tables import hudi_rs_slice_rows, metadata_listing, storage_slices, tablesvc_slices

from tablesvc.api import Table
from tablesvc.config import build_config
from tablesvc.config.registry import CleanerPolicy
from tablesvc.metadata import MetadataTable
from tablesvc.metadata import mdt_clean
from tablesvc.metadata.mdt_clean import clean_if_due, execute
from tablesvc.metadata.mdt_clean_plan import (
    MetadataCleanPolicy,
    build_clean_plan,
    clean_due,
    commits_since_last_clean,
    earliest_commit_to_retain,
)
from tablesvc.metadata.mdt_compaction import merge_for
from tablesvc.metadata.mdt_compaction_plan import metadata_partitions
from tablesvc.metadata.partition_reader import partition_records
from tablesvc.metadata.writer import MetadataTableWriter
from timeline.active import Timeline
from timeline.instant import Action, Instant, State, TimelineLayout
from timeline.payloads import decode_clean_metadata, decode_commit_metadata, encode_cleaner_plan

# (fixture, the instant of the compaction Java wrote on its metadata table)
JAVA_COMPACTIONS = [("v8_trips_8i3u1d", "20251220210130942"),
                    ("zips:mor_avro_v9_txns_simple_meta", "20260307162612567"),
                    ("zips:mor_avro_v9_txns_complex_meta", "20260307162643148")]
ONE_VERSION = MetadataCleanPolicy(CleanerPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)


# -- the policy -------------------------------------------------------------------------------------
@pytest.mark.parametrize("conf,expected", [
    ({}, (CleanerPolicy.KEEP_LATEST_COMMITS, 20, 0, 0)),                        # max(20, 12)
    ({"hoodie.cleaner.commits.retained": "17"}, (CleanerPolicy.KEEP_LATEST_COMMITS, 20, 0, 0)),   # 20.4 -> 20
    ({"hoodie.cleaner.commits.retained": "25"}, (CleanerPolicy.KEEP_LATEST_COMMITS, 30, 0, 0)),
    ({"hoodie.cleaner.commits.retained": "19"}, (CleanerPolicy.KEEP_LATEST_COMMITS, 22, 0, 0)),   # 22.8 -> 22
    ({"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"}, (CleanerPolicy.KEEP_LATEST_FILE_VERSIONS, 0, 4, 0)),
    ({"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "1"},
     (CleanerPolicy.KEEP_LATEST_FILE_VERSIONS, 0, 2, 0)),
    ({"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "5"},
     (CleanerPolicy.KEEP_LATEST_FILE_VERSIONS, 0, 6, 0)),                      # 6.0, not 7
    ({"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS"}, (CleanerPolicy.KEEP_LATEST_BY_HOURS, 0, 0, 29)),
    ({"hoodie.metadata.derive.from.datatable.clean.policy": "false", "hoodie.cleaner.commits.retained": "40"},
     (CleanerPolicy.KEEP_LATEST_FILE_VERSIONS, 0, 2, 0)),
])
def test_the_policy_is_derived_from_the_data_tables_as_java_does(conf, expected):
    p = MetadataCleanPolicy.derived_from(build_config(conf=conf))
    assert (p.policy, p.commits_retained, p.file_versions_retained, p.hours_retained) == expected


# -- when -------------------------------------------------------------------------------------------
def _timeline(names: list[str]) -> Timeline:
    return Timeline.from_names("/nowhere/.hoodie/metadata", TimelineLayout.V2, names)


def _t(n: int, ms: int = 0) -> str:
    return f"202601010000{n:02d}{ms:03d}"


def test_the_gate_needs_no_compaction_or_three_instants_after_the_latest():
    writes = [f"{_t(i)}_{_t(i, 500)}.deltacommit" for i in (1, 2, 3)]
    assert clean_due(_timeline(writes))                                   # no compaction yet
    compacted = writes + [f"{_t(4)}.compaction.requested", f"{_t(4)}_{_t(4, 500)}.commit"]
    assert not clean_due(_timeline(compacted))
    two_more = compacted + [f"{_t(i)}_{_t(i, 500)}.deltacommit" for i in (5, 6)]
    assert not clean_due(_timeline(two_more))
    assert not clean_due(_timeline(two_more + [f"{_t(7)}.deltacommit.requested"]))   # pending: not counted
    assert clean_due(_timeline(two_more + [f"{_t(7)}.clean.requested", f"{_t(7)}_{_t(7, 500)}.clean"]))  # any action


def test_the_earliest_commit_to_retain_stops_before_a_pending_commit():
    names = [f"{_t(i)}_{_t(i, 500)}.deltacommit" for i in range(1, 9)]
    commits = MetadataCleanPolicy(CleanerPolicy.KEEP_LATEST_COMMITS, commits_retained=3)
    assert earliest_commit_to_retain(_timeline(names), commits, 0, "UTC").timestamp == _t(6)
    pending = names + [f"{_t(5, 100)}.deltacommit.requested"]       # requested between 5 and 6
    assert earliest_commit_to_retain(_timeline(pending), commits, 0, "UTC").timestamp == _t(5)
    few = MetadataCleanPolicy(CleanerPolicy.KEEP_LATEST_COMMITS, commits_retained=8)
    assert earliest_commit_to_retain(_timeline(names), few, 0, "UTC") is None


# -- what, on Java's metadata tables ---------------------------------------------------------------
def _open(path):
    table = Table.open(str(path))
    return table, MetadataTableWriter.of(table.storage, table.base_path, table.instant_times)


def _before_javas_compaction(path, instant: str) -> set[str]:
    """Independently of the planner: per file group Java's compaction ``instant`` rewrote (its
    commit's write stats), every file of the group in storage but the new base file and the log
    files whose delta commit completed after ``instant`` (v8+ puts those in the new slice)."""
    root = path / ".hoodie" / "metadata"
    timeline = root / ".hoodie" / "timeline"
    completion = {}
    for f in timeline.iterdir():
        stem = f.name.split(".")[0]
        if "_" in stem and f.name.endswith(".deltacommit"):
            requested, completed = stem.split("_")
            completion[requested] = completed
    (commit,) = timeline.glob(f"{instant}_*.commit")
    stats = decode_commit_metadata(commit.read_bytes(), TimelineLayout.V2, "commit").write_stats()
    out = set()
    for s in stats:
        folder = root / s.partition_path
        for f in folder.iterdir():
            name = f.name
            if name.startswith("."):
                if not name.startswith(f".{s.file_id}_") or ".log." not in name:
                    continue
                delta = name[len(s.file_id) + 2:].split(".log.")[0]
                if completion.get(delta, delta) > instant:
                    continue
            elif not name.startswith(f"{s.file_id}_") or name.endswith(f"_{instant}.hfile"):
                continue
            out.add(str(f))
    return out


def _records(path) -> dict:
    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    return {p: partition_records(mdt, p, merge_for(p)) for p in metadata_partitions(table.storage, mdt.base_path)}


def _readers_agree(path) -> None:
    table = Table.open(str(path))
    assert tablesvc_slices(table) == hudi_rs_slice_rows(path) == storage_slices(table)


@pytest.mark.parametrize("name,instant", JAVA_COMPACTIONS)
def test_one_version_plans_every_slice_before_javas_compaction(fixture_root, tmp_path, name, instant):
    path = copy_table(fixture_root.path(name), tmp_path)
    table, mdt = _open(path)
    expected = _before_javas_compaction(path, instant)
    assert expected, "the fixture's compaction left older slices"
    plan = build_clean_plan(table.storage, mdt.base_path, mdt.config, mdt.timeline(), ONE_VERSION, 0)
    planned = {f for paths in plan.files_to_delete().values() for f in paths}
    assert planned == expected
    assert plan.policy == "KEEP_LATEST_FILE_VERSIONS" and plan.earliest_instant_to_retain is None
    assert plan.last_completed_commit_timestamp == max(i.timestamp for i in mdt.timeline().completed_writes())


@pytest.mark.parametrize("name,instant", JAVA_COMPACTIONS)
def test_keeping_commits_keeps_the_slice_a_reader_at_the_earliest_retained_commit_uses(fixture_root, tmp_path,
                                                                                          name, instant):
    """KEEP_LATEST_COMMITS: the slices before Java's compaction go only once the earliest commit
    to retain is later than the compaction; while it is the compaction or earlier, a reader at it
    still uses the slice before (Java keeps the newest slice based before the ECTR)."""
    path = copy_table(fixture_root.path(name), tmp_path)
    table, mdt = _open(path)
    older = _before_javas_compaction(path, instant)
    writes = [i.timestamp for i in mdt.timeline().completed_writes()]
    seen = set()
    for retained in range(1, len(writes) + 1):
        ectr = writes[len(writes) - retained] if retained < len(writes) else None
        policy = MetadataCleanPolicy(CleanerPolicy.KEEP_LATEST_COMMITS, commits_retained=retained)
        plan = build_clean_plan(table.storage, mdt.base_path, mdt.config, mdt.timeline(), policy, 0)
        planned = {f for paths in plan.files_to_delete().values() for f in paths} if plan else set()
        assert planned == (older if ectr is not None and ectr > instant else set()), (retained, ectr)
        if plan is not None:
            assert plan.earliest_instant_to_retain.timestamp == ectr
        seen.add(bool(planned))
    assert False in seen     # every fixture has an ECTR at or before its compaction for some retained count


@pytest.mark.parametrize("name,instant", JAVA_COMPACTIONS)
def test_the_clean_deletes_its_plan_and_readers_stay_equal(fixture_root, tmp_path, name, instant):
    path = copy_table(fixture_root.path(name), tmp_path)
    table, mdt = _open(path)
    before = _records(path)
    listing_before = metadata_listing(table)
    plan = build_clean_plan(table.storage, mdt.base_path, mdt.config, mdt.timeline(), ONE_VERSION, 0)
    planned = {f for paths in plan.files_to_delete().values() for f in paths}
    ts = table.instant_times.next(after=mdt.timeline().max_time())
    table.storage.write_new(mdt.timeline().path_of(Instant(ts, Action.CLEAN, State.REQUESTED)),
                            encode_cleaner_plan(plan))
    done = execute(mdt, ts)
    assert done.state is State.COMPLETED and done.action is Action.CLEAN and done.completion_time > ts
    assert not any(table.storage.exists(f) for f in planned)
    assert (path / ".hoodie/metadata/.hoodie/timeline" / f"{ts}.clean.inflight").read_bytes() == b""
    md = decode_clean_metadata(table.storage.read_bytes(mdt.timeline().path_of(done)), "clean")
    assert md.total_files_deleted == len(planned) and md.start_clean_time == ts
    assert {n for p in md.partition_metadata.values() for n in p.success_delete_files} == \
        {f.rsplit("/", 1)[1] for f in planned}
    assert _records(path) == before
    assert metadata_listing(Table.open(str(path))) == listing_before
    _readers_agree(path)


# -- a kill half-way, and the next commit -----------------------------------------------------------
class Killed(BaseException):
    """A process killed mid-clean: nothing after the raise runs."""


def test_a_clean_killed_half_way_is_invisible_and_the_next_commit_finishes_it(fixture_root, tmp_path, monkeypatch):
    name, instant = JAVA_COMPACTIONS[0]
    path = copy_table(fixture_root.path(name), tmp_path)
    table, mdt = _open(path)
    before = _records(path)
    expected = _before_javas_compaction(path, instant)
    # open the gate (Java's fixture stops right after its compaction): what is tested here is the
    # lifecycle of a clean on the metadata timeline, not the gate
    monkeypatch.setattr(mdt_clean, "clean_due", lambda timeline: True)
    assert commits_since_last_clean(table.storage, mdt.timeline()) > 0
    real_delete, calls = type(table.storage).delete, []

    def dying_delete(storage, p):
        calls.append(p)
        if len(calls) > 3:
            raise Killed()
        return real_delete(storage, p)

    monkeypatch.setattr(type(table.storage), "delete", dying_delete)
    with pytest.raises(Killed):
        clean_if_due(table, mdt, ONE_VERSION)
    monkeypatch.setattr(type(table.storage), "delete", real_delete)
    (pending,) = mdt.timeline().pending(Action.CLEAN)
    assert pending.state is State.INFLIGHT
    assert sum(1 for f in expected if not table.storage.exists(f)) == 3
    assert _records(path) == before
    _readers_agree(path)

    # the next commit's services: the pending clean is finished from its plan, nothing new planned
    # (the derived default policy, KEEP_LATEST_COMMITS 20, would plan nothing anyway)
    table, mdt = _open(path)
    (done,) = clean_if_due(table, mdt)
    assert done.timestamp == pending.timestamp and done.is_completed
    assert not any(table.storage.exists(f) for f in expected)
    assert not mdt.timeline().pending(Action.CLEAN)
    assert clean_if_due(table, mdt, ONE_VERSION) == []       # nothing left for one version either
    assert _records(path) == before
    _readers_agree(path)
