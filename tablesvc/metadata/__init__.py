"""Reading Hudi's metadata table (``.hoodie/metadata``): its ``files`` partition as the source of
a table's file listing.  docs/metadata-table.md says what is read and how records merge."""

from tablesvc.metadata.files_records import FileInfo, FilesRecord
from tablesvc.metadata.listing import MetadataFileListing, lists_files
from tablesvc.metadata.reader import MetadataTable, metadata_base_path

__all__ = ["FileInfo", "FilesRecord", "MetadataFileListing", "MetadataTable", "lists_files", "metadata_base_path"]
