"""A rollback command block appended to a file slice as its next log version."""

from __future__ import annotations

from tablesvc.errors import TablesvcError
from tablesvc.fsview.names import UNKNOWN_WRITE_TOKEN, LogFileName, looks_like_log_file
from tablesvc.logformat import read_log_file, rollback_block, write_log_file
from timeline.storage import Storage, join


def append_rollback_command_block(storage: Storage, folder: str, file_id: str, base_instant: str,
                                  r: str, t: str) -> tuple[str, int]:
    """Write ``rollback_block(R, T)`` as the next log version of the slice (``file_id``,
    ``base_instant``) in ``folder``, unless the slice already holds that block (a rollback resumed
    after a kill: written once only); returns (path, size) of the file holding it.  A version taken
    meanwhile by another writer moves on to the next one."""
    versions = [0]
    for info in storage.list_dir(folder):
        if info.is_dir or not looks_like_log_file(info.name):
            continue
        try:
            log = LogFileName.parse(info.name)
        except TablesvcError:
            continue
        if log.file_id != file_id or log.instant != base_instant or log.extension != "log" or log.cdc:
            continue
        versions.append(log.version)
        try:
            contents = read_log_file(storage, info.path)
        except FileNotFoundError:
            continue
        if any(b.is_rollback and b.instant_time == r and b.target_instant_time == t for b in contents.blocks):
            return info.path, info.size
    version = max(versions) + 1
    while True:
        path = join(folder, LogFileName(file_id, base_instant, version, UNKNOWN_WRITE_TOKEN).name)
        try:
            return path, len(write_log_file(storage, path, [rollback_block(r, t)]))
        except FileExistsError:
            version += 1
