"""Invariants every tablesvc table must hold between operations (issue #7), as one function.

``check_invariants(base_path, expected)`` returns human-readable violations (an empty list
means all good); it never raises for a broken table (a check that raises is reported as a
violation).  No pytest fixtures here: the model-based test and the soak run import it.

The invariants and the rule each one is checked by:

1. **snapshot == model** (``expected`` given): the latest snapshot read through hudi-rs (the
   independent oracle), through tablesvc's in-process slice reader (``read_file_slice`` per
   latest file slice) and, with ``spark``, through ``Table.read``, each equal ``expected``
   (record key -> tuple of ``columns``); a key read twice is a violation on its own.  hudi-rs
   is not asked while a v6 table has logs named after a pending compaction: it drops them
   until the compaction completes (a known divergence from Java, hudi-rs-oracle.md P3).
2. **one pending plan per file group**: no (partition, file id) is in two pending compaction,
   log compaction or clustering plans.
3. **needed files exist**: every base and log file a pending plan lists exists; and every file
   the latest slice of a file group needs, derived from the timeline alone (not from a listing,
   which cannot show what is missing), exists: per file group, the base file of the newest
   completed instant that wrote one, and the log files completed instants wrote into that slice
   (v8/v9: completed after the base instant was requested; v6: named after the base instant).
   So a clean that deleted a needed file is caught even when the reader silently falls back to
   an older slice.
4. **no orphans** (``recovered=True``): every data file in a partition belongs to an instant:

   * a base file, or a v8/v9 log file, named with instant ``T``: ``T`` is pending (a running or
     failed instant: the recovery's to remove), or ``T`` is completed *and* the file is in
     ``T``'s commit metadata.  A file of an instant that is not on the timeline (rolled back,
     or never requested) is an orphan, and so is an extra file of a completed instant (a
     failed task attempt that ``remove_orphans`` missed);
   * a v6 log file (named after its slice's base instant): every valid block's instant is
     completed, pending, or the target of a rollback command block in the same slice, and a
     file is never made of rolled-back blocks only (the rollback deletes those);
   * hidden temporary copies (``storage.local.temporary_name_for``, a create killed before its link);
   * marker folders and heartbeat files of instants that are not pending.

   ``recovered=False`` (right after a crash, before recovery) keeps only the rules a crash
   cannot break: files of pending instants and leftovers are then expected.
5. **instant times** (always): no two instants share a timestamp; a completion time is later
   than its request time; with a ``history`` (``InstantHistory``, kept by the caller across
   calls) every timestamp or completion time not seen before is later than every time seen
   before, so a rolled-back instant's time is never reused.
6. **metadata table == storage** (a table whose ``hoodie.table.metadata.partitions`` lists
   ``files``; after every step, crashes included): the latest file slices tablesvc lists through
   the metadata table equal those of a storage listing (the metadata table switched off: only
   completed instants' files count) and those hudi-rs lists (through the metadata table, v8+),
   file names and sizes; and every file the metadata table lists exists in storage with that size.
   Version 6 names a log file by its slice's base instant, so a storage listing also holds the log
   files of a write that has not completed (killed, not yet rolled back): those whose every block
   is a pending instant's are left out of the storage side (Hudi 0.15's metadata table lists a
   write's files at its commit, and a rollback's at the rollback).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable

from timeline.storage import join


MAX_REPORTED = 8          # differences listed per check: enough to see the pattern
_STATS_CACHE: dict[tuple[str, int], list] = {}   # (completed file, size) -> its write stats
PARTITION_METAFILE = ".hoodie_partition_metadata"


@dataclass
class InstantHistory:
    """Every instant time (request and completion) seen by earlier checks of one table."""

    seen: set[str] = field(default_factory=set)
    latest: str = ""

    def check(self, timeline) -> list[str]:
        out = []
        times = {}
        for i in timeline.instants:
            times[i.timestamp] = "requested"
            if i.completion_time:
                times[i.completion_time] = "completion"
        new = sorted(t for t in times if t not in self.seen)
        for t in new:
            if self.latest and t <= self.latest:
                out.append(f"instant times: new {times[t]} time {t} is not later than {self.latest}, the latest "
                           "time seen before (times must strictly increase; a rolled-back time is never reused)")
        self.seen.update(new)
        if new:
            self.latest = max(self.latest, new[-1])
        return out


def check_invariants(base_path: str, expected: dict | None = None, *, key_field: str = "uuid",
                     columns: tuple[str, ...] = ("ts", "fare"), spark=None, history: InstantHistory | None = None,
                     recovered: bool = True, storage_options: dict[str, str] | None = None) -> list[str]:
    """Every violation of the invariants (module doc) by the table at ``base_path``; [] if none.
    ``storage_options``: for a table on an object store (tablesvc and hudi-rs both read it there)."""
    from tablesvc.api import Table

    out: list[str] = []
    try:
        table = Table.open(base_path, options=storage_options)
        timeline = table.timeline()
    except Exception as e:          # a table that cannot be opened violates everything
        return [f"the table cannot be opened: {type(e).__name__}: {e}"]

    def run(name: str, check: Callable[[], Iterable[str]]) -> None:
        try:
            out.extend(check())
        except Exception as e:
            out.append(f"{name}: the check raised {type(e).__name__}: {e}")

    from tablesvc.metadata import lists_files

    with_mdt = lists_files(table.config) and table.metadata_enabled
    blind = _hudi_rs_blind_spot(table, timeline)
    rs = None
    if with_mdt and not blind:      # one hudi-rs handle for its rows and its slices (one listing)
        from oracles.hudi_rs import hudi_table

        rs = hudi_table(base_path, storage_options)
    if expected is not None:
        if not blind:
            run("hudi-rs snapshot", lambda: _compare(
                "hudi-rs", _hudi_rs_rows(base_path, key_field, columns, rs, storage_options), expected))
        run("tablesvc snapshot", lambda: _compare("tablesvc reader", _tablesvc_rows(table, key_field, columns),
                                                  expected))
        if spark is not None:
            run("spark snapshot", lambda: _compare("tablesvc Spark read",
                                                   _spark_rows(table, spark, key_field, columns), expected))
    run("pending plans", lambda: _pending_plan_violations(table, timeline))
    run("needed files", lambda: _needed_file_violations(table, timeline))
    run("orphans", lambda: _orphan_violations(table, timeline, recovered))
    run("instant times", lambda: _instant_time_violations(timeline, history))
    if with_mdt:
        run("metadata table", lambda: _metadata_table_violations(table, timeline, rs))
    return out


# -- 6. metadata table == storage --------------------------------------------------------------------
def _without_pending_v6_logs(table, timeline, s: tuple) -> tuple:
    """A v6 slice tuple without the log files whose every block an uncompleted instant wrote."""
    from tablesvc.logformat import HeaderKey, read_log_file

    partition, file_id, base, logs, base_size, log_sizes = s
    folder = join(table.base_path, partition) if partition else table.base_path
    keep = []
    for name, size in zip(logs, log_sizes):
        try:
            blocks = read_log_file(table.storage, join(folder, name)).blocks
        except FileNotFoundError:
            continue
        times = {dict(b.header).get(HeaderKey.INSTANT_TIME) for b in blocks}
        archived = [t for t in times if t and timeline.start and t < timeline.start]
        if not blocks or archived or any(t and timeline.is_completed(t) for t in times) or any(
                dict(b.header).get(HeaderKey.TARGET_INSTANT_TIME) for b in blocks):
            keep.append((name, size))
    return (partition, file_id, base, tuple(n for n, _ in keep), base_size, tuple(z for _, z in keep))


def _metadata_table_violations(table, timeline, rs) -> list[str]:
    """``rs``: hudi-rs's handle on the table (None: hudi-rs is not asked, ``_hudi_rs_blind_spot``)."""
    from oracles.hudi_rs import read_options
    from tablesvc.fsview.view import FileSystemView
    from tablesvc.metadata import MetadataFileListing

    def slices(listing) -> list[tuple]:
        view = FileSystemView.build(table.storage, table.base_path, table.config, timeline, listing=listing)
        return sorted((s.partition, s.file_id, s.base_file.file_name if s.base_file else None,
                       tuple(lf.file_name for lf in s.log_files), s.base_file.size if s.base_file else None,
                       tuple(lf.size for lf in s.log_files)) for s in view.latest_file_slices(table.storage))

    out: list[str] = []
    mdt = MetadataFileListing(table.storage, table.base_path, timeline)      # read once
    through, listed = slices(mdt), slices(None)
    if table.config.version < 8:
        listed = sorted(_without_pending_v6_logs(table, timeline, s) for s in listed)
    if through != listed:
        only_mdt, only_storage = sorted(set(through) - set(listed)), sorted(set(listed) - set(through))
        out += [f"metadata table: slice {s} listed through the metadata table, not from storage"
                for s in only_mdt[:MAX_REPORTED]]
        out += [f"metadata table: slice {s} listed from storage, not through the metadata table"
                for s in only_storage[:MAX_REPORTED]]
    if rs is not None:
        rs = sorted((s.partition_path, s.file_id, s.base_file_name or None, tuple(s.log_file_names),
                     s.base_file_size if s.base_file_name else None, tuple(s.log_file_sizes))
                    for s in rs.get_file_slices(read_options()))
        if table.config.version < 8:        # hudi-rs lists v6 tables from storage (its reader skips pending blocks)
            rs = sorted(_without_pending_v6_logs(table, timeline, s) for s in rs)
        if rs != listed:
            out += [f"metadata table: hudi-rs lists slice {s}, storage does not"
                    for s in sorted(set(rs) - set(listed))[:MAX_REPORTED]]
            out += [f"metadata table: hudi-rs does not list slice {s} that storage has"
                    for s in sorted(set(listed) - set(rs))[:MAX_REPORTED]]
    from timeline.time_travel import pending_clean_plans

    # a killed clean has deleted files its commit (which updates the metadata table) has not recorded
    cleaning = {path.rsplit("/", 1)[-1] for _, plan in pending_clean_plans(table.storage, timeline)
                for paths in plan.files_to_delete().values() for path in paths}
    for partition, files in {p: mdt.files(p) for p in mdt.partitions()}.items():
        folder = join(table.base_path, partition) if partition else table.base_path
        for name, size in sorted(files.items())[:1000]:
            try:
                actual = table.storage.stat(join(folder, name)).size
            except FileNotFoundError:
                if name in cleaning:
                    continue
                out.append(f"metadata table: lists {partition}/{name} ({size} bytes), which storage lacks")
                continue
            if actual != size:
                out.append(f"metadata table: lists {partition}/{name} at {size} bytes, storage has {actual}")
    return out[:3 * MAX_REPORTED]


