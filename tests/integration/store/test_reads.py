"""Bulk reads: a loop, a strategy's view of it, and the history in chunks, on every backend."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC
from typing import Any

import pytest
from sqlalchemy import event, text

from sessionstore import (
    CompactionConfig,
    DefaultBlockCompaction,
    SessionStore,
    StoredMessage,
    UserMessage,
    export_conversation,
    stream_conversation,
)
from sessionstore._loop_messages import LoopMessages
from sessionstore.errors import AmbiguousSessionError, LoopNotFoundError, SessionNotFoundError
from sessionstore.store._tables import utc_micros
from tests.conftest import citus_requested
from tests.factories import conversation
from tests.integration.store._helpers import new_session


def _same(read: list[StoredMessage], written: list[StoredMessage]) -> None:
    assert [m.model_dump() for m in read] == [m.model_dump() for m in written]


# ── get_messages ───────────────────────────────────────────────────────────────


async def test_get_messages_reads_the_loop_and_its_newest(store: SessionStore) -> None:
    sid = await new_session(store)
    written = await store.append_messages(sid, conversation(turns=6))
    _same(await store.get_messages(sid), written)
    _same(await store.get_messages(sid, last=4), written[-4:])
    _same(await store.get_messages(sid, last=1000), written)
    assert await store.get_messages(sid, last=0) == []
    loop_id = written[0].loop_id
    _same(await store.get_messages(sid, loop_id, last=2), written[-2:])
    _same(await store.get_messages(sid, loop_id), written)


async def test_get_messages_on_postgresql_sends_no_begin(store: SessionStore) -> None:
    """Its statements each answer on their own: no `BEGIN` and `COMMIT` round trips."""
    if store.engine.dialect.name != "postgresql":
        pytest.skip("a PostgreSQL transaction block")
    sid = await new_session(store)
    written = await store.append_messages(sid, conversation(turns=3))
    sent: list[str] = []
    logged: dict[int, Any] = {}

    def log(record: Any) -> None:
        sent.append(record.query.split()[0].upper())

    def listen(dbapi_connection: Any, *_: Any) -> None:
        # asyncpg's own log of the plain queries it sends (BEGIN, COMMIT).
        driver = dbapi_connection.driver_connection
        if id(driver) not in logged:
            logged[id(driver)] = driver
            driver.add_query_logger(log)

    event.listen(store.engine.sync_engine.pool, "checkout", listen)
    try:
        _same(await store.get_messages(sid), written)
        _same(await store.get_messages(sid, last=2), written[-2:])
        with pytest.raises(SessionNotFoundError):
            await store.get_messages("no-such-session")
        assert logged  # the logger listened to the connections the reads used
        assert "BEGIN" not in sent
        assert "COMMIT" not in sent
        _same(await store.get_history(sid), written)  # a read of several statements
        assert sent.count("BEGIN") == 1
    finally:
        event.remove(store.engine.sync_engine.pool, "checkout", listen)
        for driver in logged.values():
            driver.remove_query_logger(log)


async def test_get_messages_of_an_empty_or_unknown_loop(store: SessionStore) -> None:
    sid = await new_session(store)
    assert await store.get_messages(sid) == []  # no loop yet
    loop = await store.start_loop(sid)
    assert await store.get_messages(sid, loop.id) == []
    assert await store.get_messages(sid, last=5) == []
    with pytest.raises(LoopNotFoundError):
        await store.get_messages(sid, loop.id + 1000)
    with pytest.raises(SessionNotFoundError):
        await store.get_messages("no-such-session")
    with pytest.raises(SessionNotFoundError):
        await store.get_messages("no-such-session", loop.id, last=3)


async def test_get_messages_stays_within_the_tenant(store: SessionStore) -> None:
    sid = await new_session(store)  # owned by app / ada
    written = await store.append_messages(sid, conversation(turns=1))
    _same(await store.for_tenant("app", "ada").get_messages(sid, last=2), written[-2:])
    other = store.for_tenant("app", "bob")
    with pytest.raises(SessionNotFoundError):
        await other.get_messages(sid)
    with pytest.raises(SessionNotFoundError):
        await other.get_messages(sid, written[0].loop_id, last=2)


async def test_get_messages_of_the_unscoped_store_needs_one_tenant(store: SessionStore) -> None:
    """The unscoped store reads a loop without a tenant lookup first, yet an id two
    tenants use is still ambiguous, and another session's loop is still not found."""
    ada, bob = store.for_tenant("app", "ada"), store.for_tenant("app", "bob")
    await ada.create_session(session_id="shared")
    await bob.create_session(session_id="shared")
    ada_written = await ada.append_messages("shared", conversation(turns=2))
    bob_written = await bob.append_messages("shared", conversation(turns=3))
    for loop_id in (None, ada_written[0].loop_id, bob_written[0].loop_id):
        for last in (None, 2):
            with pytest.raises(AmbiguousSessionError):
                await store.get_messages("shared", loop_id, last=last)
    _same(await ada.get_messages("shared", last=2), ada_written[-2:])
    await bob.delete_session("shared")
    _same(await store.get_messages("shared"), ada_written)
    _same(await store.get_messages("shared", ada_written[0].loop_id, last=3), ada_written[-3:])
    other = await new_session(store)
    other_written = await store.append_messages(other, conversation(turns=1))
    with pytest.raises(LoopNotFoundError):
        await store.get_messages("shared", other_written[0].loop_id)
    with pytest.raises(LoopNotFoundError):
        await store.get_messages(other, ada_written[0].loop_id, last=1)


