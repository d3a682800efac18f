"""Which instants' log blocks of the metadata table a reader takes, besides the metadata table's
own completion (``HoodieTableMetadataUtil.getValidInstantTimestamps``, Hudi 1.x):

* every completed instant of the data table's active timeline;
* every completed delta commit of the metadata table whose instant is not pending on the data
  table (a writer commits the metadata table first, then its data instant: until the data
  instant completes, its metadata delta commit does not count, and if the data instant fails it
  never will; a delta commit of an instant archived on the data table still counts);
* the instants that completed rollbacks and restores of the data table rolled back (newer than
  the earliest of the above): their metadata delta commits are read, so that the rollback's own
  delta commit, which marks their files deleted, has something to merge over;
* the metadata table's completed rollbacks and restores, and its delta commits of the
  ``00000000000000…`` instants that initialise its partitions.
"""

from __future__ import annotations

from timeline.active import Timeline
from timeline.instant import Action
from timeline.storage import Storage

INIT_INSTANT_PREFIX = "00000000000000"     # Hudi's SOLO_COMMIT_TIMESTAMP: partition initialisation


def valid_instants(storage: Storage, data: Timeline, metadata: Timeline) -> frozenset[str]:
    pending_on_data = {i.timestamp for i in data.pending()}
    valid = {i.timestamp for i in data.completed()}
    valid.update(i.timestamp for i in metadata.completed(Action.DELTA_COMMIT)
                 if i.timestamp not in pending_on_data)
    earliest = min(valid) if valid else INIT_INSTANT_PREFIX
    for instant in data.completed(Action.ROLLBACK, Action.RESTORE):
        if instant.timestamp > earliest:
            valid.update(_rolled_back(storage, data, instant))
    valid.update(i.timestamp for i in metadata.completed(Action.ROLLBACK, Action.RESTORE))
    valid.update(i.timestamp for i in metadata.completed(Action.DELTA_COMMIT)
                 if i.timestamp.startswith(INIT_INSTANT_PREFIX))
    return frozenset(valid)


def _rolled_back(storage: Storage, data: Timeline, instant) -> tuple[str, ...]:
    payload = data.payload(storage, instant)
    if instant.action is Action.ROLLBACK:
        return tuple(getattr(payload, "commits_rollback", ()) or ())
    out: list[str] = []
    for metadatas in (getattr(payload, "hoodie_restore_metadata", None) or {}).values():
        for md in metadatas or ():
            out.extend(getattr(md, "commits_rollback", ()) or ())
    return tuple(out)
