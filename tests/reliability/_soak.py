"""How hard the reliability tests push, and where they record what they did.

CI runs them at scale 1. `bench/soak_reliability.py` runs the same tests longer by setting
SESSIONSTORE_SOAK_SCALE, and collects the figures each test records (kills survived,
writes acknowledged, timeouts retried, inputs tried) from SESSIONSTORE_SOAK_REPORT.
"""

from __future__ import annotations

import json
import os
from typing import Any

SCALE_ENV = "SESSIONSTORE_SOAK_SCALE"
REPORT_ENV = "SESSIONSTORE_SOAK_REPORT"


def backend_of(url: str) -> str:
    """The backend name a test records its figures under."""
    return "postgres" if url.startswith("postgresql") else "sqlite"


def scaled(count: int) -> int:
    """`count` times the soak scale (1 in CI)."""
    return count * max(1, int(os.environ.get(SCALE_ENV, "1")))


def record(test: str, backend: str, **figures: Any) -> None:
    """Append one test's figures to the soak report, when one is being written."""
    path = os.environ.get(REPORT_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as report:
            report.write(json.dumps({"test": test, "backend": backend, **figures}) + "\n")
