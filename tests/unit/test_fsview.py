"""The file-system view of every shared fixture equals hudi-rs's file slices, latest and as of
every completed instant."""

from __future__ import annotations

import os
import shutil

import pytest
from oracles.hudi_rs import file_slices

from fixture_tables import TABLES_DIR, all_fixture_names, copy_table
from tablesvc.fsview import BaseFileName, LogFileName, list_partitions
from tablesvc.errors import FileNameError
from tablesvc.storage import LocalStorage
from tablesvc.api import Table


def hudi_slices(path: str, as_of: str | None = None) -> list[tuple]:
    return sorted((s.partition_path, s.file_id, s.base_file_name or None, tuple(s.log_file_names))
                  for s in file_slices(path, as_of))


def our_slices(table: Table, as_of: str | None = None) -> list[tuple]:
    return sorted((s.partition, s.file_id, s.base_file.file_name if s.base_file else None,
                   tuple(lf.file_name for lf in s.log_files)) for s in table.latest_file_slices(as_of))


@pytest.mark.parametrize("name", all_fixture_names())
def test_view_equals_hudi_rs_latest_and_as_of_each_instant(fixture_root, name):
    path = str(fixture_root.path(name))
    table = Table.open(path)
    assert our_slices(table) == hudi_slices(path)
    completed = [i.timestamp for i in table.timeline().completed_writes()]
    for ts in completed:
        assert our_slices(table, ts) == hudi_slices(path, ts), f"as of {ts}"


def test_view_hides_uncommitted_files_and_keeps_stray_folders_harmless(tmp_path):
    path = copy_table(TABLES_DIR / "v6_trips_8i1u", tmp_path)
    table = Table.open(str(path))
    before = our_slices(table)
    part = path / "city=chennai"
    fid = [n for n in os.listdir(part) if n.endswith(".parquet")][0].split("_")[0]
    # A failed write's base file (instant not on the timeline, newer than the timeline start).
    src = [n for n in os.listdir(part) if n.endswith(".parquet")][0]
    shutil.copy(part / src, part / f"{fid}_9-9-9_20300101000000000.parquet")
    # A stray hidden folder and a temp file inside a partition.
    (part / ".tmp").mkdir()
    (part / ".tmp" / "x").write_text("x")
    (part / ".junk.tmp").write_text("x")
    assert our_slices(Table.open(str(path))) == before


def test_file_names_round_trip_and_reject_bad_names():
    base = "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_0-13-60_20250331030642808.parquet"
    assert BaseFileName.parse(base).name == base
    log = ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85"
    ln = LogFileName.parse(log)
    assert (ln.file_id, ln.instant, ln.version, ln.write_token) == (
        "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0", "20250331030642808", 1, "0-26-85")
    assert ln.name == log
    for bad in ("part-0000.parquet", "a_b_c_d.parquet", "fid_0-1-2_2025.parquet", ".fid_2025.log.1"):
        with pytest.raises(FileNameError, match="is not a|instant"):
            BaseFileName.parse(bad) if bad.endswith("parquet") else LogFileName.parse(bad)


def test_partitions_are_found_by_marker_file(fixture_root):
    storage = LocalStorage()
    assert list_partitions(storage, str(TABLES_DIR / "v6_complexkeygen_hivestyle"), True) == [
        "byteField=10/shortField=300", "byteField=20/shortField=100", "byteField=30/shortField=100"]
    assert list_partitions(storage, str(TABLES_DIR / "v6_nonpartitioned"), False) == [""]


def _schedule_pending_compaction(table: Table) -> tuple[str, list]:
    """Write a compaction plan over the latest slices (plan only, as a scheduler would)."""
    from timeline.instant import Action
    from timeline.payloads import CompactionOperation, CompactionPlan, encode_compaction_plan

    slices = table.latest_file_slices()
    ops = tuple(CompactionOperation(base_instant_time=s.base_instant, delta_file_paths=tuple(
        lf.file_name for lf in s.log_files), data_file_path=s.base_file.file_name, file_id=s.file_id,
        partition_path=s.partition, metrics={"TOTAL_LOG_FILES_SIZE": 0.0}) for s in slices)
    plan = CompactionPlan(operations=ops, version=2)
    c = table.timeline_writer.request(Action.COMPACTION, encode_compaction_plan(plan))
    return c.timestamp, slices


