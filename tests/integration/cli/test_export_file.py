"""`export -o FILE` writes FILE whole or not at all (issue 17, item 12).

The export streams a chunk of messages at a time; it used to stream into FILE itself, so
a failure after the first chunk left FILE truncated, and its previous content (perhaps the
last backup) gone. Here the failure is real: the session's 1,001st message is an inline
image without a media type, which the OpenAI format cannot express, so the export fails
in its second chunk, after the first was written.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from sessionstore import ImageContent, SessionStore, UserMessage
from tests.integration.cli.runner import fails, ok, with_store

PREVIOUS = '{"id": "the last good backup", "messages": []}\n'


async def _seed(store: SessionStore, *, bad: bool) -> None:
    await store.create_session(session_id="long", app_name="app", user_id="ops")
    messages = [UserMessage(content=f"message {index}") for index in range(1000)]
    if bad:
        messages.append(UserMessage(content=[ImageContent(data="aGk=")]))
    else:
        messages.append(UserMessage(content="the last one"))
    await store.append_messages("long", messages)


def _others(directory: Path, keep: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path != keep)


def test_a_failed_export_leaves_the_previous_file_intact(db_url, tmp_path):
    ok(db_url, "db", "upgrade")
    with_store(db_url, lambda store: _seed(store, bad=True))
    out = tmp_path / "out"
    out.mkdir()
    target = out / "long.json"
    target.write_text(PREVIOUS, encoding="utf-8")

    result = fails(db_url, "export", "long", "-o", str(target))
    assert "message 1000" in result.stderr
    assert target.read_text(encoding="utf-8") == PREVIOUS
    assert _others(out, target) == []  # no temporary file left behind

    # Where there was no file, there is still none.
    fails(db_url, "export", "long", "-o", str(out / "new.json"))
    assert _others(out, target) == []


def test_an_export_replaces_the_file_whole_with_the_usual_permissions(db_url, tmp_path):
    ok(db_url, "db", "upgrade")
    with_store(db_url, lambda store: _seed(store, bad=False))
    target = tmp_path / "long.json"
    target.write_text(PREVIOUS, encoding="utf-8")
    mask = os.umask(0o027)
    try:
        result = ok(db_url, "export", "long", "-o", str(target))
    finally:
        os.umask(mask)
    assert "Exported session 'long'" in result.stderr
    exported = json.loads(target.read_text(encoding="utf-8"))
    assert len(exported["messages"]) == 1001
    assert exported["messages"][-1]["content"] == "the last one"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [path.name for path in tmp_path.iterdir() if path.suffix == ".tmp"] == []
    # Without -o, the same JSON goes to stdout.
    assert json.loads(ok(db_url, "export", "long").stdout) == exported


def test_an_export_into_a_missing_directory_is_a_usage_error(db_url, tmp_path):
    ok(db_url, "db", "upgrade")
    with_store(db_url, lambda store: _seed(store, bad=False))
    result = fails(db_url, "export", "long", "-o", str(tmp_path / "nowhere" / "x.json"))
    assert result.exit_code == 2
    assert "not a directory" in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_an_export_into_a_read_only_directory_is_a_clean_error(tmp_path):
    # On SQLite only: the directory is what is tested, and CI counts skipped PostgreSQL tests.
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    ok(db_url, "db", "upgrade")
    with_store(db_url, lambda store: _seed(store, bad=False))
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "long.json").write_text(PREVIOUS, encoding="utf-8")
    locked.chmod(0o555)
    try:
        result = fails(db_url, "export", "long", "-o", str(locked / "long.json"))
    finally:
        locked.chmod(0o755)
    assert "cannot write" in result.stderr
    assert (locked / "long.json").read_text(encoding="utf-8") == PREVIOUS
