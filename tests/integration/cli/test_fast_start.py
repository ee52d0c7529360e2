"""`sessionstore --help` and `--version` import click and nothing heavy.

The group lists its commands from `COMMANDS` and imports a command's module only to run
it, so the top-level help stays fast; these tests guard what it imports and keep each
listed summary equal to the command's own help.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from sessionstore.cli import COMMANDS, main

HEAVY = (
    "sqlalchemy",
    "alembic",
    "asyncpg",
    "aiosqlite",
    "pydantic",
    "rich",
    "httpx",
    "sessionstore.store",
    "sessionstore.models",
    "sessionstore.config",
    "sessionstore._compaction",
    "sessionstore._context",
)

_PROBE = """
import io, json, sys
from contextlib import redirect_stdout
from sessionstore.cli import main
with redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:], prog_name="sessionstore")
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def _modules_imported_by(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=True
    ).stdout
    modules: list[str] = json.loads(out.splitlines()[-1])
    return modules


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("-h",)])
def test_the_top_level_help_and_version_import_nothing_heavy(args):
    modules = _modules_imported_by(*args)

    heavy = [m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY)]
    assert heavy == []
    assert "click" in modules  # the probe did run the group


def test_a_command_imports_what_it_needs_when_it_runs():
    modules = _modules_imported_by("db", "--help")

    assert "sessionstore.cli._db" in modules


def test_import_sessionstore_is_lazy():
    code = "import json, sys, sessionstore; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    modules = json.loads(out.stdout)

    assert [m for m in modules if m.startswith(HEAVY)] == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_listed_summary_is_the_first_sentence_of_the_commands_help(name):
    entry = COMMANDS[name]
    command = getattr(importlib.import_module(entry.module), entry.attribute)

    assert isinstance(command, click.Command)
    assert command.name == name
    assert command.get_short_help_str(limit=1_000) == entry.summary


def test_an_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(main, ["no-such-command"])

    assert result.exit_code == 2
    assert "No such command 'no-such-command'" in result.output
