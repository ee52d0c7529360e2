"""The routing check's recorder sees what the store sends on PostgreSQL, fast paths on.

`tests/routing.py`'s `Recorder` records statements in the store's asyncpg connections, so
the `store` fixture's stores keep the paths users run: the one-statement append on asyncpg
itself (`_pg_append.insert_on_driver`) and reads past SQLAlchemy's result processing
(`_plain.read_plain`), both skipped on an engine with cursor listeners.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from sessionstore import SessionStore, UserMessage
from sessionstore.store import _pg_append
from tests.conftest import BACKENDS, citus_requested
from tests.routing import Recorder, violations

pytestmark = pytest.mark.driver_path
POSTGRES = [param for param in BACKENDS if param.id == "postgres"]


@pytest.mark.parametrize("db_url", POSTGRES, indirect=True)
async def test_the_recorder_sees_the_driver_paths_and_keeps_them_on(db_url: str) -> None:
    if citus_requested():
        pytest.skip("Citus: the driver paths are off there (statements of two tables)")
    recorder = Recorder()
    async with SessionStore.from_url(db_url, **recorder.engine_kwargs()) as store:
        assert _pg_append.drives(store.engine.sync_engine)
        sid = (await store.create_session(app_name="app", user_id="ada")).id
        await store.append_messages(sid, [UserMessage(content="one")])
        await store.append_messages(sid, [UserMessage(content="two")])  # on the driver
        assert len(await store.get_messages(sid)) == 2
        async with store.engine.connect() as conn:  # a test's own SQL: not the store's
            await conn.execute(text("SELECT count(*) FROM sessionstore_messages"))
    sent = recorder.statements
    assert any(s.startswith("WITH locked AS (") for s in sent)  # the driver's append
    assert any(s.lstrip().startswith("SELECT") for s in sent)  # the reads
    assert not any("count(*) FROM sessionstore_messages" in s for s in sent)
    assert violations(sent) == []
