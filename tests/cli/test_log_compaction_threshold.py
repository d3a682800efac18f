"""The "not due" reason of log compaction names the block threshold in force and where it came
from: the default, the table's ``.hoodie/tablesvc.yaml``, ``--config FILE``, ``--conf``, or the
forced threshold of ``schedule --force`` / ``run`` without a pending plan.  The default is one
value everywhere: the registry's, the planner's and docs/log-compaction.md's.  No Spark.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tablesvc.cli.main import main
from tablesvc.config.registry import REGISTRY
from tablesvc.demo.sample_table import build_sample_table
from tablesvc.api import Table

from table_builders import update_five_records

KEY = "hoodie.log.compaction.blocks.threshold"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "log-compaction.md"


@pytest.fixture(scope="module")
def four_blocks(tmp_path_factory) -> Path:
    """v8: the chennai slice holds 4 valid log blocks (four update commits), the others one."""
    table = build_sample_table(str(tmp_path_factory.mktemp("blocks") / "t"), table_version=8, rows=60).table
    for fare in (1.0, 2.0, 3.0, 4.0):
        [chennai] = [s for s in table.latest_file_slices() if s.partition == "city=chennai"]
        update_five_records(table, chennai, fare)
    return Path(table.base_path)


def schedule(capsys, template: Path, tmp_path: Path, label: str, table_yaml: str | None, *extra: str) -> dict:
    path = tmp_path / label
    shutil.copytree(template, path)
    if table_yaml is not None:
        (path / ".hoodie" / "tablesvc.yaml").write_text(table_yaml)
    capsys.readouterr()
    rc = main(["logcompaction", "schedule", str(path), "--json", *extra])
    out, err = capsys.readouterr()
    assert rc == 0 and not err, err
    result = json.loads(out)
    assert result["status"] == "nothing_to_do" and not Table.open(str(path)).timeline().pending_log_compactions()
    return result


def test_the_reason_names_the_threshold_and_its_source(four_blocks, capsys, tmp_path):
    below = "file groups with log blocks below the threshold (at most 4 valid log blocks < {}, " + KEY + ")"
    config = tmp_path / "svc.yaml"
    config.write_text(f"{KEY}: 7\n")
    cases = [
        ("default", None, (), 5, "threshold 5 is the default"),
        ("table", f"{KEY}: 6\n", (), 6, "threshold 6 comes from the table's .hoodie/tablesvc.yaml"),
        ("config", f"{KEY}: 6\n", ("--config", str(config)), 7, f"threshold 7 comes from --config {config}"),
        ("conf", None, ("--config", str(config), "--conf", f"{KEY}=6"), 6, "threshold 6 comes from --conf"),
    ]
    for label, table_yaml, extra, threshold, source in cases:
        reason = schedule(capsys, four_blocks, tmp_path, label, table_yaml, *extra)["reason"]
        assert f"{below.format(threshold)}; {source}" in reason, (label, reason)


def test_a_forced_threshold_says_so_and_what_the_configured_one_was(tmp_path, capsys):
    path = build_sample_table(str(tmp_path / "t"), table_version=8, rows=60).table.base_path
    capsys.readouterr()
    assert main(["logcompaction", "schedule", path, "--force", "--json", "--conf", f"{KEY}=9"]) == 0
    reason = json.loads(capsys.readouterr().out)["reason"]
    assert ("(at most 1 valid log block < 2, " + KEY + "); threshold 2 is forced (schedule --force, or run "
            "without a pending plan), over the configured 9 from --conf") in reason, reason


def test_the_default_is_the_same_in_the_registry_the_planner_and_the_docs():
    from tablesvc.services.log_compaction import planner

    default = REGISTRY[KEY].default
    assert planner.blocks_threshold(None) == planner.blocks_threshold({}) == default == 5
    documented = re.search(r"^\| `" + re.escape(KEY) + r"` \| (\d+) \|", DOCS.read_text(), re.MULTILINE)
    assert documented and int(documented.group(1)) == default


def test_a_plain_mapping_is_checked_as_the_registry_checks_it():
    """Library callers may pass a dict: its value is parsed by the registry (at least 2), not by a
    second, looser rule in the planner."""
    from tablesvc.errors import ConfigError
    from tablesvc.services.log_compaction import planner

    assert planner.blocks_threshold({KEY: "3"}) == 3
    with pytest.raises(ConfigError, match=KEY):
        planner.blocks_threshold({KEY: "1"})
