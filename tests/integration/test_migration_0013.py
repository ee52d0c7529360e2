"""Migration 0013 (SQLite: the raw messages' no-replace trigger checks the table's keys)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from sqlalchemy import text

from sessionstore import SessionStore, UserMessage, migrate
from tests.conftest import BACKENDS
from tests.integration.test_migrations import _diff, _dump, _fill_every_table, _inspect

BEFORE = "0012_written_search_vector"
SQLITE = [param for param in BACKENDS if param.id == "sqlite"]


def _triggers(connection: Any) -> dict[str, str]:
    if connection.dialect.name != "sqlite":
        query = "SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal"
    else:
        query = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
    return {str(name): str(body) for name, body in connection.execute(text(query))}


def _replace_by_position(path: str, session_id: str) -> tuple[str | None, list[Any]]:
    """REPLACE the first message by its loop and position under another session id, on a
    stdlib connection (no foreign keys); return the error, if refused, and the messages'
    ids and session ids after."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        row = conn.execute(
            "SELECT loop_id, position, turn_index, app_name, user_id FROM sessionstore_messages "
            "WHERE session_id = ? ORDER BY id LIMIT 1",
            [session_id],
        ).fetchone()
        refused = None
        try:
            conn.execute(
                "INSERT OR REPLACE INTO sessionstore_messages (session_id, loop_id, position, "
                "turn_index, kind, payload, token_count, content_hash, created_at, app_name, "
                "user_id) VALUES ('forged', ?, ?, ?, 'user', '{}', 1, x'00', "
                "'2026-01-01 00:00:00', ?, ?)",
                list(row),
            )
        except sqlite3.IntegrityError as exc:
            refused = str(exc)
        rows = conn.execute("SELECT id, session_id FROM sessionstore_messages ORDER BY id")
        return refused, rows.fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("empty_db_url", SQLITE, indirect=True)
async def test_0013_closes_the_replace_by_loop_and_position_and_goes_back(
    empty_db_url: str,
) -> None:
    """At 0012 a REPLACE by `(loop_id, position)` under another session id replaced a stored
    message; at 0013 it is refused; the downgrade restores 0012's trigger, rows kept."""
    path = empty_db_url.split("///", 1)[1]
    await migrate.upgrade(empty_db_url, BEFORE)
    at_0012 = await _inspect(empty_db_url, _triggers)
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        await _fill_every_table(store)
        await store.create_session(session_id="s", app_name="app", user_id="u")
        kept = await store.append_messages("s", [UserMessage(content="kept")])
    rows = await _inspect(empty_db_url, _dump)
    refused, before = _replace_by_position(path, "s")
    assert refused is not None
    assert "immutable" in refused
    assert (kept[0].id, "s") in before
    assert all(sid != "forged" for _, sid in before)
    assert await _inspect(empty_db_url, _dump) == rows

    await migrate.downgrade(empty_db_url, BEFORE)
    assert await _inspect(empty_db_url, _triggers) == at_0012
    assert await _inspect(empty_db_url, _dump) == rows
    await migrate.upgrade(empty_db_url)
    assert await migrate.current(empty_db_url) == migrate.head()
    assert await _inspect(empty_db_url, _diff) == []
    assert await _inspect(empty_db_url, _dump) == rows

    # The hole 0013 closes: at 0012 the same statement replaced the message.
    await migrate.downgrade(empty_db_url, BEFORE)
    refused, after = _replace_by_position(path, "s")
    assert refused is None
    assert (kept[0].id, "s") not in after
    assert any(sid == "forged" for _, sid in after)


@pytest.mark.parametrize("empty_db_url", BACKENDS, indirect=True)
async def test_0013_upgrades_and_downgrades_on_every_backend(empty_db_url: str) -> None:
    """PostgreSQL (and Citus) are left as they are; SQLite's trigger goes and comes back."""
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        await _fill_every_table(store)  # by this code, at the head: then back to 0012
    await migrate.downgrade(empty_db_url, BEFORE)
    triggers = await _inspect(empty_db_url, _triggers)
    rows = await _inspect(empty_db_url, _dump)
    await migrate.upgrade(empty_db_url)
    changed = await _inspect(empty_db_url, _triggers)
    assert changed.keys() == triggers.keys()
    differs = {name for name in triggers if triggers[name] != changed[name]}
    sqlite = empty_db_url.startswith("sqlite")
    assert differs == ({"sessionstore_messages_no_replace"} if sqlite else set())
    assert await _inspect(empty_db_url, _diff) == []
    await migrate.downgrade(empty_db_url, BEFORE)
    assert await _inspect(empty_db_url, _triggers) == triggers
    assert await _inspect(empty_db_url, _dump) == rows
