"""Java Hudi's check of a metadata table (``metadata_validation.py``, the substitute for
``HoodieMetadataTableValidator``) on the Java-written fixtures with a metadata table: it must find
nothing, and must have compared something in every check the table keeps.  On broken copies it
must find what was broken:

* the metadata table's last delta commit made pending again (its completed instant file removed):
  the data commit it belonged to stays completed, so its files are committed in storage yet
  missing from the metadata table's ``files``, ``column_stats`` (what tablesvc would leave if it
  committed a data instant without its metadata delta commit);
* a base file rewritten (the same rows, another compression): its size in storage no longer is
  the one ``files`` lists, and its footer's sizes no longer are ``column_stats``'.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fixture_tables import copy_table
from metadata_validation import COLUMN_STATS, FILE_SLICES, PARTITION_STATS, PARTITIONS, validate_metadata_table

pytestmark = pytest.mark.interop_java

# fixture -> whether its metadata table keeps partition_stats (the non-partitioned ones do not)
FIXTURES = {
    "v8_trips_8i3u1d": True,
    "v9_nonpartitioned_rollback": False,
    "zips:mor_avro_v9_txns_simple_meta": True,
    "zips:mor_avro_v9_txns_complex_meta": True,
    "zips:mor_avro_v9_txns_nonpart_meta": False,
}


def _copy(fixture_root, name: str, tmp_path: Path) -> Path:
    return copy_table(fixture_root.path(name), tmp_path)


@pytest.mark.parametrize("name", list(FIXTURES))
def test_java_finds_nothing_wrong_with_java_written_metadata_tables(name, java_hudi, fixture_root, tmp_path):
    result = validate_metadata_table(java_hudi, _copy(fixture_root, name, tmp_path))
    print(result.render())
    assert not result.differences, result.render()
    for check in (PARTITIONS, FILE_SLICES, COLUMN_STATS):
        assert result.count(check) > 0, f"{check} compared nothing: {result.render()}"
    assert (result.count(PARTITION_STATS) > 0) == FIXTURES[name], result.render()


def test_a_data_commit_without_its_metadata_delta_commit_is_found(java_hudi, fixture_root, tmp_path):
    path = _copy(fixture_root, "v9_nonpartitioned_rollback", tmp_path)
    mdt_timeline = path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    last = max(mdt_timeline.glob("*_*.deltacommit"))
    instant = last.name.split("_")[0]
    # the data commit of the same instant stays completed
    assert list((path / ".hoodie" / "timeline").glob(f"{instant}_*.deltacommit"))
    last.unlink()

    result = validate_metadata_table(java_hudi, path)
    print(result.render())
    # its files carry the instant in their names (base files and, on v8+, log files)
    written = [d for d in result.differences if d.check == FILE_SLICES and instant in d.detail]
    assert written, f"the files of {instant} missing from the metadata table were not found: {result.render()}"
    assert any(d.check == COLUMN_STATS and "no record in the metadata table" in d.detail and instant in d.where
               for d in result.differences), result.render()


def test_a_base_file_whose_size_changed_in_storage_is_found(java_hudi, fixture_root, tmp_path):
    path = _copy(fixture_root, "zips:mor_avro_v9_txns_simple_meta", tmp_path)
    clean = validate_metadata_table(java_hudi, path)
    assert not clean.differences, clean.render()
    # the newest base file of a partition: the latest slice of its file group
    base = max((path / "region=us").glob("*.parquet"), key=lambda p: p.name.rsplit("_", 1)[1])
    before = base.stat().st_size
    table = pq.read_table(base)
    pq.write_table(table, base, compression="none")      # schema metadata (Hudi's footer keys) kept
    assert base.stat().st_size != before

    result = validate_metadata_table(java_hudi, path)
    print(result.render())
    assert any(d.check == FILE_SLICES and base.name in d.detail and str(before) in d.detail
               for d in result.differences), result.render()
    assert any(d.check == COLUMN_STATS and base.name in d.where for d in result.differences), result.render()


def test_a_committed_log_file_gone_from_storage_is_found(java_hudi, fixture_root, tmp_path):
    path = _copy(fixture_root, "v8_trips_8i3u1d", tmp_path)
    # the newest log file of the table: the latest slice of its file group holds it
    log = max(path.glob("*/.*.log.*"), key=lambda p: p.name.split("_")[1].split(".")[0])
    log.unlink()

    result = validate_metadata_table(java_hudi, path)
    print(result.render())
    assert any(d.check == FILE_SLICES and log.name in d.detail and "absent from storage" in d.detail
               for d in result.differences), result.render()
