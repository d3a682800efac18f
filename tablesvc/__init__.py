"""tablesvc: Hudi-compatible table services for merge-on-read tables, in Python on Spark."""

__version__ = "0.1.0"
