"""What the table-service commands (compaction, logcompaction, …) share: opening the table
with its layered config, a Spark session started only when a plan needs one, and printing
service results as text or JSON."""

from __future__ import annotations

import argparse
from typing import Callable, Iterable

from tablesvc.cli.output import print_json, say
from tablesvc.config import ServiceConfig, load_config
from tablesvc.services.result import ServiceResult
from tablesvc.table import Table


def open_table(args: argparse.Namespace) -> tuple[Table, ServiceConfig]:
    """The table and its config (defaults < table yaml < --config < --conf)."""
    table = Table.open(args.path)
    config = load_config(table.storage, conf_pairs=getattr(args, "conf", None) or (),
                         config_file=getattr(args, "config", None), table_path=table.base_path)
    return table, config


def lazy_spark(args: argparse.Namespace, config: ServiceConfig) -> Callable[[], object]:
    """A factory: Spark starts only if there is a plan to execute."""
    def spark():
        from tablesvc.spark.session import get_spark

        return get_spark(getattr(args, "spark_profile", None), config.as_dict(),
                         quiet=not getattr(args, "debug", False))
    return spark


def print_results(args: argparse.Namespace, results: Iterable[ServiceResult]) -> None:
    results = list(results)
    if getattr(args, "json", False):
        print_json([r.as_dict() for r in results])
    else:
        for r in results:
            say(r.render())
