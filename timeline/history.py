"""Completion times of archived instants, from the LSM history of table versions 8 and 9.

Hudi 1.x's archiver moves old instants out of the active timeline into ``.hoodie/timeline/history/``
(Hudi 1.2.0: ``LSMTimeline``, ``LSMTimelineWriter``, ``ArchivedTimelineLoaderV2``):

* Parquet files named ``<min instant>_<max instant>_<layer>.parquet``: one row per archived
  instant (columns ``instantTime``, ``completionTime``, ``action``, ``metadata``, ``plan``,
  ``version``).  An archival run writes one layer-0 file; the LSM compaction merges a batch of
  files of one layer into one file of the next layer, named by the batch's lowest and highest
  instant.  An instant is archived once, so a file's name range bounds every instant in it.
* ``manifest_<N>``: JSON ``{"files": [{"fileName": ..., "fileLen": ...}, ...]}``, the files
  that make up version N of the history.  Only the files of the latest manifest count: files a
  compaction replaced, and files a failed archival run left, stay on storage until Hudi cleans
  them and are ignored here as by Java.
* ``_version_``: the latest N as decimal text.  When it cannot be read or parsed, Java takes the
  highest N among the ``manifest_<N>`` files (``.tmp`` ones excluded); so does this reader.  No
  manifest at all is an empty history.

Only the columns ``instantTime`` and ``completionTime`` are read, and only from the files whose
name range holds an instant asked for; nothing is read before the first question.  A null
``completionTime`` (Java writes none, but a history converted from an older archive could) stands
for the instant time itself, as ``CompletionTimeQueryViewV2.setCompletionTime`` takes it.

Damaged input (a manifest that is missing or not that JSON, a listed file that is missing, a
name that is not ``<min>_<max>_<layer>.parquet``, a file Parquet cannot read or without those
columns) raises one ``HistoryError`` naming the file: the CLI exits 2, as for a damaged
timeline payload.  Java fails too (``HoodieException`` / ``HoodieIOException``).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Iterable

from timeline.errors import InvalidInputError, TimelineError
from timeline.instant import TimelineLayout
from timeline.storage import Storage, join

HISTORY_DIR = "history"       # hoodie.timeline.history.path's default, under the timeline folder
VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
_FILE_NAME = re.compile(r"(\d+)_(\d+)_(\d)\.parquet").fullmatch     # LSMTimeline.ARCHIVE_FILE_PATTERN
_COLUMNS = ["instantTime", "completionTime"]


class HistoryError(TimelineError, InvalidInputError):
    """The archived timeline (the LSM history) cannot be read: names the file."""


@dataclass(frozen=True)
class HistoryFile:
    """One Parquet file of the history, as its name describes it."""

    name: str
    min_instant: str
    max_instant: str
    layer: int

    @classmethod
    def parse(cls, name: str, where: str) -> "HistoryFile":
        m = _FILE_NAME(name)
        if m is None:
            raise HistoryError(f"{where}: {name!r} is not a history file name (<min instant>_<max instant>_<layer>.parquet)")
        return cls(name, m.group(1), m.group(2), int(m.group(3)))

    def may_hold(self, instant: str) -> bool:
        return self.min_instant <= instant <= self.max_instant


def history_folder(base_path: str) -> str:
    return join(base_path, TimelineLayout.V2.timeline_dir, HISTORY_DIR)


def latest_manifest_version(storage: Storage, folder: str) -> int | None:
    """N of the manifest that counts (module doc), None when there is none."""
    try:
        return int(storage.read_bytes(join(folder, VERSION_FILE)).decode("utf-8").strip())
    except (FileNotFoundError, UnicodeDecodeError, ValueError):
        pass    # Java logs a warning and falls back to the listing
    versions = []
    for name in storage.list_names(folder):
        if name.startswith(MANIFEST_PREFIX) and not name.endswith(".tmp"):
            try:
                versions.append(int(name[len(MANIFEST_PREFIX):]))
            except ValueError:
                raise HistoryError(f"{join(folder, name)}: not a manifest name (manifest_<number>)") from None
    return max(versions, default=None)


def manifest_files(storage: Storage, folder: str) -> tuple[HistoryFile, ...]:
    """The files of the latest manifest (empty when the history has none)."""
    version = latest_manifest_version(storage, folder)
    if version is None:
        return ()
    path = join(folder, f"{MANIFEST_PREFIX}{version}")
    try:
        doc = json.loads(storage.read_bytes(path).decode("utf-8"))
    except FileNotFoundError:
        raise HistoryError(f"{path}: the history's latest manifest (version {version}) is missing") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise HistoryError(f"{path}: not a history manifest ({exc})") from None
    entries = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("fileName"), str)
                                                 for e in entries):
        raise HistoryError(f"{path}: not a history manifest (no list of files with a fileName each)")
    return tuple(HistoryFile.parse(e["fileName"], path) for e in entries)


def read_completion_times(storage: Storage, folder: str, file: HistoryFile) -> dict[str, str]:
    """instant time -> completion time of every instant in one history file."""
    import pyarrow.parquet as pq     # here, not at import: most commands never read the history

    path = join(folder, file.name)
    try:
        with storage.open_read(path) as f:
            table = pq.read_table(f, columns=_COLUMNS)
    except FileNotFoundError:
        raise HistoryError(f"{path}: listed in the history's manifest but missing") from None
    except Exception as exc:   # noqa: BLE001 - pyarrow raises several kinds; all mean a damaged file
        raise HistoryError(f"{path}: not a readable history file ({type(exc).__name__}: {exc})") from None
    instants, completions = (table.column(c).to_pylist() for c in _COLUMNS)
    if any(not isinstance(i, str) for i in instants):
        raise HistoryError(f"{path}: a row without an instantTime")
    return {i: (c or i) for i, c in zip(instants, completions)}


class ArchivedCompletionTimes:
    """Lazy answers from one table's history: reads the latest manifest on the first question
    that the times known so far do not answer, and then each file once, when an instant asked for
    lies in its name range.  A completion time never changes once archived, so what was read is
    kept for the process (per history folder, ``_KNOWN``): a view built again asks storage only
    for instants not seen before.  Thread-safe."""

    def __init__(self, storage: Storage, base_path: str):
        self._storage = storage
        self.folder = history_folder(base_path)
        self._files: tuple[HistoryFile, ...] | None = None
        self._read: set[str] = set()

    def completion_times(self, instants: Iterable[str]) -> dict[str, str]:
        """instant -> completion time, for those of ``instants`` the history holds."""
        wanted = set(instants)
        if not wanted:
            return {}
        with _LOCK:
            known = _KNOWN.setdefault(self.folder, {})
            missing = wanted.difference(known)
            if missing:
                if self._files is None:
                    self._files = manifest_files(self._storage, self.folder)
                for f in self._files:
                    if f.name not in self._read and any(f.may_hold(i) for i in missing):
                        for instant, done in read_completion_times(self._storage, self.folder, f).items():
                            known.setdefault(instant, done)    # an instant archived twice: the same time
                        self._read.add(f.name)
            return {i: known[i] for i in wanted if i in known}

    def completion_time(self, instant: str) -> str | None:
        return self.completion_times((instant,)).get(instant)

    @property
    def files_read(self) -> frozenset[str]:
        """The history files this reader read (tests check the laziness with it)."""
        return frozenset(self._read)


def forget_history(base_path: str | None = None) -> None:
    """Drop the completion times kept for one table's history (all: None); tests that damage or
    rewrite a history use it."""
    with _LOCK:
        if base_path is None:
            _KNOWN.clear()
        else:
            _KNOWN.pop(history_folder(base_path), None)


_LOCK = threading.Lock()
_KNOWN: dict[str, dict[str, str]] = {}
