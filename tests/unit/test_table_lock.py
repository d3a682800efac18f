"""The table lock is Java Hudi's file-system lock file (timeline/lock.py).

A Java writer's lock file is made here as Hudi's FileSystemBasedLockProvider makes it on the
local file system: ``<dir>/lock`` holding its LockInfo text, with Hadoop's ``.lock.crc`` beside
it, or empty (created, not yet written).  Its modification time is set to say how old it is.
"""

from __future__ import annotations

import json
import os

import pytest

from tablesvc.api.table import Table
from tablesvc.config import load_config
from tablesvc.errors import ConfigError
from tablesvc.storage import LocalStorage
from timeline.clock import ManualClock
from timeline.errors import LockHeldError
from timeline.lock import LOCK_FILE, LockSettings, TableLock, checksum_sibling, lock_file_path

JAVA_LOCK_INFO = (b'{"lockCreateTime":"2026-03-01 10:00:00.000","lockThreadName":"main",'
                  b'"lockStacksInfo":["java.lang.Thread.getStackTrace(Thread.java:1610)"]}')
NOW_MS = 1_770_000_000_000


def java_lock(folder, age_ms: int, body: bytes = JAVA_LOCK_INFO) -> str:
    """A lock file as a Java writer leaves it, ``age_ms`` old by its mtime (seen from NOW_MS)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "lock")
    with open(path, "wb") as f:
        f.write(body)
    with open(os.path.join(folder, ".lock.crc"), "wb") as f:
        f.write(b"crc\x00\x00\x02\x00")
    mtime_s = (NOW_MS - age_ms) / 1000
    os.utime(path, (mtime_s, mtime_s))
    return path


def lock(base, clock, **kwargs) -> TableLock:
    return TableLock(LocalStorage(), str(base), clock, wait_ms=0, sleep=lambda s: None, **kwargs)


def test_the_lock_file_is_javas(tmp_path):
    assert LOCK_FILE == ".hoodie/lock"
    assert lock_file_path("/t") == "/t/.hoodie/lock"
    assert lock_file_path("/t", "/locks/t1") == "/locks/t1/lock"
    assert checksum_sibling("/t/.hoodie/lock") == "/t/.hoodie/.lock.crc"
    held = lock(tmp_path, ManualClock(NOW_MS), owner="me").acquire()
    assert (tmp_path / ".hoodie" / "lock").exists()
    assert json.loads((tmp_path / ".hoodie" / "lock").read_bytes())["owner"] == "me"
    held.release()
    assert not (tmp_path / ".hoodie" / "lock").exists()


@pytest.mark.parametrize("body", [JAVA_LOCK_INFO, b""], ids=["lock-info", "empty"])
def test_a_fresh_java_lock_is_honoured_and_never_deleted(tmp_path, body):
    path = java_lock(tmp_path / ".hoodie", age_ms=0, body=body)
    taker = lock(tmp_path, ManualClock(NOW_MS), expire_minutes=1)
    for _ in range(3):
        assert not taker.try_acquire()
    with pytest.raises(LockHeldError, match=r"\.hoodie/lock is held by a Java writer"):
        taker.acquire()
    assert open(path, "rb").read() == body and (tmp_path / ".hoodie" / ".lock.crc").exists()
    taker.release()   # never acquired: leaves Java's lock alone
    assert os.path.exists(path)


def test_a_java_lock_never_expires_when_expire_is_zero(tmp_path):
    path = java_lock(tmp_path / ".hoodie", age_ms=30 * 86_400_000)   # a month old
    taker = lock(tmp_path, ManualClock(NOW_MS))                      # expire_minutes=0, Java's default
    assert not taker.try_acquire()
    with pytest.raises(LockHeldError, match="never expires.*delete the file"):
        taker.acquire()
    assert open(path, "rb").read() == JAVA_LOCK_INFO


def test_a_java_lock_expires_by_mtime_as_java_judges(tmp_path):
    folder = tmp_path / ".hoodie"
    # exactly the limit old: Java's rule is strictly older than, so still held
    java_lock(folder, age_ms=2 * 60_000)
    taker = lock(tmp_path, ManualClock(NOW_MS), expire_minutes=2)
    assert not taker.try_acquire() and (folder / "lock").exists()
    # older than the limit: removed with its checksum sibling, then taken
    java_lock(folder, age_ms=2 * 60_000 + 1)
    assert not taker.try_acquire()
    assert not (folder / "lock").exists() and not (folder / ".lock.crc").exists()
    assert taker.try_acquire()
    taker.release()
    assert not (folder / "lock").exists()


def test_tablesvc_locks_still_expire_by_their_own_expiry(tmp_path):
    clock = ManualClock(NOW_MS)
    first = lock(tmp_path, clock, ttl_ms=1000, owner="first").acquire()
    # mtime is irrelevant for tablesvc's own lock, whatever expire says
    second = lock(tmp_path, clock, ttl_ms=1000, owner="second", expire_minutes=0)
    with pytest.raises(LockHeldError, match="held by first"):
        second.acquire()
    clock.advance(1001)   # first died: its expiry passed
    assert not second.try_acquire() and second.try_acquire()
    first.release()       # no longer its lock: left alone
    assert json.loads(open(second.path, "rb").read())["owner"] == "second"
    second.release()
    assert not os.path.exists(second.path)


def test_release_leaves_a_lock_a_java_writer_overwrote(tmp_path, capsys):
    held = lock(tmp_path, ManualClock(NOW_MS)).acquire()
    with open(held.path, "wb") as f:      # Hadoop's non-atomic create overwrote it
        f.write(JAVA_LOCK_INFO)
    held.release()
    assert open(held.path, "rb").read() == JAVA_LOCK_INFO
    assert "overwritten by a Java writer" in capsys.readouterr().err


def test_the_lock_folder_may_be_elsewhere(tmp_path):
    elsewhere = tmp_path / "locks" / "t1"
    java_lock(elsewhere, age_ms=0)
    taker = lock(tmp_path / "table", ManualClock(NOW_MS), lock_dir=str(elsewhere))
    assert not taker.try_acquire()
    os.remove(elsewhere / "lock")
    assert taker.try_acquire() and taker.path == str(elsewhere / "lock")
    taker.release()


def make_table(tmp_path, yaml_text: str | None = None, name: str = "t") -> Table:
    from tablesvc.table.create import TableSpec

    table = Table.create(str(tmp_path / name), TableSpec(name=name, table_version=8, record_key_fields=("id",),
                                                         ordering_field="ts"))
    if yaml_text is not None:
        (tmp_path / name / ".hoodie" / "tablesvc.yaml").write_text(yaml_text)
    return Table.open(table.base_path)


def test_table_takes_the_lock_the_tables_config_names(tmp_path):
    table = make_table(tmp_path)
    assert table.lock_settings == LockSettings(None, 0, 30_000)
    assert table.lock().path == f"{table.base_path}/.hoodie/lock"
    table = make_table(tmp_path, f"hoodie.write.lock.filesystem.path: file://{tmp_path}/locks/\n"
                                 "hoodie.write.lock.filesystem.expire: 5\n", name="t2")
    assert table.lock_settings == LockSettings(f"{tmp_path}/locks", 5, 30_000)
    with table.lock() as held:
        assert held.path == f"{tmp_path}/locks/lock" and os.path.exists(held.path)
    assert not os.path.exists(f"{tmp_path}/locks/lock")


def test_a_command_cannot_move_the_lock_away_from_the_tables(tmp_path):
    table = make_table(tmp_path, "hoodie.write.lock.filesystem.expire: 5\n")
    storage = LocalStorage()
    # agreeing with the table's file is fine, disagreeing is refused naming the key and the file
    assert load_config(storage, conf_pairs=["hoodie.write.lock.filesystem.expire=5"],
                       table_path=table.base_path).get("hoodie.write.lock.filesystem.expire") == 5
    with pytest.raises(ConfigError, match=r"hoodie.write.lock.filesystem.expire: set by --conf.*tablesvc.yaml"):
        load_config(storage, conf_pairs=["hoodie.write.lock.filesystem.expire=1"], table_path=table.base_path)
    with pytest.raises(ConfigError, match="hoodie.write.lock.filesystem.path: set by --conf"):
        load_config(storage, conf_pairs=[f"hoodie.write.lock.filesystem.path={tmp_path}"],
                    table_path=table.base_path)
    with pytest.raises(ConfigError, match="expected an absolute folder path"):
        load_config(storage, conf_pairs=["hoodie.write.lock.filesystem.path=locks"])


@pytest.mark.parametrize("name", ["v6_trips_8i1u", "v8_trips_8i3u1d"])
def test_readers_ignore_the_lock_file_in_the_timeline_folder(tmp_path, name):
    """Table version 6 keeps its timeline in ``.hoodie/`` itself, where the lock file lives."""
    from fixture_tables import TABLES_DIR, copy_table
    from oracles.hudi_rs import hudi_table, read_rows

    path = copy_table(TABLES_DIR / name, tmp_path)
    before_rs = sorted(map(str, read_rows(path)))
    before = Table.open(str(path)).timeline().instants
    java_lock(path / ".hoodie", age_ms=0)
    assert hudi_table(path) is not None and sorted(map(str, read_rows(path))) == before_rs
    assert Table.open(str(path)).timeline().instants == before