# -- 1. snapshot == model --------------------------------------------------------------------------
def _keyed(rows: list[dict], key_field: str, columns: tuple[str, ...]) -> tuple[dict, list[str]]:
    counts = Counter(r[key_field] for r in rows)
    twice = sorted(k for k, n in counts.items() if n > 1)
    return {r[key_field]: tuple(r[c] for c in columns) for r in rows}, twice


def _hudi_rs_rows(base_path: str, key_field: str, columns: tuple[str, ...], handle=None, storage_options=None):
    from oracles.hudi_rs import read_options, read_rows

    if handle is not None:
        rows = [r for b in handle.read(read_options()) for r in b.to_pylist()]
        return _keyed(rows, key_field, columns)
    return _keyed(read_rows(base_path, storage_options=storage_options), key_field, columns)


def _hudi_rs_blind_spot(table, timeline) -> bool:
    """hudi-rs drops v6 log files named after a pending compaction until it completes (a known
    divergence from Java: hudi-rs-oracle.md, probe P3); its snapshot is not compared then."""
    from tablesvc.fsview.names import LogFileName, looks_like_log_file
    from tablesvc.fsview.partitions import list_partitions
    from timeline.instant import TimelineLayout
    from timeline.storage import join

    pending = {i.timestamp for i in timeline.pending_compactions()}
    if table.config.layout is not TimelineLayout.V1 or not pending:
        return False
    for partition in list_partitions(table.storage, table.base_path, table.config.is_partitioned):
        for name in table.storage.list_names(join(table.base_path, partition) if partition else table.base_path):
            if looks_like_log_file(name) and not name.endswith(".tmp") and LogFileName.parse(name).instant in pending:
                return True
    return False


