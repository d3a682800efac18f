"""The CLI conventions: subcommands, JSON output, one-line errors and exit codes (real processes)."""

from __future__ import annotations

import json

import pytest

from fixture_tables import TABLES_DIR, copy_table
from helpers import one_error_line, tablesvc
from oracles.hudi_rs import hudi_table, read_options


def test_timeline_json_lists_instants_with_operations():
    proc = tablesvc("timeline", str(TABLES_DIR / "v9_txns_simple_nometa"), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [set(r) for r in rows][0] == {"instant", "action", "state", "completion_time", "operation"}
    by_instant = {r["instant"]: r for r in rows}
    compaction = by_instant["20260307135839895"]
    assert compaction == {"instant": "20260307135839895", "action": "commit", "state": "completed",
                          "completion_time": "20260307135840408", "operation": "COMPACT"}
    assert by_instant["20260307135840454"]["action"] == "replacecommit"
    assert by_instant["20260307135840454"]["operation"] == "CLUSTER"
    assert by_instant["20260307135827749"]["operation"] in ("UPSERT", "INSERT", "BULK_INSERT")
    assert [r["instant"] for r in rows] == sorted(r["instant"] for r in rows)


def test_timeline_text_and_incomplete(tmp_path):
    path = copy_table(TABLES_DIR / "v6_trips_8i1u", tmp_path)
    proc = tablesvc("timeline", str(path))
    assert proc.returncode == 0
    assert "20250331030645735  deltacommit  completed" in proc.stdout
    assert "UPSERT" in proc.stdout
    proc = tablesvc("timeline", str(path), "--incomplete")
    assert proc.returncode == 0 and "no pending instants" in proc.stdout
    (path / ".hoodie" / "20300101000000000.deltacommit.requested").write_bytes(b"")
    (path / ".hoodie" / "20300101000000000.deltacommit.inflight").write_bytes(b"")
    rows = json.loads(tablesvc("timeline", str(path), "--incomplete", "--json").stdout)
    assert rows == [{"instant": "20300101000000000", "action": "deltacommit", "state": "inflight",
                     "completion_time": None, "operation": None}]


def test_init_creates_a_table_hudi_rs_opens(tmp_path):
    target = tmp_path / "trips"
    proc = tablesvc("init", str(target), "--name", "trips", "--record-key", "uuid", "--ordering-field", "ts",
                    "--partition-field", "city", "--table-version", "6")
    assert proc.returncode == 0, proc.stderr
    assert "created table trips (version 6" in proc.stdout
    t = hudi_table(target)
    assert t.read(read_options()) == []
    rows = json.loads(tablesvc("timeline", str(target), "--json").stdout)
    assert rows == []


def test_init_defaults_to_version_8(tmp_path):
    proc = tablesvc("init", str(tmp_path / "t"), "--name", "t", "--record-key", "id", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["version"] == 8 and summary["timeline_layout"] == 2
    assert (tmp_path / "t" / ".hoodie" / "timeline").is_dir()


@pytest.mark.parametrize("args,code,needle", [
    (["timeline", "/definitely/not/here"], 2, "/definitely/not/here"),
    (["timeline", "{tmp}"], 2, "not a Hudi table"),
    (["fsview", "{fixture}", "--as-of", "yesterday"], 2, "yesterday"),
    (["timeline", "{fixture}", "--conf", "novalue"], 2, "novalue"),
    (["timeline", "{fixture}", "--conf", "hoodie.compact.inline.max.delta.commits=five"], 2,
     "hoodie.compact.inline.max.delta.commits"),
    (["timeline", "{fixture}", "--config", "{tmp}/missing.yaml"], 2, "missing.yaml"),
    (["init", "{tmp}/new", "--name", "bad name", "--record-key", "id"], 2, "bad name"),
    (["init", "{fixture}", "--name", "x", "--record-key", "id"], 2, "already a Hudi table"),
])
def test_bad_input_is_one_line_with_exit_code(tmp_path, args, code, needle):
    fixture = TABLES_DIR / "v6_trips_8i1u"
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{fixture}", str(fixture)) for a in args]
    proc = tablesvc(*argv)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    line = one_error_line(proc)
    assert needle in line


def test_corrupt_timeline_name_names_the_file_and_debug_shows_traceback(tmp_path):
    path = copy_table(TABLES_DIR / "v6_trips_8i1u", tmp_path)
    (path / ".hoodie" / "20300101000000000.frobnicate").write_bytes(b"")
    proc = tablesvc("timeline", str(path))
    assert proc.returncode == 2
    assert "20300101000000000.frobnicate" in one_error_line(proc)
    proc = tablesvc("timeline", str(path), "--debug")
    assert proc.returncode == 2 and "Traceback" in proc.stderr


def test_config_yaml_and_unknown_command(tmp_path):
    cfg = tmp_path / "svc.yaml"
    cfg.write_text("hoodie.cleaner.commits.retained: 4\nhoodie.clean.automatic: false\n")
    proc = tablesvc("timeline", str(TABLES_DIR / "v6_trips_8i1u"), "--config", str(cfg))
    assert proc.returncode == 0
    cfg.write_text("hoodie.cleaner.policy: KEEP_EVERYTHING\n")
    proc = tablesvc("timeline", str(TABLES_DIR / "v6_trips_8i1u"), "--config", str(cfg))
    assert proc.returncode == 2 and "hoodie.cleaner.policy" in one_error_line(proc)
    assert tablesvc("frobnicate").returncode == 2


def test_fsview_json_matches_latest_slices():
    proc = tablesvc("fsview", str(TABLES_DIR / "v8_trips_8i3u1d"), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert len(rows) == 3
    sao = [r for r in rows if r["partition"] == "city=sao_paulo"][0]
    assert sao["base_instant"] == "20251220210129235"
    assert sao["log_files"] == [".8aa68f7e-afd6-4c94-b86c-8a886552e08d-0_20251220210130911.log.1_0-1139-3316"]
