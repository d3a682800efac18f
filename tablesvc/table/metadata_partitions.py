"""The partitions a metadata table can hold, as ``hoodie.table.metadata.partitions`` names them.

Each kind is a value: the folder name under ``.hoodie/metadata`` (also the name in the table's
properties), the record type its records carry (Hudi's ``MetadataPartitionType``) and the prefix of
its file-group ids (``files-0000-0``, ``col-stats-0001-0``, ...).  Secondary and expression indexes
are families: one partition per index, named ``secondary_index_<name>`` / ``expr_index_<name>``.

``MAINTAINED`` is what tablesvc keeps true on its own commits; every other partition a table lists
either stays true by itself under a given action or makes tablesvc refuse it (``table.writable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class PartitionKind:
    folder: str              # the partition's folder, or the family's prefix
    record_type: int         # HoodieMetadataRecord.type of its records
    file_id_prefix: str      # file-group ids: <prefix><NNNN>-0
    is_family: bool = False  # secondary_index_<name>, expr_index_<name>


class MetadataPartitionType(Enum):
    FILES = PartitionKind("files", 2, "files-")
    COLUMN_STATS = PartitionKind("column_stats", 3, "col-stats-")
    BLOOM_FILTERS = PartitionKind("bloom_filters", 4, "bloom-filters-")
    RECORD_INDEX = PartitionKind("record_index", 5, "record-index-")
    PARTITION_STATS = PartitionKind("partition_stats", 6, "partition-stats-")
    SECONDARY_INDEX = PartitionKind("secondary_index_", 7, "secondary-index-", is_family=True)
    EXPRESSION_INDEX = PartitionKind("expr_index_", 3, "expr-index-", is_family=True)

    @classmethod
    def of(cls, partition_name: str) -> "MetadataPartitionType | None":
        """The kind of a name listed in ``hoodie.table.metadata.partitions`` (None: unknown)."""
        for kind in cls:
            if (partition_name.startswith(kind.value.folder) if kind.value.is_family
                    else partition_name == kind.value.folder):
                return kind
        return None


# What tablesvc's commits keep true.  Grows as issue #27's write side lands: a kind joins only
# once every commit tablesvc makes updates it.  FILES: ``metadata.maintain`` (every commit, v8/v9).
# COLUMN_STATS, PARTITION_STATS: ``metadata.stats_changes`` in the same delta commit (a clean
# writes column-stats deletes and, as Java, no partition stats).
# RECORD_INDEX: ``metadata.record_index`` from the write tasks' key changes (``write_key_changes``);
# compaction, log compaction and clean write none, as Java.
# SECONDARY_INDEX: ``metadata.secondary_index`` from the write's Spark job over the touched file
# groups before and with the write (``spark.secondary_index_job``); nothing on compaction, log
# compaction or clean, as Java.
MAINTAINED: frozenset[MetadataPartitionType] = frozenset({
    MetadataPartitionType.FILES, MetadataPartitionType.COLUMN_STATS, MetadataPartitionType.PARTITION_STATS,
    MetadataPartitionType.RECORD_INDEX, MetadataPartitionType.SECONDARY_INDEX})

__all__ = ["MAINTAINED", "MetadataPartitionType", "PartitionKind"]
