"""Progress on stderr for `compact`, `export` and `audit --html`: shown on a terminal, never
in the output, never with --json or when piped unless asked, and `--no-progress` silences it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessionstore.cli._progress import is_shown
from tests.integration.cli.runner import SMALL, ok, write_jsonl


@pytest.fixture
def session(db_url: str, tmp_path: Path) -> str:
    ok(db_url, "import", str(write_jsonl(tmp_path / "s.jsonl", [SMALL])))
    return "small-1"


def test_compact_shows_its_step_only_when_asked(db_url, session):
    quiet = ok(db_url, "compact", session, "--json")
    asked = ok(db_url, "compact", session, "--json", "--progress")

    assert quiet.stderr == ""
    assert asked.stderr.startswith(f"... Compacting session {session}")
    json.loads(asked.stdout)  # stdout stays the JSON, whole


def test_export_shows_its_step_on_stderr_and_writes_the_same_export(db_url, session, tmp_path):
    plain = ok(db_url, "export", session)
    asked = ok(db_url, "export", session, "--progress")
    silenced = ok(db_url, "export", session, "--no-progress")

    assert asked.stdout == plain.stdout == silenced.stdout
    assert f"... Exporting session {session}" in asked.stderr
    assert plain.stderr == silenced.stderr == ""


@pytest.mark.parametrize(
    ("asked", "as_json", "terminal", "shown"),
    [
        (None, False, True, True),  # a terminal: shown
        (None, True, True, False),  # --json: never unless asked
        (None, False, False, False),  # piped: never unless asked
        (True, True, False, True),  # --progress wins
        (False, False, True, False),  # --no-progress wins
    ],
)
def test_when_progress_is_shown(monkeypatch, asked, as_json, terminal, shown):
    monkeypatch.setattr("sys.stderr.isatty", lambda: terminal)

    assert is_shown(asked, as_json=as_json) is shown
