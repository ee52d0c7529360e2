"""What several store test modules need."""

from __future__ import annotations

from sessionstore import SessionStore


async def new_session(store: SessionStore, *, title: str | None = None) -> str:
    session = await store.create_session(app_name="app", user_id="ada", title=title)
    return session.id
