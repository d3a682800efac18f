"""Where a file-system view gets its file names and sizes from, when not from listing storage.

``FileSystemView.build(listing=...)`` takes the partitions, and each partition's file names with
their sizes, from a ``FileListing`` instead of listing folders and ``stat``-ing files: the
metadata table's ``files`` partition (``tablesvc.metadata.listing``) is one.  Everything after
the names is the same: which files are visible (their instants committed on the data table's
timeline), how they form slices, which slice is latest.  A file the listing names is in the
view even when storage no longer holds it, as in Java and hudi-rs.
"""

from __future__ import annotations

from typing import Protocol


class FileListing(Protocol):
    def partitions(self) -> list[str]:
        """Partition paths, sorted ("" for a non-partitioned table)."""
        ...

    def files(self, partition: str) -> dict[str, int]:
        """File name -> size in bytes of every file of ``partition`` (empty when it has none)."""
        ...
