"""A store on a SQLite file makes its async engine only when something asks for it.

Its calls run on the standard library's driver in its own threads, so `sessions list`
starts without importing SQLAlchemy's asyncio extension, its ORM or aiosqlite
(`store._engine.SqliteFile`); `store.engine`, the migrations and a schema that is not at
the newest revision still get the engine, configured as `make_engine` configures it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sessionstore import ConfigurationError, SchemaError, SessionStore, UserMessage, migrate
from tests.integration.store._helpers import new_session


def _url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"


async def test_calls_and_the_schema_check_make_no_async_engine(tmp_path: Path) -> None:
    url = _url(tmp_path)
    await migrate.upgrade(url)
    async with SessionStore.from_url(url) as store:
        assert await store.check_schema() == migrate.head()
        session_id = await new_session(store)
        await store.append_messages(session_id, [UserMessage(content="kept")])
        assert [m.token_count for m in await store.get_messages(session_id)] != []
        assert (await store.list_sessions()).items != []

        assert store._runner.made_engine is None


async def test_the_engine_is_made_when_asked_for_and_kept(tmp_path: Path) -> None:
    url = _url(tmp_path)
    async with SessionStore.from_url(url, lock_timeout=2.5) as store:
        await store.upgrade()  # through the engine, made now
        engine = store.engine
        assert isinstance(engine, AsyncEngine)
        assert store.engine is engine
        assert store._runner.made_engine is engine
        session_id = await new_session(store)
        async with engine.connect() as connection:
            busy = (await connection.execute(text("PRAGMA busy_timeout"))).scalar_one()
            count = await connection.scalar(text("SELECT count(*) FROM sessionstore_sessions"))
        assert (busy, count) == (2500, 1)
        assert (await store.get_session(session_id)).id == session_id


async def test_a_database_not_at_the_newest_revision_is_explained(tmp_path: Path) -> None:
    async with SessionStore.from_url(_url(tmp_path)) as store:
        with pytest.raises(SchemaError, match="not initialised"):
            await store.check_schema()


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"lock_timeout": 0}, ValueError),
        ({"synchronous": "off"}, ValueError),
        ({"url": "sqlite+pysqlite:///x.db"}, ConfigurationError),
    ],
)
def test_from_url_checks_its_arguments_at_once(
    tmp_path: Path, arguments: dict[str, object], error: type[Exception]
) -> None:
    url = str(arguments.pop("url", _url(tmp_path)))

    with pytest.raises(error):
        SessionStore.from_url(url, **arguments)  # type: ignore[arg-type]  # wrong on purpose


async def test_other_engine_arguments_make_the_engine_at_once(tmp_path: Path) -> None:
    async with SessionStore.from_url(_url(tmp_path), echo=False) as store:
        assert store._runner.made_engine is not None