@pytest.mark.parametrize("version", [6, 8])
def test_pending_compaction_slices_merge_with_the_previous_slice(tmp_path, version):
    """Logs written after a compaction is scheduled stay readable while it is pending."""
    import shutil as _shutil

    from tablesvc.demo.sample_table import build_sample_table
    from tablesvc.fsview import LogFileName
    from timeline.instant import Action

    sample = build_sample_table(str(tmp_path / "t"), table_version=version)
    table = Table.open(sample.table.base_path)
    c, before = _schedule_pending_compaction(table)
    target = [s for s in before if s.log_files][0]
    # A delta commit after the schedule appends a log to that file group: v6 names it after
    # the compaction's new slice, v8 after the delta commit itself.
    d = table.timeline_writer.request(Action.DELTA_COMMIT)
    table.timeline_writer.start(d)
    log_instant = c if version == 6 else d.timestamp
    new_log = LogFileName(target.file_id, log_instant, 1, "0-9-9")
    _shutil.copy(target.log_files[0].path, os.path.join(os.path.dirname(target.log_files[0].path), new_log.name))
    from timeline.payloads import CommitMetadata, WriteStat, encode_commit_metadata

    stat = WriteStat(file_id=target.file_id, path=f"{target.partition}/{new_log.name}", prev_commit=log_instant,
                     partition_path=target.partition, base_file=target.base_file.file_name,
                     log_files=(new_log.name,), log_version=1, log_offset=0)
    md = CommitMetadata(partition_to_write_stats={target.partition: (stat,)},
                        extra_metadata={"schema": table.schema()}, operation_type="UPSERT")
    table.timeline_writer.complete(d, encode_commit_metadata(md, table.config.layout))
    # A half-written compaction output (its instant is not completed) must stay invisible.
    base = target.base_file
    _shutil.copy(base.path, os.path.join(os.path.dirname(base.path), f"{target.file_id}_0-8-8_{c}.parquet"))
    latest = {s.file_id: s for s in Table.open(table.base_path).latest_file_slices()}
    merged = latest[target.file_id]
    assert merged.base_file.file_name == base.file_name       # previous slice's base file
    assert [lf.file_name for lf in merged.log_files] == [lf.file_name for lf in target.log_files] + [new_log.name]
    if version == 8:  # hudi-rs agrees for v8 (for v6 it hides the new log until the compaction completes)
        assert our_slices(Table.open(table.base_path)) == hudi_slices(table.base_path)


def test_table_schema_comes_from_the_latest_completed_write():
    import json

    schema = json.loads(Table.open(str(TABLES_DIR / "v6_trips_8i1u")).schema())
    assert [f["name"] for f in schema["fields"]] == ["ts", "uuid", "rider", "driver", "fare", "city"]
    v9 = json.loads(Table.open(str(TABLES_DIR / "v9_txns_simple_nometa")).schema())
    assert "txn_id" in [f["name"] for f in v9["fields"]]
    empty = Table.open(str(TABLES_DIR / "v6_empty"))  # no commit yet: the create schema
    assert empty.timeline().latest_schema(empty.storage) is None
    assert json.loads(empty.schema())["name"] == "v6_empty_record"


def _name_outcome(parse, name):
    try:
        return parse(name)
    except FileNameError:
        return "refused"


def _base_by_the_rules(name):
    stem, dot, ext = name.rpartition(".")
    parts = stem.split("_") if dot else []
    if len(parts) != 3 or name.startswith("."):
        raise FileNameError(name)
    return BaseFileName(parts[0], parts[1], parts[2], ext)


def _log_by_the_rules(name):
    import re

    m = re.match(r"^\.(?P<fid>[^_]+)_(?P<instant>[^_]*)\.(?P<ext>log|archive)\.(?P<version>\d+)"
                 r"(?:_(?P<token>\d+-\d+-\d+))?(?P<cdc>\.cdc)?$", name)
    if not m or not m.group("token"):
        raise FileNameError(name)
    return LogFileName(m["fid"], m["instant"], int(m["version"]), m["token"], m["ext"], bool(m["cdc"]))


