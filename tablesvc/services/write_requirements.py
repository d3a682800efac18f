"""The write action's own commit requirement: no concurrent write touched its file groups.

Why: a write's metadata-table changes for the key-indexed partitions (``secondary_index_*``, and
``record_index``'s updates) are computed from the file groups' slices as the write's Spark job saw
them, outside the table lock.  Two writes that both update key ``k`` in file group ``F`` would
each delete the old ``v0$k`` and insert their own value: whichever commits second leaves the first
one's entry behind, an index entry no row backs.

Hudi's optimistic concurrency control refuses such a pair the same way for every write of a
multi-writer table (``SimpleConcurrentFileWritesConflictResolutionStrategy``): the candidates are
the completed commits, delta commits and replace commits whose completion time is after the
committing write's requested time (Hudi 1.x ``findInstantsModifiedAfterByCompletionTime``), and
two operations conflict when the (partition, file id) sets they mutated intersect; a compaction
(or log compaction) is not a conflict for a write (it rewrites, it changes no value).

tablesvc applies it to writes of tables whose metadata table lists (completed or inflight) a
partition indexed by record key, where a lost update is a wrong index entry that no reader
detects; other tables keep the single-writer default (docs/metadata-table.md, "Secondary
indexes").  A v6 timeline (no completion times) compares the instant times instead, as Hudi 0.x.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Mapping, Sequence

from tablesvc.errors import ConflictError
from tablesvc.services.lifecycle.requirements import CommitRequirement
from timeline.active import Timeline
from timeline.payloads import CommitMetadata, WriteStat

# completed instants of these operations rewrite file groups without changing a value
NOT_A_CONFLICT = frozenset({"COMPACT", "LOG_COMPACT"})


def touched_file_groups(stats: Mapping[str, Sequence[WriteStat]]) -> frozenset[tuple[str, str]]:
    """(partition, file id) of every file group a write's stats name."""
    return frozenset((partition, s.file_id) for partition, ss in stats.items() for s in ss if s.file_id)


def _mutated(metadata: CommitMetadata) -> Iterable[tuple[str, str]]:
    for partition, ss in (metadata.partition_to_write_stats or {}).items():
        for s in ss:
            if s.file_id:
                yield partition, s.file_id
    yield from metadata.replaced_file_ids()


@dataclass(frozen=True)
class NoConcurrentFileGroupWrite(CommitRequirement):
    """No write that completed after ``requested`` mutated one of ``file_groups``."""

    name: ClassVar[str] = "no-concurrent-file-group-write"

    requested: str
    file_groups: frozenset[tuple[str, str]]

    def describe(self) -> str:
        return (f"no write completed after {self.requested} touched one of its "
                f"{len(self.file_groups)} file groups")

    def check(self, table: Any, timeline: Timeline | None) -> None:
        if timeline is None or not self.file_groups:
            return
        for other in timeline.completed_writes():
            if other.timestamp == self.requested:
                continue
            after = other.completion_time or other.timestamp
            if after <= self.requested:
                continue
            metadata = timeline.commit_metadata(table.storage, other)
            if not isinstance(metadata, CommitMetadata) or metadata.operation_type in NOT_A_CONFLICT:
                continue
            shared = sorted(self.file_groups.intersection(_mutated(metadata)))
            if shared:
                partition, file_id = shared[0]
                raise ConflictError(
                    f"{table.base_path}: {other.action.value} {other.timestamp} completed while write "
                    f"{self.requested} ran and wrote file group {file_id} of partition {partition!r} "
                    f"(and {len(shared) - 1} more): write {self.requested} not committed; retry it")


__all__ = ["NOT_A_CONFLICT", "NoConcurrentFileGroupWrite", "touched_file_groups"]
