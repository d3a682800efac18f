"""The file-system view: file groups and file slices per partition.

Rules (docs/file-system-view.md explains them with examples):

* Only committed files are visible: a base or log file whose name instant is not a
  completed instant (or older than the active timeline, i.e. archived) is hidden.
  v6 exception, as in Java: log files named with a *pending compaction* instant are
  kept; they start the compaction's new slice.
* Base file -> slice keyed by its instant.
* Log file -> v6: the slice keyed by the instant in its name; v8/v9: the slice with
  the greatest base instant at or before the log's completion time; the logs completed
  before every base instant share one slice keyed by the earliest of their instants,
  as Java's ``HoodieFileGroup.addLogFile`` builds it; an archived delta commit's completion time comes from
  the LSM history (``timeline.history``), its own instant when the history lacks it.
* File groups replaced by a completed replacecommit (as of the query time) are gone.
* ``latest_file_slices(as_of)`` picks per file group the latest slice whose base
  instant is at or before ``as_of``; when that slice is a pending compaction's
  (no base file yet) it is merged with the slice before it, as Java's
  ``getLatestMergedFileSlicesBeforeOrOn`` does.  As in hudi-rs, the log files of the
  chosen slice are not filtered by ``as_of``: readers drop blocks written after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tablesvc.fsview.grouping import GroupingRules, file_groups, visible_files, with_sizes
# the model lives in model.py; its names stay importable from here
from tablesvc.fsview.model import BaseFile, FileGroup, FileSlice, LogFile  # noqa: F401
from tablesvc.fsview.partitions import discover_partitions
from timeline.active import Timeline, gc_paused
from timeline.history import ArchivedCompletionTimes
from timeline.instant import Action, TimelineLayout
from timeline.storage import Storage, join

if TYPE_CHECKING:  # the table package imports this module; avoid the cycle at run time
    from tablesvc.fsview.listing import FileListing
    from tablesvc.table.config import TableConfig


@dataclass(frozen=True)
class FileSystemView:
    config: "TableConfig"
    timeline: Timeline
    partitions: tuple[str, ...]
    groups: tuple[FileGroup, ...]
    pending_compaction_instants: frozenset[str]
    skipped_files: tuple[str, ...] = field(default=())

    # -- building --------------------------------------------------------------------------
    @classmethod
    def build(cls, storage: Storage, base_path: str, config: "TableConfig", timeline: Timeline,
              partitions: list[str] | None = None, *, sizes: bool = True,
              only: "set[str] | None" = None, listing: "FileListing | None" = None) -> "FileSystemView":
        """The view of ``timeline``.  Folders are listed by name only; with ``sizes`` (the default)
        each visible data file is then ``stat``-ed for its size (hidden, uncommitted and unrelated
        files are not), and a file deleted in between is left out, as a listing with sizes would.
        ``sizes=False`` leaves every ``size`` None: for callers that need names and slices only
        (the clean planner) or sizes of a few slices (the compaction planner: ``fsview.sizes``);
        a ``stat`` is the dominant per-file cost on large tables.  Every partition is listed
        before any file is sized, so a storage wrapper sees all listings, then all ``stat``
        calls.  ``only``: of the partitions found, group just these (an incremental clean); the
        view's ``partitions`` are those.  ``listing``: take partitions, names and sizes from it (the
        metadata table, ``fsview/listing.py``) instead of listing and sizing storage."""
        with gc_paused():   # many long-lived objects, no cycles (see gc_paused)
            return cls._build(storage, base_path, config, timeline, partitions, sizes, only, listing)

    @classmethod
    def _build(cls, storage: Storage, base_path: str, config: "TableConfig", timeline: Timeline,
               partitions: list[str] | None, sizes: bool, only: "set[str] | None",
               listing: "FileListing | None" = None) -> "FileSystemView":
        listed: dict[str, list[str]] = {}
        if listing is not None:
            partitions = listing.partitions() if partitions is None else partitions
            listed = {p: sorted(listing.files(p)) for p in partitions}
        elif partitions is None:
            partitions, listed = discover_partitions(storage, base_path, config.is_partitioned)
        if only is not None:
            partitions = [p for p in partitions if p in only]
        pending_compactions = frozenset(i.timestamp for i in timeline.pending_compactions())
        rules = GroupingRules(timeline, _Committed(timeline),
                              pending_compactions if config.layout is TimelineLayout.V1 else frozenset(),
                              "." + config.base_file_format.lower(), config.layout is TimelineLayout.V1,
                              timeline.completion_times(),
                              None if config.layout is TimelineLayout.V1 else _Archived(timeline, storage, base_path))
        skipped: list[str] = []
        visible = []
        for partition in partitions:
            folder = join(base_path, partition) if partition else base_path
            names = listed.get(partition)
            if names is None:
                names = storage.list_names(folder)
            visible.append(visible_files(partition, folder, names, rules, skipped))
        # every partition's sizes at once: the folders are sized in parallel (fsview/sizes.py)
        if listing is not None:   # sizes as the listing records them; storage is not asked
            size_maps = [listing.files(v.partition) if sizes else None for v in visible]
        else:
            size_maps = with_sizes(storage, visible) if sizes else [None] * len(visible)
        groups: list[FileGroup] = []
        for v, size_of in zip(visible, size_maps):
            groups += file_groups(v, rules, size_of)
        return cls(config, timeline, tuple(partitions), tuple(groups), pending_compactions, tuple(skipped))

    # -- queries -----------------------------------------------------------------------------
    def replaced_file_ids(self, storage: Storage, as_of: str | None = None) -> set[tuple[str, str]]:
        """(partition, file id) pairs replaced by completed replacecommits at or before ``as_of``."""
        out: set[tuple[str, str]] = set()
        for instant in self.timeline.completed(Action.REPLACE_COMMIT):
            if as_of is not None and instant.timestamp > as_of:
                continue
            md = self.timeline.commit_metadata(storage, instant)
            for partition, ids in (getattr(md, "partition_to_replace_file_ids", None) or {}).items():
                out.update((partition, fid) for fid in ids)
        return out

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        return [g for g in self.groups if partition is None or g.partition == partition]

    def latest_file_slices(self, storage: Storage, as_of: str | None = None,
                           partition: str | None = None) -> list[FileSlice]:
        replaced = self.replaced_file_ids(storage, as_of)
        out = []
        for g in self.file_groups(partition):
            if (g.partition, g.file_id) in replaced:
                continue
            s = g.latest_slice(as_of)
            if s is None:
                continue
            if s.base_file is None and s.base_instant in self.pending_compaction_instants:
                earlier = [x for x in g.slices if x.base_instant < s.base_instant]
                if earlier:
                    prev = earlier[-1]
                    s = FileSlice(s.partition, s.file_id, prev.base_instant, prev.base_file,
                                  prev.log_files + s.log_files)
            out.append(s)
        return out


class _Archived:
    """v8+: completion times of archived instants, from the LSM history (``timeline.history``), as
    Java's ``CompletionTimeQueryViewV2`` finds them: the active timeline first (the caller asks
    only for instants it does not hold), the history only for instants before the active
    timeline's start.  Nothing is read until a log of an archived delta commit is grouped."""

    def __init__(self, timeline: Timeline, storage: Storage, base_path: str):
        self._start = timeline.start
        self._history = ArchivedCompletionTimes(storage, base_path)

    def __call__(self, instants: set[str]) -> dict[str, str]:
        start = self._start
        before = {i for i in instants if start is not None and i < start}
        return self._history.completion_times(before) if before else {}


class _Committed(dict):
    """instant -> whether data files named with it are committed (module docstring), asked of the
    timeline once per instant: a partition holds many files of each instant."""

    def __init__(self, timeline: Timeline):
        super().__init__()
        self._timeline = timeline

    def __missing__(self, instant: str) -> bool:
        committed = self[instant] = self._timeline.is_committed_or_archived(instant)
        return committed