def test_fast_file_name_parsing_agrees_with_the_rules():
    """The view parses one name per data file (100k at the issue #6 scale) with one strict match;
    on every shape, good or bad, the outcome is the dataclass's own verdict."""
    t = "20250101000000123"
    fids = ["abc-1", "ab_c", "a.b", "", "a\n", "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"]
    tokens = ["0-1-0", "1", "0-1-0.x", "", "a-b-c", "0-1-0\n"]
    instants = [t, t[:14], t[:15], f"x{t}", f"{t}\n"]
    for fid in fids:
        for token in tokens:
            for instant in instants:
                for ext in ("parquet", "", "orc", "par.quet"):
                    name = f"{fid}_{token}_{instant}.{ext}"
                    assert _name_outcome(BaseFileName.parse, name) == _name_outcome(_base_by_the_rules, name), name
                for ext in ("log", "archive", "logx"):
                    for version in ("1", "0", "01", "10", ""):
                        for cdc in ("", ".cdc", ".x"):
                            for name in (f".{fid}_{instant}.{ext}.{version}_{token}{cdc}",
                                         f".{fid}_{instant}.{ext}.{version}{cdc}"):
                                assert _name_outcome(LogFileName.parse, name) == \
                                    _name_outcome(_log_by_the_rules, name), name


@pytest.mark.parametrize("name", ["v6_trips_8i1u", "v8_trips_8i3u1d", "v6_complexkeygen_hivestyle"])
def test_a_view_without_sizes_has_the_same_slices(name):
    """The clean planner builds the view from names only (no stat per data file)."""
    from tablesvc.fsview import FileSystemView

    table = Table.open(str(TABLES_DIR / name))
    timeline = table.timeline()
    with_sizes = FileSystemView.build(table.storage, table.base_path, table.config, timeline)
    names_only = FileSystemView.build(table.storage, table.base_path, table.config, timeline, sizes=False)

    def shape(view, keep_size):
        return [(g.partition, g.file_id, [(s.base_instant, s.base_file and (s.base_file.name, s.base_file.path),
                                            [(lf.name, lf.path, lf.size if keep_size else None) for lf in s.log_files])
                                           for s in g.slices]) for g in view.groups]

    assert shape(names_only, True) == shape(with_sizes, False)
    assert all(lf.size is None for g in names_only.groups for s in g.slices for lf in s.log_files)
    assert all(lf.size is not None and lf.size > 0 for g in with_sizes.groups for s in g.slices for lf in s.log_files)
    assert names_only.partitions == with_sizes.partitions


