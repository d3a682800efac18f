"""Storage implementations behind the one interface in ``timeline.storage``."""

from timeline.storage import FileInfo, Storage, join
from tablesvc.storage.local import LocalStorage

__all__ = ["FileInfo", "LocalStorage", "Storage", "join", "storage_for"]


def storage_for(path: str) -> Storage:
    """The storage that serves ``path`` (only local paths and ``file://`` today)."""
    if "://" in path and not path.startswith("file://"):
        from tablesvc.errors import InvalidInputError

        raise InvalidInputError(f"{path}: only local paths are supported for now")
    return LocalStorage()
