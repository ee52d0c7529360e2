"""Raw rows are immutable in the database itself: no UPDATE, DELETE or replacing INSERT.

Deleting a whole session stays possible (issue 10, defect 9).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from sessionstore import (
    CompactedSection,
    CompactionBlock,
    ReplacementMessage,
    SessionStore,
    TurnRange,
    UserMessage,
    make_engine,
)
from sessionstore.errors import SessionNotFoundError
from tests.conftest import BACKENDS
from tests.factories import conversation
from tests.integration.store._helpers import new_session

SQLITE = [param for param in BACKENDS if param.id == "sqlite"]


async def _compacted_session(store: SessionStore) -> tuple[str, list[Any], int]:
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, conversation(3))
    block = await store.write_block(
        session_id,
        stored[0].loop_id,
        CompactionBlock(
            keep_compacted=CompactedSection(
                range=TurnRange(start_turn=1, end_turn=1),
                messages=[
                    ReplacementMessage(
                        message=UserMessage(content="[Summary]"), covers=[stored[1].id]
                    )
                ],
            )
        ),
    )
    assert block.id is not None
    return session_id, stored, block.id


async def _refused(db_url: str, statement: str) -> None:
    engine = make_engine(db_url)
    try:
        with pytest.raises(DBAPIError, match="immutable"):
            async with engine.begin() as conn:
                await conn.execute(text(statement))
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM sessionstore_messages WHERE id = {message}",
        "DELETE FROM sessionstore_loops WHERE id = {loop}",
        "DELETE FROM sessionstore_blocks WHERE id = {block}",
        "DELETE FROM sessionstore_block_sections",
        "DELETE FROM sessionstore_section_messages",
    ],
)
async def test_database_refuses_deleting_one_raw_row(
    store: SessionStore, db_url: str, statement: str
) -> None:
    session_id, stored, block_id = await _compacted_session(store)
    before = await store.get_messages(session_id)
    ids = {"message": stored[1].id, "loop": stored[0].loop_id, "block": block_id}
    await _refused(db_url, statement.format(**ids))
    assert await store.get_messages(session_id) == before
    assert [b.id for b in await store.block_history(session_id, stored[0].loop_id)] == [block_id]


async def test_database_refuses_rewriting_a_message_by_replace_or_delete_and_insert(
    store: SessionStore, db_url: str
) -> None:
    """SQLite's INSERT OR REPLACE and a DELETE + INSERT on PostgreSQL both rewrite a message."""
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, conversation(2))
    target = stored[1]
    session = await store.get_session(session_id)
    columns = (
        "session_id, app_name, user_id, loop_id, position, turn_index, kind, payload, "
        "token_count, content_hash, created_at"
    )
    values = (
        f"'{session_id}', '{session.app_name}', '{session.user_id}', {target.loop_id}, "
        f"{target.position}, {target.turn_index}, 'user', "
        """'{"kind":"user","content":"forged"}', 1, 'x', '2026-01-01 00:00:00'"""
    )
    if store.engine.dialect.name == "sqlite":
        await _refused(
            db_url, f"INSERT OR REPLACE INTO sessionstore_messages ({columns}) VALUES ({values})"
        )
        await _refused(
            db_url,
            f"INSERT OR REPLACE INTO sessionstore_messages (id, {columns}) "
            f"VALUES ({target.id}, {values})",
        )
    await _refused(db_url, f"DELETE FROM sessionstore_messages WHERE id = {target.id}")
    assert await store.get_messages(session_id) == stored


@pytest.mark.parametrize("db_url", SQLITE, indirect=True)  # INSERT OR REPLACE is SQLite's
@pytest.mark.parametrize(
    "key",
    [
        pytest.param({"session_id": "other"}, id="another-session-id"),
        pytest.param({"app_name": "other-app", "user_id": "other-user"}, id="another-tenant"),
    ],
)
async def test_sqlite_refuses_replacing_a_message_by_its_loop_and_position_under_another_key(
    store: SessionStore, db_url: str, key: dict[str, str]
) -> None:
    """SQLite's position key is `(loop_id, position)` (0011): a REPLACE by it under another
    session key is refused too, on a connection that does not enforce foreign keys
    (the stdlib driver's default), where nothing else would stop it (migration 0013)."""
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, conversation(2))
    target = stored[1]
    session = await store.get_session(session_id)
    row = {
        "session_id": session_id,
        "app_name": session.app_name,
        "user_id": session.user_id,
        "loop_id": target.loop_id,
        "position": target.position,
        "turn_index": target.turn_index,
        "kind": "user",
        "payload": '{"kind":"user","content":"forged"}',
        "token_count": 1,
        "content_hash": b"x" * 32,
        "created_at": "2026-01-01 00:00:00",
        **key,
    }
    path = db_url.split("///", 1)[1]
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (0,)
        marks = ", ".join("?" * len(row))
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            conn.execute(
                f"INSERT OR REPLACE INTO sessionstore_messages ({', '.join(row)}) VALUES ({marks})",
                list(row.values()),
            )
    finally:
        conn.close()
    assert await store.get_messages(session_id) == stored


async def test_deleting_a_whole_session_still_works_in_sql_and_through_the_store(
    store: SessionStore, db_url: str
) -> None:
    first, _, _ = await _compacted_session(store)
    second, _, _ = await _compacted_session(store)
    kept, kept_messages, _ = await _compacted_session(store)
    await store.delete_session(first)
    engine = make_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f"DELETE FROM sessionstore_sessions WHERE id = '{second}'"))
            leftovers = (
                await conn.execute(
                    text(
                        "SELECT count(*) FROM sessionstore_messages WHERE session_id IN "
                        f"('{first}', '{second}')"
                    )
                )
            ).scalar_one()
    finally:
        await engine.dispose()
    assert leftovers == 0
    for gone in (first, second):
        with pytest.raises(SessionNotFoundError):
            await store.get_session(gone)
    assert await store.get_messages(kept) == kept_messages
