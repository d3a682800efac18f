"""Hudi 0.15 initialises a partition of an existing table's metadata table at ``<latest data T>010``
(``createIndexInitTimestamp``, 20 digits).  While that is the latest completed metadata delta
commit, 0.15's compaction and clean of the metadata table append their suffix to it
(``createCompactionTimestamp`` / ``createCleanTimestamp`` append to any time): ``<T>010001`` and
``<T>010002``, 23 digits.  tablesvc schedules them at the same times and reads, lists and
writes a table holding them."""

from __future__ import annotations

import pytest

from fixture_tables import v6_metadata_table
from metadata_tables import slices_agree
from tablesvc.api import Table
from tablesvc.config.registry import CleanerPolicy
from tablesvc.metadata import MetadataTable
from tablesvc.metadata.mdt_clean import clean_if_due
from tablesvc.metadata.mdt_clean_plan import MetadataCleanPolicy
from tablesvc.metadata.mdt_compaction import compact_if_due
from tablesvc.metadata.writer import MetadataTableWriter
from tablesvc.services.result import Status
from timeline.instant import Action, Instant, validate_instant_time


def _writer(table) -> MetadataTableWriter:
    return MetadataTableWriter.of(table.storage, table.base_path, table.instant_times, ("files",))


def _initialised_at_010(path) -> str:
    """A completed metadata delta commit at ``<latest data instant>010``, as 0.15's initialisation
    of a new partition leaves it (its records are not what this test is about: none)."""
    table = Table.open(str(path))
    init = table.timeline().max_time() + "010"
    done = _writer(table).write_delta_commit(init, {})
    assert done.timestamp == init and len(init) == 20
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    assert mdt.timeline.latest_completed(Action.DELTA_COMMIT).timestamp == init
    return init


def test_instant_times_of_23_digits_are_valid_and_longer_are_not():
    assert validate_instant_time("20261127120136247010001") == "20261127120136247010001"
    assert Instant.parse("20261127120136247010001.commit").timestamp == "20261127120136247010001"
    with pytest.raises(Exception, match="20261127120136247010001001"):
        validate_instant_time("20261127120136247010001001")


def test_a_v6_metadata_compaction_after_a_010_initialisation_is_at_010001(tmp_path):
    path = v6_metadata_table("v6_mdt_files", tmp_path)
    init = _initialised_at_010(path)
    table = Table.open(str(path))
    [done] = compact_if_due(table, _writer(table), max_delta_commits=1)
    assert done.timestamp == init + "001" and len(done.timestamp) == 23 and done.action is Action.COMMIT
    assert (path / ".hoodie" / "metadata" / "files" / f"files-0000-0_1-0-1_{init}001.hfile").is_file()
    slices_agree(path)
    # the next write's metadata delta commit lands after it, in the new slice
    [c] = Table.open(str(path)).compact()
    assert c.status is Status.DONE, c.render()
    slices_agree(path)


def test_a_v6_metadata_clean_after_a_010_initialisation_is_at_010002(tmp_path):
    path = v6_metadata_table("v6_mdt_files", tmp_path)
    # two delta commits after Java's last metadata compaction (three instants): the clean is due
    assert [r.status for r in Table.open(str(path)).compact()] == [Status.DONE]
    assert [r.status for r in Table.open(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})] \
        == [Status.DONE]
    init = _initialised_at_010(path)
    table = Table.open(str(path))
    [done] = clean_if_due(table, _writer(table), MetadataCleanPolicy(CleanerPolicy.KEEP_LATEST_FILE_VERSIONS,
                                                                      file_versions_retained=1))
    assert done.timestamp == init + "002" and len(done.timestamp) == 23 and done.action is Action.CLEAN
    assert (path / ".hoodie" / "metadata" / ".hoodie" / f"{done.timestamp}.clean").is_file()
    slices_agree(path)
