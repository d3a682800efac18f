"""``Table``: one Hudi table, its storage, clock, config, timeline and file-system view."""

from __future__ import annotations

import os
from functools import cached_property
from typing import Mapping, Sequence

from tablesvc.errors import InvalidInputError, NotATableError
from tablesvc.fsview.view import FileSlice, FileSystemView
from tablesvc.metadata import MetadataFileListing, lists_files
from tablesvc.storage import storage_for
from tablesvc.table.config import TableConfig
from tablesvc.table.create import TableSpec, create_table
from tablesvc.table.properties import read_properties
from timeline.active import Timeline
from timeline.clock import Clock, SystemClock
from timeline.instant_time import InstantTimeGenerator, resolve_timezone
from timeline.lock import LockSettings, TableLock
from timeline.storage_lock import StorageLock, check_timings
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
    def open(cls, path: str, storage: Storage | None = None, clock: Clock | None = None,
             options: Mapping[str, str] | None = None) -> "Table":
        """``options``: object-store settings for ``storage_for`` (obstore's or Hadoop S3A's key names,
        docs/storage.md), used when no ``storage`` is given; other keys are ignored."""
        base = normalize_path(path)
        storage = storage or storage_for(base, options)
        if not storage.exists(base):
            raise NotATableError(f"{base}: no such folder")
        if not storage.stat(base).is_dir:
            raise NotATableError(f"{base} is a file, not a table folder")
        props = read_properties(storage, base)
        return cls(base, storage, TableConfig.from_properties(props, f"{base}/.hoodie/hoodie.properties"), clock)

    @classmethod
    def create(cls, path: str, spec: TableSpec, storage: Storage | None = None,
               clock: Clock | None = None, options: Mapping[str, str] | None = None) -> "Table":
        base = normalize_path(path)
        storage = storage or storage_for(base, options)
        prepare = None
        if spec.metadata_table:       # built before hoodie.properties exists (metadata/bootstrap.py)
            from tablesvc.metadata.bootstrap import with_metadata_table

            generator = InstantTimeGenerator(clock or SystemClock(), resolve_timezone("UTC"))
            prepare = lambda props: with_metadata_table(  # noqa: E731
                storage, base, props, generator, column_stats=spec.metadata_column_stats)
        config = create_table(storage, base, spec, prepare)
        return cls(base, storage, config, clock)

    # -- timeline ------------------------------------------------------------------------------
    @cached_property
    def instant_times(self) -> InstantTimeGenerator:
        return InstantTimeGenerator(self.clock, resolve_timezone(self.config.timezone))

    @cached_property
    def lock_settings(self) -> LockSettings:
        """Where the table lock is and how a Java writer's lock expires: from the table's own
        ``.hoodie/tablesvc.yaml`` only, the one layer every tablesvc process on the table reads
        (a ``--conf`` that disagrees is refused when the config is loaded)."""
        from tablesvc.config import load_config

        cfg = load_config(self.storage, table_path=self.base_path)
        return LockSettings(cfg.get("hoodie.write.lock.filesystem.path") or None,
                            int(cfg.get("hoodie.write.lock.filesystem.expire")),
                            int(cfg.get("hoodie.write.lock.wait_time_ms")),
                            int(cfg.get("hoodie.write.lock.storage.validity.timeout.secs")),
                            int(cfg.get("hoodie.write.lock.storage.renew.interval.secs")))

    def lock(self, **kwargs) -> TableLock | StorageLock:
        """The table lock; ``kwargs`` (``wait_ms``, ...) override.  On local files, Java Hudi's
        file-system lock (``timeline/lock.py``); on S3 (``s3://``, ``s3a://``) and Azure (``az://``,
        ``abfs[s]://``), Hudi's storage-based lock (RFC-91, ``timeline/storage_lock.py``), whose
        compare-and-swap is the ETag (``If-Match``) on both: the object and protocol a Java writer
        with ``StorageBasedLockProvider`` honours (no Java writer on Azure is tested).  GCS is
        refused: no emulator here takes its conditional writes, so they are untested, and every
        change takes this lock first, so nothing changes a table there."""
        if "://" in self.base_path:          # normalize_path keeps only object-store URLs as URLs
            from tablesvc.storage.object_store import SCHEMES

            scheme = self.base_path.split("://", 1)[0].lower()
            if SCHEMES.get(scheme) not in ("s3", "azure"):
                raise InvalidInputError(f"{self.base_path}: changing a table on {scheme}:// needs the storage-based "
                                        "table lock, which tablesvc does not take on GCS: its conditional "
                                        "writes are untested (reads only; docs/storage.md)")
            s = self.lock_settings
            try:
                check_timings(s.storage_validity_s, s.storage_renew_s)
            except ValueError as e:
                from tablesvc.errors import ConfigError

                raise ConfigError(str(e)) from None
            kwargs.setdefault("wait_ms", s.wait_ms)
            kwargs.setdefault("validity_ms", s.storage_validity_s * 1000)
            kwargs.setdefault("renew_ms", s.storage_renew_s * 1000)
            return StorageLock(self.storage, self.base_path, self.clock, **kwargs)
        return TableLock.of(self.storage, self.base_path, self.lock_settings, self.clock, **kwargs)

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
        """The view of ``timeline`` (now: a fresh one), its files listed through the metadata table
        when ``uses_metadata_table``, else from storage."""
        timeline = timeline or self.timeline()
        listing = None
        if self.uses_metadata_table:
            listing = MetadataFileListing(self.storage, self.base_path, timeline)
        return FileSystemView.build(self.storage, self.base_path, self.config, timeline, listing=listing)

    @cached_property
    def metadata_enabled(self) -> bool:
        """The reader's ``hoodie.metadata.enable`` (defaults < ``.hoodie/tablesvc.yaml``); a command
        given ``--conf hoodie.metadata.enable=...`` sets it from its own config."""
        return bool(self.service_config().get("hoodie.metadata.enable"))

    @property
    def uses_metadata_table(self) -> bool:
        """Files are listed through the metadata table: the table's ``files`` partition is complete
        (``hoodie.table.metadata.partitions`` names it, Java's test) and the reader has not
        switched it off (``hoodie.metadata.enable=false``)."""
        return lists_files(self.config) and self.metadata_enabled

    def latest_file_slices(self, as_of: str | None = None, partition: str | None = None) -> list[FileSlice]:
        view = self.file_system_view()
        return view.latest_file_slices(self.storage, as_of, partition)

    # -- configuration ---------------------------------------------------------------------------
    def service_config(self, options: Mapping[str, object] | None = None):
        """The config a CLI command of this table gets: built-in defaults < the table's
        ``.hoodie/tablesvc.yaml`` < ``options`` (Hudi keys, as ``--conf key=value`` gives them)."""
        from tablesvc.config import load_config

        pairs = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in (options or {}).items()]
        return load_config(self.storage, conf_pairs=pairs, table_path=self.base_path)

    # -- data (Spark) ------------------------------------------------------------------------
    # Imported lazily: opening a table and reading its timeline needs no Spark.
    def write(self, df, operation: str = "upsert", *, options: Mapping[str, object] | None = None, **kwargs):
        """Write a Spark DataFrame (insert, upsert or delete); returns a ``WriteResult`` or
        ``None`` when there was nothing to write.  ``options``: Hudi keys (inline services,
        log block format, …) over the table's config; ``config=`` a ready ``ServiceConfig``."""
        from tablesvc.services.write import write_dataframe

        if options is not None:
            if kwargs.get("config") is not None:
                raise InvalidInputError("Table.write: give options (Hudi keys) or config, not both")
            kwargs["config"] = self.service_config(options)
        return write_dataframe(self, df, operation, **kwargs)

    def insert(self, df, **options):
        return self.write(df, "insert", **options)

    def upsert(self, df, **options):
        return self.write(df, "upsert", **options)

    def delete(self, df, **options):
        """Delete the keys in ``df`` (record key columns, plus partition columns when partitioned)."""
        return self.write(df, "delete", **options)

    def read(self, as_of: str | None = None, columns: tuple[str, ...] | list[str] | None = None, spark=None):
        """The table as a Spark DataFrame: the latest snapshot, or as of a time (time travel: ``as_of``
        in any form ``read --as-of`` takes; a time the table cannot show is ``TimeTravelError``)."""
        from tablesvc.spark.read_job import read_dataframe
        from tablesvc.spark.session import get_spark

        return read_dataframe(spark or get_spark(), self, as_of, tuple(columns) if columns else None)

    # -- services ------------------------------------------------------------------------------
    # The functions the CLI's commands call (tablesvc/cli/cmd_*.py), with the same options, and
    # the same typed results it prints: a list of ``ServiceResult`` (action, status, instant,
    # reason, metrics).  ``options``: Hudi keys, as ``--conf`` gives them.  Spark: ``spark``, else
    # the active session (executors checked before the table changes), else one started only
    # when a plan needs it.  Imported lazily: a Table that runs no service loads none.
    def compact(self, instant: str | None = None, *, sort_columns: Sequence[str] = (),
                options: Mapping[str, object] | None = None, spark=None):
        """``tablesvc compaction run``: ``instant``'s plan, else every pending plan (oldest first),
        else one scheduled now whatever the trigger says, and run."""
        from tablesvc.services.compaction import run_compaction
        from tablesvc.spark.session import service_session

        config = self.service_config(options)
        return run_compaction(self, instant, spark=service_session(spark, config.as_dict()),
                              sort_columns=tuple(sort_columns), config=config)

    def log_compact(self, instant: str | None = None, *, options: Mapping[str, object] | None = None, spark=None):
        """``tablesvc logcompaction run``: ``instant``'s plan, else every pending plan, else one
        scheduled now (block threshold lowered to 2), and run."""
        from tablesvc.services.log_compaction import run_log_compaction
        from tablesvc.spark.session import service_session

        config = self.service_config(options)
        return run_log_compaction(self, instant, spark=service_session(spark, config.as_dict()), config=config)

    def clean(self, *, dry_run: bool = False, options: Mapping[str, object] | None = None):
        """``tablesvc clean run [--dry-run]``: ``hoodie.cleaner.policy`` (no Spark).  A dry run's
        result lists the files it would delete in ``metrics["files"]``."""
        from tablesvc.services.clean import run_clean

        return run_clean(self, self.service_config(options), dry_run=dry_run)

    def rollback_failed(self, *, dry_run: bool = False, options: Mapping[str, object] | None = None):
        """``tablesvc rollback``: finish pending rollbacks, then roll back every failed instant
        (heartbeat expired), newest first (no Spark)."""
        from tablesvc.services.rollback import rollback_failed

        return rollback_failed(self, dry_run=dry_run, config=self.service_config(options))

    def rollback(self, instant: str, *, dry_run: bool = False, allow_completed: bool = False,
                 options: Mapping[str, object] | None = None):
        """``tablesvc rollback --instant T [--allow-completed]``: one instant; returns its one
        ``ServiceResult``."""
        from tablesvc.services.rollback import rollback

        return rollback(self, instant, dry_run=dry_run, allow_completed=allow_completed,
                        config=self.service_config(options))

    def run_inline_services(self, *, options: Mapping[str, object] | None = None, spark=None):
        """What a write runs after its commit (``hoodie.compact.inline``, ``hoodie.compact.schedule.inline``,
        ``hoodie.log.compaction.inline``, ``hoodie.clean.automatic``), run now: for a pipeline whose
        writes turned them off, or that wrote with another engine."""
        from tablesvc.services.inline import run_inline_services
        from tablesvc.spark.session import service_session

        config = self.service_config(options)
        return run_inline_services(self, config, service_session(spark, config.as_dict()))
