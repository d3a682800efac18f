"""The ``_hoodie_*`` meta fields: the columns Hudi stores first in every record of a table that
populates them (``hoodie.populate.meta.fields``, the default), spelled here once.

They belong to the table format, so they sit on its floor: the merge reader, the write, the
Spark jobs, the services and the demo all import them from here.
"""

COMMIT_TIME = "_hoodie_commit_time"          # the instant that wrote the record
COMMIT_SEQNO = "_hoodie_commit_seqno"        # "<instant>_<task>_<n>": unique within the table
RECORD_KEY = "_hoodie_record_key"            # the key records are merged on
PARTITION_PATH = "_hoodie_partition_path"    # the partition folder, relative to the table
FILE_NAME = "_hoodie_file_name"              # the file the record was written to

# In the order Hudi lays them out, before the data columns.
META_FIELDS = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)

__all__ = ["COMMIT_SEQNO", "COMMIT_TIME", "FILE_NAME", "META_FIELDS", "PARTITION_PATH", "RECORD_KEY"]
