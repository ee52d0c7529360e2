"""A dump of every sessionstore table, to prove that a refused call changed nothing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, text

from sessionstore import SessionStore
from sessionstore.store._tables import metadata


async def dump(store: SessionStore) -> dict[str, list[tuple[Any, ...]]]:
    """Return every row of every table (the schema's version included), in a stable order."""
    tables: dict[str, list[tuple[Any, ...]]] = {}
    async with store.engine.connect() as db:
        for table in metadata.sorted_tables:
            stmt = select(table).order_by(*table.primary_key.columns)
            rows = await db.execute(stmt)
            tables[table.name] = [tuple(row) for row in rows]
        version = await db.execute(text("SELECT * FROM sessionstore_alembic_version"))
        tables["sessionstore_alembic_version"] = [tuple(row) for row in version]
    return tables


async def empty(store: SessionStore) -> None:
    """Delete every session (every other table cascades from sessions)."""
    async with store.engine.begin() as db:
        await db.execute(text("DELETE FROM sessionstore_sessions"))
