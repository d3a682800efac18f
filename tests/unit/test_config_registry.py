"""One config path and one writability check (issue #25, item 3).

* Every ``hoodie.*`` key a service, the runner, a Spark job or a command reads is a key of the registry
  (``tablesvc/config/registry.py``), found by reading the sources: no key is read that the
  registry does not type, default and check, and no default is given beside a read.
* A plain mapping handed to a service from Python is parsed and checked by the registry: a bad
  value is refused with the registry's own message, whichever service reads it.
* ``require_writable(table, action)`` is the one "can tablesvc change this table?" check: each
  action's refusal is the message its command gave before, and no other module asks whether the
  table keeps a metadata table.  No Spark.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from tablesvc.config import REGISTRY, build_config, service_config
from tablesvc.errors import ConfigError, UnsupportedTableError
from tablesvc.api import MergeMode, Table, TableSpec
from tablesvc.table.writable import (CLEAN, COMPACT, LOG_COMPACT, ROLLBACK, SERVICE, WRITE, is_writable,
                                     require_writable)

ROOT = Path(__file__).resolve().parents[2]
# Where configuration is read.  tablesvc/table and tablesvc/write read hoodie.properties (the
# table's own keys), which is not service configuration.
READERS = ("tablesvc/services", "tablesvc/runner", "tablesvc/spark", "tablesvc/cli")


def _modules():
    for folder in READERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT), ast.parse(path.read_text(), str(path))


def _is_key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("hoodie.") \
        and all(c.isalnum() or c in "._" for c in node.value)


def _keys_read() -> dict[str, list[str]]:
    """Every whole ``hoodie.*`` string literal in the readers -> where it is."""
    found: dict[str, list[str]] = {}
    for rel, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                continue
            if _is_key(node):
                found.setdefault(node.value, []).append(f"{rel}:{node.lineno}")
    return found


def test_the_sources_are_read():
    keys = _keys_read()
    # the scan sees the keys it must: the trigger, heartbeat and threshold keys among them
    for key in ("hoodie.compact.inline.trigger.strategy", "hoodie.compact.inline.max.delta.commits",
                "hoodie.client.heartbeat.interval_in_ms", "hoodie.client.heartbeat.tolerable.misses",
                "hoodie.log.compaction.blocks.threshold", "hoodie.cleaner.policy"):
        assert key in keys, key


def test_every_key_a_service_reads_is_in_the_registry():
    unregistered = {key: where for key, where in _keys_read().items() if key not in REGISTRY}
    assert not unregistered, f"keys read but not registered (tablesvc/config/registry.py): {unregistered}"


def test_no_default_is_given_beside_a_read():
    """``config.get(KEY, default)`` would be a second default: defaults live in the registry."""
    beside = []
    for rel, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and node.args and (_is_key(node.args[0]) or (isinstance(node.args[0], ast.Name)
                                                                 and node.args[0].id.endswith("_KEY"))) \
                    and (len(node.args) > 1 or node.keywords):
                beside.append(f"{rel}:{node.lineno}")
    assert not beside, beside


def test_every_registered_default_passes_its_own_check():
    for spec in REGISTRY.values():
        assert spec.value(spec.default) == spec.default, spec.key


def test_the_defaults_are_the_registrys():
    from tablesvc.services.plan_execution import heartbeat_settings
    from tablesvc.services.log_compaction.planner import blocks_threshold
    from tablesvc.services.rollback.pending import HeartbeatWindow

    registry = {key: spec.default for key, spec in REGISTRY.items()}
    for config in (None, {}, build_config()):
        assert heartbeat_settings(config) == (registry["hoodie.client.heartbeat.interval_in_ms"],
                                              registry["hoodie.client.heartbeat.tolerable.misses"])
        window = HeartbeatWindow.of(config)
        assert (window.interval_ms, window.misses) == heartbeat_settings(config)
        assert blocks_threshold(config) == registry["hoodie.log.compaction.blocks.threshold"]
        assert service_config(config).as_dict() == build_config().as_dict()


# -- a plain mapping from Python goes through the registry's checks ---------------------------------------
def _registry_message(key: str, raw: str) -> str:
    with pytest.raises(ConfigError) as refused:
        REGISTRY[key].value(raw)
    return str(refused.value)


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Table:
    path = str(tmp_path_factory.mktemp("registry") / "t")
    return Table.create(path, TableSpec("trips", ("uuid",), "ts", ("city",), table_version=8, num_buckets=2))


def _readers(table: Table):
    """Each service's own read of configuration, as a function of the configuration given."""
    from tablesvc.services.compaction import compaction_due
    from tablesvc.services.compaction.planner import build_plan
    from tablesvc.services.log_compaction.planner import blocks_threshold
    from tablesvc.services.plan_execution import heartbeat_settings
    from tablesvc.services.rollback.pending import HeartbeatWindow

    return {
        "hoodie.compact.inline.trigger.strategy": lambda c: compaction_due(table.timeline(), c, table.clock),
        "hoodie.compact.inline.max.delta.commits": lambda c: compaction_due(table.timeline(), c, table.clock),
        "hoodie.compact.inline.max.delta.seconds": lambda c: compaction_due(table.timeline(), c, table.clock),
        "hoodie.client.heartbeat.interval_in_ms": heartbeat_settings,
        "hoodie.client.heartbeat.tolerable.misses": HeartbeatWindow.of,
        "hoodie.log.compaction.blocks.threshold": blocks_threshold,
        "hoodie.compaction.target.io": lambda c: build_plan(table, table.timeline(), c),
    }


