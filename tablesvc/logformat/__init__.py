"""Hudi log files: block framing, block contents, and builders for new blocks.

Format notes: ``docs/log-format.md``.  Everything here is pure bytes-in/bytes-out
except ``read_log_file``/``write_log_file``, which go through a ``Storage``.
"""

from __future__ import annotations

from tablesvc.logformat.avro_content import (
    avro_data_block,
    avro_schema_to_arrow,
    decode_avro_records,
    decode_to_arrow,
    encode_avro_records,
    parse_avro_schema,
    records_to_arrow,
)
from tablesvc.logformat.blocks import (
    CONTENT_VERSION,
    DATA_BLOCK_TYPES,
    LOG_FORMAT_VERSION,
    MAGIC,
    BlockType,
    CommandType,
    CorruptBlock,
    HeaderKey,
    LogBlock,
    new_header,
    rollback_block,
    with_compacted_block_times,
)
from tablesvc.logformat.delete_content import (
    WRITE_ORDERING_INDEX,
    WRITE_ORDERING_VALUE,
    DeleteRecord,
    OrderingKind,
    decode_delete_records,
    delete_block,
    delete_records_for_keys,
    encode_delete_records,
)
from tablesvc.logformat.framing import encode_block, encode_blocks, iter_blocks
from tablesvc.logformat.hfile_content import (
    KeyedRecord,
    decode_hfile,
    decode_hfile_records,
    encode_hfile_records,
    hfile_data_block,
)
from tablesvc.logformat.parquet_content import decode_parquet, encode_parquet, parquet_data_block
from tablesvc.logformat.reader import (
    LogFileContents,
    block_deletes,
    block_keyed_records,
    block_records,
    block_table,
    parse_log_bytes,
    read_log_file,
    write_log_file,
)

__all__ = [
    "BlockType", "CONTENT_VERSION", "CommandType", "CorruptBlock", "DATA_BLOCK_TYPES", "DeleteRecord", "HeaderKey",
    "KeyedRecord", "LOG_FORMAT_VERSION", "LogBlock", "LogFileContents", "MAGIC", "OrderingKind", "WRITE_ORDERING_INDEX",
    "WRITE_ORDERING_VALUE", "avro_data_block", "avro_schema_to_arrow", "block_deletes", "block_keyed_records", "block_records",
    "block_table", "decode_avro_records", "decode_delete_records", "decode_hfile", "decode_hfile_records", "decode_parquet", "decode_to_arrow",
    "delete_block", "delete_records_for_keys", "encode_avro_records", "encode_block", "encode_blocks",
    "encode_delete_records", "encode_hfile_records", "hfile_data_block", "encode_parquet", "iter_blocks", "new_header", "parquet_data_block",
    "parse_avro_schema", "parse_log_bytes", "read_log_file", "records_to_arrow", "rollback_block",
    "with_compacted_block_times", "write_log_file",
]
