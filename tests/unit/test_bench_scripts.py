"""Every bench script starts: its imports resolve against the package as it is now.

The scripts are not run by the other tests, and they reach into private modules to time
phases apart; a refactor that moved one of those names broke `bench_read_phases.py` in
stop 27 unnoticed until its next run. `--help` imports everything a script needs (its
siblings, the package, the peers) and stops at argparse, so a moved name fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p.name for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))
# The peers' packages: the bench extra installs them; without them a script that times
# them cannot start, which is not a fault of the script.
OPTIONAL = ("agents", "google.adk", "asyncpg")


def test_the_scripts_are_found() -> None:
    assert "bench_peers.py" in SCRIPTS
    assert "bench_read_phases.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_starts(script: str) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    missing = [name for name in OPTIONAL if f"No module named '{name}" in run.stderr]
    if run.returncode != 0 and missing:
        pytest.skip(f"{script} needs {missing[0]} (the bench extra)")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "usage:" in run.stdout
