"""The ``tablesvc`` command line: argparse subcommands sharing one set of conventions.

Every command accepts ``--conf key=value`` (repeatable, Hudi key names),
``--config FILE.yaml`` and ``--debug``.  Errors print one line on stderr naming the
path, key or instant; ``--debug`` prints the traceback too.  Exit codes: 0 done or
nothing to do, 1 runtime failure, 2 invalid usage or input, 3 conflict (retry later).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Sequence

from tablesvc import __version__
from tablesvc.cli import (
    cmd_clean, cmd_compaction, cmd_fsview, cmd_init, cmd_logcompaction, cmd_read, cmd_retry, cmd_rollback, cmd_run,
    cmd_status, cmd_timeline, cmd_write,
)
from tablesvc.config import load_config
from tablesvc.config.unknown_keys import misspelled_key_warnings
from tablesvc.errors import InvalidInputError, TablesvcError
from tablesvc.spark.progress import progress_lines
from tablesvc.api.table import normalize_path
from tablesvc.storage import LocalStorage, join, storage_for

COMMANDS = (cmd_init, cmd_timeline, cmd_fsview, cmd_write, cmd_read, cmd_compaction, cmd_logcompaction, cmd_clean,
            cmd_rollback, cmd_run, cmd_status, cmd_retry)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (like every other error), pointing at ``--help`` instead of
    printing the usage block; subcommand parsers inherit the class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def common_options() -> argparse.ArgumentParser:
    common = OneLineParser(add_help=False)
    common.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="configuration value with a Hudi key name (repeatable)")
    common.add_argument("--config", metavar="FILE.yaml", help="YAML file of configuration values")
    common.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="tablesvc", description="Hudi-compatible table services for MOR tables.")
    parser.add_argument("--version", action="version", version=f"tablesvc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    common = common_options()
    for command in COMMANDS:
        command.add_parser(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # a usage error (one line, exit 2), --help or --version (exit 0)
        return e.code if isinstance(e.code, int) else 2
    try:
        _refuse_empty_values(args)
        # Object-store settings (fs.s3a.*, ...) from --config and --conf open the table's storage;
        # every command hands args.storage_options to Table.open / Table.create.
        args.storage_options = load_config(LocalStorage(), conf_pairs=args.conf,
                                           config_file=args.config).storage_options()
        table_path = getattr(args, "path", None)
        storage = storage_for(table_path, args.storage_options) if table_path else LocalStorage()
        if table_path and "://" in table_path and not table_path.startswith("file://"):
            table_path = normalize_path(table_path)
            if not storage.exists(join(table_path, ".hoodie")):
                table_path = None
        elif table_path and not os.path.isdir(os.path.join(table_path, ".hoodie")):
            table_path = None  # not a table (yet): the command reports that itself
        args.service_config = load_config(storage, conf_pairs=args.conf, config_file=args.config,
                                          table_path=table_path)
        # A key that looks like a misspelling of one tablesvc reads: one line each, then on as before.
        for warning in misspelled_key_warnings(args.service_config.sources, ("--conf", args.config or "--config")):
            print(warning, file=sys.stderr)
        with progress_lines(_shows_progress(args)):
            return int(args.run(args) or 0)
    except TablesvcError as e:
        if args.debug:
            traceback.print_exc()
        print(f"tablesvc: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("tablesvc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # an unexpected failure: still one line unless --debug
        if args.debug:
            traceback.print_exc()
        # One line even for a multi-line message (a JVM error quotes whole stack traces)
        first = (str(e).strip().splitlines() or [""])[0]
        print(f"tablesvc: error: {type(e).__name__}: {first} (rerun with --debug for details)", file=sys.stderr)
        return 1


# Arguments for which an empty string would silently mean "not given" (``--instant ""`` would
# roll back every failed instant) or name nothing.
_NON_EMPTY = {"path": "PATH", "paths": "PATH", "instant": "--instant", "as_of": "--as-of", "input": "--input",
              "output": "--output", "config": "--config", "job": "JOB"}


def _refuse_empty_values(args: argparse.Namespace) -> None:
    for name, shown in _NON_EMPTY.items():
        value = getattr(args, name, None)
        values = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            raise InvalidInputError(f"{shown} is empty")


def _shows_progress(args: argparse.Namespace) -> bool:
    """Commands that run Spark jobs take ``--quiet``; they print progress lines unless it or
    ``--json`` is given."""
    return hasattr(args, "quiet") and not args.quiet and not getattr(args, "json", False)


def entry_point() -> None:
    sys.exit(main())
