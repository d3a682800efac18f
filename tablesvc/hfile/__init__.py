"""HFile (version 3), the base file format of Hudi's metadata table and the content of its
HFILE_DATA log blocks: a pure-Python reader (by key and full scan) and a writer byte-equal to
Hudi 1.x's native one (``writer.py``), NONE and GZ compression.

Layout and sources: ``reader.py``'s docstring and docs/metadata-table.md.
"""

from tablesvc.hfile.blocks import BlockType, Compression
from tablesvc.hfile.reader import Cell, HFileReader, IndexEntry, Trailer, read_hfile
from tablesvc.hfile.writer import HFileSettings, HFileWriter, write_hfile

__all__ = ["BlockType", "Cell", "Compression", "HFileReader", "HFileSettings", "HFileWriter", "IndexEntry", "Trailer",
           "read_hfile", "write_hfile"]
