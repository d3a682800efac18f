"""What a slice read needs to know, as plain picklable values.

``ReadContext`` is built once on the driver (``ReadContext.for_table``) and shipped
to Spark executors next to many ``SliceSpec``s; neither holds a ``Table``, a
``Timeline`` or a storage handle, only strings, ints and frozensets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tablesvc.errors import InvalidInputError, UnsupportedTableError
from tablesvc.table.meta_fields import RECORD_KEY

if TYPE_CHECKING:
    from tablesvc.fsview.view import FileSlice
    from tablesvc.table.config import TableConfig
    from timeline.active import Timeline
    from timeline.storage import Storage


class ReadableTable(Protocol):
    """What ``ReadContext.for_table`` reads of a table.  The ``Table`` handle (``tablesvc.api``) has
    it; it is named here, on the merge floor, so that the reader never imports the handle, which
    sits floors above (it calls the Spark jobs and the services)."""

    base_path: str
    storage: Storage
    config: TableConfig

    def timeline(self) -> Timeline: ...

    def schema(self, timeline: Timeline | None = None) -> str | None: ...


EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
MERGE_MODES = (EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING)


@dataclass(frozen=True, kw_only=True)
class ReadContext:
    """Table-wide inputs of a merged read (one per query, shared by every slice); keyword-only."""

    base_path: str
    table_version: int
    record_key_field: str = RECORD_KEY
    ordering_field: str | None
    merge_mode: str
    as_of: str | None = None
    completed_instants: frozenset[str]
    timeline_start: str | None
    table_schema_json: str | None
    columns: tuple[str, ...] | None = None
    populate_meta_fields: bool = True
    # The storage tasks read through (``tablesvc.storage.storage_for_tasks``): set for object stores,
    # whose options must travel with the task; None for local files.
    storage: "Storage | None" = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.merge_mode not in MERGE_MODES:
            raise UnsupportedTableError(f"{self.base_path}: merge mode {self.merge_mode!r} is not supported "
                                        f"by the merge reader (only {', '.join(MERGE_MODES)})")
        if not isinstance(self.completed_instants, frozenset):
            object.__setattr__(self, "completed_instants", frozenset(self.completed_instants))
        if self.columns is not None and not isinstance(self.columns, tuple):
            object.__setattr__(self, "columns", tuple(self.columns))

    @property
    def effective_merge_mode(self) -> str:
        """Event time needs an ordering field; without one Java and hudi-rs order by commit."""
        if self.merge_mode == EVENT_TIME_ORDERING and not self.ordering_field:
            return COMMIT_TIME_ORDERING
        return self.merge_mode

    @property
    def append_only(self) -> bool:
        """Tables without meta fields carry no record key to merge on; hudi-rs concatenates them."""
        return not self.populate_meta_fields

    def is_committed(self, instant: str | None) -> bool:
        """True for a completed instant, or one older than the active timeline (archived)."""
        if instant is None:
            return False
        if instant in self.completed_instants:
            return True
        return self.timeline_start is not None and instant < self.timeline_start

    def within_as_of(self, instant: str | None) -> bool:
        return self.as_of is None or (instant is not None and instant <= self.as_of)

    @classmethod
    def for_table(cls, table: ReadableTable, timeline: "Timeline | None" = None, as_of: str | None = None,
                  columns: tuple[str, ...] | list[str] | None = None) -> "ReadContext":
        from tablesvc.storage import storage_for_tasks
        from tablesvc.table.config import MergeMode

        timeline = timeline if timeline is not None else table.timeline()
        config = table.config
        if config.merge_mode is MergeMode.CUSTOM:
            raise UnsupportedTableError(f"{table.base_path}: merge mode CUSTOM (payload "
                                        f"{config.props.get('hoodie.compaction.payload.class', '?')}) "
                                        "needs a record merger this reader does not have")
        if as_of is not None and not (isinstance(as_of, str) and as_of.isdigit()):
            raise InvalidInputError(f"as-of instant {as_of!r} is not an instant time (digits only)")
        schema = None
        if as_of is not None:
            schema = timeline.as_of(as_of).latest_schema(table.storage)
        schema = schema or table.schema(timeline)
        return cls(
            base_path=table.base_path,
            table_version=config.version,
            ordering_field=config.ordering_field,
            merge_mode=config.merge_mode.value,
            as_of=as_of,
            completed_instants=frozenset(i.timestamp for i in timeline.instants if i.is_completed),
            timeline_start=timeline.start,
            table_schema_json=schema,
            columns=tuple(columns) if columns is not None else None,
            populate_meta_fields=config.populate_meta_fields,
            storage=storage_for_tasks(table.storage),
        )


@dataclass(frozen=True)
class SliceSpec:
    """One file slice to read: absolute paths, log files in reader order."""

    partition: str
    file_id: str
    base_file: str | None
    log_files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.log_files, tuple):
            object.__setattr__(self, "log_files", tuple(self.log_files))

    @classmethod
    def from_file_slice(cls, file_slice: "FileSlice") -> "SliceSpec":
        return cls(file_slice.partition, file_slice.file_id,
                   file_slice.base_file.path if file_slice.base_file else None,
                   tuple(lf.path for lf in file_slice.log_files))


@dataclass(frozen=True)
class SliceReadMetrics:
    """What one slice read did; add several with ``+`` for a query total."""

    base_rows: int = 0
    log_files: int = 0
    log_blocks_read: int = 0
    log_blocks_skipped: int = 0          # written after as_of, or by an uncommitted/failed instant
    log_blocks_rolled_back: int = 0      # targeted by a rollback command block
    log_blocks_superseded: int = 0       # replaced by a log-compacted block
    command_blocks: int = 0
    log_records: int = 0
    log_deletes: int = 0
    corrupt_spans: int = 0               # torn tails ignored (or spans discarded by a rollback)
    output_rows: int = 0

    def __add__(self, other: "SliceReadMetrics") -> "SliceReadMetrics":
        if not isinstance(other, SliceReadMetrics):
            return NotImplemented
        return SliceReadMetrics(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple())))

    def as_tuple(self) -> tuple[int, ...]:
        return (self.base_rows, self.log_files, self.log_blocks_read, self.log_blocks_skipped,
                self.log_blocks_rolled_back, self.log_blocks_superseded, self.command_blocks, self.log_records,
                self.log_deletes, self.corrupt_spans, self.output_rows)

    def as_dict(self) -> dict[str, int]:
        from dataclasses import asdict

        return asdict(self)


__all__ = ["COMMIT_TIME_ORDERING", "EVENT_TIME_ORDERING", "MERGE_MODES", "ReadContext", "SliceReadMetrics",
           "SliceSpec"]
