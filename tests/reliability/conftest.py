"""The reliability suites (crash, concurrent writers across processes, soak, hostile input
by the thousand, tenant isolation) are slow: `python -m pytest -m slow` runs them, and
`.ci/run` always does."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.slow)
