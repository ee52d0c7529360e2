"""Bounded waits: a hung transaction holding a session makes writers fail, typed, in time.

Issue 10, defect 11: PostgreSQL had no `lock_timeout`, so `compact` and `sessions delete`
waited forever behind a transaction holding the session's row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from sessionstore import (
    LockTimeoutError,
    SessionStore,
    StorageError,
    UserMessage,
    compact_session_loops,
    make_engine,
)
from tests.integration._helpers import SMALL, session_with_loops
from tests.integration.cli.runner import fails


@asynccontextmanager
async def _session_held(db_url: str, session_id: str) -> AsyncIterator[None]:
    """Hold the session's write lock in another transaction, as a hung writer would."""
    if make_url(db_url).get_backend_name() == "sqlite":
        holder = sqlite3.connect(make_url(db_url).database or "", isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn, conn.begin():
            await conn.execute(
                text("SELECT id FROM sessionstore_sessions WHERE id = :sid FOR UPDATE"),
                {"sid": session_id},
            )
            yield
    finally:
        await engine.dispose()


async def test_writes_behind_a_held_session_fail_with_a_typed_error(
    store: SessionStore, db_url: str
) -> None:
    session_id = await session_with_loops(store, loops=2, turns=4)
    before = await store.get_messages(session_id)
    async with (
        SessionStore.from_url(db_url, lock_timeout=0.3) as impatient,
        _session_held(db_url, session_id),
    ):
        with pytest.raises(LockTimeoutError, match="lock timeout") as caught:
            await impatient.delete_session(session_id)
        assert isinstance(caught.value, StorageError)
        with pytest.raises(LockTimeoutError):
            await compact_session_loops(impatient, session_id, config=SMALL, max_context_tokens=300)
        with pytest.raises(LockTimeoutError):
            await impatient.append_messages(session_id, [UserMessage(content="late")])
    # Once the lock is released, the same writes go through; nothing was half-written.
    assert await store.get_messages(session_id) == before
    await store.delete_session(session_id)


def test_the_cli_waits_as_long_as_lock_timeout_says(db_url: str) -> None:
    async def prepare() -> str:
        async with SessionStore.from_url(db_url) as store:
            return await session_with_loops(store, loops=1, turns=2)

    import asyncio

    session_id = asyncio.run(prepare())

    async def held_delete() -> str:
        async with _session_held(db_url, session_id):
            result = await asyncio.to_thread(
                fails, db_url, "--lock-timeout", "0.3", "sessions", "delete", session_id, "--yes"
            )
            return result.stderr

    assert "lock timeout" in asyncio.run(held_delete())


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan")])
def test_lock_timeout_must_be_positive(bad: float) -> None:
    with pytest.raises(ValueError, match="lock_timeout"):
        make_engine("sqlite+aiosqlite://", lock_timeout=bad)
