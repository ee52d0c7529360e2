"""The SDK adapters are extras: `import sessionstore` never loads an SDK, and a missing one says
which extra to install."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

from sessionstore.formats import _responses

PROBE = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None
import sessionstore
from sessionstore.errors import MissingDependencyError
try:
    import {module}
except MissingDependencyError as exc:
    print(exc)
"""


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("sessionstore.integrations.openai_agents", ["agents"], "openai-agents"),
        ("sessionstore.integrations.pydantic_ai", ["pydantic_ai"], "pydantic-ai"),
        ("sessionstore.formats.pydantic_ai", ["pydantic_ai"], "pydantic-ai"),
        ("sessionstore.integrations.adk", ["google.adk"], "adk"),
        ("sessionstore.formats.adk", ["google.adk"], "adk"),
        ("sessionstore.recall.mcp", ["mcp"], "mcp"),
    ],
)
def test_a_missing_sdk_names_its_extra(module: str, blocked: list[str], extra: str) -> None:
    code = PROBE.format(blocked=blocked, module=module)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert f'pip install "sessionstore[{extra}]"' in result.stdout


def test_importing_sessionstore_loads_no_sdk() -> None:
    code = (
        "import sys, sessionstore, sessionstore.formats\n"
        "sdks = ('agents', 'pydantic_ai', 'openai', 'google', 'mcp')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in sdks))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_responses_format_examples_run() -> None:
    outcome = doctest.testmod(_responses)
    assert outcome.attempted > 0
    assert outcome.failed == 0
