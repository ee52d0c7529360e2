"""`sessionstore demo`: a new database or an existing one, text and JSON, bad options."""

from __future__ import annotations

from sessionstore import CompactionConfig, audit_session
from tests.integration.cli.runner import fails, json_out, ok, with_store


def _demo_sessions(url: str) -> list[str]:
    return [s.id for s in with_store(url, lambda s: s.list_sessions()).items]


def test_demo_runs_on_a_new_sqlite_file_and_again(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}"

    first = ok(url, "demo", env={"COLUMNS": "120"})

    (session_id,) = _demo_sessions(url)
    text = first.stdout
    assert f"1. Stored session {session_id}" in text
    config = CompactionConfig()
    audit = with_store(
        url, lambda s: audit_session(s, session_id, config=config, max_context_tokens=32_000)
    )
    assert f"Total: {audit.raw_tokens:,} raw tokens → {audit.context_tokens:,}" in text
    assert f"{audit.raw_tokens:,} raw tokens:" in text
    assert "within 32,000 tokens" in text
    assert f"--url {url} audit {session_id}" in text
    assert f"--url {url} context {session_id} --budget 8000 --format text" in text
    tables = [line for line in text.splitlines() if line[:1] in "┏┃┡│├└"]
    assert tables
    assert max(len(line) for line in tables) <= 120

    second = json_out(ok(url, "demo", "--loops", "3", "--seed", "2", "--budget", "8000", "--json"))
    assert second["session_id"] != session_id
    assert set(_demo_sessions(url)) == {session_id, second["session_id"]}
    assert second["stored"]["loops"] == 3
    assert second["stored"]["raw_tokens"] == second["audit"]["raw_tokens"]
    assert second["context"]["tokens"] <= second["context"]["budget"] == 8000
    assert second["compaction"]["blocks"][0]["loop_id"] == second["context"]["loop_ids"][-1]
    assert [loop["in_scope"] for loop in second["audit"]["loops"]] == [True, True, True]


def test_demo_uses_the_default_file_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SESSIONSTORE_URL", raising=False)

    text = ok(None, "demo", "--loops", "2").stdout

    assert (tmp_path / "sessionstore.db").is_file()
    (session_id,) = _demo_sessions("sqlite+aiosqlite:///sessionstore.db")
    assert f"   sessionstore audit {session_id}\n" in text


def test_demo_on_each_backend(db_url):
    data = json_out(ok(db_url, "demo", "--loops", "2", "--json"))

    assert _demo_sessions(db_url) == [data["session_id"]]
    assert data["stored"]["loops"] == 2


def test_demo_refuses_bad_options(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}"

    assert "--budget" in fails(url, "demo", "--budget", "0").stderr
    assert "--loops" in fails(url, "demo", "--loops", "0").stderr
    assert not (tmp_path / "demo.db").exists()
