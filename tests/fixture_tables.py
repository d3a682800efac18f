"""The tables Apache Hudi wrote, carried in ``tests/data/hudi`` (its README says where each comes
from and what it holds), as test files use them.

``tables/*.zip`` are unzipped once per test run into a temporary folder (``TABLES_DIR``), on first
import (before collection, since test files import this module), so that tests can be
parametrized by table name; ``zips/*.zip`` are unzipped on first use (``FixtureRoot``).  Tests that
change a table call ``copy_table`` first.

A module of its own, not conftest.py: test files import these names, and a second conftest.py in
a sub-folder (tests/interop_java has one) would shadow ``from fixture_tables import ...``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from tablesvc.demo.hudi_tables import CARRIED, unzip_table, unzip_tables

REPO = Path(__file__).resolve().parent.parent
FIXTURES = CARRIED
if not (FIXTURES / "tables").is_dir():  # the project carries them: their absence is a broken checkout
    raise RuntimeError(f"the Apache Hudi test tables are missing: no folder {FIXTURES / 'tables'}")
_UNZIPPED = Path(tempfile.mkdtemp(prefix="tablesvc-hudi-tables-"))
atexit.register(shutil.rmtree, _UNZIPPED, True)
TABLES_DIR = _UNZIPPED / "tables"
unzip_tables(FIXTURES / "tables", TABLES_DIR)
ZIPS_DIR = FIXTURES / "zips"
LOG_FILES_DIR = FIXTURES / "log_files"
HISTORY_FIXTURES_DIR = FIXTURES / "history"     # tables with an LSM history and their expectations (JSON)
# version-6 tables with a metadata table, Java 0.15.0's (tests/interop_java/make_v6_metadata_fixtures.py)
V6_METADATA_FIXTURES_DIR = FIXTURES / "v6_metadata"


def v6_metadata_table(name: str, dst_parent: Path) -> Path:
    """A writable copy of ``v6_metadata/<name>.zip`` under ``dst_parent``."""
    return unzip_table(V6_METADATA_FIXTURES_DIR / f"{name}.zip", dst_parent / name)


def extracted_table_names() -> list[str]:
    return sorted(p.name for p in TABLES_DIR.iterdir() if p.is_dir()) if TABLES_DIR.is_dir() else []


def zip_names() -> list[str]:
    return sorted(p.stem for p in ZIPS_DIR.glob("*.zip")) if ZIPS_DIR.is_dir() else []


def all_fixture_names() -> list[str]:
    """Every fixture table: ``tables/<name>`` and ``zips:<zip stem>``."""
    return extracted_table_names() + [f"zips:{z}" for z in zip_names()]


class FixtureRoot:
    """Resolves a fixture name to a table directory (extracting zips on first use)."""

    def __init__(self, scratch: Path):
        self._scratch = scratch

    def path(self, name: str) -> Path:
        if not name.startswith("zips:"):
            return TABLES_DIR / name
        stem = name[len("zips:"):]
        target = self._scratch / stem
        if not target.exists():
            return unzip_table(ZIPS_DIR / f"{stem}.zip", target)
        (table,) = [p for p in target.iterdir() if p.is_dir()]
        return table


def copy_table(src: Path, dst_parent: Path) -> Path:
    """A writable copy of a fixture table."""
    dst = dst_parent / src.name
    shutil.copytree(src, dst)
    for root, dirs, files in os.walk(dst):
        for n in dirs + files:
            os.chmod(os.path.join(root, n), 0o755 if n in dirs else 0o644)
    os.chmod(dst, 0o755)
    return dst