# -- the fast view (issue #6) against the one-object-per-name view it replaced -------------------------
def reference_view(storage, base_path, config, timeline, partitions=None, *, sizes=True, only=None):
    """The view built the way it was before the fast path: every folder listed with sizes (a stat
    per file), every name parsed into its dataclass, one object per file, the rules one by one."""
    from bisect import bisect_right

    from tablesvc.fsview.names import PARTITION_METAFILE, looks_like_log_file
    from tablesvc.fsview.view import BaseFile, FileGroup, FileSlice, FileSystemView, LogFile
    from timeline.instant import TimelineLayout

    def marked(names):
        return PARTITION_METAFILE in names or f"{PARTITION_METAFILE}.parquet" in names

    listed = {}
    if partitions is None:
        if not config.is_partitioned:
            partitions = [""]
        else:
            found, leaves, stack = [], [], [""]
            while stack:
                rel = stack.pop()
                entries = storage.list_dir(os.path.join(base_path, rel) if rel else base_path)
                kids = [e.name for e in entries if e.is_dir and not e.name.startswith((".", "_"))
                        and not (rel == "" and e.name in (".hoodie", "_delta_log"))]
                files = [e for e in entries if not e.is_dir]
                if rel and marked({e.name for e in entries}):
                    found.append(rel)
                    listed[rel] = files
                    continue
                if rel and not kids:
                    leaves.append(rel)
                    listed[rel] = files
                stack.extend(f"{rel}/{k}" if rel else k for k in kids)
            partitions = sorted(found) if found else sorted(leaves)
    if only is not None:   # the incremental clean's partitions (it used to drop the others' groups later)
        partitions = [p for p in partitions if p in only]
    pending = frozenset(i.timestamp for i in timeline.pending_compactions())
    v1 = config.layout is TimelineLayout.V1
    completion = timeline.completion_times()
    groups, skipped = [], []
    for partition in partitions:
        folder = os.path.join(base_path, partition) if partition else base_path
        files = listed.get(partition)
        if files is None:
            files = [e for e in storage.list_dir(folder) if not e.is_dir]
        bases, logs = {}, {}
        for e in files:
            try:
                if looks_like_log_file(e.name):
                    ln = LogFileName.parse(e.name)
                    if ln.extension == "log" and not ln.cdc and (timeline.is_committed_or_archived(ln.instant)
                                                                 or (v1 and ln.instant in pending)):
                        logs.setdefault(ln.file_id, []).append(LogFile(ln, e.path, e.size if sizes else None))
                elif not e.name.startswith(".") and e.name.endswith("." + config.base_file_format.lower()):
                    bn = BaseFileName.parse(e.name)
                    if timeline.is_committed_or_archived(bn.instant):
                        bases.setdefault(bn.file_id, []).append(BaseFile(bn, e.path, e.size if sizes else None))
            except FileNameError:
                skipped.append(e.path)
        for fid in sorted(set(bases) | set(logs)):
            by_instant = {}
            for b in sorted(bases.get(fid, []), key=lambda b: b.file_name):
                by_instant.setdefault(b.name.instant, b)
            base_instants = sorted(by_instant)
            slice_logs = {}
            for lf in logs.get(fid, []):
                if v1:
                    first = key = lf.name.instant
                else:
                    first = completion.get(lf.name.instant, lf.name.instant)
                    at = bisect_right(base_instants, first)
                    key = base_instants[at - 1] if at else lf.name.instant
                slice_logs.setdefault(key, []).append(((first, lf.name.version, lf.name.write_token), lf))
            slices = tuple(FileSlice(partition, fid, k, by_instant.get(k),
                                     tuple(lf for _, lf in sorted(slice_logs.get(k, []), key=lambda x: x[0])))
                           for k in sorted(set(base_instants) | set(slice_logs)))
            groups.append(FileGroup(partition, fid, slices))
    return FileSystemView(config, timeline, tuple(partitions), tuple(groups), pending, tuple(skipped))


def _view_shape(view):
    return (view.partitions, view.skipped_files, [
        (g.partition, g.file_id, [(s.base_instant, s.file_names, s.describe(), s.base_file,
                                   tuple((lf.name, lf.path, lf.size) for lf in s.log_files)) for s in g.slices])
        for g in view.groups])


def _odd_names(table, timeline):
    """Add what real folders hold besides the hot shapes: checksum files, temporary files, an
    uncommitted write, a log of version "01", archive and cdc logs, a second attempt's base file,
    a foreign file, a stray folder; and give data files sizes."""
    import random

    rng = random.Random(6)
    parts = sorted(p for p in os.listdir(table.base_path) if p.startswith("part="))
    for k, part in enumerate(parts):
        folder = os.path.join(table.base_path, part)
        names = sorted(os.listdir(folder))
        for n in names:
            if n.endswith(".parquet") or ".log." in n:
                os.truncate(os.path.join(folder, n), rng.randrange(0, 100_000))
        if k % 3:
            continue      # the other folders keep the hot shapes only (the fast path)
        log = next(n for n in names if ".log." in n)
        fid, instant = log[1:].split("_")[0], log.split("_")[1].split(".")[0]
        base = next(n for n in names if n.endswith(".parquet"))
        extra = [f".{log}.crc", f".{base}.crc", f".{log}.{'0' * 32}.tmp", f".{fid}_{instant}.log.01_0-1-0",
                 f".{fid}_{instant}.archive.1_0-1-0", f".{fid}_{instant}.log.7_0-1-0.cdc",
                 f".{fid}_20991231000000000.log.1_0-1-0", f"{fid}_0-9-9_20991231000000000.parquet",
                 base.replace("_0-1-0_", "_0-1-1_"), "part-0000.parquet", "notes.txt"]
        for n in extra:
            with open(os.path.join(folder, n), "wb") as f:
                f.write(b"x" * rng.randrange(1, 100))
        os.makedirs(os.path.join(folder, ".tmp"), exist_ok=True)


