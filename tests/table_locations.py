"""Where a test's table lives: a local folder, or a fresh prefix of the moto S3 bucket (or of the
Azurite container, ``location("azure", ...)``; not in ``LOCATIONS``).

The model-based, crash and takeover tests run the same steps on both.  A ``TableLocation`` gives
the table URL, the storage options (object_store's key names, ``None`` for local files) for this
process, and the environment child processes (the crash harness, the ``tablesvc`` command line)
take the same endpoint and credentials from.  ``LOCATIONS`` parametrizes a test over both, the S3
case marked ``s3``; ``location(kind, tmp_path, request)`` starts the S3 endpoint only when asked.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

LOCATIONS = ["local", pytest.param("s3", marks=pytest.mark.s3)]


@dataclass(frozen=True)
class TableLocation:
    root: str                                   # a local folder or an s3:// prefix; tables go below it
    options: dict[str, str] | None = None       # storage options for this process (None: local files)
    env: dict[str, str] = field(default_factory=dict)   # the same settings for child processes

    @property
    def on_object_store(self) -> bool:
        return self.options is not None

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *(p.strip("/") for p in parts if p)])

    def storage(self):
        from tablesvc.storage import storage_for

        return storage_for(self.root, self.options)

    def open(self, path: str, **kwargs):
        from tablesvc.api import Table

        return Table.open(path, options=self.options, **kwargs)

    def child_env(self, **extra: str) -> dict[str, str]:
        """This process's environment with the endpoint's settings: what a child process needs to
        reach the table (the harness and the CLI take no storage options on their command line)."""
        return dict(os.environ, **self.env, **extra)


def local_location(folder: Path) -> TableLocation:
    return TableLocation(str(folder))


def s3_location(server, name: str = "tables") -> TableLocation:
    """A fresh prefix of ``server``'s bucket (``tests/s3_server.S3Server``): tests never share tables."""
    return TableLocation(server.url(name, uuid.uuid4().hex[:12]), server.options(), server.env())


def azure_location(server, name: str = "tables") -> TableLocation:
    """A fresh prefix of ``server``'s container (``tests/azure_server.AzureServer``), as ``az://``."""
    return TableLocation(server.url(name, uuid.uuid4().hex[:12]), server.options(), server.env())


def location(kind: str, tmp_path: Path, request) -> TableLocation:
    """``kind`` (a ``LOCATIONS`` value, or ``azure``): ``tmp_path``, or a prefix on the session's S3
    or Azurite endpoint."""
    if kind == "local":
        return local_location(tmp_path)
    if kind == "s3":
        return s3_location(request.getfixturevalue("s3_endpoint"), tmp_path.name)
    if kind == "azure":
        return azure_location(request.getfixturevalue("azure_endpoint"), tmp_path.name)
    raise ValueError(f"unknown table location {kind!r}; expected local, s3 or azure")


def copy_tree(storage, source: str, dest: str, dest_storage=None) -> int:
    """Every object (file) under ``source`` (read through ``storage``) copied to the same relative
    key under ``dest`` (written through ``dest_storage``, by default the same); returns how many."""
    from timeline.storage import join

    dest_storage = dest_storage or storage
    files = files_under(storage, source)
    for child in files:
        dest_storage.write_new(join(dest, child), storage.read_bytes(join(source, child)))
    return len(files)


def files_under(storage, root: str) -> dict[str, int]:
    """Relative path -> size of every file under ``root`` (a table's tree, on any storage)."""
    from timeline.storage import join

    out: dict[str, int] = {}
    pending = [""]
    while pending:
        rel = pending.pop()
        for info in storage.list_dir(join(root, rel) if rel else root):
            child = f"{rel}/{info.name}" if rel else info.name
            if info.is_dir:
                pending.append(child)
            else:
                out[child] = info.size
    return out
