"""The tables Apache Hudi wrote that the project carries (``tests/data/hudi``), unzipped for use.

They live in the source tree, zipped, beside the tests that read them; a checkout (or an
editable install) finds them next to this package.  ``TABLESVC_FIXTURES`` names another folder
of the same shape (``tables/*.zip``, ``zips/``, ``log_files/``).
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

CARRIED = Path(os.environ.get("TABLESVC_FIXTURES") or Path(__file__).resolve().parents[2] / "tests" / "data" / "hudi")


def unzip_table(archive: Path, target: Path) -> Path:
    """Unzip one table archive (``<name>/`` at its top; macOS ``__MACOSX`` folders skipped)
    into ``target`` and return the table's folder."""
    with zipfile.ZipFile(archive) as zf:
        members = [m for m in zf.namelist() if not m.startswith("__MACOSX")]
        zf.extractall(target, members)
        tops = {m.split("/", 1)[0] for m in members}
    if len(tops) != 1:
        raise ValueError(f"{archive}: expected one table folder at the top, found {sorted(tops)}")
    return target / tops.pop()


def unzip_tables(folder: Path, target: Path) -> list[Path]:
    """Every ``folder/*.zip`` unzipped into ``target``; the tables' folders, by name."""
    target.mkdir(parents=True, exist_ok=True)
    return sorted(unzip_table(archive, target) for archive in sorted(folder.glob("*.zip")))
