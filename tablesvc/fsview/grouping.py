"""One partition's file names -> its file groups and slices (the rules are in view.py's docstring).

This runs once per data file of the table (100k at the issue #6 scale, where building the view
was 82-85% of planning time), so it keeps Python work per file to a minimum:

* log names are cut into their fields a whole folder at a time (``_hot_logs``: joined, split,
  every field kind checked at once) when they all have the shape Hudi writes; any other folder
  (odd names, archive or cdc logs, versions like ``01``, checksum files) takes the per-name loop
  with the checked parsers (``_visible_one_by_one``), so results and skipped files are the same;
* no ``stat`` per file (sizes only when asked for, and only of visible files);
* a file group's logs are parallel lists (``LogColumns``), ordered and cut into slices with
  ``sorted``/``map``/``bisect`` (C loops), not one tuple or object per file;
* a slice holds those raw lists until a caller reads its ``base_file`` / ``log_files``; only then
  are the frozen objects made (``materialize_*``, model.py).  The clean planner needs the names of the
  slices it deletes, the compaction planner names and instants of the latest slices: neither
  makes an object per data file.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import groupby
from operator import methodcaller
from typing import Callable

from tablesvc.errors import FileNameError
from tablesvc.fsview.model import FileGroup, FileSlice, _base_name, _new, _set
from tablesvc.fsview.names import PARTITION_METAFILE, BaseFileName, LogFileName
from tablesvc.fsview.sizes import sizes_by_folder
from timeline.active import Timeline
from timeline.storage import Storage

# A visible base file while grouping: (stored name, file id, write token, instant), with the
# BaseFileName appended when its spelling differs from the stored name (never, in practice).
_LOG_ONE = re.compile(r"\.([A-Za-z0-9-]+)_(\d{14}(?:\d{3})?)\.log\.([1-9][0-9]*)_(\d+-\d+-\d+)").fullmatch
_LOG_FORMAT = ".{}_{}.log.{}_{}".format
_NOT_FID_CHARS = {ord(c): None for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-"}
_INSTANT_LENGTHS = frozenset({14, 17})
_dashes = methodcaller("count", "-")
_MARKERS = (PARTITION_METAFILE, f"{PARTITION_METAFILE}.parquet")


class LogColumns:
    """Log files as parallel lists: stored names, instants, versions (digit strings; ints where
    the checked parser read them), write tokens, and the parsed names (None: every file has the
    hot shape, so its stored name is exactly how the parsed name spells it)."""

    __slots__ = ("names", "instants", "versions", "tokens", "parsed")

    def __init__(self, names: list[str], instants: list[str], versions: list, tokens: list[str],
                 parsed: list[LogFileName | None] | None = None):
        self.names, self.instants, self.versions, self.tokens, self.parsed = names, instants, versions, tokens, parsed

    def __len__(self) -> int:
        return len(self.names)

    def take(self, order) -> "LogColumns":
        """The files at the indexes ``order`` (a list or a slice), in that order."""
        if isinstance(order, slice):
            p = self.parsed
            return LogColumns(self.names[order], self.instants[order], self.versions[order], self.tokens[order],
                              None if p is None else p[order])
        pick = [*map(self.names.__getitem__, order)], [*map(self.instants.__getitem__, order)], \
            [*map(self.versions.__getitem__, order)], [*map(self.tokens.__getitem__, order)]
        return LogColumns(*pick, None if self.parsed is None else [*map(self.parsed.__getitem__, order)])

    def file_names(self) -> list[str]:
        """Each file's name as ``LogFileName.name`` spells it."""
        if self.parsed is None:
            return self.names
        return [n if p is None else p.name for n, p in zip(self.names, self.parsed)]

    @staticmethod
    def of_entries(entries: list[tuple]) -> "LogColumns":
        """From (stored name, instant, version, token, LogFileName or None) tuples."""
        names, instants, versions, tokens, parsed = map(list, zip(*entries))
        return LogColumns(names, instants, versions, tokens, None if parsed.count(None) == len(parsed) else parsed)


@dataclass(frozen=True)
class GroupingRules:
    """What the view decides per file, fixed for one build."""

    timeline: Timeline
    committed: dict            # instant -> committed or archived (view._Committed)
    v6_pending: frozenset[str]
    base_suffix: str
    v1: bool
    completion: dict[str, str]     # of the active timeline; archived instants are added as asked
    # v8+: instants -> their completion times as the LSM history holds them (``view._Archived``)
    archived: Callable[[set[str]], dict[str, str]] | None = None


