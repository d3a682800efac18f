"""A ``hoodie.*`` key in ``--conf`` / ``--config`` that tablesvc does not read, but that is close to
one it does (``hoodie.cleaner.commits.retain`` for ``hoodie.cleaner.commits.retained``), gets one
warning line on stderr naming the closest key; the command does what it did without the key
(Hudi ignores unknown keys too).  Hudi keys of other settings (``hoodie.clean.async``,
``hoodie.datasource.*``) and ``spark.*`` keys get no warning.  No Spark: ``clean run --dry-run``.
"""

from __future__ import annotations

import json

import pytest

from tablesvc.cli.main import main
from tablesvc.config.registry import REGISTRY
from tablesvc.demo.sample_table import build_sample_table

from table_builders import tree


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    return build_sample_table(str(tmp_path_factory.mktemp("keys") / "t"), rows=30).table.base_path


def dry_run(capsys, table: str, *extra: str) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    rc = main(["clean", "run", table, "--dry-run", "--json", *extra])
    out, err = capsys.readouterr()
    return rc, out, err.splitlines()


@pytest.mark.parametrize("given, closest", [
    ("hoodie.cleaner.commits.retain", "hoodie.cleaner.commits.retained"),
    ("hoodie.compact.inline.max.delta.commit", "hoodie.compact.inline.max.delta.commits"),
    ("hoodie.log.compaction.block.threshold", "hoodie.log.compaction.blocks.threshold"),
    ("hoodie.clean.policy", "hoodie.cleaner.policy"),      # Hudi 1.x's name; tablesvc reads the older one
])
def test_a_misspelled_conf_key_gets_one_warning_naming_the_closest_key(table, capsys, given, closest):
    state = tree(table)
    rc, out, err = dry_run(capsys, table, "--conf", f"{given}=1")
    plain_rc, plain_out, plain_err = dry_run(capsys, table)
    assert (rc, json.loads(out)) == (plain_rc, json.loads(plain_out)) == (0, json.loads(plain_out))
    assert plain_err == []
    assert len(err) == 1, err
    assert err[0].startswith("tablesvc: warning: --conf ") and given in err[0] and f"did you mean {closest}?" in err[0]
    assert tree(table) == state


def test_a_misspelled_key_in_a_config_file_names_the_file(table, capsys, tmp_path):
    config = tmp_path / "svc.yaml"
    config.write_text("hoodie.cleaner.commits.retained: 10\nhoodie.cleaner.fileversion.retained: 2\n")
    rc, _out, err = dry_run(capsys, table, "--config", str(config))
    assert rc == 0 and len(err) == 1, err
    assert str(config) in err[0] and "hoodie.cleaner.fileversion.retained" in err[0]
    assert "did you mean hoodie.cleaner.fileversions.retained?" in err[0]


@pytest.mark.parametrize("key", [
    "hoodie.clean.async", "hoodie.clean.max.commits", "hoodie.cleaner.parallelism", "hoodie.archive.automatic",
    "hoodie.compaction.logfile.num.threshold", "hoodie.datasource.write.recordkey.field",
    "hoodie.metadata.bloom.filter.enable",
    "hoodie.write.lock.wait_time_ms_between_retry", "spark.sql.shuffle.partitions", "hoodie.cleaner.commits.retained",
])
def test_keys_hudi_knows_and_known_keys_get_no_warning(table, capsys, key):
    rc, _out, err = dry_run(capsys, table, "--conf", f"{key}=3")
    assert rc == 0 and err == []


def test_no_listed_hudi_key_is_taken_for_a_typo():
    """The Hudi keys tablesvc knows it does not read are real keys of other settings, not registry keys."""
    from tablesvc.config.unknown_keys import HUDI_KEYS_NOT_READ

    assert HUDI_KEYS_NOT_READ and not set(HUDI_KEYS_NOT_READ) & set(REGISTRY)
