"""``tablesvc run PATH [PATH ...] [--lease-seconds N] [--poll-seconds N] [--once] [--max-failures N]``:
the long-lived table-service worker (docs/runner.md)."""

from __future__ import annotations

import argparse
import signal

from tablesvc.cli.output import add_quiet_option, print_json, say
from tablesvc.errors import InvalidInputError
from tablesvc.api import Table
from tablesvc.config import load_config
from tablesvc.table.writable import SERVICE, require_writable


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("run", parents=[common], help="service tables continuously (async runner)",
                       description="Schedule what is due and execute pending compactions, log compactions, cleans "
                                   "and rollbacks of failed writes, holding a lease per job. Any number of runners "
                                   "may service the same tables. SIGTERM finishes the current job and exits 0.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="table base paths")
    p.add_argument("--lease-seconds", type=float, default=60.0, help="lease length (default 60); renewed every third")
    p.add_argument("--poll-seconds", type=float, default=10.0, help="pause between polls (default 10)")
    p.add_argument("--max-failures", type=int, default=3,
                   help="failures after which a job is set aside until `tablesvc retry` (default 3)")
    p.add_argument("--once", action="store_true", help="one pass over the tables, then exit")
    p.add_argument("--spark-profile", help="Spark profile from spark_conf/ (default: local)")
    p.add_argument("--json", action="store_true", help="print the final summary as JSON")
    add_quiet_option(p)
    p.set_defaults(run=run)


def _check(args: argparse.Namespace) -> None:
    from tablesvc.services.metadata_drops import drop_opted_out_partitions

    if args.lease_seconds < 1:
        raise InvalidInputError(f"--lease-seconds must be at least 1 (got {args.lease_seconds})")
    if args.poll_seconds < 0:
        raise InvalidInputError(f"--poll-seconds must not be negative (got {args.poll_seconds})")
    if args.max_failures < 1:
        raise InvalidInputError(f"--max-failures must be at least 1 (got {args.max_failures})")
    for path in args.paths:  # every table is checked before anything runs (exit 2)
        table = Table.open(path, options=getattr(args, "storage_options", None))
        config = load_config(table.storage, conf_pairs=args.conf or (), config_file=args.config,
                             table_path=table.base_path)
        dropped = drop_opted_out_partitions(table, SERVICE, config)   # the metadata table's opt-outs first
        require_writable(table, SERVICE)
        if dropped is not None:
            say(f"{table.base_path}: {dropped.render()}")


def run(args: argparse.Namespace) -> int:
    from tablesvc.runner import Runner, RunnerSettings

    _check(args)
    settings = RunnerSettings(lease_ms=int(args.lease_seconds * 1000), poll_seconds=args.poll_seconds,
                              max_failures=args.max_failures)

    def spark():
        from tablesvc.spark.session import get_spark

        return get_spark(args.spark_profile, args.service_config.as_dict(), quiet=not args.debug)

    runner = Runner(list(args.paths), settings, conf_pairs=args.conf, config_file=args.config, spark=spark,
                    storage_options=getattr(args, "storage_options", None))
    signal.signal(signal.SIGTERM, lambda *_: runner.stop())
    say(f"[{settings.owner}] runner started on {len(args.paths)} table(s): lease {args.lease_seconds:g} s, "
        f"poll {args.poll_seconds:g} s{', one pass' if args.once else ''}")
    stats = runner.run(once=args.once)
    if args.json:
        print_json(stats.as_dict())
    else:
        say(f"[{settings.owner}] runner stopped: " + ", ".join(f"{k}={v}" for k, v in stats.as_dict().items()))
    return 0
