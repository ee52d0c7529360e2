"""Skip messages name places relative to the checkout, never by an absolute path (issue 19).

The real-transcripts dataset lives beside the checkout (`../shared/...`). Where it is
missing, the tests that read it skip; their message once printed the absolute path it
resolved to, a directory of the machine outside the project. This test copies the
checkout's files to a directory with nothing beside it, runs the tests that read the
dataset there with `-rs`, and checks every skip reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.datasets import CHECKOUT, DATASET_LABEL

pytestmark = pytest.mark.slow  # a pytest run in a process of its own

# A path starting at the root: a slash not preceded by a word character, a dot or a slash.
_ABSOLUTE = re.compile(r"(?<![\w./-])/[\w.-]+/")


def _tracked_files() -> list[str]:
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(command, cwd=CHECKOUT, capture_output=True, check=True).stdout
    return [name for name in listed.decode().split("\0") if name]


def _copy_checkout(target: Path) -> None:
    """Copy the checkout's files as they are on disk (uncommitted and new ones included)."""
    for name in _tracked_files():
        source = CHECKOUT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _dataset_tests() -> list[str]:
    """The test files that read the dataset (through `dataset_dir` or `DATASET`)."""
    return sorted(
        str(path.relative_to(CHECKOUT))
        for path in (CHECKOUT / "tests").rglob("test_*.py")
        if re.search(r"\bdataset_dir\b|\bDATASET\b", path.read_text(encoding="utf-8"))
        and path.name != Path(__file__).name
    )


# A plugin for the run in the copy: only the tests that read the dataset (the rest would
# only cost time).
_ONLY_DATASET_TESTS = """
def pytest_collection_modifyitems(config, items):
    wanted = {"dataset_dir", "transcripts"}
    keep = [item for item in items if wanted & set(getattr(item, "fixturenames", ()))]
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep
"""


def test_no_skip_reason_names_an_absolute_path(tmp_path: Path) -> None:
    checkout = tmp_path / "alone" / "checkout"
    checkout.mkdir(parents=True)
    _copy_checkout(checkout)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "only_dataset_tests.py").write_text(_ONLY_DATASET_TESTS, encoding="utf-8")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"SESSIONSTORE_TEST_POSTGRES_URL", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER"}
    }
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), str(plugins)])
    tests = _dataset_tests()
    assert len(tests) >= 5, tests
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-n",
            "0",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-p",
            "only_dataset_tests",
            "-m",
            "not postgres",
            *tests,
        ],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    reasons = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert any(DATASET_LABEL in line for line in reasons), run.stdout[-3000:]
    absolute = [line for line in reasons if _ABSOLUTE.search(line) or str(tmp_path) in line]
    assert not absolute, absolute
