"""Per-file-group write pieces: keys, bucket index, schema evolution, pre-combine, markers,
and the writer of one file group's files.  Pure pyarrow/fastavro; each function runs in one
Spark task or on the driver.  See ``docs/write-path.md`` ("File-group writes")."""

from tablesvc.write.bucket_index import (
    BucketSpec, bucket_file_id, bucket_id, bucket_ids, bucket_of_file_id, java_list_hash, java_string_hash,
)
from tablesvc.write.dedupe import combine_in_batch
from tablesvc.write.file_group_writer import FileGroupTarget, WriteContext, write_file_group
from tablesvc.write.keys import (
    DEFAULT_PARTITION_PATH, PARTITION_PATH_COLUMN, RECORD_KEY_COLUMN, KeySpec, add_key_columns,
)
from tablesvc.write.markers import IOType, create_marker, delete_markers, list_markers, marker_path
from tablesvc.write.partition_metadata import ensure_partition_metadata
from tablesvc.write.schema_evolution import (
    align_to_schema, arrow_to_avro_schema, reconcile_schema, with_meta_fields,
)

__all__ = [
    "BucketSpec", "DEFAULT_PARTITION_PATH", "FileGroupTarget", "IOType", "KeySpec",
    "PARTITION_PATH_COLUMN", "RECORD_KEY_COLUMN", "WriteContext", "add_key_columns", "align_to_schema",
    "arrow_to_avro_schema", "bucket_file_id", "bucket_id", "bucket_ids", "bucket_of_file_id", "combine_in_batch",
    "create_marker", "delete_markers", "ensure_partition_metadata", "java_list_hash", "java_string_hash",
    "list_markers", "marker_path", "reconcile_schema", "with_meta_fields", "write_file_group",
]
