"""``Table``: one Hudi table, its storage, clock, config, timeline and file-system view."""

from __future__ import annotations

import os
from functools import cached_property

from tablesvc.errors import NotATableError
from tablesvc.fsview.view import FileSlice, FileSystemView
from tablesvc.storage import storage_for
from tablesvc.table.config import TableConfig
from tablesvc.table.create import TableSpec, create_table
from tablesvc.table.properties import read_properties
from timeline.active import Timeline
from timeline.clock import Clock, SystemClock
from timeline.instant_time import InstantTimeGenerator, resolve_timezone
from timeline.lock import TableLock
from timeline.storage import Storage
from timeline.transitions import TimelineWriter


def normalize_path(path: str) -> str:
    if "://" in path and not path.startswith("file://"):
        return path.rstrip("/")
    local = path[len("file://"):] if path.startswith("file://") else path
    return os.path.abspath(local)


class Table:
    def __init__(self, base_path: str, storage: Storage, config: TableConfig, clock: Clock | None = None):
        self.base_path = base_path
        self.storage = storage
        self.config = config
        self.clock = clock or SystemClock()

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str, storage: Storage | None = None, clock: Clock | None = None) -> "Table":
        base = normalize_path(path)
        storage = storage or storage_for(base)
        if not storage.exists(base):
            raise NotATableError(f"{base}: no such folder")
        if not storage.stat(base).is_dir:
            raise NotATableError(f"{base} is a file, not a table folder")
        props = read_properties(storage, base)
        return cls(base, storage, TableConfig.from_properties(props, f"{base}/.hoodie/hoodie.properties"), clock)

    @classmethod
    def create(cls, path: str, spec: TableSpec, storage: Storage | None = None,
               clock: Clock | None = None) -> "Table":
        base = normalize_path(path)
        storage = storage or storage_for(base)
        config = create_table(storage, base, spec)
        return cls(base, storage, config, clock)

    # -- timeline ------------------------------------------------------------------------------
    @cached_property
    def instant_times(self) -> InstantTimeGenerator:
        return InstantTimeGenerator(self.clock, resolve_timezone(self.config.timezone))

    def lock(self, **kwargs) -> TableLock:
        return TableLock(self.storage, self.base_path, self.clock, **kwargs)

    @cached_property
    def timeline_writer(self) -> TimelineWriter:
        return TimelineWriter(self.storage, self.base_path, self.config.layout, self.instant_times, self.lock)

    def timeline(self) -> Timeline:
        """A fresh snapshot of the active timeline."""
        return Timeline.load(self.storage, self.base_path, self.config.layout)

    def schema(self, timeline: Timeline | None = None) -> str | None:
        """The table's Avro schema: from the latest completed write, else ``hoodie.table.create.schema``."""
        return (timeline or self.timeline()).latest_schema(self.storage) or self.config.create_schema

    # -- files -------------------------------------------------------------------------------------
    def file_system_view(self, timeline: Timeline | None = None) -> FileSystemView:
        return FileSystemView.build(self.storage, self.base_path, self.config, timeline or self.timeline())

    def latest_file_slices(self, as_of: str | None = None, partition: str | None = None) -> list[FileSlice]:
        view = self.file_system_view()
        return view.latest_file_slices(self.storage, as_of, partition)

    # -- data (Spark) ------------------------------------------------------------------------
    # Imported lazily: opening a table and reading its timeline needs no Spark.
    def write(self, df, operation: str = "upsert", **options):
        """Write a Spark DataFrame (insert, upsert or delete); returns a ``WriteResult`` or
        ``None`` when there was nothing to write."""
        from tablesvc.spark.write_job import write_dataframe

        return write_dataframe(self, df, operation, **options)

    def insert(self, df, **options):
        return self.write(df, "insert", **options)

    def upsert(self, df, **options):
        return self.write(df, "upsert", **options)

    def delete(self, df, **options):
        """Delete the keys in ``df`` (record key columns, plus partition columns when partitioned)."""
        return self.write(df, "delete", **options)

    def read(self, as_of: str | None = None, columns: tuple[str, ...] | list[str] | None = None, spark=None):
        """The table as a Spark DataFrame: the latest snapshot, or as of an instant (time travel)."""
        from tablesvc.spark.read_job import read_dataframe
        from tablesvc.spark.session import get_spark

        return read_dataframe(spark or get_spark(), self, as_of, tuple(columns) if columns else None)
