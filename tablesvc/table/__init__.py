"""The table: ``hoodie.properties``, its typed config, creation, and the ``Table`` handle."""

from tablesvc.table.config import MergeMode, TableConfig, TableType
from tablesvc.table.create import TableSpec, create_table, table_properties
from tablesvc.table.properties import parse_properties, read_properties, render_properties, write_properties
from tablesvc.table.table import Table

__all__ = ["MergeMode", "Table", "TableConfig", "TableSpec", "TableType", "create_table", "parse_properties",
           "read_properties", "render_properties", "table_properties", "write_properties"]
