"""LocalStorage.delete removes Hadoop's checksum sibling with the file, as Java Hudi's file system does."""

from __future__ import annotations

from tablesvc.storage import LocalStorage


def test_delete_removes_the_checksum_sibling(tmp_path):
    data = tmp_path / "p0" / "f1_1-0-1_20240101000000000.parquet"
    data.parent.mkdir()
    data.write_bytes(b"PAR1")
    crc = data.parent / f".{data.name}.crc"
    crc.write_bytes(b"crc")
    other = data.parent / ".other.parquet.crc"
    other.write_bytes(b"crc")

    assert LocalStorage().delete(str(data)) is True
    assert not data.exists() and not crc.exists()
    assert other.exists()                     # only the deleted file's own checksum goes


def test_delete_of_a_missing_file_still_clears_its_stale_checksum(tmp_path):
    crc = tmp_path / ".gone.log.1_0-1-0.crc"
    crc.write_bytes(b"crc")
    assert LocalStorage().delete(str(tmp_path / "gone.log.1_0-1-0")) is False
    assert not crc.exists()