@pytest.mark.parametrize("key, raw", [
    ("hoodie.compact.inline.trigger.strategy", "SOMETIMES"),
    ("hoodie.compact.inline.max.delta.commits", "0"),        # the triggers' own check allowed 0
    ("hoodie.compact.inline.max.delta.commits", "five"),
    ("hoodie.compact.inline.max.delta.seconds", "-1"),
    ("hoodie.client.heartbeat.interval_in_ms", "0"),        # read unchecked before
    ("hoodie.client.heartbeat.tolerable.misses", "two"),
    ("hoodie.log.compaction.blocks.threshold", "1"),
    ("hoodie.compaction.target.io", "0"),
])
def test_a_bad_value_in_a_plain_mapping_is_refused_with_the_registrys_message(table, key, raw):
    expected = _registry_message(key, raw)
    assert key in expected
    with pytest.raises(ConfigError) as refused:
        _readers(table)[key]({key: raw})
    assert str(refused.value) == expected


def test_a_good_value_in_a_plain_mapping_is_used(table):
    readers = _readers(table)
    assert readers["hoodie.client.heartbeat.interval_in_ms"](
        {"hoodie.client.heartbeat.interval_in_ms": "1000", "hoodie.client.heartbeat.tolerable.misses": 3}) == (1000, 3)
    due, why = readers["hoodie.compact.inline.max.delta.commits"]({"hoodie.compact.inline.max.delta.commits": "7"})
    assert not due and "< 7 (NUM_COMMITS)" in why
    strategy = "hoodie.compact.inline.trigger.strategy"
    due, why = readers[strategy]({strategy: "num_or_time"})     # the registry's parse: any case
    assert "(NUM_OR_TIME)" in why
    # None and "" mean "not set", as they always have for a mapping
    assert readers["hoodie.log.compaction.blocks.threshold"]({"hoodie.log.compaction.blocks.threshold": None}) == 5
    assert readers["hoodie.log.compaction.blocks.threshold"]({"hoodie.log.compaction.blocks.threshold": ""}) == 5


def test_a_plain_mapping_names_its_source_as_given():
    from tablesvc.config.values import describe_source

    key = "hoodie.log.compaction.blocks.threshold"
    assert describe_source({key: "3"}, key) == "the configuration given"
    assert describe_source({}, key) == describe_source(None, key) == "the default"
    assert describe_source(build_config(conf={key: "3"}), key) == "--conf"


