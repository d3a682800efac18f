"""Value types of the Hudi log format: block types, header keys, blocks, corrupt spans.

The integer codes are the on-disk ordinals of Hudi's Java enums
(``HoodieLogBlockType``, ``HeaderMetadataType``, ``HoodieCommandBlockTypeEnum``);
they are part of the file format, so never renumber them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum

from tablesvc.errors import LogFormatError

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
# magic + block length + the smallest block (version, type, empty header, content length, empty footer,
# reverse pointer): no whole block is shorter
MIN_FRAME_SIZE = len(MAGIC) + 8 + 4 + 4 + 4 + 8 + 4 + 8
# Version prefix of AVRO_DATA and DELETE contents; hudi-rs accepts nothing else.
CONTENT_VERSION = 3


class BlockType(IntEnum):
    COMMAND = 0
    DELETE = 1
    CORRUPT = 2  # never on disk: Java readers synthesise it, we use CorruptBlock instead
    AVRO_DATA = 3
    HFILE_DATA = 4  # metadata table: the content is an HFile (logformat/hfile_content.py)
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(IntEnum):
    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


class CommandType(IntEnum):
    ROLLBACK = 0


DATA_BLOCK_TYPES = frozenset({BlockType.AVRO_DATA, BlockType.HFILE_DATA, BlockType.PARQUET_DATA, BlockType.CDC_DATA})

Header = tuple[tuple[HeaderKey, str], ...]


def _normalise_header(pairs: Iterable[tuple[int, str]], what: str) -> Header:
    out = []
    for pair in pairs:
        try:
            key, value = pair
        except (TypeError, ValueError) as exc:
            raise LogFormatError(f"log block {what}: entry {pair!r} is not a (key, value) pair") from exc
        try:
            key = HeaderKey(key)
        except ValueError as exc:
            raise LogFormatError(f"log block {what}: unknown key code {key!r}") from exc
        if not isinstance(value, str):
            raise LogFormatError(f"log block {what}: value for {key.name} must be str, got {type(value).__name__}")
        out.append((key, value))
    return tuple(out)


def map_encoded_size(pairs: Header) -> int:
    """Bytes of a count-prefixed header/footer map on disk."""
    return 4 + sum(8 + len(v.encode("utf-8")) for _, v in pairs)


@dataclass(frozen=True)
class LogBlock:
    """One framed block.  ``header``/``footer`` keep on-disk order so re-encoding is exact."""

    block_type: BlockType
    header: Header = ()
    content: bytes = b""
    footer: Header = ()
    offset: int = -1  # byte offset of the magic in its file; -1 for a block not read from a file

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "block_type", BlockType(self.block_type))
        except ValueError as exc:
            raise LogFormatError(f"unknown log block type code {self.block_type!r}") from exc
        object.__setattr__(self, "header", _normalise_header(self.header, "header"))
        object.__setattr__(self, "footer", _normalise_header(self.footer, "footer"))
        if not isinstance(self.content, bytes):
            object.__setattr__(self, "content", bytes(self.content))

    # -- sizes -----------------------------------------------------------------
    @property
    def block_length(self) -> int:
        """The on-disk int64 after the magic: bytes from the version through the reverse pointer."""
        return (4 + 4 + map_encoded_size(self.header) + 8 + len(self.content)
                + map_encoded_size(self.footer) + 8)

    @property
    def size(self) -> int:
        """Total bytes of the block in its file, magic and reverse pointer included."""
        return len(MAGIC) + 8 + self.block_length

    @property
    def end(self) -> int:
        """File offset just past this block (only meaningful when ``offset >= 0``)."""
        return self.offset + self.size

    @property
    def content_offset(self) -> int:
        """File offset of the content's first byte (only meaningful when ``offset >= 0``): magic,
        block length, version, type, header map, content length come before it."""
        return self.offset + len(MAGIC) + 8 + 4 + 4 + map_encoded_size(self.header) + 8

    # -- header accessors --------------------------------------------------------
    def get(self, key: HeaderKey, default: str | None = None) -> str | None:
        """Header value; the first one when a (malformed) header repeats a key."""
        for k, v in self.header:
            if k == key:
                return v
        return default

    @property
    def instant_time(self) -> str | None:
        return self.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant_time(self) -> str | None:
        return self.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema(self) -> str | None:
        return self.get(HeaderKey.SCHEMA)

    @property
    def command_type(self) -> CommandType | None:
        raw = self.get(HeaderKey.COMMAND_BLOCK_TYPE)
        if raw is None:
            return None
        try:
            return CommandType(int(raw))
        except ValueError as exc:
            raise LogFormatError(f"log block at offset {self.offset}: unknown command block type {raw!r}") from exc

    @property
    def compacted_block_times(self) -> tuple[str, ...]:
        raw = self.get(HeaderKey.COMPACTED_BLOCK_TIMES)
        if not raw:
            return ()
        return tuple(t.strip() for t in raw.split(",") if t.strip())

    @property
    def is_rollback(self) -> bool:
        return self.block_type == BlockType.COMMAND and self.command_type == CommandType.ROLLBACK

    @property
    def is_data(self) -> bool:
        return self.block_type in DATA_BLOCK_TYPES

    def with_header(self, key: HeaderKey, value: str) -> LogBlock:
        """A new (offset-less) block with ``key`` set, header kept in ascending key order."""
        kept = [(k, v) for k, v in self.header if k != key] + [(HeaderKey(key), value)]
        kept.sort(key=lambda kv: int(kv[0]))
        return LogBlock(self.block_type, tuple(kept), self.content, self.footer)


def new_header(pairs: Iterable[tuple[int, str]]) -> Header:
    """Header for a block we write: ascending key code, each key at most once."""
    header = _normalise_header(pairs, "header")
    keys = [k for k, _ in header]
    if len(set(keys)) != len(keys):
        raise LogFormatError(f"log block header repeats a key: {[k.name for k in keys]}")
    return tuple(sorted(header, key=lambda kv: int(kv[0])))


def rollback_block(instant: str, target_instant: str) -> LogBlock:
    """A COMMAND block rolling back ``target_instant``, written by rollback ``instant``."""
    return LogBlock(BlockType.COMMAND, new_header([
        (HeaderKey.INSTANT_TIME, instant),
        (HeaderKey.TARGET_INSTANT_TIME, target_instant),
        (HeaderKey.COMMAND_BLOCK_TYPE, str(int(CommandType.ROLLBACK))),
    ]))


def with_compacted_block_times(block: LogBlock, instants: Iterable[str]) -> LogBlock:
    """``block`` marked as the log compaction of ``instants`` (kept in the given order;
    Hudi lists them newest first)."""
    if not block.is_data and block.block_type != BlockType.DELETE:
        raise LogFormatError(f"only data and delete blocks can carry COMPACTED_BLOCK_TIMES, not {block.block_type.name}")
    times = [str(t) for t in instants]
    if not times or any("," in t or not t for t in times):
        raise LogFormatError(f"COMPACTED_BLOCK_TIMES needs non-empty instants without commas, got {times!r}")
    return block.with_header(HeaderKey.COMPACTED_BLOCK_TIMES, ",".join(times))


@dataclass(frozen=True)
class CorruptBlock:
    """A byte span that does not frame as a valid block (Java's CORRUPT_BLOCK)."""

    offset: int
    length: int
    reason: str
    # INSTANT_TIME from the span's header when the header survived (a torn block cut short after it):
    # tells a failed append (an instant that never completed) from a damaged block of a completed one.
    instant_time: str | None = field(default=None, compare=False)

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def can_hold_block(self) -> bool:
        """False for a span too short to have held a whole block (a duplicated magic, a few stray
        bytes): a valid block after it cannot have lost a block before it."""
        return self.length >= MIN_FRAME_SIZE

    def describe(self, path: str) -> str:
        return f"{path}: corrupt log block at offset {self.offset}: {self.reason}"


__all__ = [
    "BlockType", "CONTENT_VERSION", "CommandType", "CorruptBlock", "DATA_BLOCK_TYPES", "Header", "HeaderKey",
    "LOG_FORMAT_VERSION", "LogBlock", "MAGIC", "map_encoded_size", "new_header", "rollback_block",
    "with_compacted_block_times",
]
