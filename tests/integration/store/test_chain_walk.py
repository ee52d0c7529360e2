"""PostgreSQL: the walk of a long chain visits each loop a bounded number of times.

The chain of loops is read by a recursive CTE, one parent a step. A session of many loops
in a table whose statistics say a session has one loop (most sessions do), or in a new
table never analyzed, led the planner to read the session's loops (or the whole table)
again at each step: quadratic in the chain's length. Every read of a chain goes through
it (a resume's windows, `chain_blocks`, `get_digest`, `get_history`, the SDK session's
items), so a session of 1,000 loops took half a second a walk. The test counts the rows
the plans touch, which does not depend on the machine's speed.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from sessionstore import SessionStore, UserMessage, migrate
from sessionstore.store._chain_walk import (
    select_chain,
    select_chain_counts,
    select_history,
    walk_form,
)
from sessionstore.store._engine import make_engine
from sessionstore.store._payload_reads import select_chain_keys

LOOPS = 300


def _touched(plan: dict[str, Any]) -> int:
    """The rows the plan's nodes on the loops table returned or filtered out, every run."""
    own = 0
    if plan.get("Relation Name") == "sessionstore_loops":
        loops = plan.get("Actual Loops", 1)
        kept = plan.get("Actual Rows", 0)
        removed = plan.get("Rows Removed by Filter", 0) + plan.get(
            "Rows Removed by Index Recheck", 0
        )
        own = (kept + removed) * loops
    own += plan.get("Rows Removed by Join Filter", 0) * plan.get("Actual Loops", 1)
    return int(own) + sum(_touched(child) for child in plan.get("Plans", []))


SHORT = 20_000
"""Sessions of one loop each: a table whose statistics say a session has one loop, and
large enough that the planner reads it by its indexes rather than whole."""

_FILL = (
    """INSERT INTO sessionstore_sessions (id, app_name, user_id, metadata, version, loop_count,
    created_at, updated_at)
    SELECT 'short-' || n, 'app', 'user-' || (n % 7), '{}', 1, 1, now(), now()
    FROM generate_series(1, :count) AS n""",
    """INSERT INTO sessionstore_loops (session_id, app_name, user_id, parent_loop_id, sequence,
    depth, created_at, message_count, token_total, turn_count, open_tool_call_ids)
    SELECT 'short-' || n, 'app', 'user-' || (n % 7), NULL, 0, 0, now(), 0, 0, 0, '[]'
    FROM generate_series(1, :count) AS n""",
    "ANALYZE",
)


async def _long_session(url: str, *, short_ones: bool) -> tuple[str, int]:
    """A session of `LOOPS` loops; with `short_ones`, in a table of analyzed short sessions.

    Without them the table is small and was never analyzed, as on a new database.
    """
    await migrate.upgrade(url)
    if short_ones:
        engine = make_engine(url, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                for statement in _FILL:
                    await conn.execute(text(statement), {"count": SHORT})
        finally:
            await engine.dispose()
    async with SessionStore.from_url(url) as store:
        long = await store.create_session(app_name="app", user_id="user-1")
        for index in range(LOOPS):
            await store.append_messages(long.id, [UserMessage(content=f"{index}")], loop_id="new")
        chain = await store.active_chain(long.id)
    assert len(chain) == LOOPS
    return long.id, chain[-1].id


def _walks() -> dict[str, tuple[Any, dict[str, Any]]]:
    """Each statement that walks a chain, with what it binds beyond the session's key."""
    form = walk_form("postgresql", routed=False)  # what a PostgreSQL database gets
    return {
        "chain": (select_chain(False, form), {}),
        "chain window": (select_chain(True, form), {"limit": LOOPS}),  # every step runs
        "history": (select_history(form), {}),
        "chain counts": (select_chain_counts(form), {}),
        "payload chain": (select_chain_keys("postgresql", False), {}),  # the SDK session's read
        "payload chain, newest": (select_chain_keys("postgresql", True), {"n": 10 * LOOPS}),
    }


@pytest.mark.parametrize("short_ones", [True, False], ids=["many short sessions", "new table"])
async def test_every_chain_walk_does_linear_work(empty_db_url: str, short_ones: bool) -> None:
    if not empty_db_url.startswith("postgresql"):
        pytest.skip("PostgreSQL's planner with a table's statistics")
    session_id, head = await _long_session(empty_db_url, short_ones=short_ones)
    key = {"head": head, "sid": session_id, "app": "app", "user": "user-1"}
    engine = make_engine(empty_db_url)
    touched: dict[str, int] = {}
    try:
        async with engine.connect() as conn:
            for name, (statement, params) in _walks().items():
                rows = (await conn.execute(statement, {**key, **params})).all()
                assert len(rows) >= LOOPS, name
                # The same statement, as the driver gets it, explained.
                compiled = statement.compile(dialect=conn.dialect)
                values = {**compiled.params, **key, **params}
                positional = tuple(values[bind] for bind in compiled.positiontup or ())
                explained = await conn.exec_driver_sql(
                    f"EXPLAIN (ANALYZE, FORMAT JSON) {compiled}", positional
                )
                (plan,) = explained.scalar_one()
                touched[name] = _touched(plan["Plan"])
    finally:
        await engine.dispose()

    # A lookup of each parent by its key, or one pass over the session's loops: a few
    # rows a loop. One scan of the session's loops a step would be LOOPS * LOOPS.
    assert {name: count for name, count in touched.items() if count > 5 * LOOPS} == {}


@pytest.mark.parametrize("short_ones", [True, False], ids=["many short sessions", "new table"])
async def test_a_window_of_the_chain_reads_only_its_loops(
    empty_db_url: str, short_ones: bool
) -> None:
    """A resume reads the chain's newest loops a window at a time; joined back to the
    loops table, a window of 10 read all the session's loops on a new table."""
    if not empty_db_url.startswith("postgresql"):
        pytest.skip("PostgreSQL's planner with a table's statistics")
    session_id, head = await _long_session(empty_db_url, short_ones=short_ones)
    key = {"head": head, "sid": session_id, "app": "app", "user": "user-1", "limit": 10}
    statement = select_chain(True, walk_form("postgresql", routed=False))
    engine = make_engine(empty_db_url)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(statement, key)).all()
            compiled = statement.compile(dialect=conn.dialect)
            values = {**compiled.params, **key}
            positional = tuple(values[bind] for bind in compiled.positiontup or ())
            explained = await conn.exec_driver_sql(
                f"EXPLAIN (ANALYZE, FORMAT JSON) {compiled}", positional
            )
            (plan,) = explained.scalar_one()
    finally:
        await engine.dispose()
    assert [row.id for row in rows][-1] == head
    assert len(rows) == 10
    assert _touched(plan["Plan"]) <= 50