@dataclass(frozen=True)
class VisibleFiles:
    """One partition folder's visible data files, per file id (``visible_files``), before grouping
    (``with_sizes`` may still leave out, in the dicts, files gone since the listing)."""

    partition: str
    folder: str
    bases: dict[str, list[tuple]]
    logs: dict[str, LogColumns]

    def stored_names(self) -> list[str]:
        """Every visible file's stored name (what ``with_sizes`` asks sizes for)."""
        return [e[0] for same in self.bases.values() for e in same] + \
            [n for cols in self.logs.values() for n in cols.names]


def visible_files(partition: str, folder: str, names: list[str], rules: GroupingRules,
                  skipped: list[str]) -> VisibleFiles:
    """The visible data files of one partition folder listed as ``names``."""
    dotted = _dotted(names)
    logs = _hot_logs(names, dotted, rules)
    if logs is None:
        bases, logs = _visible_one_by_one(folder, names, rules, skipped)
    else:   # every log name had the hot shape; the few other names one by one
        others = names[:dotted[0]] + names[dotted[1]:] if dotted else [n for n in names if n[:1] != "."]
        bases, _ = _visible_one_by_one(folder, others, rules, skipped)
    return VisibleFiles(partition, folder, bases, logs)


def file_groups(visible: VisibleFiles, rules: GroupingRules, size_of: dict | None) -> list["FileGroup"]:
    """The file groups of one partition, ordered by file id; ``size_of``: stored name -> size of
    every visible file (``with_sizes``), or None for a view without sizes."""
    bases, logs = visible.bases, visible.logs
    return [_group(visible.partition, visible.folder, fid, bases.get(fid), logs.get(fid), rules, size_of)
            for fid in sorted(bases.keys() | logs.keys())]


def with_sizes(storage: Storage, partitions: list[VisibleFiles]) -> list[dict]:
    """Stored name -> size of every visible file, per partition (in order), all folders sized at
    once (``sizes_by_folder``: on threads for many local files).  A file gone since the listing
    is dropped from its partition's ``bases`` / ``logs`` (a listing with sizes never showed it)."""
    names: dict[str, list[str]] = {}
    for v in partitions:
        names.setdefault(v.folder, []).extend(v.stored_names())
    found = sizes_by_folder(storage, names)
    one_each = len(names) == len(partitions)   # the usual case; a caller may name one folder twice
    by_folder = None if one_each else {f: dict(zip(ns, found[f])) for f, ns in names.items()}
    out = []
    for v in partitions:
        if one_each:
            size_of = dict(zip(names[v.folder], found[v.folder]))
        else:
            known = by_folder[v.folder]   # type: ignore[index]
            size_of = {n: known[n] for n in v.stored_names()}
        if None in size_of.values():
            _drop_gone(v, size_of)
        out.append(size_of)
    return out


def _dotted(names: list[str]) -> tuple[int, int] | None:
    """Where the names starting with "." lie in ``names`` when it is sorted (as listings are): one
    block, found by bisection ("/" follows "." and is in no file name); None when not sorted."""
    if names != sorted(names):    # C compares: a sorted list is one run
        return None
    return bisect_left(names, "."), bisect_left(names, "/")


def _hot_logs(names: list[str], dotted: tuple[int, int] | None, rules: GroupingRules) -> dict[str, LogColumns] | None:
    """The visible log files of one folder per file id, in listing order, as
    ``_visible_one_by_one`` finds them, when every name ``looks_like_log_file`` accepts has the
    hot shape (``_LOG_ONE``); else None.

    Rather than one pattern match per name (~2 µs each here), the names are cut into their four
    fields for the whole folder at once (joined, separators replaced, one split) and each field
    kind is checked at once (``isdecimal`` over all instants joined, ...).  Rebuilding every name
    from its fields proves the cut: name == .{fid}_{instant}.log.{version}_{token} with fields
    free of "_" and newlines, and fields of the shape's character classes, is exactly a
    ``_LOG_ONE`` match with these groups."""
    cut = None
    if dotted is not None:
        # First guess: every dotted name but the partition marker is a log (the usual folder); if
        # they all pass the checks below, they are exactly the names looks_like_log_file accepts.
        guess = names[dotted[0]:dotted[1]]
        for marker in _MARKERS:
            if marker in guess:
                guess.remove(marker)
        cut = _cut_logs(guess)
    if cut is None:
        logish = [n for n in names if n[:1] == "." and ".log." in n and not n.endswith(".tmp")]
        cut = _cut_logs(logish)
        if cut is None:
            return None
    logish, fids, instants, versions, tokens = cut
    if not logish:
        return {}
    return _hot_columns(logish, fids, instants, versions, tokens, rules)


