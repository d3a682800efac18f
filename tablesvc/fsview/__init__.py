"""File names, partitions and the file-system view (file groups and slices)."""

from tablesvc.fsview.names import BaseFileName, LogFileName, new_file_id, write_token
from tablesvc.fsview.partitions import list_partitions
from tablesvc.fsview.view import BaseFile, FileGroup, FileSlice, FileSystemView, LogFile

__all__ = ["BaseFile", "BaseFileName", "FileGroup", "FileSlice", "FileSystemView", "LogFile", "LogFileName",
           "list_partitions", "new_file_id", "write_token"]