@pytest.mark.driver_path
async def test_get_messages_of_the_unscoped_store_sends_one_statement(
    store: SessionStore,
) -> None:
    """No tenant lookup before the read: one statement on PostgreSQL, one round trip."""
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite's reads go straight to the driver, past SQLAlchemy's events")
    if citus_requested():
        pytest.skip("Citus: the tenant is looked up first (a statement of two tables)")
    sid = await new_session(store)
    written = await store.append_messages(sid, conversation(turns=3))
    sent: list[str] = []

    def log(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    event.listen(store.engine.sync_engine, "before_cursor_execute", log)
    try:
        _same(await store.get_messages(sid), written)
        _same(await store.get_messages(sid, written[0].loop_id, last=2), written[-2:])
        assert len(sent) == 2
        _same(await store.for_tenant("app", "ada").get_messages(sid, last=2), written[-2:])
        assert len(sent) == 3
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", log)


async def test_messages_read_in_bulk_behave_as_built_ones(store: SessionStore) -> None:
    sid = await new_session(store)
    written = await store.append_messages(sid, [UserMessage(content="hi", client_id="c-1")])
    (read,) = await store.get_messages(sid)
    assert read.message.client_id == "c-1"
    assert read == written[0]
    assert read.model_fields_set == written[0].model_fields_set
    copy = read.model_copy(update={"token_count": 99})
    assert (copy.token_count, read.token_count) == (99, written[0].token_count)
    assert written[0].model_copy(update={"position": 7}).position == 7
    (again,) = await store.get_messages(sid, last=1)
    assert again.message == read.message
    assert again.message is not read.message
    bare = again.message.model_copy(update={"client_id": None})
    assert (bare.client_id, again.message.client_id) == (None, "c-1")


# ── get_loop_view ──────────────────────────────────────────────────────────────


async def test_loop_view_holds_columns_and_builds_messages_when_indexed(
    store: SessionStore,
) -> None:
    sid = await new_session(store)
    written = await store.append_messages(sid, conversation(turns=8))
    loop = await store.get_loop(sid, written[0].loop_id)
    view = await store.get_loop_view(sid, loop)
    messages = view.messages
    assert isinstance(messages, LoopMessages)
    assert len(messages) == len(written)
    _same(list(messages), written)
    _same(messages[2:5], written[2:5])
    _same([messages[-1]], [written[-1]])
    with pytest.raises(IndexError):
        messages[len(written)]
    assert view.tokens() == sum(m.token_count for m in written)
    assert view.tokens(1, 4) == sum(m.token_count for m in written[1:4])
    assert view.message_ids(3, 6) == [m.id for m in written[3:6]]
    assert view.turn_map.ranges == view.of(loop, written).turn_map.ranges
    assert view.previous is None
    config = CompactionConfig(keep_first_turns=1, keep_recent_turns=2)
    strategy = DefaultBlockCompaction()
    from_view = strategy.compact(view, config, True)
    assert from_view == strategy.compact(view.of(loop, written), config, True)
    (block,) = await store.write_blocks(sid, [(loop.id, from_view)])
    again = await store.get_loop_view(sid, loop)
    assert again.previous == await store.get_block(sid, loop.id)
    assert again.previous is not None
    assert again.previous.id == block.id


async def test_loop_view_of_an_empty_loop_and_of_another_tenant(store: SessionStore) -> None:
    sid = await new_session(store)
    loop = await store.start_loop(sid)
    view = await store.get_loop_view(sid, loop)
    assert len(view.messages) == 0
    assert view.turn_map.turn_count() == 0
    with pytest.raises(SessionNotFoundError):
        await store.for_tenant("app", "bob").get_loop_view(sid, loop)


# ── the history, whole and in chunks ───────────────────────────────────────────


async def _three_loops(store: SessionStore) -> tuple[str, list[StoredMessage]]:
    sid = await new_session(store)
    written = await store.append_messages(sid, conversation(turns=3))
    await store.start_loop(sid)  # an empty loop in the middle of the chain
    await store.start_loop(sid)
    written += await store.append_messages(sid, conversation(turns=2))
    return sid, written


async def test_iter_history_yields_the_history_in_bounded_chunks(store: SessionStore) -> None:
    sid, written = await _three_loops(store)
    _same(await store.get_history(sid), written)
    for size in (1, 3, 7, len(written), 1000):
        chunks = [chunk async for chunk in store.iter_history(sid, chunk_size=size)]
        assert all(0 < len(chunk) <= size for chunk in chunks)
        _same([m for chunk in chunks for m in chunk], written)
    first_loop = written[0].loop_id
    chunks = [chunk async for chunk in store.iter_history(sid, loop_id=first_loop, chunk_size=2)]
    _same([m for chunk in chunks for m in chunk], [m for m in written if m.loop_id == first_loop])


async def test_iter_history_reads_what_was_there_when_it_began(store: SessionStore) -> None:
    sid, written = await _three_loops(store)
    chunks = store.iter_history(sid, chunk_size=4)
    first = await anext(chunks)
    await store.append_messages(sid, [UserMessage(content="later")])
    rest = [m async for chunk in chunks for m in chunk]
    _same(first + rest, written)


async def test_iter_history_refuses_and_reports(store: SessionStore) -> None:
    sid, _ = await _three_loops(store)
    with pytest.raises(ValueError, match="chunk_size"):
        await anext(store.iter_history(sid, chunk_size=0))
    with pytest.raises(SessionNotFoundError):
        await anext(store.iter_history("no-such-session"))
    with pytest.raises(SessionNotFoundError):
        await anext(store.for_tenant("app", "bob").iter_history(sid))
    empty = await new_session(store)
    assert [chunk async for chunk in store.iter_history(empty)] == []
    chunks = store.iter_history(sid, chunk_size=2)
    await anext(chunks)
    await store.delete_session(sid)
    with pytest.raises(SessionNotFoundError):
        await anext(chunks)


@pytest.mark.parametrize("indent", [None, 2])
async def test_stream_conversation_writes_what_export_conversation_returns(
    store: SessionStore, indent: int | None
) -> None:
    sid, _ = await _three_loops(store)
    await store.create_session(
        session_id="meta", app_name="app", user_id="ada", title='a "title"', metadata={"k": [1]}
    )
    for session_id in (sid, "meta"):
        whole = await export_conversation(store, session_id)
        pieces = [
            piece
            async for piece in stream_conversation(store, session_id, indent=indent, chunk_size=3)
        ]
        assert "".join(pieces) == json.dumps(whole, indent=indent, ensure_ascii=False)
    assert len(whole["messages"]) == 0


async def test_a_chain_longer_than_the_drivers_parameter_limit_reads(
    store: SessionStore,
) -> None:
    """asyncpg refuses more than 32,767 parameters: the history never sends loop ids."""
    loops = 33_000
    sid = await new_session(store)
    session = await store.get_session(sid)
    root = await store.start_loop(sid)
    first = await store.append_messages(sid, [UserMessage(content="the first request")])
    base = 10**12  # far above any id the table's sequence hands out
    engine = store.engine
    async with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            # The rows are made consistent by construction: the foreign keys' checks are
            # set aside (a check a row, planned when the table looked empty, can scan the
            # session's loops at each row).
            await conn.execute(text("SET LOCAL session_replication_role = replica"))
            series = "SELECT n FROM generate_series(1, :count) AS n"
            now, empty = "now()", "'[]'::jsonb"
        else:
            series = (
                "SELECT n FROM (WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL "
                "SELECT n + 1 FROM s WHERE n < :count) SELECT n FROM s)"
            )
            now, empty = "strftime('%Y-%m-%d %H:%M:%f000', 'now')", "'[]'"
        await conn.execute(
            text(
                "INSERT INTO sessionstore_loops (id, session_id, app_name, user_id, "
                "parent_loop_id, sequence, depth, created_at, closed_at, message_count, "
                "token_total, turn_count, open_tool_call_ids) "
                "SELECT CAST(:base AS BIGINT) + n, :sid, :app, :user, "
                "CASE WHEN n = 1 THEN :root ELSE CAST(:base AS BIGINT) + n - 1 END, "
                f"n, n, {now}, NULL, 0, 0, 0, {empty} FROM ({series}) AS numbers"
            ),
            {
                "base": base,
                "sid": sid,
                "app": session.app_name,
                "user": session.user_id,
                "root": root.id,
                "count": loops,
            },
        )
        await conn.execute(
            text(
                "UPDATE sessionstore_sessions SET active_loop_id = :head, loop_count = :n "
                "WHERE id = :sid"
            ),
            {"head": base + loops, "n": loops + 1, "sid": sid},
        )
        if engine.dialect.name == "postgresql":
            # What autovacuum does soon after such a load: without statistics the planner
            # takes the table for a small one and may walk the chain through the session's
            # loops instead of by their primary key.
            await conn.execute(text("ANALYZE sessionstore_loops"))
    try:
        last = await store.append_messages(sid, [UserMessage(content="the latest request")])
        _same(await store.get_history(sid), first + last)
        _same([m async for chunk in store.iter_history(sid) for m in chunk], first + last)
    finally:
        # Deleting 33,000 loops through the cascades costs about a minute here (each deleted
        # loop makes the database look for rows that reference it, and SQLite stops a chain
        # of cascades at 1,000 levels): remove this session's rows directly instead, with
        # the foreign keys and triggers off for this one connection.
        tables = (
            "sessionstore_sessions",  # first: the messages' delete trigger needs it gone
            "sessionstore_usage",
            "sessionstore_messages",
            "sessionstore_loops",
        )
        deletes = [
            f"DELETE FROM {table} WHERE {'id' if table.endswith('sessions') else 'session_id'}"
            for table in tables
        ]
        if engine.dialect.name == "postgresql":
            async with engine.begin() as conn:
                await conn.execute(text("SET LOCAL session_replication_role = replica"))
                for delete in deletes:
                    await conn.execute(text(f"{delete} = :sid"), {"sid": sid})
        else:  # PRAGMA foreign_keys only changes outside a transaction: the plain driver
            raw = sqlite3.connect(engine.url.database or "", isolation_level=None)
            try:
                raw.execute("PRAGMA foreign_keys = OFF")
                raw.execute("BEGIN IMMEDIATE")
                for delete in deletes:
                    raw.execute(f"{delete} = ?", (sid,))
                raw.execute("COMMIT")
            finally:
                raw.close()


async def test_bulk_reads_give_the_stored_times_exactly(store: SessionStore) -> None:
    """The driver's plain read (times as microseconds on PostgreSQL) gives SQLAlchemy's times."""
    sid = await new_session(store)
    written: list[StoredMessage] = []
    for _ in range(3):
        written += await store.append_messages(sid, conversation(turns=1))
    plain = await store.get_messages(sid)
    history = await store.get_history(sid)

    def listen(*_: Any) -> None:
        """Any cursor listener sends the reads through SQLAlchemy's result processing."""

    event.listen(store.engine.sync_engine, "before_cursor_execute", listen)
    try:
        processed = await store.get_messages(sid)
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", listen)
    times = [m.created_at for m in written]
    assert [m.created_at for m in plain] == [m.created_at for m in processed] == times
    assert [m.created_at for m in history] == times
    assert all(m.created_at.tzinfo is UTC for m in plain)
    _same(plain, processed)


async def test_postgresql_times_as_microseconds_are_exact(store: SessionStore) -> None:
    """`EXTRACT(epoch ...)` scaled to microseconds gives each stored time back, to the µs."""
    if store.engine.dialect.name != "postgresql":
        pytest.skip("the plain read takes times as microseconds on PostgreSQL only")
    values = [
        "2026-11-29 03:31:21.999999+00",
        "2026-11-29 03:31:21.000001+00",
        "2026-11-29 03:31:21+00",
        "1969-12-31 23:59:59.000001+00",
        "2262-04-11 23:47:16.854775+00",
        "2026-06-01 12:00:00.5+02",
    ]
    async with store.engine.connect() as connection:
        for value in values:
            row = (
                await connection.execute(
                    text(
                        "SELECT CAST(EXTRACT(epoch FROM stored) * 1000000 AS BIGINT), stored"
                        " FROM (SELECT CAST(CAST(:t AS TEXT) AS timestamptz) AS stored) AS one"
                    ),
                    {"t": value},
                )
            ).one()
            assert utc_micros(row[0]) == row[1], value
            assert utc_micros(row[0]).tzinfo is UTC
