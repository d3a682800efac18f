"""One path from whatever configuration a service was handed to a typed ``ServiceConfig``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tablesvc.config.loader import ServiceConfig, build_config

# The defaults alone, built once: a service handed None reads these (no table file, no flags).
_DEFAULTS = build_config()


def service_config(config: Any) -> ServiceConfig:
    """``config`` as a ``ServiceConfig``: itself, the registry's defaults for None, or a plain
    mapping (library callers, tests) parsed and checked by the registry as a config file is.

    Services accept all three so that library callers and tests need not build a full layered
    config; the CLI always passes a ``ServiceConfig``."""
    if isinstance(config, ServiceConfig):
        return config
    if config is None:
        return _DEFAULTS
    if isinstance(config, Mapping):
        return build_config(given=config)
    raise TypeError(f"expected a ServiceConfig, a mapping of Hudi keys or None, got {type(config).__name__}")


def registered_value(config: Any, key: str) -> Any:
    """``key`` from whatever configuration a service was handed, parsed and defaulted by the
    registry (a plain mapping's raw text is checked as a config file's would be)."""
    return service_config(config).get(key)


def describe_source(config: Any, key: str) -> str:
    """Where ``key``'s value in ``config`` came from, for messages: ``the default``, ``--conf``,
    ``--config FILE``, ``the table's .hoodie/tablesvc.yaml`` (a ``ServiceConfig``), or ``the
    configuration given`` (a plain mapping that sets it)."""
    return service_config(config).describe_source(key)


__all__ = ["describe_source", "registered_value", "service_config"]
