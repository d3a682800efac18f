"""The Python API: the ``Table`` handle, which opens or creates a table and runs the Spark jobs and
the services on it.  It sits above the services (its methods call them), so it has a package of
its own; ``tablesvc/table/`` below it is the table format that the lower floors read.

``TableSpec`` and ``MergeMode`` (what ``Table.create`` takes) come along so that a program needs
one import.
"""

from tablesvc.api.table import Table
from tablesvc.table.config import MergeMode
from tablesvc.table.create import TableSpec

__all__ = ["MergeMode", "Table", "TableSpec"]
