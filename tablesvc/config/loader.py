"""Where configuration values come from, in increasing precedence:

1. built-in defaults (``tablesvc.config.registry``),
2. the table's own ``<table>/.hoodie/tablesvc.yaml``, if present,
3. a YAML file given with ``--config``,
4. ``--conf key=value`` pairs (repeatable).

YAML files are flat mappings of Hudi keys to scalars, loaded with ``safe_load``.
A malformed value is a ``ConfigError`` naming the layer (the file path, or ``--conf``)
and the key.
``ServiceConfig.source(key)`` tells where a value came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import yaml

from tablesvc.config.registry import REGISTRY, TABLE_WIDE_KEYS, is_storage_key
from tablesvc.errors import ConfigError
from timeline.storage import Storage, join

TABLE_CONFIG_FILE = ".hoodie/tablesvc.yaml"
# The layer of a plain mapping a library caller hands a service from Python: checked by the same
# registry as a file, its errors left unprefixed (the caller holds the mapping, the key names it).
GIVEN = "the configuration given"


def parse_conf_pairs(pairs: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--conf {pair!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def load_yaml(text: str, where: str) -> dict[str, str]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{where}: not valid YAML ({str(e).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of configuration keys to values")
    out = {}
    for k, v in data.items():
        if isinstance(v, (dict, list)):
            raise ConfigError(f"{where}: {k}: expected a single value")
        out[str(k)] = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
    return out


@dataclass(frozen=True)
class ServiceConfig:
    values: Mapping[str, Any]
    sources: Mapping[str, str] = field(default_factory=dict)
    table_file: str | None = None     # where the table's own layer came from (its sources say so)

    def get(self, key: str) -> Any:
        if key in self.values:
            return self.values[key]
        raise ConfigError(f"{key}: not a known configuration key")

    def source(self, key: str) -> str:
        return self.sources.get(key, "default")

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)

    def storage_options(self) -> dict[str, str]:
        """The object-store settings a layer set (``registry.is_storage_key``: ``fs.s3a.*``,
        ``tablesvc.storage.*``, object_store's own names), as strings, for ``storage_for``.
        Defaults are left out: what no layer sets comes from the environment."""
        out = {}
        for key, where in self.sources.items():
            value = self.values.get(key)
            if where != "default" and is_storage_key(key) and value is not None and value != "":
                out[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    def describe_source(self, key: str) -> str:
        """``source(key)`` as messages say it: ``the default``, ``--conf``, ``--config FILE`` or
        ``the table's .hoodie/tablesvc.yaml``."""
        where = self.source(key)
        if where == "default":
            return "the default"
        if where in ("--conf", "--config"):
            return where
        if where == GIVEN:
            return GIVEN
        if where == self.table_file:
            return f"the table's {TABLE_CONFIG_FILE}"
        return f"--config {where}"


def build_config(*, conf: Mapping[str, str] | None = None, yaml_text: str | None = None,
                 yaml_where: str = "--config", table_yaml: str | None = None,
                 table_yaml_where: str = TABLE_CONFIG_FILE,
                 given: Mapping[str, Any] | None = None) -> ServiceConfig:
    """The config of the layers given, each value parsed and checked by its registry key.

    ``given``: a plain mapping from Python (its own layer, ``GIVEN``); a None or empty value there
    means "not set", as it always has for services handed a mapping."""
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if given:
        layers.append((GIVEN, {k: v for k, v in given.items() if v is not None and v != ""}))
    table_layer = load_yaml(table_yaml, table_yaml_where) if table_yaml is not None else None
    if table_layer is not None:
        layers.append((table_yaml_where, table_layer))
    if yaml_text is not None:
        layers.append((yaml_where, load_yaml(yaml_text, yaml_where)))
    if conf:
        layers.append(("--conf", conf))
    values: dict[str, Any] = {k.key: k.default for k in REGISTRY.values()}
    sources: dict[str, str] = {}
    for where, layer in layers:
        for key, raw in layer.items():
            spec = REGISTRY.get(key)
            try:
                values[key] = spec.value(raw) if spec else raw
            except ConfigError as e:
                if where == GIVEN:
                    raise
                # Name the layer too: a bad value in the table's own file must be findable.
                raise ConfigError(f"{where}: {e}") from None
            sources[key] = where
    _check_consistent(values, sources)
    _check_table_wide(values, sources, table_layer, table_yaml_where)
    return ServiceConfig(MappingProxyType(values), MappingProxyType(sources),
                         table_yaml_where if table_yaml is not None else None)


# Pairs of keys that must not both be true (Hudi's HoodieWriteConfig refuses them too).
_EXCLUSIVE = [("hoodie.compact.inline", "hoodie.compact.schedule.inline",
               "inline compaction schedules and runs, schedule-inline only plans: enable one")]


def _check_consistent(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    for a, b, why in _EXCLUSIVE:
        if values.get(a) is True and values.get(b) is True:
            raise ConfigError(f"{a} and {b} are both true (from {sources.get(a, 'default')} and "
                              f"{sources.get(b, 'default')}); {why}")


def _check_table_wide(values: Mapping[str, Any], sources: Mapping[str, str],
                      table_layer: Mapping[str, Any] | None, table_where: str) -> None:
    """A table-wide key (the table lock's place and expiry) set by a per-command layer is refused
    unless it says what the table's own file (or the default) says: a process that took the lock
    elsewhere would not exclude the others, tablesvc's or Java's."""
    for key in TABLE_WIDE_KEYS:
        where = sources.get(key, "default")
        if where == "default" or (table_layer is not None and where == table_where):
            continue
        spec = REGISTRY[key]
        table_value = spec.value(table_layer[key]) if table_layer and key in table_layer else spec.default
        if values[key] != table_value:
            raise ConfigError(f"{key}: set by {where} to {values[key]!r}, but every process on a table must use "
                              f"the same lock; set it in the table's {TABLE_CONFIG_FILE} (now {table_value!r})")


def load_config(storage: Storage, *, conf_pairs: Iterable[str] = (), config_file: str | None = None,
                table_path: str | None = None) -> ServiceConfig:
    """Config for a command: table YAML (if any) < ``--config`` file < ``--conf`` pairs."""
    conf = parse_conf_pairs(conf_pairs)
    yaml_text = None
    if config_file:
        try:
            with open(config_file, encoding="utf-8") as f:
                yaml_text = f.read()
        except OSError as e:
            raise ConfigError(f"--config {config_file}: cannot read ({e.strerror})") from None
    table_yaml = None
    if table_path:
        try:
            table_yaml = storage.read_bytes(join(table_path, TABLE_CONFIG_FILE)).decode("utf-8")
        except FileNotFoundError:
            table_yaml = None
    return build_config(conf=conf, yaml_text=yaml_text, yaml_where=config_file or "--config",
                        table_yaml=table_yaml, table_yaml_where=join(table_path or "", TABLE_CONFIG_FILE))
