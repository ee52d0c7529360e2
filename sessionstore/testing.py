"""Helpers for testing code that uses sessionstore.

>>> async def test_my_agent(tmp_path):
...     async with migrated_store(f"sqlite+aiosqlite:///{tmp_path / 't.db'}") as store:
...         session = await store.create_session(app_name="test", user_id="me")
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sessionstore import migrate
from sessionstore._tokens import TokenCounter
from sessionstore.store import SessionStore

__all__ = ["migrated_store"]


@asynccontextmanager
async def migrated_store(
    url: str = "sqlite+aiosqlite:///:memory:", *, token_counter: TokenCounter | None = None
) -> AsyncIterator[SessionStore]:
    """Open a store on `url`, migrated to the newest schema, and close it afterwards.

    The default is an in-memory SQLite database that lives as long as the store.
    """
    store = SessionStore.from_url(url, token_counter=token_counter)
    try:
        await migrate.upgrade(store.engine)
        yield store
    finally:
        await store.close()
