"""PARQUET_DATA block content: a complete Parquet file, no version prefix."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from tablesvc.errors import LogFormatError
from tablesvc.logformat.blocks import BlockType, HeaderKey, LogBlock, new_header

_PARQUET_MAGIC = b"PAR1"


def decode_parquet(content: bytes, source: str = "") -> pa.Table:
    """The table held by a PARQUET_DATA block."""
    where = f"{source}: " if source else ""
    # Check both magics first so a torn block reports where, not a deep Arrow error.
    if len(content) < 12 or not content.startswith(_PARQUET_MAGIC) or not content.endswith(_PARQUET_MAGIC):
        raise LogFormatError(f"{where}parquet data content ({len(content)} bytes) does not start and end "
                             f"with {_PARQUET_MAGIC!r}")
    try:
        # Read in place (no Python file object) and on this thread, as the base files are
        # (slice_reader._READ_THREADS): read_table's dataset layer and threads cost ~25% more CPU.
        return pq.ParquetFile(pa.BufferReader(content)).read(use_threads=False)
    except (pa.ArrowException, OSError) as exc:
        raise LogFormatError(f"{where}parquet data content does not read: {exc}") from exc


def encode_parquet(table: pa.Table, compression: str = "snappy", use_dictionary: bool | list[str] = True) -> bytes:
    """Parquet file bytes for a PARQUET_DATA block; ``use_dictionary`` as pyarrow takes it (all
    columns, or the names of those to dictionary-encode)."""
    buf = io.BytesIO()
    try:
        pq.write_table(table, buf, compression=compression, use_dictionary=use_dictionary)
    except (pa.ArrowException, OSError) as exc:
        raise LogFormatError(f"table does not write as parquet: {exc}") from exc
    return buf.getvalue()


def parquet_data_block(instant: str, schema_json: str, table: pa.Table,
                       use_dictionary: bool | list[str] = True) -> LogBlock:
    """A new PARQUET_DATA block; Hudi still writes the Avro SCHEMA header next to the Parquet schema.
    Writers pass the columns worth a dictionary (``write.parquet_encoding.dictionary_columns``)."""
    header = new_header([(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, schema_json)])
    return LogBlock(BlockType.PARQUET_DATA, header, encode_parquet(table, use_dictionary=use_dictionary))


__all__ = ["decode_parquet", "encode_parquet", "parquet_data_block"]