def _tablesvc_rows(table, key_field: str, columns: tuple[str, ...]):
    from tablesvc.merge import ReadContext, SliceSpec, read_file_slice

    ctx = ReadContext.for_table(table)
    parts = [read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx) for s in table.latest_file_slices()]
    rows = [r for p in parts for r in p.select([key_field, *columns]).to_pylist()]
    return _keyed(rows, key_field, columns)


def _spark_rows(table, spark, key_field: str, columns: tuple[str, ...]):
    rows = [r.asDict() for r in table.read(spark=spark).select(key_field, *columns).collect()]
    return _keyed(rows, key_field, columns)


def _compare(reader: str, got: tuple[dict, list[str]], expected: dict) -> list[str]:
    rows, twice = got
    out = [f"{reader}: key {k} is read more than once" for k in twice[:MAX_REPORTED]]
    missing = sorted(set(expected) - set(rows))
    extra = sorted(set(rows) - set(expected))
    differ = sorted(k for k in set(rows) & set(expected) if rows[k] != tuple(expected[k]))
    out += [f"{reader}: key {k} is missing (model: {expected[k]})" for k in missing[:MAX_REPORTED]]
    out += [f"{reader}: key {k} should not be there (read {rows[k]})" for k in extra[:MAX_REPORTED]]
    out += [f"{reader}: key {k} reads {rows[k]}, the model says {tuple(expected[k])}" for k in differ[:MAX_REPORTED]]
    hidden = len(missing) + len(extra) + len(differ) - sum(min(len(x), MAX_REPORTED) for x in (missing, extra, differ))
    if hidden:
        out.append(f"{reader}: {hidden} more difference(s) from the model")
    return out


