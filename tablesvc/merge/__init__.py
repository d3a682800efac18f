"""The file-slice merge reader: base file + log blocks -> merged rows (docs/merge-semantics.md).

Pure pyarrow + fastavro, no Spark: Spark jobs ship a ``ReadContext`` and ``SliceSpec``s
to executors and call ``read_file_slice`` / ``iter_file_slice`` there.
"""

from tablesvc.merge.blocks import BlockSelection, SelectedBlock, select_blocks, select_from_contents
from tablesvc.merge.context import (
    COMMIT_TIME_ORDERING,
    EVENT_TIME_ORDERING,
    ReadContext,
    SliceReadMetrics,
    SliceSpec,
)
from tablesvc.merge.merger import (
    BaseMerge,
    LogDeletes,
    LogSide,
    MergeCounts,
    fold_log,
    is_natural_delete,
    merge_records,
)
from tablesvc.merge.schema import align_table, nullable_everywhere, output_schema
from tablesvc.merge.slice_reader import (
    DEFAULT_BATCH_SIZE,
    MergedSlice,
    iter_file_slice,
    log_inputs,
    open_merged_slice,
    read_file_slice,
    read_file_slice_with_metrics,
)

__all__ = [
    "BaseMerge", "BlockSelection", "COMMIT_TIME_ORDERING", "DEFAULT_BATCH_SIZE", "EVENT_TIME_ORDERING", "LogDeletes",
    "LogSide", "MergeCounts", "MergedSlice", "ReadContext", "SelectedBlock", "SliceReadMetrics",
    "SliceSpec", "align_table", "fold_log", "is_natural_delete", "iter_file_slice", "log_inputs", "merge_records",
    "nullable_everywhere", "open_merged_slice", "output_schema", "read_file_slice", "read_file_slice_with_metrics",
    "select_blocks", "select_from_contents",
]
