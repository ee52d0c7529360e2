"""The gates `.ci/run` sets really gate: its docs build fails on a warning (issue 17, item 10).

`mkdocs build --strict --quiet` passed with a broken link: `--quiet` drops the warnings
before `--strict` counts them. These tests run the docs line of `.ci/run` itself, as it
is written there, on a tiny site with a broken link (it must fail), the same site fixed
(it must pass), and the project's docs (they must pass).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mkdocs", reason="the docs extra is not installed")


def _docs_line() -> str:
    """Return the one command line of `.ci/run` that builds the docs."""
    lines = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if "mkdocs build" in line and not line.lstrip().startswith("#")
    ]
    assert len(lines) == 1, lines
    return lines[0]


def _run_gate(directory: Path, scratch: Path) -> subprocess.CompletedProcess[str]:
    # The venv's bin first, as in `.ci/run` once it has activated its venv; the site goes
    # to `scratch` (the line builds it in a `mktemp -d`).
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _docs_line()],
        cwd=directory,
        env={**os.environ, "PATH": path, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _tiny_site(directory: Path, link: str) -> Path:
    (directory / "docs").mkdir(parents=True)
    (directory / "mkdocs.yml").write_text("site_name: tiny\n", encoding="utf-8")
    (directory / "docs" / "index.md").write_text(
        f"# Tiny\n\nSee [the other page]({link}).\n", encoding="utf-8"
    )
    (directory / "docs" / "other.md").write_text("# Other\n", encoding="utf-8")
    return directory


def test_the_docs_gate_is_strict_and_not_quiet() -> None:
    line = _docs_line()
    assert "--strict" in line.split()
    assert "--quiet" not in line.split()
    assert "-q" not in line.split()


def test_the_docs_gate_fails_on_a_broken_link(tmp_path: Path) -> None:
    broken = _run_gate(_tiny_site(tmp_path / "broken", "missing.md"), tmp_path)
    assert broken.returncode != 0, broken.stdout + broken.stderr
    assert "missing.md" in broken.stdout + broken.stderr

    fixed = _run_gate(_tiny_site(tmp_path / "fixed", "other.md"), tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_the_project_docs_pass_the_gate(tmp_path: Path) -> None:
    built = _run_gate(ROOT, tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stdout + built.stderr