def _write_stats(table, timeline, instant) -> list:
    """The write stats of a completed instant (decoded once: a completed file never changes;
    its size is part of the key in case one is rolled back and completed again)."""
    path = timeline.path_of(instant)
    key = (path, table.storage.stat(path).size)
    if key not in _STATS_CACHE:
        md = timeline.commit_metadata(table.storage, instant)
        _STATS_CACHE[key] = list(md.write_stats()) if md is not None else []
    return _STATS_CACHE[key]


# -- 2. and part of 3: pending plans ---------------------------------------------------------------
def _pending_plans(table, timeline):
    """(instant, operations) of every pending compaction, log compaction and clustering plan."""
    from timeline.instant import Action

    for instant in timeline.pending():
        if timeline.origin_action(instant) in (Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING):
            yield instant, tuple(timeline.plan_of(table.storage, instant).operations or ())


def _pending_plan_violations(table, timeline) -> list[str]:
    from timeline.storage import join

    out = []
    owners: dict[tuple[str, str], list[str]] = defaultdict(list)
    for instant, ops in _pending_plans(table, timeline):
        for op in ops:
            partition = op.partition_path or ""
            owners[(partition, op.file_id)].append(f"{instant.timestamp} ({timeline.origin_action(instant).value})")
            names = ([op.data_file_path] if op.data_file_path else []) + list(op.delta_file_paths or ())
            for name in names:
                path = join(table.base_path, partition, name.rsplit("/", 1)[-1])
                if not table.storage.exists(path):
                    out.append(f"pending plan {instant.timestamp} needs {_rel(table, path)}, which is gone")
    for (partition, file_id), plans in sorted(owners.items()):
        if len(plans) > 1:
            out.append(f"file group {partition}/{file_id} is in {len(plans)} pending plans: {', '.join(plans)}")
    return out