@pytest.fixture(scope="module")
def synthetic_table(tmp_path_factory):
    """The planning benchmark's table shape (tests/benchmarks/synthetic_timeline.py), 300 delta
    commits / ~3k data files, with odd names added to a third of its partitions."""
    from synthetic_timeline import build_timeline   # tests/benchmarks: on sys.path (tests/conftest.py)

    built = build_timeline(tmp_path_factory.mktemp("synthetic") / "t", 300)
    _odd_names(built.table, built.table.timeline())
    return Table.open(built.table.base_path)


@pytest.mark.parametrize("sizes", [True, False])
def test_the_view_equals_the_one_object_per_name_view(synthetic_table, sizes):
    """Every group, slice, name, path, size and skipped file, lazily made or not."""
    from tablesvc.fsview import FileSystemView

    table = synthetic_table
    timeline = table.timeline()
    fast = FileSystemView.build(table.storage, table.base_path, table.config, timeline, sizes=sizes)
    ref = reference_view(table.storage, table.base_path, table.config, timeline, sizes=sizes)
    assert any(g for g in fast.groups)
    # before anything is materialized: names, and the planners' columns
    for g, r in zip(fast.groups, ref.groups):
        for s, rs in zip(g.slices, r.slices):
            assert s.file_names == rs.file_names
            folders, stored, names, instants = s.log_columns()
            assert [f"{f}/{n}" for f, n in zip(folders, stored)] == [lf.path for lf in rs.log_files]
            assert names == [lf.file_name for lf in rs.log_files]
            assert instants == [lf.name.instant for lf in rs.log_files]
    assert _view_shape(fast) == _view_shape(ref)
    assert fast.groups == ref.groups   # dataclass equality sees the made objects
    assert fast.latest_file_slices(table.storage) == ref.latest_file_slices(table.storage)
    assert len(fast.skipped_files) > 0


def test_planners_plan_the_same_with_the_one_object_per_name_view(synthetic_table, monkeypatch):
    """Compaction and clean plans (several policies and budgets) are identical whichever view the
    planners build: the fast path changes no decision."""
    import tablesvc.fsview.view as view_module
    from tablesvc.config import build_config
    from tablesvc.services.clean.planner import plan_clean
    from tablesvc.services.compaction.planner import build_plan

    table = synthetic_table
    configs = [({"hoodie.compaction.target.io": io} if io else {}) for io in (None, "1", "3")] + [
        {"hoodie.cleaner.policy": p, **extra} for p in ("KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS")
        for extra in ({}, {"hoodie.cleaner.commits.retained": "100", "hoodie.cleaner.fileversions.retained": "1"})]

    def plans():
        out = []
        for conf in configs:
            cfg = build_config(conf=conf or None)
            plan, why, summary = build_plan(table, table.timeline(), cfg)
            clean = plan_clean(table, cfg)
            out.append((plan, why, summary, clean))
        return out

    fast = plans()
    assert any(p[0] for p in fast) and any(p[3].files for p in fast)
    monkeypatch.setattr(view_module.FileSystemView, "build", classmethod(
        lambda cls, storage, base, config, timeline, partitions=None, *, sizes=True, only=None:
        reference_view(storage, base, config, timeline, partitions, sizes=sizes, only=only)))
    # (the compaction planner asks for names only, then reads its candidates' sizes itself)
    assert plans() == fast
    # an incremental clean (a previous clean 2 writes before the next ECTR): the partitions written since
    monkeypatch.undo()
    _record_clean(table, table.timeline().completed_writes()[-12])
    fast = plans()
    assert 0 < fast[3][3].partitions_scanned < len(table.file_system_view().partitions)
    monkeypatch.setattr(view_module.FileSystemView, "build", classmethod(
        lambda cls, storage, base, config, timeline, partitions=None, *, sizes=True, only=None:
        reference_view(storage, base, config, timeline, partitions, sizes=sizes, only=only)))
    assert plans() == fast


