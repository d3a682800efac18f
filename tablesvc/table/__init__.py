"""The table format: ``hoodie.properties``, its typed config, and creating a table.

What the lower floors read.  The ``Table`` handle (the Python API) is ``tablesvc.api``.
"""

from tablesvc.table.config import MergeMode, TableConfig, TableType
from tablesvc.table.create import TableSpec, create_table, table_properties
from tablesvc.table.properties import parse_properties, read_properties, render_properties, write_properties

__all__ = ["MergeMode", "TableConfig", "TableSpec", "TableType", "create_table", "parse_properties",
           "read_properties", "render_properties", "table_properties", "write_properties"]
