"""Races between real processes on one object store (tests/crash_model/test_s3_races.py,
tests/cli/test_cli_azure.py): each racer does its imports, then waits for one shared moment
(``RACE_AT``) and runs its command, so the requests that decide the race meet at the store.
The racers get no cloud variables from the test's environment: the store is named by their arguments.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

# the real command line, at the shared moment
RACE_CLI = ("import os, sys, time\n"
            "from tablesvc.cli.main import main\n"
            "time.sleep(max(0.0, float(os.environ['RACE_AT']) - time.time()))\n"
            "sys.exit(main(sys.argv[1:]))\n")
# one create-if-absent of argv[1] with the options argv[2] (JSON) and the body argv[3]: exit 3 if lost
RACE_CREATE = ("import json, os, sys, time\n"
               "from tablesvc.storage.object_store import ObjectStorage\n"
               "storage = ObjectStorage(json.loads(sys.argv[2]))\n"
               "time.sleep(max(0.0, float(os.environ['RACE_AT']) - time.time()))\n"
               "try:\n"
               "    storage.write_new(sys.argv[1], sys.argv[3].encode())\n"
               "except FileExistsError:\n"
               "    sys.exit(3)\n")


def race(argvs: list[list[str]], code: str = RACE_CLI, lead_s: float = 3.5) -> list[tuple[int, str, str]]:
    """Start one process per argv, all meeting at ``now + lead_s`` (time for their imports on a
    busy 2-core machine); (exit code, stdout, stderr) of each, in argv order."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "AZURE_"))}
    env["RACE_AT"] = f"{time.time() + lead_s:.3f}"
    procs = [subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, text=True) for argv in argvs]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        out.append((p.returncode, stdout, stderr))
    return out


def one_line(stderr: str) -> str:
    """The one stderr line of a racer that lost (no traceback)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]