def _record_clean(table, ectr):
    """A completed clean whose earliest commit to retain is ``ectr`` (nothing deleted)."""
    from timeline.instant import Action
    from timeline.payloads import (ActionInstant, CleanerPlan, CleanMetadata, encode_clean_metadata,
                                   encode_cleaner_plan)

    last = table.timeline().completed_writes()[-1]
    plan = CleanerPlan(policy="KEEP_LATEST_COMMITS",
                       earliest_instant_to_retain=ActionInstant(ectr.timestamp, ectr.action.value, "COMPLETED"),
                       last_completed_commit_timestamp=last.timestamp, file_paths_to_be_deleted_per_partition={},
                       partitions_to_be_deleted=())
    w = table.timeline_writer
    inflight = w.start(w.request(Action.CLEAN, encode_cleaner_plan(plan)))
    w.complete(inflight, encode_clean_metadata(CleanMetadata(
        start_clean_time=inflight.timestamp, time_taken_in_millis=0, total_files_deleted=0,
        earliest_commit_to_retain=ectr.timestamp, partition_metadata={}, last_completed_commit_timestamp=last.timestamp,
        policy="KEEP_LATEST_COMMITS")))


def test_file_sizes_by_name_with_gone_files(tmp_path):
    """One stat per name, relative to the folder; a file deleted since the listing gives None (the
    listing with sizes left such files out); other storages go through Storage.stat."""
    from helpers import ListingCounter
    from tablesvc.fsview.sizes import file_sizes

    for n, size in (("a", 3), ("b", 0), ("c", 7)):
        (tmp_path / n).write_bytes(b"x" * size)
    for storage in (LocalStorage(), ListingCounter()):
        assert file_sizes(storage, str(tmp_path), ["c", "a", "b"]) == [7, 3, 0]
        assert file_sizes(storage, str(tmp_path), ["a", "gone", "c"]) == [3, None, 7]
        assert file_sizes(storage, str(tmp_path / "nowhere"), ["a"]) == [None]


def test_sizes_by_folder_on_threads_match_one_stat_per_file(tmp_path, monkeypatch):
    """Many local files are sized a folder per thread (pyarrow's stat loop, off the GIL): the
    sizes, the order and the None of a gone file are those of ``os.stat`` name by name; a
    storage that is not plain LocalStorage is asked in order, one file after the other, on
    the calling thread."""
    import threading

    import tablesvc.fsview.sizes as sizes

    expected: dict[str, list[int | None]] = {}
    for f in range(6):
        folder = tmp_path / f"part={f}"
        folder.mkdir()
        names = [f"file-{k:03d}" for k in range(40)]
        for k, name in enumerate(names):
            if k % 13 != 5:           # some names are gone by the time they are sized
                (folder / name).write_bytes(b"x" * (f * 100 + k))
        names.reverse()               # asked in an order other than the listing's
        expected[str(folder)] = [os.stat(folder / n).st_size if (folder / n).exists() else None for n in names]
    asked = {folder: [f"file-{k:03d}" for k in reversed(range(40))] for folder in expected}

    used_threads: set[str] = set()
    real = sizes.file_sizes

    def recording(storage, folder, names):
        used_threads.add(threading.current_thread().name)
        return real(storage, folder, names)

    monkeypatch.setattr(sizes, "file_sizes", recording)
    monkeypatch.setattr(sizes, "PARALLEL_MIN_FILES", 1)
    assert sizes.sizes_by_folder(LocalStorage(), asked) == expected
    assert used_threads and all(n.startswith("tablesvc-sizes") for n in used_threads)

    used_threads.clear()
    monkeypatch.setattr(sizes, "PARALLEL_MIN_FILES", 10 ** 9)   # few files: no pool
    assert sizes.sizes_by_folder(LocalStorage(), asked) == expected
    assert used_threads == {threading.current_thread().name}

    class InOrder(LocalStorage):
        """A wrapper (a subclass: not the fast path) that records the files it is asked about."""

        def __init__(self):
            super().__init__()
            self.stats: list[str] = []

        def stat(self, path):
            self.stats.append(path)
            return super().stat(path)

    used_threads.clear()
    monkeypatch.setattr(sizes, "PARALLEL_MIN_FILES", 1)
    storage = InOrder()
    assert sizes.sizes_by_folder(storage, asked) == expected
    assert used_threads == {threading.current_thread().name}
    assert storage.stats == [f"{folder}/{n}" for folder, names in asked.items() for n in names]


