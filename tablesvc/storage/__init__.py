"""Storage implementations behind the one interface in ``timeline.storage``."""

from timeline.storage import FileInfo, Storage, join
from tablesvc.storage.local import LocalStorage

__all__ = ["FileInfo", "LocalStorage", "Storage", "discard_partial_copies", "join", "storage_for",
           "storage_for_tasks", "task_storage"]


def storage_for(path: str, options=None) -> Storage:
    """The storage that serves ``path``: local paths and ``file://`` on the local file system;
    ``s3://``/``s3a://``, ``az://``/``abfs[s]://`` (and ``gs://``, untested) on an object store
    (``tablesvc.storage.object_store``), configured by ``options`` (obstore's or Hadoop S3A's key
    names) and the environment."""
    if "://" in path and not path.startswith("file://"):
        from tablesvc.storage.object_store import SCHEMES, ObjectStorage

        if path.split("://", 1)[0].lower() in SCHEMES:
            return ObjectStorage(options)
        from tablesvc.errors import InvalidInputError

        raise InvalidInputError(f"{path}: unsupported scheme {path.split('://', 1)[0]!r} (local paths, file://, "
                                f"{', '.join(s + '://' for s in sorted(SCHEMES))})")
    return LocalStorage()


def storage_for_tasks(storage: Storage) -> Storage | None:
    """What a Spark task is handed of a table's ``storage``: an object store's task form
    (``ObjectStorage.for_tasks``: its options travel with the task, so executors reach the same
    endpoint), or None for local files, where a task opens the file system itself
    (``task_storage``) and a wrapper the driver put around its storage stays in the driver."""
    ship = getattr(storage, "for_tasks", None)
    return ship() if ship is not None else None


def task_storage(base_path: str, storage: Storage | None) -> Storage:
    """The storage a task works through: the one its context carries (``storage_for_tasks``),
    else the one ``base_path`` names."""
    return storage if storage is not None else storage_for(base_path)


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
