"""Which names appeared in or vanished from a timeline folder since it was last listed (Linux inotify).

Why: completing an instant on layout 2 must know whether the instant is still inflight (another
process may have completed it, under a name with an unknown completion time) and the greatest
time on the timeline; listing 30k names for that took 20-60 ms (issue #6).  A process that listed
the folder once can instead ask the kernel what changed since: the kernel queues one event per
name created, linked, renamed or deleted in the folder, by any process on this machine, Java Hudi
writers included, as part of the change itself.  Reading the queue is one ``read`` call.

When this must not be trusted, it says so and the caller lists: not Linux or no inotify (the
per-user instance limit reached), a folder on a file system where another machine may write (only
local file systems are watched: NFS, SMB, FUSE, 9p, overlay and the rest are not), events lost
(queue overflow), the folder moved or deleted, a forked child (the queue belongs to the parent),
or a second listing started meanwhile.  Only plain local storage is watched (``watchable``).
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading

_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_UNMOUNT, _IN_Q_OVERFLOW, _IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
_IN_ONLYDIR, _IN_ISDIR = 0x01000000, 0x40000000
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_WATCH_MASK = _IN_CREATE | _IN_DELETE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR
_APPEARED = _IN_CREATE | _IN_MOVED_TO
_VANISHED = _IN_DELETE | _IN_MOVED_FROM
_GONE = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_UNMOUNT | _IN_IGNORED
_EVENT = struct.Struct("iIII")
# File systems whose every change goes through this machine's kernel (so raises an event here).
_LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs"})


def watchable(storage) -> bool:
    """Plain local storage only: a subclass or wrapper may fake, count or fail its listings on
    purpose.  Known by name: the timeline package does not import tablesvc."""
    cls = type(storage)
    return cls.__name__ == "LocalStorage" and cls.__module__ == "tablesvc.storage.local"


class Watch:
    """The changes to one folder's names since its last ``reset``, for the listing that followed."""

    def __init__(self, notifier: "_Notifier", wd: int):
        self._notifier = notifier
        self._wd = wd
        self._changes: dict[str, bool] = {}   # name -> present after its last event
        self._generation = 0
        self._valid = True
        self._baseline = None                 # what the caller built from the listing after reset

    def reset(self) -> int:
        """Forget the changes so far, before listing the folder again; returns the token to pass to
        ``set_baseline``.  (Changes made while the listing runs are kept: applying them to it
        again is harmless.)"""
        with self._notifier.lock:
            self._notifier.drain()
            self._changes.clear()
            self._generation += 1
            self._baseline = None
            return self._generation

    def set_baseline(self, token: int, baseline) -> None:
        """Record what the listing made after ``reset`` returned ``token``; ignored if another
        reset came in between (its listing is the one the changes are counted from)."""
        with self._notifier.lock:
            if token == self._generation and self._valid:
                self._baseline = baseline

    def changes(self) -> tuple[object, dict[str, bool]] | None:
        """(the baseline, name -> present for each name changed since its listing), or None when
        that cannot be told exactly (list the folder instead)."""
        with self._notifier.lock:
            if not self._notifier.drain() or not self._valid or self._baseline is None:
                return None
            return self._baseline, dict(self._changes)

    def _event(self, mask: int, name: str) -> None:
        if mask & _GONE:
            self._valid = False
        elif name and not mask & _IN_ISDIR:
            if mask & _APPEARED:
                self._changes[name] = True
            elif mask & _VANISHED:
                self._changes[name] = False

    @property
    def usable(self) -> bool:
        return self._valid and self._notifier.usable


class _Notifier:
    """This process's inotify queue (one for all folders), read without blocking."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.watches: dict[int, Watch] = {}
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")

    @property
    def usable(self) -> bool:
        return self.pid == os.getpid()

    def add(self, folder: str) -> Watch | None:
        with self.lock:
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(folder), _WATCH_MASK)
            if wd < 0:
                return None
            known = self.watches.get(wd)   # the same folder watched again: one watch descriptor
            if known is not None and known.usable:
                return known
            watch = self.watches[wd] = Watch(self, wd)
            return watch

    def remove(self, watch: Watch) -> None:
        with self.lock:
            if self.watches.get(watch._wd) is watch:
                del self.watches[watch._wd]
                if self.usable:   # a forked child shares the parent's queue: leave its watches alone
                    self._libc.inotify_rm_watch(self.fd, watch._wd)
            watch._valid = False

    def drain(self) -> bool:
        """Read every queued event into its watch (caller holds ``lock``); False when events may
        have been lost (overflow) or this is a forked child's copy of the queue."""
        if not self.usable:
            return False
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return True
            at = 0
            while at < len(data):
                wd, mask, _, size = _EVENT.unpack_from(data, at)
                name = data[at + 16:at + 16 + size].rstrip(b"\0")
                at += 16 + size
                if mask & _IN_Q_OVERFLOW:
                    for watch in self.watches.values():
                        watch._valid = False
                    return False
                watch = self.watches.get(wd)
                if watch is not None:
                    watch._event(mask, os.fsdecode(name))


_NOTIFIER: _Notifier | None = None
_NOTIFIER_LOCK = threading.Lock()
_FS_TYPES: dict[str, str | None] = {}


def _notifier() -> _Notifier | None:
    global _NOTIFIER
    with _NOTIFIER_LOCK:
        if _NOTIFIER is not None and not _NOTIFIER.usable:
            # a forked child: the parent's queue is not ours to read; our copy of its descriptor
            # goes (closing it here leaves the parent's open)
            try:
                os.close(_NOTIFIER.fd)
            except OSError:
                pass
            _NOTIFIER = None
        if _NOTIFIER is None:
            try:
                _NOTIFIER = _Notifier()
            except (OSError, AttributeError):   # not Linux, no libc symbol, or the instance limit
                return None
        return _NOTIFIER


def _fs_type(folder: str) -> str | None:
    """The file system type of the mount holding ``folder`` (/proc/self/mountinfo), or None."""
    real = os.path.realpath(folder)
    found = _FS_TYPES.get(real, "")
    if found != "":
        return found
    best, kind = "", None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                mount = left.split(" ")[4].replace("\\040", " ")
                inside = real == mount or real.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, kind = mount, right.split(" ")[0]
    except OSError:
        kind = None
    _FS_TYPES[real] = kind
    return kind


def watch_folder(folder: str) -> Watch | None:
    """A watch on ``folder`` (an existing one when there is), or None when changes there cannot
    be known from this machine's events (see the module docstring)."""
    folder = folder[len("file://"):] if folder.startswith("file://") else folder
    if _fs_type(folder) not in _LOCAL_FS:
        return None
    notifier = _notifier()
    return notifier.add(folder) if notifier is not None else None


def unwatch(watch: Watch) -> None:
    watch._notifier.remove(watch)
