"""Configuration: the typed key registry and the layered loader."""

from tablesvc.config.loader import ServiceConfig, build_config, load_config, parse_conf_pairs
from tablesvc.config.registry import REGISTRY, CleanerPolicy, ConfigKey
from tablesvc.config.values import registered_value, service_config

__all__ = ["REGISTRY", "CleanerPolicy", "ConfigKey", "ServiceConfig", "build_config", "load_config",
           "parse_conf_pairs", "registered_value", "service_config"]
