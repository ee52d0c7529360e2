"""PostgreSQL: a loop looked up by its id reads one row, whatever the table's statistics.

A loop is looked up by its id and its session's key: the counters an append updates, the
loop's row, and the foreign key check of each message inserted. Without statistics (a new
table, autovacuum off) or with statistics that say a session has one loop, the planner
read the lookup through the `(session, sequence)` unique key, all the session's loops for
each: an append to a session grew with its loops. Migration 0015's index on `id` alone
is what the planner takes now. The test counts the rows the plans touch, which does not
depend on the machine's speed. (Citus cannot hold that index: see the migration.)
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from sessionstore import SessionStore, UserMessage, migrate
from sessionstore.store._engine import make_engine
from tests.integration.store.test_chain_walk import _touched

LOOPS = 300

_LOOKUPS = {
    "the loop's row": "SELECT * FROM sessionstore_loops WHERE id = :lid AND session_id = :sid "
    "AND app_name = :app AND user_id = :user",
    "the counters' update": "UPDATE sessionstore_loops SET message_count = message_count "
    "WHERE id = :lid AND session_id = :sid AND app_name = :app AND user_id = :user",
    # What the messages' foreign key check runs for each row inserted.
    "the foreign key's check": "SELECT 1 FROM ONLY sessionstore_loops x WHERE id = :lid "
    "AND session_id = :sid AND app_name = :app AND user_id = :user FOR KEY SHARE OF x",
}


async def test_a_loop_is_found_by_its_id_in_a_table_never_analyzed(empty_db_url: str) -> None:
    if not empty_db_url.startswith("postgresql"):
        pytest.skip("PostgreSQL's planner without a table's statistics")
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        session = await store.create_session(app_name="app", user_id="user")
        for index in range(LOOPS):
            await store.append_messages(
                session.id, [UserMessage(content=f"{index}")], loop_id="new"
            )
        chain = await store.active_chain(session.id)
    key = {"lid": chain[LOOPS // 2].id, "sid": session.id, "app": "app", "user": "user"}
    touched: dict[str, int] = {}
    engine = make_engine(empty_db_url)
    try:
        async with engine.connect() as conn:
            analyzed = await conn.execute(
                text(
                    "SELECT last_analyze, last_autoanalyze FROM pg_stat_user_tables "
                    "WHERE relname = 'sessionstore_loops'"
                )
            )
            assert analyzed.one() == (None, None)  # as a new database (autovacuum too slow)
            for name, statement in _LOOKUPS.items():
                explained = await conn.execute(
                    text(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}"), key
                )
                (plan,) = explained.scalar_one()
                touched[name] = _touched(plan["Plan"])
            await conn.rollback()
    finally:
        await engine.dispose()

    # One row each; through the session's key it was every loop of the session.
    assert {name: count for name, count in touched.items() if count > 5} == {}
