"""Which of a write's keys a file group already holds: its inserts and updates.

Hudi counts a record written into a file group as an update when the group held its key before
(``numUpdateWrites``), else as an insert (``numInserts``).  With the lookup index the join
decides that on the way: a key it found in a group is an update, the others go to new groups.
With the bucket index every key of a bucket goes to the bucket's group, found or not, so the
write task asks the group's latest slice (``count_present_keys``): its record keys are read
(the base file's key column and the log blocks, merged as the reader merges them, deletes
applied) and the batch's keys counted among them.  Only the key column of each batch is held.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from tablesvc.table.meta_fields import RECORD_KEY as KEY

if TYPE_CHECKING:
    from tablesvc.merge import ReadContext, SliceSpec
    from timeline.storage import Storage


@dataclass(frozen=True)
class PresentKeys:
    """What a write task needs to count present keys: the read context (key column only) and the
    latest slice of each existing file group, by (partition path, file id)."""

    ctx: "ReadContext"
    slices: dict = field(default_factory=dict)

    def count(self, storage: "Storage", partition: str, file_id: str, keys: pa.Array | pa.ChunkedArray) -> int:
        """How many of ``keys`` (unique) the file group holds now; 0 for a group it does not know."""
        spec = self.slices.get((partition, file_id))
        return 0 if spec is None else count_present_keys(storage, spec, self.ctx, keys)

    def mask(self, storage: "Storage", partition: str, file_id: str, keys: pa.Array | pa.ChunkedArray) -> pa.Array:
        """For each of ``keys``, whether the file group holds it now (all False for a group it does
        not know): the record index needs which keys, not only how many (``metadata.write_key_changes``)."""
        spec = self.slices.get((partition, file_id))
        if spec is None:
            return pa.array([False] * len(keys), pa.bool_())
        return present_key_mask(storage, spec, self.ctx, keys)


def count_present_keys(storage: "Storage", spec: "SliceSpec", ctx: "ReadContext",
                       keys: pa.Array | pa.ChunkedArray) -> int:
    """How many of ``keys`` (unique) are live keys of the slice ``spec`` (``ctx`` reads the key
    column only)."""
    from tablesvc.merge import iter_file_slice

    wanted = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    present = 0
    for batch in iter_file_slice(storage, spec, ctx):
        present += pc.sum(pc.is_in(batch.column(KEY), value_set=wanted)).as_py() or 0
    return present


def present_key_mask(storage: "Storage", spec: "SliceSpec", ctx: "ReadContext",
                     keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    """For each of ``keys``, whether it is a live key of the slice ``spec`` (key column only)."""
    from tablesvc.merge import iter_file_slice

    wanted = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    held = [batch.column(KEY) for batch in iter_file_slice(storage, spec, ctx)]
    if not held:
        return pa.array([False] * len(wanted), pa.bool_())
    return pc.fill_null(pc.is_in(wanted, value_set=pa.chunked_array(held).combine_chunks()), False)


__all__ = ["PresentKeys", "count_present_keys", "present_key_mask"]
