"""The SQLite durability setting: `synchronous` "normal" (the default) or "full"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection

from sessionstore import SessionStore, UserMessage, make_engine, migrate
from tests.integration.store._helpers import new_session

_LEVELS = {"normal": 1, "full": 2}
"""SQLite's numbers for the settings, as `PRAGMA synchronous` reports them."""


def _level(db: Connection) -> int:
    return int(db.exec_driver_sql("PRAGMA synchronous").scalar_one())


@pytest.mark.parametrize("synchronous", [None, "normal", "full", "FULL"])
async def test_every_connection_of_a_store_commits_with_the_setting(
    tmp_path: Path, synchronous: str | None
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    await migrate.upgrade(url)
    options: dict[str, Any] = {} if synchronous is None else {"synchronous": synchronous}
    wanted = _LEVELS[(synchronous or "normal").lower()]
    async with SessionStore.from_url(url, **options) as store:
        session_id = await new_session(store)
        await store.append_messages(session_id, [UserMessage(content="kept")])
        async with store.engine.connect() as connection:  # the async engine's own
            assert await connection.run_sync(_level) == wanted
        runner = store._runner
        assert await runner.run(_level) == wanted  # a worker thread's connection
        assert await runner.run(_level, inline=True) == wanted  # the event loop's
        assert [m.message.text for m in await store.get_messages(session_id)] == ["kept"]  # type: ignore[union-attr]  # a user message


@pytest.mark.parametrize("synchronous", ["off", "extra", "", 2])
def test_an_unknown_setting_is_refused(synchronous: object) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        make_engine("sqlite+aiosqlite:///unused.db", synchronous=synchronous)  # type: ignore[arg-type]  # a wrong type on purpose
