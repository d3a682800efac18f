"""Base and log file names: parse and build, exactly as Hudi spells them.

* base file: ``<fileId>_<writeToken>_<instant>.<ext>``
* log file:  ``.<fileId>_<instant>.log.<version>_<writeToken>``

The file id never contains ``_`` (readers split on it); write tokens are
``<task partition>-<stage>-<attempt>``, digits only.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from tablesvc.errors import FileNameError

_FILE_ID = re.compile(r"^[A-Za-z0-9-]+$")
_TOKEN = re.compile(r"^\d+-\d+-\d+$")
# 20 or 23 digits: a v6 metadata table's suffixed time (timeline.instant._TIME)
_INSTANT = re.compile(r"^\d{14}(\d{3}){0,3}$")
_LOG = re.compile(r"^\.(?P<fid>[^_]+)_(?P<instant>[^_]*)\.(?P<ext>log|archive)\.(?P<version>\d+)"
                  r"(?:_(?P<token>\d+-\d+-\d+))?(?P<cdc>\.cdc)?$")

# Fast paths: names every rule of the dataclass checks accepts, in one match each.  A table has
# one name per data file (100k at the issue #6 scale), and the view parses all of them.  Names
# these do not match go through the original parse, so results and errors are unchanged.
_BASE_STRICT = re.compile(r"([A-Za-z0-9-]+)_([^_]+)_(\d{14}(?:\d{3})?)\.([^.]*)")
_LOG_STRICT = re.compile(r"\.([A-Za-z0-9-]+)_(\d{14}(?:\d{3})?)\.(log|archive)\.(\d+)_(\d+-\d+-\d+)(\.cdc)?")

UNKNOWN_WRITE_TOKEN = "1-0-1"   # Hudi's token for files no task wrote (rollback blocks)
DEFAULT_WRITE_TOKEN = "0-0-0"
PARTITION_METAFILE = ".hoodie_partition_metadata"


def new_file_id(index: int = 0) -> str:
    """``<uuid>-<n>``, the shape Hudi gives new file groups."""
    return f"{uuid.uuid4()}-{index}"


def write_token(task_partition: int, stage: int, attempt: int) -> str:
    return f"{task_partition}-{stage}-{attempt}"


@dataclass(frozen=True)
class BaseFileName:
    file_id: str
    write_token: str
    instant: str
    extension: str = "parquet"

    def __post_init__(self) -> None:
        if not _FILE_ID.match(self.file_id):
            raise FileNameError(f"file id {self.file_id!r} must be letters, digits and '-' (no '_')")
        if not _INSTANT.match(self.instant):
            raise FileNameError(f"base file instant {self.instant!r} is not yyyyMMddHHmmss[SSS]")
        if "_" in self.write_token or not self.write_token:
            raise FileNameError(f"write token {self.write_token!r} must be non-empty without '_'")

    @classmethod
    def parse(cls, name: str) -> "BaseFileName":
        m = _BASE_STRICT.fullmatch(name)
        if m is not None:   # the common case, validated in one match
            return unchecked(cls, {"file_id": m[1], "write_token": m[2], "instant": m[3], "extension": m[4]})
        stem, dot, ext = name.rpartition(".")
        parts = stem.split("_") if dot else []
        if len(parts) != 3 or name.startswith("."):
            raise FileNameError(f"{name!r} is not a base file name (<fileId>_<writeToken>_<instant>.<ext>)")
        try:
            return cls(parts[0], parts[1], parts[2], ext)
        except FileNameError as e:
            raise FileNameError(f"{name!r}: {e}") from None

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant}.{self.extension}"


@dataclass(frozen=True)
class LogFileName:
    file_id: str
    instant: str
    version: int
    write_token: str
    extension: str = "log"
    cdc: bool = False

    def __post_init__(self) -> None:
        if not _FILE_ID.match(self.file_id):
            raise FileNameError(f"file id {self.file_id!r} must be letters, digits and '-' (no '_')")
        if not _INSTANT.match(self.instant):
            raise FileNameError(f"log file instant {self.instant!r} is not yyyyMMddHHmmss[SSS]")
        if self.version < 1:
            raise FileNameError(f"log version {self.version} must be >= 1")
        if not _TOKEN.match(self.write_token):
            raise FileNameError(f"write token {self.write_token!r} must be <digits>-<digits>-<digits>")

    @classmethod
    def parse(cls, name: str) -> "LogFileName":
        strict = _LOG_STRICT.fullmatch(name)
        if strict is not None and strict[4][0] != "0":   # version 0 (refused) or 01: the full path
            fid, instant, ext, version, token, cdc = strict.groups()
            return unchecked(cls, {"file_id": fid, "instant": instant, "version": int(version),
                                   "write_token": token, "extension": ext, "cdc": cdc is not None})
        m = _LOG.match(name)
        if not m or not m.group("token"):
            raise FileNameError(f"{name!r} is not a log file name (.<fileId>_<instant>.log.<version>_<token>)")
        try:
            return cls(m.group("fid"), m.group("instant"), int(m.group("version")), m.group("token"),
                       m.group("ext"), bool(m.group("cdc")))
        except FileNameError as e:
            raise FileNameError(f"{name!r}: {e}") from None

    @property
    def name(self) -> str:
        cdc = ".cdc" if self.cdc else ""
        return f".{self.file_id}_{self.instant}.{self.extension}.{self.version}_{self.write_token}{cdc}"


def unchecked(cls, fields: dict):
    """An instance of the frozen dataclass ``cls`` with ``fields`` (all of them, already valid:
    a strict pattern matched them, or they are built values): what the generated ``__init__``
    would set, as the instance's dict in one step, ``__post_init__`` skipped.  For the loops
    that make one object per data file."""
    obj = object.__new__(cls)
    object.__setattr__(obj, "__dict__", fields)
    return obj


def looks_like_log_file(name: str) -> bool:
    return name.startswith(".") and ".log." in name and not name.endswith(".tmp")