# -- 3. files the latest slices need ---------------------------------------------------------------
def _needed_file_violations(table, timeline) -> list[str]:
    from tablesvc.fsview.names import BaseFileName, LogFileName
    from timeline.instant import TimelineLayout
    from timeline.storage import join

    v6 = table.config.layout is TimelineLayout.V1
    completion = timeline.completion_times()
    bases: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)     # group -> (instant, path)
    logs: dict[tuple[str, str], list[tuple[str, str, str]]] = defaultdict(list)  # group -> (instant, done, path)
    for instant in timeline.completed_writes():
        for stat in _write_stats(table, timeline, instant):
            if not stat.path:
                continue
            group = (stat.partition_path or "", stat.file_id)
            name = stat.path.rsplit("/", 1)[-1]
            if name.startswith("."):
                LogFileName.parse(name)
                logs[group].append((instant.timestamp, completion.get(instant.timestamp, instant.timestamp),
                                    stat.path))
            else:
                BaseFileName.parse(name)
                bases[group].append((instant.timestamp, stat.path))
    out = []
    for group in sorted(set(bases) | set(logs)):
        base = max(bases.get(group, ()), default=None)
        needed = [(base[0], base[1])] if base else []
        for written, done, path in logs.get(group, ()):
            name_instant = LogFileName.parse(path.rsplit("/", 1)[-1]).instant
            if base is None or (name_instant == base[0] if v6 else done > base[0]):
                needed.append((written, path))
        for written, path in needed:
            if not table.storage.exists(join(table.base_path, path)):
                out.append(f"{path} (written by {written}) is gone, but the latest slice of file group "
                           f"{group[0]}/{group[1]} needs it")
    return out


# -- 4. orphans ------------------------------------------------------------------------------------
def _orphan_violations(table, timeline, recovered: bool) -> list[str]:
    from tablesvc.errors import FileNameError
    from tablesvc.fsview.names import BaseFileName, LogFileName, looks_like_log_file
    from tablesvc.fsview.partitions import list_partitions
    from tablesvc.storage.local import temporary_copy_of
    from timeline.instant import Action, TimelineLayout
    from timeline.storage import join

    v6 = table.config.layout is TimelineLayout.V1
    state: dict[str, object] = {}
    for i in timeline.instants:
        if i.action is not Action.ROLLBACK:
            state[i.timestamp] = i
    committed_paths: dict[str, set[str]] = {}

    def stats_of(instant) -> set[str]:
        if instant.timestamp not in committed_paths:
            committed_paths[instant.timestamp] = {s.path for s in _write_stats(table, timeline, instant)}
        return committed_paths[instant.timestamp]

    def judge(t: str, rel: str) -> str | None:
        """Why the file named with instant ``t`` is an orphan, or None."""
        instant = state.get(t)
        if instant is None:
            start = timeline.start       # the first instant on the active timeline
            if start is not None and t < start:
                return None      # archived: older than the active timeline
            return f"instant {t} is not on the timeline (rolled back, or never requested)"
        if instant.is_pending or not recovered:
            return None
        if rel not in stats_of(instant):
            return f"instant {t} is completed but its commit metadata does not list the file"
        return None

    out = []
    for partition in list_partitions(table.storage, table.base_path, table.config.is_partitioned):
        folder = join(table.base_path, partition) if partition else table.base_path
        slices_v6: dict[tuple[str, str], list] = defaultdict(list)
        for name in table.storage.list_names(folder):
            rel = f"{partition}/{name}" if partition else name
            why = None
            if temporary_copy_of(name) is not None:
                why = "a temporary copy of a create that never finished" if recovered else None
            elif name == PARTITION_METAFILE:
                continue
            elif looks_like_log_file(name):
                try:
                    ln = LogFileName.parse(name)
                except FileNameError:
                    continue
                if v6:
                    slices_v6[(ln.file_id, ln.instant)].append((rel, join(folder, name)))
                    continue
                why = judge(ln.instant, rel)
            elif not name.startswith("."):
                try:
                    bn = BaseFileName.parse(name)
                except FileNameError:
                    continue
                why = judge(bn.instant, rel)
            if why:
                out.append(f"orphan {rel}: {why}")
        for (_file_id, _base), files in sorted(slices_v6.items()):
            out.extend(_v6_slice_orphans(table, files, state, recovered))
    if recovered:
        out.extend(_leftover_violations(table, timeline))
    return out


