"""Java Hudi must start: the Java tier fails (never skips) when it cannot run.

The session's driver has started Spark with the newest Hudi bundle (``java_hudi`` fails the test
otherwise); here it writes a row into a new MOR table and reads it back, so the bundle's writer
and reader both work, and the table carries the version the bundle was asked for.  The bundle for
table version 6 (Hudi 0.x), when ``make interop`` found one, must do the same.
"""

from __future__ import annotations

import pytest
from java_hudi import JavaTable, read_properties

pytestmark = pytest.mark.interop_java


def _round_trip(driver, table: JavaTable) -> None:
    row = ("k1", 1, "p0", "v1")
    driver.write(table, "insert", [row])
    assert driver.read(table) == [row]
    assert read_properties(table.path)["hoodie.table.version"] == str(table.table_version)


def test_java_hudi_starts_and_writes_a_row(java_hudi, tmp_path):
    assert java_hudi.ready.get("ready") is True
    assert java_hudi.ready["hudi_table_version"] >= 8, java_hudi.ready   # a Hudi 1.x bundle is on the class path
    _round_trip(java_hudi, JavaTable(str(tmp_path / "probe"), "interop_probe", 8, java_hudi.bundle))


def test_the_table_version_6_bundle_starts(java_hudi_setup, start_java_hudi, tmp_path):
    bundle = java_hudi_setup.bundle_for(6)
    if bundle is java_hudi_setup.bundle:
        # no Hudi 0.x bundle on this Spark: version 6 is written by the newest bundle, started above
        assert java_hudi_setup.v6_bundle is None
        return
    driver = start_java_hudi(bundle, tmp_path / "java")
    assert driver.ready["hudi_table_version"] == 6, driver.ready
    _round_trip(driver, JavaTable(str(tmp_path / "probe6"), "interop_probe6", 6, bundle))