def _cut_logs(logish: list[str]) -> tuple[list[str], list[str], list[str], list[str], list[str]] | None:
    """(names, file ids, instants, versions, write tokens) when every name of ``logish`` has the
    hot log shape; else None (``_hot_logs``)."""
    if not logish:
        return logish, [], [], [], []
    count = len(logish)
    fields = "\n".join(logish)[1:].replace("\n.", "\n").replace(".log.", "_").replace("\n", "_").split("_")
    if len(fields) != 4 * count:
        return None
    fids, instants, versions, tokens = fields[0::4], fields[1::4], fields[2::4], fields[3::4]
    if list(map(_LOG_FORMAT, fids, instants, versions, tokens)) != logish:
        return None
    all_versions, all_tokens = "\n".join(versions), "\n".join(tokens)
    if not (all(fids) and not "".join(fids).translate(_NOT_FID_CHARS)                      # [A-Za-z0-9-]+
            and set(map(len, instants)) <= _INSTANT_LENGTHS and "".join(instants).isdecimal()  # \d{14}(\d{3})?
            and all(versions) and all_versions.isascii() and all_versions.replace("\n", "").isdecimal()
            and all_versions[0] != "0" and "\n0" not in all_versions                        # [1-9][0-9]*
            and set(map(_dashes, tokens)) == {2} and all_tokens.replace("-", "").replace("\n", "").isdecimal()
            and all_tokens[0] != "-" and all_tokens[-1] != "-" and "--" not in all_tokens     # \d+-\d+-\d+
            and "\n-" not in all_tokens and "-\n" not in all_tokens):
        return None
    return logish, fids, instants, versions, tokens


def _hot_columns(logish: list[str], fids: list[str], instants: list[str], versions: list[str], tokens: list[str],
                 rules: GroupingRules) -> dict[str, LogColumns]:
    """The cut log names that are visible, per file id, in listing order."""
    committed, v6_pending = rules.committed, rules.v6_pending
    hidden = {i for i in set(instants) if not (committed[i] or i in v6_pending)}
    if hidden:
        keep = [k for k, i in enumerate(instants) if i not in hidden]
        logish, fids, instants, versions, tokens = ([*map(col.__getitem__, keep)]
                                                    for col in (logish, fids, instants, versions, tokens))
    out: dict[str, LogColumns] = {}
    start = 0
    # a sorted listing holds each file id's names together: one run per file id, cut in C
    for fid, run in groupby(fids):
        end = start + len(list(run))
        cols = LogColumns(logish[start:end], instants[start:end], versions[start:end], tokens[start:end])
        known = out.get(fid)
        out[fid] = cols if known is None else _joined(known, cols)
        start = end
    return out


def _joined(a: LogColumns, b: LogColumns) -> LogColumns:
    """``a``'s files then ``b``'s (one file id in two runs: an unsorted listing)."""
    parsed = None if a.parsed is None and b.parsed is None else \
        (a.parsed or [None] * len(a)) + (b.parsed or [None] * len(b))
    return LogColumns(a.names + b.names, a.instants + b.instants, a.versions + b.versions, a.tokens + b.tokens,
                      parsed)


def _visible_one_by_one(folder: str, names: list[str], rules: GroupingRules,
                        skipped: list[str]) -> tuple[dict[str, list[tuple]], dict[str, LogColumns]]:
    """Per file id, the visible base files (tuples, see above) and log files of one folder, in
    listing order; names that look like data files but do not parse go to ``skipped``."""
    committed, v6_pending, base_suffix = rules.committed, rules.v6_pending, rules.base_suffix
    bases: dict[str, list[tuple]] = {}
    logs: dict[str, list[tuple]] = {}
    for name in names:
        if name[:1] == ".":
            if ".log." not in name or name.endswith(".tmp"):       # looks_like_log_file
                continue
            m = _LOG_ONE(name)
            if m is not None:
                fid, instant, version, token = m.groups()
                if committed[instant] or instant in v6_pending:
                    logs.setdefault(fid, []).append((name, instant, version, token, None))
                continue
            try:
                ln = LogFileName.parse(name)
            except FileNameError:
                skipped.append(f"{folder}/{name}")
                continue
            if ln.extension == "log" and not ln.cdc and (committed[ln.instant] or ln.instant in v6_pending):
                logs.setdefault(ln.file_id, []).append((name, ln.instant, ln.version, ln.write_token, ln))
        elif name.endswith(base_suffix):
            try:
                bn = BaseFileName.parse(name)
            except FileNameError:
                skipped.append(f"{folder}/{name}")
                continue
            if committed[bn.instant]:
                entry = ((name, bn.file_id, bn.write_token, bn.instant) if bn.name == name
                         else (name, bn.file_id, bn.write_token, bn.instant, bn))
                bases.setdefault(bn.file_id, []).append(entry)
    return bases, {fid: LogColumns.of_entries(entries) for fid, entries in logs.items()}


