"""``<partition>/.hoodie_partition_metadata``: the file that makes a folder a partition for Hudi's
readers.  The first base file written into a new partition creates it (``base_file_writer``)."""

from __future__ import annotations

from tablesvc.fsview.names import PARTITION_METAFILE
from timeline.storage import Storage, join


def partition_depth(partition: str) -> int:
    return len([p for p in partition.split("/") if p]) if partition else 0


def ensure_partition_metadata(storage: Storage, base_path: str, partition: str, instant: str,
                              depth: int | None = None) -> bool:
    """Create ``<partition>/.hoodie_partition_metadata`` unless it exists; True when created."""
    path = join(base_path, partition, PARTITION_METAFILE)
    if storage.exists(path):
        return False
    depth = partition_depth(partition) if depth is None else depth
    body = f"#partition metadata\ncommitTime={instant}\npartitionDepth={depth}\n".encode()
    try:
        storage.write_new(path, body)
    except FileExistsError:  # another task made it first
        return False
    return True


__all__ = ["ensure_partition_metadata", "partition_depth"]
