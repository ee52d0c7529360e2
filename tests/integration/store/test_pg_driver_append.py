"""PostgreSQL: an append that follows the store's own is one statement on asyncpg itself.

`_pg_append.insert_on_driver` sends the locking append as asyncpg's own prepared
statement outside a transaction block. These tests watch it with asyncpg's query logger
on the pooled connections (it sees what asyncpg's connection methods run, not the
statements SQLAlchemy prepares and runs itself), and check the answer, the counters and
the errors are those of SQLAlchemy's path. Stores here have no cursor listener (that
keeps SQLAlchemy's path; `test_append_state.py` runs its tests both ways).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, text

from sessionstore import (
    AssistantMessage,
    SessionStore,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    make_engine,
)
from sessionstore.errors import SessionNotFoundError, StorageError
from tests.conftest import citus_requested

pytestmark = pytest.mark.driver_path


@pytest.fixture
async def pg_store(db_url: str) -> AsyncIterator[tuple[SessionStore, list[str]]]:
    """A PostgreSQL store without cursor listeners, and the statements its connections send."""
    if not db_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only")
    if citus_requested():
        pytest.skip("Citus: an append is a transaction there, not one statement on the driver")
    sent: list[str] = []
    async with SessionStore.from_url(db_url) as opened:

        def log(connection: Any, record: Any) -> None:
            record.driver_connection.add_query_logger(lambda query: sent.append(query.query))

        event.listen(opened.engine.sync_engine.pool, "connect", log)
        yield opened, sent


def _is_locking_append(statement: str) -> bool:
    return statement.startswith("WITH locked AS (") and "INSERT INTO sessionstore_messages" in (
        statement
    )


async def test_a_following_append_is_one_statement_and_no_transaction_block(
    pg_store: tuple[SessionStore, list[str]],
) -> None:
    store, sent = pg_store
    sid = (await store.create_session(app_name="app", user_id="ada")).id
    await store.append_messages(sid, [UserMessage(content="one")])
    version = (await store.get_session(sid)).version
    for n in range(3):
        sent.clear()
        [stored] = await store.append_messages(sid, [UserMessage(content=f"q{n}")])
        await asyncio.sleep(0)  # asyncpg calls its query loggers soon, not at once
        assert len(sent) == 1, sent
        assert _is_locking_append(sent[0])
        assert stored.position == n + 1
    sent.clear()
    batch = await store.append_messages(
        sid,
        [
            AssistantMessage(content=[ToolCall(id="c1", name="ls")], model="m"),
            ToolResultMessage(tool_call_id="c1", tool_name="ls", content="a\x00b"),
        ],
    )
    await asyncio.sleep(0)  # asyncpg calls its query loggers soon, not at once
    assert len(sent) == 1
    assert _is_locking_append(sent[0])
    history = await store.get_history(sid)
    assert history[-2:] == batch
    assert [m.position for m in history] == list(range(6))
    assert [m.turn_index for m in history] == [0, 1, 2, 3, 4, 4]
    assert history[-1].message.content[0].text == "a\x00b"  # type: ignore[union-attr]  # a text block
    (loop,) = await store.list_loops(sid)
    assert (loop.message_count, loop.turn_count) == (6, 5)
    assert loop.token_total == sum(m.token_count for m in history)
    assert (await store.get_session(sid)).version == version + 4
    hits = await store.search("q2", session_id=sid)
    assert [hit.position for hit in hits] == [3]


async def test_a_tenant_handle_appends_on_the_driver_to_its_own_sessions_only(
    pg_store: tuple[SessionStore, list[str]],
) -> None:
    store, sent = pg_store
    sid = (await store.create_session(app_name="app", user_id="ada")).id
    ada = store.for_tenant("app", "ada")
    await ada.append_messages(sid, [UserMessage(content="one")])
    sent.clear()
    await ada.append_messages(sid, [UserMessage(content="two")])
    await asyncio.sleep(0)  # asyncpg calls its query loggers soon, not at once
    assert len(sent) == 1
    assert _is_locking_append(sent[0])
    bob = store.for_tenant("app", "bob")
    with pytest.raises(SessionNotFoundError):
        await bob.append_messages(sid, [UserMessage(content="not yours")])
    assert [m.position for m in await ada.get_history(sid)] == [0, 1]


async def test_a_connection_lost_under_the_driver_append_is_an_error_then_a_new_one_serves(
    pg_store: tuple[SessionStore, list[str]], db_url: str
) -> None:
    store, sent = pg_store
    sid = (await store.create_session(app_name="app", user_id="ada")).id
    await store.append_messages(sid, [UserMessage(content="one")])
    await store.append_messages(sid, [UserMessage(content="two")])
    admin = make_engine(db_url, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
    finally:
        await admin.dispose()
    with pytest.raises(StorageError):
        await store.append_messages(sid, [UserMessage(content="lost")])
    # The broken connection was invalidated: the next appends get a new one, and the one
    # after the next is on the driver again.
    [stored] = await store.append_messages(sid, [UserMessage(content="three")])
    assert stored.position == 2
    sent.clear()
    [stored] = await store.append_messages(sid, [UserMessage(content="four")])
    assert stored.position == 3
    await asyncio.sleep(0)  # asyncpg calls its query loggers soon, not at once
    assert len(sent) == 1
    assert _is_locking_append(sent[0])
    assert [m.position for m in await store.get_history(sid)] == [0, 1, 2, 3]
