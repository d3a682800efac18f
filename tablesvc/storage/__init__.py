"""Storage implementations behind the one interface in ``timeline.storage``."""

from timeline.storage import FileInfo, Storage, join
from tablesvc.storage.local import LocalStorage

__all__ = ["FileInfo", "LocalStorage", "Storage", "discard_partial_copies", "join", "storage_for"]


def storage_for(path: str) -> Storage:
    """The storage that serves ``path`` (only local paths and ``file://`` today)."""
    if "://" in path and not path.startswith("file://"):
        from tablesvc.errors import InvalidInputError

        raise InvalidInputError(f"{path}: only local paths are supported for now")
    return LocalStorage()


def discard_partial_copies(storage: Storage, paths) -> list[str]:
    """What creators of ``paths`` killed mid-create left (``Storage.discard_partial``, folder by
    folder); nothing for a storage without temporary copies.  Returns the deleted paths."""
    discard = getattr(storage, "discard_partial", None)
    if discard is None:
        return []
    by_folder: dict[str, list[str]] = {}
    for path in paths:
        folder, _, name = path.rpartition("/")
        by_folder.setdefault(folder, []).append(name)
    return [removed for folder, names in by_folder.items() for removed in discard(folder, names)]