# -- one writability check ----------------------------------------------------------------------------------
def _fake_table(**config) -> SimpleNamespace:
    values = dict(has_metadata_table=False, metadata_partitions=(), is_mor=True, version=9, props={},
                  merge_mode=MergeMode.EVENT_TIME_ORDERING, populate_meta_fields=True)
    values.update(config)
    return SimpleNamespace(base_path="/data/t", config=SimpleNamespace(**values))


ALL = (WRITE, COMPACT, LOG_COMPACT, CLEAN, SERVICE)    # a rollback keeps every partition true (Java's MDT rollback)


@pytest.mark.parametrize("action", ALL, ids=lambda a: a.name)
def test_each_action_refuses_a_metadata_table_tablesvc_does_not_update(action, monkeypatch):
    """A partition tablesvc does not maintain (here ``files``, ``MAINTAINED`` pinned empty) stops
    every action but a rollback; the policy per action and partition is tests/unit/test_metadata_refusals.py."""
    monkeypatch.setattr("tablesvc.table.metadata_partitions.MAINTAINED", frozenset())
    table = _fake_table(has_metadata_table=True, metadata_partitions=("files",),
                        props={"hoodie.table.metadata.partitions": "files"})
    with pytest.raises(UnsupportedTableError) as refused:
        require_writable(table, action)
    assert str(refused.value) == (f"/data/t: {action.name} would leave the metadata table's files stale (tablesvc "
                                  "does not update them); to go ahead, drop them first as Java Hudi does: "
                                  "hoodie.metadata.enable=false (files)")
    assert refused.value.exit_code == 2 and not is_writable(table, action)
    require_writable(_fake_table(), action)    # a plain merge-on-read table: every action may


@pytest.mark.parametrize("config, refusal, refused_by", [
    ({"is_mor": False}, "/data/t: compaction applies to merge-on-read tables only", (COMPACT, LOG_COMPACT)),
    ({"merge_mode": MergeMode.CUSTOM}, "/data/t: merge mode CUSTOM needs a record merger tablesvc does not have; "
     "compaction must merge exactly as the reader does", (COMPACT, LOG_COMPACT)),
    ({"populate_meta_fields": False}, "/data/t: hoodie.populate.meta.fields=false: without stored record keys a "
     "compaction cannot merge records", (COMPACT, LOG_COMPACT)),
])
def test_what_a_compaction_needs_beyond_no_metadata_table(config, refusal, refused_by):
    table = _fake_table(**config)
    for action in ALL:
        if action in refused_by:
            with pytest.raises(UnsupportedTableError, match="^" + refusal.replace("(", r"\(").replace(")", r"\)")):
                require_writable(table, action)
        elif not (action is WRITE and "is_mor" in config):
            require_writable(table, action)
    if "is_mor" in config:
        with pytest.raises(UnsupportedTableError, match="^/data/t: tablesvc writes merge-on-read tables only$"):
            require_writable(table, WRITE)


def test_a_rollback_keeps_every_known_partition_true(monkeypatch):
    """Java's metadata-table rollback takes the instant out of every partition: nothing it knows refuses."""
    monkeypatch.setattr("tablesvc.table.metadata_partitions.MAINTAINED", frozenset())
    listed = "bloom_filters,column_stats,files,record_index,secondary_index_x"
    require_writable(_fake_table(has_metadata_table=True, metadata_partitions=tuple(listed.split(",")),
                                 props={"hoodie.table.metadata.partitions": listed}), ROLLBACK)


def test_only_the_writability_check_asks_about_the_metadata_table():
    """``has_metadata_table`` is read by require_writable alone (the demo only prints it)."""
    asking = []
    for path in sorted((ROOT / "tablesvc").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("tablesvc/table/writable.py", "tablesvc/table/config.py") or rel.startswith("tablesvc/demo/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Attribute) and node.attr == "has_metadata_table":
                asking.append(f"{rel}:{node.lineno}")
    assert not asking, asking
