"""The soak run (tests/soak.py) as a slow test: `make soak`, or `pytest -m slow tests/crash_model/test_soak.py`.

Three minutes by default (`TABLESVC_SOAK_MINUTES` overrides; `TABLESVC_SOAK_SEED` picks the
seed), run with `--cover`: a slow machine gets more time (bounded) to see a takeover and every
kind of service.  The soak's own exit code says whether the invariants held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import kill_tree

pytestmark = [pytest.mark.slow, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]


def test_soak_holds_the_invariants_through_crashes_stalls_and_takeovers(tmp_path):
    minutes = float(os.environ.get("TABLESVC_SOAK_MINUTES", "3"))
    seed = os.environ.get("TABLESVC_SOAK_SEED", "1")
    cmd = [sys.executable, str(REPO / "tests" / "soak.py"), "--minutes", str(minutes), "--seed", seed,
           "--workdir", str(tmp_path / "soak"), "--cover", "--json"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        # the run, up to twice as long again with --cover, then drain and stop (generous: 2 cores)
        out, err = proc.communicate(timeout=minutes * 60 * 3 + 1800)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
    assert out, err[-4000:]
    report = json.loads(out)
    figures = report["figures"]
    assert proc.returncode == 0 and not report["violations"], json.dumps(report, indent=1)
    assert figures["takeovers_from_disturbed"] >= 1, figures
    missing = [kind for kind, n in figures["services_completed"].items() if n < 1]
    assert not missing, f"no {missing} completed: {figures}"
