"""Deleting a session: at any chain depth, through an index per referencing column.

Issue 17, items 1 and 2: a chain of 1,000+ loops could not be deleted on SQLite ("too many
levels of trigger recursion": each loop's deletion cascaded to its child from inside the
cascade), and each deleted loop, block, section or message scanned the tables that
reference it (no index led with the referencing column), so deletes were quadratic.
`bench/bench_delete.py` measures the cost per row at 5k, 20k and 100k loops.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError

from sessionstore import (
    AssistantMessage,
    FixedCount,
    Message,
    SessionStore,
    Usage,
    UserMessage,
    compact_session_loops,
    make_engine,
)
from sessionstore.errors import SessionNotFoundError
from sessionstore.store._tables import KEY_COLUMNS, metadata
from tests.factories import conversation
from tests.integration._helpers import SMALL
from tests.integration.store.test_retention import populate, rows_by_session

DEPTH = 1_200
"""Past SQLite's limit of 1,000 nested trigger levels."""


async def _deep_chain(store: SessionStore, depth: int) -> str:
    loops: list[list[Message]] = [
        [
            UserMessage(content=f"request {index}"),
            AssistantMessage(content=f"answer {index}", usage=Usage(input_tokens=index + 1)),
        ]
        for index in range(depth)
    ]
    loops[-2:] = [list(conversation(turns=6)), list(conversation(turns=6))]
    session = await store.import_session(loops, app_name="app", user_id="deep")
    await store.record_usage(session.id, Usage(output_tokens=5))
    await store.record_compaction_event(session.id, event="started", tokens_before=10)
    config = SMALL.model_copy(update={"compaction_scope": FixedCount(1)})
    result = await compact_session_loops(store, session.id, config=config, max_context_tokens=400)
    assert result.blocks  # blocks, sections and section messages too
    return session.id


@pytest.mark.slow_on_postgres  # 1,200 loops cascading: a minute on PostgreSQL
@pytest.mark.parametrize("via", ["store", "sql"])
async def test_a_chain_deeper_than_sqlites_trigger_limit_is_deleted_whole(
    store: SessionStore, db_url: str, via: str
) -> None:
    """Through the store, and through a plain DELETE of the session row (on SQLite the
    trigger of migration 0007 detaches the loops before the cascade, whoever deletes)."""
    other = await populate(store)
    deep = await _deep_chain(store, DEPTH)
    before = await rows_by_session(store)
    assert before[("sessionstore_loops", deep)] == DEPTH

    if via == "store":
        await store.delete_session(deep)
    else:
        engine = make_engine(db_url)
        try:
            async with engine.begin() as conn:
                await conn.execute(
                    text("DELETE FROM sessionstore_sessions WHERE id = :id"), {"id": deep}
                )
        finally:
            await engine.dispose()

    after = await rows_by_session(store)
    assert after == Counter({key: n for key, n in before.items() if key[1] == other})
    with pytest.raises(SessionNotFoundError):
        await store.get_session(deep)
    assert (await store.verify()).is_ok


def _unindexed(connection: Any) -> list[str]:
    """The referencing columns (beside the session's key) no index of their table finds.

    A foreign key to a row of the same session is `(column, *KEY_COLUMNS)`: `column` holds
    the row's id, unique on its own, so an index whose leading columns are all columns of
    the foreign key and include `column` finds the referencing rows by equality (migration
    0010 looks up a loop's messages by `(loop_id, turn_index)` and a message's usage by its
    key `(session_id, app_name, user_id, message_id)`); a foreign key to the session itself
    is the key alone, which the unique keys lead with.
    """
    inspector = inspect(connection)
    missing = []
    for table in metadata.sorted_tables:
        orders = [ix["column_names"] for ix in inspector.get_indexes(table.name)]
        orders += [uq["column_names"] for uq in inspector.get_unique_constraints(table.name)]
        orders.append(inspector.get_pk_constraint(table.name)["constrained_columns"])
        for fk in table.foreign_key_constraints:
            columns = {c.name for c in fk.columns}
            referencing = [name for name in columns if name not in KEY_COLUMNS]
            if not referencing:
                assert "session_id" in {order[0] for order in orders if order}, table.name
            elif not any(referencing[0] in _bound(order, columns) for order in orders):
                missing.append(f"{table.name}.{referencing[0]}")
    return missing


def _bound(order: list[str], columns: set[str]) -> list[str]:
    """The leading columns of an index that a look-up by `columns` binds by equality."""
    bound = []
    for name in order:
        if name not in columns:
            break
        bound.append(name)
    return bound


async def test_every_column_that_references_a_deleted_row_leads_an_index(db_url: str) -> None:
    """Deleting a loop, block, section or message looks up its referencing rows by index."""
    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(_unindexed) == []
    finally:
        await engine.dispose()


async def test_one_loop_or_message_still_cannot_be_deleted_alone(
    store: SessionStore, db_url: str
) -> None:
    """Raw is sacred: the new delete path opens no way to delete a row on its own."""
    session_id = await populate(store)
    before = await rows_by_session(store)
    (loop, *_) = await store.list_loops(session_id)
    (message, *_) = await store.get_messages(session_id, loop_id=loop.id)
    engine = make_engine(db_url)
    try:
        for statement in (
            f"DELETE FROM sessionstore_messages WHERE id = {message.id}",
            f"DELETE FROM sessionstore_loops WHERE id = {loop.id}",
        ):
            with pytest.raises(DBAPIError):
                async with engine.begin() as conn:
                    await conn.execute(text(statement))
    finally:
        await engine.dispose()
    assert await rows_by_session(store) == before
