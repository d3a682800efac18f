"""Whole log files: read through a ``Storage``, report corrupt spans, decode block contents.

A corrupt span is not an error by itself: Hudi's own readers skip it (or let a
later rollback block discard it), so ``read_log_file`` returns it next to the good
blocks with its file offset and reason.  Callers that must not lose data either
check ``LogFileContents.corrupt`` or pass ``raise_on_corrupt=True``, which raises
``CorruptLogBlockError("<path>: corrupt log block at offset N: <reason>")``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from tablesvc.errors import LogFormatError
from tablesvc.logformat.avro_content import decode_avro_records, decode_to_arrow
from tablesvc.logformat.blocks import BlockType, CorruptBlock, LogBlock
from tablesvc.logformat.delete_content import DeleteRecord, decode_delete_records
from tablesvc.logformat.framing import encode_blocks, iter_blocks
from tablesvc.logformat.hfile_content import KeyedRecord, decode_hfile_records
from tablesvc.logformat.parquet_content import decode_parquet
from timeline.storage import Storage


@dataclass(frozen=True)
class LogFileContents:
    """What one log file holds: valid blocks and corrupt spans, both in file order."""

    path: str
    size: int
    blocks: tuple[LogBlock, ...]
    corrupt: tuple[CorruptBlock, ...]

    @property
    def ok(self) -> bool:
        return not self.corrupt

    def describe_corrupt(self) -> list[str]:
        return [c.describe(self.path) for c in self.corrupt]


def parse_log_bytes(data: bytes, path: str = "<bytes>", *, raise_on_corrupt: bool = False) -> LogFileContents:
    """Split the bytes of a log file into blocks and corrupt spans."""
    blocks: list[LogBlock] = []
    corrupt: list[CorruptBlock] = []
    for item in iter_blocks(data, path, raise_on_corrupt=raise_on_corrupt):
        (blocks if isinstance(item, LogBlock) else corrupt).append(item)
    return LogFileContents(path, len(data), tuple(blocks), tuple(corrupt))


def read_log_file(storage: Storage, path: str, *, raise_on_corrupt: bool = False) -> LogFileContents:
    """Read and frame one log file (``FileNotFoundError`` when it is absent)."""
    return parse_log_bytes(storage.read_bytes(path), path, raise_on_corrupt=raise_on_corrupt)


def write_log_file(storage: Storage, path: str, blocks: Iterable[LogBlock]) -> bytes:
    """Create a new log file holding ``blocks``; never appends (object stores cannot)."""
    data = encode_blocks(blocks)
    if not data:
        raise LogFormatError(f"{path}: refusing to write a log file without blocks")
    storage.write_new(path, data)
    return data


# -- content decoding with file context -------------------------------------------------

def _where(block: LogBlock, path: str) -> str:
    return f"{path}: {block.block_type.name} block at offset {block.offset}"


def _schema_of(block: LogBlock, path: str) -> str:
    schema = block.schema
    if not schema:
        raise LogFormatError(f"{_where(block, path)} has no SCHEMA header")
    return schema


def _expect(block: LogBlock, path: str, *types: BlockType) -> None:
    if block.block_type not in types:
        raise LogFormatError(f"{_where(block, path)} is not a {'/'.join(t.name for t in types)} block")


def block_records(block: LogBlock, path: str = "<bytes>") -> list[dict]:
    """Records of an AVRO_DATA block as dicts."""
    _expect(block, path, BlockType.AVRO_DATA)
    return decode_avro_records(block.content, _schema_of(block, path), _where(block, path))


def block_table(block: LogBlock, path: str = "<bytes>") -> pa.Table:
    """Records of an AVRO_DATA or PARQUET_DATA block as an Arrow table."""
    _expect(block, path, BlockType.AVRO_DATA, BlockType.PARQUET_DATA)
    if block.block_type == BlockType.PARQUET_DATA:
        return decode_parquet(block.content, _where(block, path))
    return decode_to_arrow(block.content, _schema_of(block, path), _where(block, path))


def block_keyed_records(block: LogBlock, path: str = "<bytes>") -> list[KeyedRecord]:
    """Records of an HFILE_DATA block (the metadata table's), keyed by their HFile cell keys."""
    _expect(block, path, BlockType.HFILE_DATA)
    return decode_hfile_records(block.content, _schema_of(block, path), path, block.content_offset)


def block_deletes(block: LogBlock, path: str = "<bytes>") -> list[DeleteRecord]:
    """Keys of a DELETE block."""
    _expect(block, path, BlockType.DELETE)
    return decode_delete_records(block.content, _where(block, path))


__all__ = [
    "LogFileContents", "block_deletes", "block_keyed_records", "block_records", "block_table", "parse_log_bytes", "read_log_file",
    "write_log_file",
]