def _v6_slice_orphans(table, files: list[tuple[str, str]], state: dict, recovered: bool) -> list[str]:
    """v6 log files of one slice: judged by their blocks (the names carry the slice, not the write)."""
    from tablesvc.logformat import read_log_file

    contents = [(rel, read_log_file(table.storage, path)) for rel, path in files]
    rolled_back = {b.target_instant_time for _rel, c in contents for b in c.blocks if b.is_rollback}
    out = []
    for rel, c in contents:
        data = [b for b in c.blocks if not b.is_rollback]
        if not recovered:
            continue
        unknown = sorted({b.instant_time for b in data if b.instant_time not in state
                          and b.instant_time not in rolled_back})
        if unknown:
            out.append(f"orphan {rel}: blocks of instant(s) {', '.join(unknown)}, which are neither on the timeline "
                       "nor rolled back by a command block of the slice")
        elif data and all(b.instant_time in rolled_back and b.instant_time not in state for b in data) \
                and not any(b.is_rollback for b in c.blocks):
            out.append(f"orphan {rel}: every block belongs to a rolled-back instant (the rollback deletes such files)")
    return out


def _leftover_violations(table, timeline) -> list[str]:
    from tablesvc.write.markers import MARKER_ROOT
    from timeline.heartbeat import HEARTBEAT_DIR
    from timeline.storage import join

    pending = {i.timestamp for i in timeline.pending()}
    out = []
    for info in table.storage.list_dir(join(table.base_path, MARKER_ROOT)):
        if info.is_dir and info.name not in pending:
            out.append(f"leftover marker folder {MARKER_ROOT}/{info.name}: instant {info.name} is not pending")
    for name in table.storage.list_names(join(table.base_path, HEARTBEAT_DIR)):
        if name.isdigit() and name not in pending:
            out.append(f"leftover heartbeat {HEARTBEAT_DIR}/{name}: instant {name} is not pending")
    return out


# -- 5. instant times ------------------------------------------------------------------------------
def _instant_time_violations(timeline, history: InstantHistory | None) -> list[str]:
    out = []
    by_time: dict[str, list[str]] = defaultdict(list)
    for i in timeline.instants:
        by_time[i.timestamp].append(i.action.value)
        if i.completion_time and i.completion_time <= i.timestamp:
            out.append(f"instant {i.timestamp} ({i.action.value}) completed at {i.completion_time}, not after it "
                       "was requested")
    for t, actions in sorted(by_time.items()):
        if len(actions) > 1:
            out.append(f"instant time {t} is used by {len(actions)} instants: {', '.join(actions)}")
    if history is not None:
        out.extend(history.check(timeline))
    return out


def _rel(table, path: str) -> str:
    base = table.base_path.rstrip("/") + "/"
    return path[len(base):] if path.startswith(base) else path


__all__ = ["InstantHistory", "check_invariants"]