def test_a_slice_total_size_is_its_files_bytes_or_unknown_without_sizes():
    """``FileSlice.total_size`` (what task packing weighs a slice by): base + log bytes on disk;
    None when the view was built by name only."""
    from tablesvc.fsview import FileSystemView

    table = Table.open(str(TABLES_DIR / "v6_trips_8i1u"))
    slices = table.latest_file_slices()
    assert slices and any(s.log_files for s in slices)
    for s in slices:
        files = ([s.base_file.path] if s.base_file else []) + [lf.path for lf in s.log_files]
        assert s.total_size == sum(os.path.getsize(f) for f in files)
    names_only = FileSystemView.build(table.storage, table.base_path, table.config, table.timeline(), sizes=False)
    assert all(s.total_size is None for s in names_only.latest_file_slices(table.storage))


def test_a_file_deleted_between_listing_and_sizing_leaves_the_view(tmp_path, monkeypatch):
    """The view lists every partition by name, then sizes every visible file of every partition
    at once (folders on threads for local storage); a file deleted in between is left out, as a
    listing with sizes would have left it out, and every other file keeps its size."""
    import tablesvc.fsview.sizes as sizes
    import tablesvc.fsview.view as view_module
    from tablesvc.fsview import FileSystemView

    table = Table.open(str(copy_table(TABLES_DIR / "v6_trips_8i1u", tmp_path)))
    timeline = table.timeline()
    before = table.latest_file_slices()
    victim = next(s for s in before if s.log_files)
    gone = victim.log_files[-1]
    listing = view_module.discover_partitions(table.storage, table.base_path, table.config.is_partitioned)
    os.remove(gone.path)       # after the listing, before the sizes
    monkeypatch.setattr(view_module, "discover_partitions", lambda *a, **k: listing)
    monkeypatch.setattr(sizes, "PARALLEL_MIN_FILES", 1)           # the threaded path, on few files
    after = FileSystemView.build(table.storage, table.base_path, table.config, timeline).latest_file_slices(
        table.storage)
    by_id = {(s.partition, s.file_id): s for s in after}
    assert len(after) == len(before)
    for s in before:
        got = by_id[(s.partition, s.file_id)]
        expected_logs = [lf.file_name for lf in s.log_files if lf.path != gone.path]
        assert [lf.file_name for lf in got.log_files] == expected_logs
        for f in ([got.base_file] if got.base_file else []) + list(got.log_files):
            assert f.size == os.path.getsize(f.path)


def test_sizes_of_two_partitions_in_one_folder_are_each_their_own(tmp_path):
    """``with_sizes`` sizes every partition's visible files at once, by folder; two partitions a
    caller names with one folder (``p`` and ``p/``) still get the sizes of their own files, and
    a file gone from one of them leaves that one only."""
    from tablesvc.fsview.grouping import VisibleFiles, with_sizes

    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "a.parquet").write_bytes(b"x" * 3)
    (folder / "b.parquet").write_bytes(b"x" * 5)
    first = VisibleFiles("p", str(folder), {"f1": [("a.parquet", "f1", "0-0-0", "1")]}, {})
    second = VisibleFiles("p/", str(folder), {"f2": [("b.parquet", "f2", "0-0-0", "1")],
                                              "f3": [("gone.parquet", "f3", "0-0-0", "1")]}, {})
    assert with_sizes(LocalStorage(), [first, second]) == [{"a.parquet": 3}, {"b.parquet": 5, "gone.parquet": None}]
    assert list(first.bases) == ["f1"] and list(second.bases) == ["f2"]
