"""The file-group model: base and log files, file slices, file groups.

Beside the view (view.py builds it, grouping.py cuts a partition's names into it): a slice the
view builds holds its files as raw lists and tuples until ``base_file`` or ``log_files`` is first
read, so the functions that read those raw entries (``raw_*``, ``materialize_*``) live here with
the model they fill.
"""

from __future__ import annotations

from dataclasses import dataclass

from tablesvc.fsview.names import BaseFileName, LogFileName

# frozen objects made in one step: the fields the generated __init__ would set, already valid
_new = object.__new__
_set = object.__setattr__


@dataclass(frozen=True)
class _StoredFile:
    name: BaseFileName | LogFileName
    path: str
    size: int | None     # None when the view was built without sizes (FileSystemView.build)

    @property
    def file_name(self) -> str:
        return self.name.name


@dataclass(frozen=True)
class BaseFile(_StoredFile):
    """A base (parquet) file; ``name`` is a ``BaseFileName``."""


@dataclass(frozen=True)
class LogFile(_StoredFile):
    """A log file; ``name`` is a ``LogFileName``."""


_LAZY_FIELDS = frozenset({"base_file", "log_files"})


@dataclass(frozen=True)
class FileSlice:
    partition: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None
    log_files: tuple[LogFile, ...]

    @property
    def file_names(self) -> tuple[str, ...]:
        raw = self.__dict__.get("_raw")
        if raw is not None and "log_files" not in self.__dict__:
            return raw_file_names(raw)
        head = (self.base_file.file_name,) if self.base_file else ()
        return head + tuple(lf.file_name for lf in self.log_files)

    @property
    def total_size(self) -> int | None:
        """Bytes of the base file and the log files; None when the view was built without sizes."""
        sizes = [f.size for f in ((self.base_file,) if self.base_file else ()) + tuple(self.log_files)]
        return None if any(v is None for v in sizes) else sum(sizes)

    def log_columns(self) -> tuple[list[str], list[str], list[str], list[str]]:
        """The log files as parallel lists, in order: (folder, stored name, file name as
        ``LogFileName`` spells it, instant) of each.  What planners read of many slices, without
        an object per log file (read-only: the lists may be the slice's own)."""
        raw = self.__dict__.get("_raw")
        if raw is not None and "log_files" not in self.__dict__:
            return raw_log_columns(raw)
        folders, stored = [], []
        for lf in self.log_files:
            folder, _, name = lf.path.rpartition("/")
            folders.append(folder)
            stored.append(name)
        return folders, stored, [lf.file_name for lf in self.log_files], [lf.name.instant for lf in self.log_files]

    # A slice the view builds holds its files as plain lists and tuples (``_raw``) until
    # ``base_file`` or ``log_files`` is first read: a table has one object per data file otherwise,
    # and planners look at a fraction of them (grouping.py).  Equality, hashing, repr and replace() read the
    # fields, so they see the objects; a pickled slice carries the objects, not the tuples.
    def __getattr__(self, name: str):    # only called when the attribute is not set
        fields = self.__dict__
        raw = fields.get("_raw")
        if raw is not None and name in _LAZY_FIELDS:
            # (another thread may be doing the same: it makes equal objects)
            fields[name] = materialize_base(raw) if name == "base_file" else materialize_logs(raw, fields["file_id"])
            if "base_file" in fields and "log_files" in fields:
                fields.pop("_raw", None)
        if name in _LAZY_FIELDS and name in fields:
            return fields[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getstate__(self) -> dict:
        if "_raw" in self.__dict__:
            self.__getattr__("base_file")
            self.__getattr__("log_files")
        return dict(self.__dict__)

    def describe(self) -> dict[str, object]:
        return {"partition": self.partition, "file_id": self.file_id, "base_instant": self.base_instant,
                "base_file": self.base_file.file_name if self.base_file else None,
                "log_files": [lf.file_name for lf in self.log_files]}


@dataclass(frozen=True)
class FileGroup:
    partition: str
    file_id: str
    slices: tuple[FileSlice, ...]   # ascending by base instant

    def latest_slice(self, as_of: str | None = None) -> FileSlice | None:
        candidates = [s for s in self.slices if as_of is None or s.base_instant <= as_of]
        return candidates[-1] if candidates else None


def _base_name(e: tuple) -> str:
    """The base file's name as ``BaseFileName.name`` spells it (what the view orders by)."""
    return e[4].name if len(e) == 5 else e[0]


# -- what FileSlice asks of its raw entries ---------------------------------------------------------
# raw = (folder, base entry or None, LogColumns in slice order or None, sizes by stored name or None);
# never changed once built, so a slice can be read from several threads.
def raw_file_names(raw: tuple) -> tuple[str, ...]:
    """``FileSlice.file_names`` of a slice not yet materialized."""
    _, b, cols, _ = raw
    head = () if b is None else (_base_name(b),)
    return head + tuple(cols.file_names()) if cols else head


def raw_log_columns(raw: tuple) -> tuple[list[str], list[str], list[str], list[str]]:
    """``FileSlice.log_columns`` of a slice not yet materialized."""
    folder, _, cols, _ = raw
    if not cols:
        return [], [], [], []
    return [folder] * len(cols), cols.names, cols.file_names(), cols.instants


def materialize_base(raw: tuple) -> "BaseFile | None":
    """``base_file`` of a slice from its raw entries: the frozen objects, each made in one step
    (the fields the generated ``__init__`` would set, already valid)."""
    folder, b, _, size_of = raw
    if b is None:
        return None
    if len(b) == 5:
        bn = b[4]
    else:
        bn = _new(BaseFileName)
        stored = b[0]
        _set(bn, "__dict__", {"file_id": b[1], "write_token": b[2], "instant": b[3],
                              "extension": stored[stored.rindex(".") + 1:]})
    base_file = _new(BaseFile)
    _set(base_file, "__dict__", {"name": bn, "path": f"{folder}/{b[0]}",
                                 "size": None if size_of is None else size_of[b[0]]})
    return base_file


def materialize_logs(raw: tuple, file_id: str) -> tuple["LogFile", ...]:
    """``log_files`` of a slice from its raw entries, as ``materialize_base``."""
    folder, _, cols, size_of = raw
    if not cols:
        return ()
    parsed = cols.parsed or [None] * len(cols)
    log_files = []
    for stored, instant, version, token, ln in zip(cols.names, cols.instants, cols.versions, cols.tokens, parsed):
        if ln is None:
            ln = _new(LogFileName)
            _set(ln, "__dict__", {"file_id": file_id, "instant": instant, "version": int(version),
                                  "write_token": token, "extension": "log", "cdc": False})
        lf = _new(LogFile)
        _set(lf, "__dict__", {"name": ln, "path": f"{folder}/{stored}",
                              "size": None if size_of is None else size_of[stored]})
        log_files.append(lf)
    return tuple(log_files)
