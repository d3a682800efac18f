"""Combining column statistics: a partition's from its files' (``partition_stats``), and two
records of one key inside the metadata table (what a reader and a compaction of it do).

* **Partition stats** (``HoodieTableMetadataUtil.convertMetadataToPartitionStatRecords``): per
  column, over the partition's files: min of the minima, max of the maxima (files without a value
  add none), the **sum** of value counts, null counts and both sizes; the record's ``fileName`` is
  the partition path and ``isTightBound`` is true (it was recomputed from every file).
* **Two records of one key** (``HoodieTableMetadataUtil.mergeColumnStatsRecords``): if either is
  deleted, the newer wins; if the newer is a tight bound, it wins; otherwise the range widens and
  the counts and sizes add up.  (A DELETE-block tombstone, which beats both, is the reader's.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tablesvc.metadata.column_stats import (
    ColumnRange,
    ColumnType,
    ValueType,
    column_type_of_value_type_info,
    stat_max,
    stat_min,
    unwrap,
)


def partition_ranges(partition: str, ranges: Iterable[ColumnRange]) -> list[ColumnRange]:
    """One range per column over the files' ``ranges``, named by the partition path."""
    out: dict[str, ColumnRange] = {}
    for r in ranges:
        before = out.get(r.column)
        if before is None:
            out[r.column] = ColumnRange(partition, r.column, r.column_type, r.min_value, r.max_value, r.null_count,
                                        r.value_count, r.total_size, r.total_uncompressed_size)
            continue
        out[r.column] = ColumnRange(
            partition, r.column, before.column_type or r.column_type, stat_min(before.min_value, r.min_value),
            stat_max(before.max_value, r.max_value), before.null_count + r.null_count,
            before.value_count + r.value_count, before.total_size + r.total_size,
            before.total_uncompressed_size + r.total_uncompressed_size)
    return list(out.values())


def _value_type(body: Mapping[str, Any]) -> ColumnType | None:
    return column_type_of_value_type_info(body.get("valueType"))


def _wrapped_bound(a: Any, b: Any, ctype: ColumnType | None, pick) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    chosen = pick(unwrap(a, ctype), unwrap(b, ctype))
    return a if chosen == unwrap(a, ctype) else b


def merge_stats_records(newer: Mapping[str, Any], older: Mapping[str, Any]) -> Mapping[str, Any]:
    """``newer`` merged over ``older`` (raw ``HoodieMetadataRecord``s of the column_stats or
    partition_stats partition, as ``partition_reader`` decodes them)."""
    new_body, old_body = newer.get("ColumnStatsMetadata"), older.get("ColumnStatsMetadata")
    if new_body is None or old_body is None:
        return newer
    if new_body.get("isDeleted") or old_body.get("isDeleted") or new_body.get("isTightBound"):
        return newer
    ctype = _value_type(new_body) or _value_type(old_body)
    if ctype is not None and ctype.value_type == ValueType.NULL:
        ctype = None
    merged = dict(new_body)
    merged["minValue"] = _wrapped_bound(old_body.get("minValue"), new_body.get("minValue"), ctype, stat_min)
    merged["maxValue"] = _wrapped_bound(old_body.get("maxValue"), new_body.get("maxValue"), ctype, stat_max)
    for name in ("valueCount", "nullCount", "totalSize", "totalUncompressedSize"):
        merged[name] = (old_body.get(name) or 0) + (new_body.get(name) or 0)
    return {**newer, "ColumnStatsMetadata": merged}
