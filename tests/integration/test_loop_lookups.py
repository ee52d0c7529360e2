"""PostgreSQL: a loop looked up by its id, its parent or as the root reads one row, on a
table without statistics.

A loop is looked up by its id and its session's key: the counters an append updates, the
loop's row, and the foreign key check of each message inserted. Without statistics (a new
table, autovacuum off) or with statistics that say a session has one loop, the planner
read the lookup through the `(session, sequence)` unique key, all the session's loops for
each: an append to a session grew with its loops (migration 0015). A loop's children (the
cascade of each loop a session's deletion removes) and the session's root met the same
key against an index of the session id and the parent: deleting a long session was
quadratic (migration 0017). The tests count the rows the plans touch, which does not
depend on the machine's speed, on a small table and on two large ones: the planner's
choice changed with the table's size. (Citus cannot hold 0015's index: see 0017.)
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from sessionstore import SessionStore, UserMessage, migrate
from sessionstore.store._engine import make_engine
from tests.integration.store.test_chain_walk import _touched
from tests.integration.test_long_chains import chain_of

LOOPS = 1_000

_LOOKUPS = {
    "the loop's row": "SELECT * FROM sessionstore_loops WHERE id = :lid AND session_id = :sid "
    "AND app_name = :app AND user_id = :user",
    "the counters' update": "UPDATE sessionstore_loops SET message_count = message_count "
    "WHERE id = :lid AND session_id = :sid AND app_name = :app AND user_id = :user",
    # What the messages' foreign key check runs for each row inserted.
    "the foreign key's check": "SELECT 1 FROM ONLY sessionstore_loops x WHERE id = :lid "
    "AND session_id = :sid AND app_name = :app AND user_id = :user FOR KEY SHARE OF x",
}


_BY_PARENT = {
    # The children of a deleted loop, which its cascade deletes (the foreign key's check).
    "a loop's children": "SELECT 1 FROM ONLY sessionstore_loops x WHERE parent_loop_id = :lid "
    "AND session_id = :sid AND app_name = :app AND user_id = :user FOR KEY SHARE OF x",
    # The session's root, which a resume probes (`_context_source.only_root`).
    "the root": "SELECT id FROM sessionstore_loops WHERE session_id = :sid AND app_name = :app "
    "AND user_id = :user AND parent_loop_id IS NULL LIMIT 2",
}


async def _rows_touched(
    url: str, statements: dict[str, str], key: dict[str, Any]
) -> dict[str, int]:
    """The rows the plan of each statement touched, run on a loops table never analyzed."""
    touched: dict[str, int] = {}
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            analyzed = await conn.execute(
                text(
                    "SELECT last_analyze, last_autoanalyze FROM pg_stat_user_tables "
                    "WHERE relname = 'sessionstore_loops'"
                )
            )
            assert analyzed.one() == (None, None)  # as a new database (autovacuum too slow)
            for name, statement in statements.items():
                explained = await conn.execute(
                    text(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}"), key
                )
                (plan,) = explained.scalar_one()
                touched[name] = _touched(plan["Plan"])
            await conn.rollback()
    finally:
        await engine.dispose()
    return touched


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
    touched = await _rows_touched(empty_db_url, {**_LOOKUPS, **_BY_PARENT}, key)
    assert len(touched) == 5
    # One row each; through the session's key it was every loop of the session.
    assert {name: count for name, count in touched.items() if count > 5} == {}


@pytest.mark.parametrize("loops", [3_000, 20_000])
async def test_every_loop_lookup_reads_one_row_of_a_long_chain_never_analyzed(
    empty_db_url: str, loops: int
) -> None:
    """Before 0017, deleting a session of 8,000 loops took 22.6 s (2,000: 1.51 s), and a
    20,000-loop one 155 s. Which index the planner took changed with the table's size:
    hence two sizes."""
    if not empty_db_url.startswith("postgresql"):
        pytest.skip("PostgreSQL's planner without a table's statistics")
    await migrate.upgrade(empty_db_url)
    session_id = await chain_of(empty_db_url, loops, analyze=False)
    key = {"lid": 10_000_000 + loops // 2, "sid": session_id, "app": "app", "user": "user"}
    touched = await _rows_touched(empty_db_url, {**_LOOKUPS, **_BY_PARENT}, key)
    assert len(touched) == 5
    assert {name: count for name, count in touched.items() if count > 5} == {}
