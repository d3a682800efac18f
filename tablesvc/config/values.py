"""Reading one value from whatever configuration a service was handed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tablesvc.config.registry import REGISTRY


def registered_value(config: Any, key: str) -> Any:
    """``key`` from whatever configuration a service was handed, parsed and defaulted by the
    registry (a plain mapping's raw text is checked as a config file's would be)."""
    spec = REGISTRY[key]
    value = config_value(config, key, None)
    return spec.default if value is None else spec.value(value)


def config_value(config: Any, key: str, default: Any) -> Any:
    """``key`` from a ``ServiceConfig``, a plain mapping or None; ``default`` when absent or empty.

    Services accept all three so that library callers and tests need not build a full
    layered config; the CLI always passes a ``ServiceConfig``."""
    if config is None:
        return default
    values = config if isinstance(config, Mapping) else getattr(config, "values", {})
    value = values.get(key)
    return default if value is None or value == "" else value


def describe_source(config: Any, key: str) -> str:
    """Where ``key``'s value in ``config`` came from, for messages: ``the default``, ``--conf``,
    ``--config FILE``, ``the table's .hoodie/tablesvc.yaml`` (a ``ServiceConfig``), or ``the
    configuration given`` (a plain mapping that sets it)."""
    if isinstance(config, Mapping):
        return "the default" if config_value(config, key, None) is None else "the configuration given"
    describe = getattr(config, "describe_source", None)
    return describe(key) if describe is not None else "the default"


__all__ = ["config_value", "describe_source", "registered_value"]
