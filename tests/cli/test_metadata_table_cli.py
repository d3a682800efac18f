"""``tablesvc fsview`` on a table with a metadata table: the listing comes through it, ``--conf
hoodie.metadata.enable=false`` lists storage, and a damaged metadata HFile is one line naming
the file and the byte offset, exit 1."""

from __future__ import annotations

import json

from fixture_tables import copy_table
from tablesvc.cli.main import main


def _fsview(capsys, path, *extra) -> tuple[int, list, list[str]]:
    rc = main(["fsview", str(path), "--json", *extra])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else out), [line for line in err.splitlines() if line]


def test_fsview_lists_through_the_metadata_table_unless_switched_off(fixture_root, tmp_path, capsys):
    path = copy_table(fixture_root.path("v8_trips_8i3u1d"), tmp_path)
    rc, before, _ = _fsview(capsys, path)
    assert rc == 0 and before
    gone = next(r for r in before if r["base_file"])
    (path / gone["partition"] / gone["base_file"]).unlink()
    rc, through_mdt, _ = _fsview(capsys, path)
    assert rc == 0 and through_mdt == before
    rc, from_storage, _ = _fsview(capsys, path, "--conf", "hoodie.metadata.enable=false")
    assert rc == 0 and gone["base_file"] not in {r["base_file"] for r in from_storage}


def test_a_damaged_metadata_hfile_is_one_line_exit_1(fixture_root, tmp_path, capsys):
    path = copy_table(fixture_root.path("v8_trips_8i3u1d"), tmp_path)
    (hfile,) = [p for p in (path / ".hoodie" / "metadata" / "files").glob("*.hfile")
                if "00000000000000000" not in p.name]
    data = bytearray(hfile.read_bytes())
    data[2] ^= 0x20
    hfile.write_bytes(bytes(data))
    rc, _, err = _fsview(capsys, path)
    assert rc == 1 and len(err) == 1, err
    assert str(hfile) in err[0] and "corrupt HFile at byte offset 0" in err[0]