def _drop_gone(visible: VisibleFiles, size_of: dict) -> None:
    """Leaves out of ``visible`` the files whose size is None (gone since the listing)."""
    bases, logs = visible.bases, visible.logs
    for fid in list(bases):
        bases[fid] = [e for e in bases[fid] if size_of[e[0]] is not None]
        if not bases[fid]:
            del bases[fid]
    for fid in list(logs):
        cols = logs[fid]
        cols = cols.take([k for k, n in enumerate(cols.names) if size_of[n] is not None])
        if len(cols):
            logs[fid] = cols
        else:
            del logs[fid]


def _group(partition: str, folder: str, fid: str, bases: list | None, logs: LogColumns | None,
           rules: GroupingRules, size_of: dict | None) -> "FileGroup":
    by_instant: dict[str, tuple] = {}
    if bases:
        # Two base files for one instant only exist after a failed task attempt; keep the first
        # by name deterministically (rollback/markers clean the other up).
        for e in (sorted(bases, key=_base_name) if len(bases) > 1 else bases):
            by_instant.setdefault(e[3], e)
    base_instants = sorted(by_instant)
    slice_logs = _slice_logs(logs, base_instants, rules) if logs else {}
    keys = sorted(by_instant.keys() | slice_logs.keys()) if slice_logs else base_instants
    slices = []
    for k in keys:
        s = _new(FileSlice)
        # the fields the generated __init__ sets, but base_file / log_files left to materialize_*()
        _set(s, "__dict__", {"partition": partition, "file_id": fid, "base_instant": k,
                             "_raw": (folder, by_instant.get(k), slice_logs.get(k), size_of)})
        slices.append(s)
    return FileGroup(partition, fid, tuple(slices))


def _slice_logs(logs: LogColumns, base_instants: list[str], rules: GroupingRules) -> dict[str, LogColumns]:
    """Slice key -> the logs of one file group that belong to it, in slice order.

    A log's order key is (instant (v6) or completion time (v8+), version, write token); it joins
    the slice named by its instant (v6), or (v8+) the slice with the greatest base instant at or
    before its completion time; the logs completed before every base instant share one slice,
    keyed by the earliest of their instants.  All logs
    are sorted once by order key (an index permutation: ``sorted``/``map``, C loops, and no tuple
    kept per file); a slice's logs are then one run of that order, cut where the base instants
    fall.  The sort is stable, so equal keys keep listing order, as the per-file loop did."""
    instants = logs.instants
    if rules.v1:
        firsts = instants
    else:
        completion = rules.completion
        unknown = set(instants).difference(completion)
        if unknown and rules.archived is not None:   # logs of archived delta commits
            completion.update(rules.archived(unknown))
        # an instant known nowhere (archived, not in the history) joins by its own time
        firsts = list(map(completion.get, instants, instants))
    keys = list(zip(firsts, map(int, logs.versions), logs.tokens))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    ordered = logs.take(order)
    out: dict[str, LogColumns] = {}
    if rules.v1:
        start = 0
        for instant, run in groupby(ordered.instants):    # sorted by instant first: one run each
            end = start + len(list(run))
            out[instant] = ordered.take(slice(start, end))
            start = end
        return out
    ordered_firsts = [*map(firsts.__getitem__, order)]
    end = len(order)
    for at in range(len(base_instants) - 1, -1, -1):
        start = bisect_left(ordered_firsts, base_instants[at], 0, end)
        if start < end:
            out[base_instants[at]] = ordered.take(slice(start, end))
        end = start
    if end:
        # Logs completed before every base file (a log-only file group, or the logs of one before
        # its first compaction) form ONE slice, keyed by the earliest of their instants.  Java's
        # HoodieFileGroup.addLogFile takes logs in instant order: the first finds no slice at or
        # before its completion time and starts one at its own instant; every later one completed
        # after that instant, so it joins that slice.  (A slice per log would read only the newest
        # log of a log-only group, as the metadata table's column_stats groups are before their
        # first compaction.)
        out[min(ordered.instants[:end])] = ordered.take(slice(0, end))
    return out
