"""A chain of more loops than a statement can bind parameters.

The reads of a chain's blocks, digests and counters as of a moment bind the chain's loop
ids in an `IN` list. PostgreSQL's protocol carries at most 32,767 parameters a statement
(asyncpg refuses more), so `chain_blocks`, `get_digest`, a compaction and an audit of a
session with a chain longer than that failed. The reads now bind the ids a chunk at a
time (`_context_source.IDS_PER_STATEMENT`).
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from sessionstore import (
    SessionStore,
    UserMessage,
    _context_source,
    audit_session,
    build_context,
    compact_session_loops,
)
from sessionstore.store._engine import make_engine
from tests.factories import conversation

LONG = 32_800
"""Loops of the long chain: more than PostgreSQL binds in one statement."""


async def chain_of(url: str, loops: int, *, analyze: bool = True) -> str:
    """A session whose active chain is `loops` loops long, written straight in SQL.

    Through the API this takes minutes; the rows are the ones it writes for loops that
    hold no message yet (ids far above the sequence's, each the child of the one before).
    `analyze`: the loops table is analyzed after, as autovacuum would.
    """
    async with SessionStore.from_url(url) as store:
        session = await store.create_session(app_name="app", user_id="user")
    base = 10_000_000
    engine = make_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO sessionstore_loops (id, session_id, app_name, user_id, "
                    "parent_loop_id, sequence, depth, created_at, closed_at, message_count, "
                    "token_total, turn_count, open_tool_call_ids) "
                    "SELECT :base + n, :sid, 'app', 'user', "
                    "CASE WHEN n = 0 THEN NULL ELSE :base + n - 1 END, n, n, now(), "
                    "CASE WHEN n = :last THEN NULL ELSE now() END, 0, 0, 0, '[]' "
                    "FROM generate_series(0, :last) AS n"
                ),
                {"base": base, "sid": session.id, "last": loops - 1},
            )
            await conn.execute(
                text(
                    "UPDATE sessionstore_sessions SET active_loop_id = :head, loop_count = :n "
                    "WHERE id = :sid"
                ),
                {"head": base + loops - 1, "n": loops, "sid": session.id},
            )
        if analyze:
            async with engine.connect() as conn:
                # As autovacuum would after such a write (the plans of a table never
                # analyzed: `test_loop_lookups.py`).
                await conn.execute(text("ANALYZE sessionstore_loops"))
                await conn.commit()
    finally:
        await engine.dispose()
    return session.id


async def test_a_chain_longer_than_a_statement_binds_is_read_whole(db_url: str) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite's own limit on bound parameters is 250,000 in Debian's build")
    session_id = await chain_of(db_url, LONG)
    async with SessionStore.from_url(db_url) as store:
        await store.append_messages(session_id, [UserMessage(content="and now?")])

        entries = await store.chain_blocks(session_id)
        digest = await store.get_digest(session_id)
        moment = (await store.get_messages(session_id))[-1].created_at
        as_of = await store.chain_blocks(session_id, as_of=moment)
        digest_as_of = await store.get_digest(session_id, as_of=moment)

    assert len(entries) == LONG
    assert all(block is None for _, block in entries)
    assert digest is None
    assert [loop.id for loop, _ in as_of] == [loop.id for loop, _ in entries]
    assert as_of[-1][0].message_count == 1
    assert digest_as_of is None


async def _compacted(store: SessionStore) -> str:
    """A session of 8 loops compacted after the 3rd, 6th and 8th: blocks and digests."""
    session = await store.create_session(app_name="app", user_id="user")
    for number in range(1, 9):
        await store.append_messages(session.id, conversation(turns=4), loop_id="new")
        if number in (3, 6, 8):
            await compact_session_loops(store, session.id, max_context_tokens=1_500)
    return session.id


async def test_reads_in_chunks_answer_as_one_statement(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ids a statement: every read of the chain's blocks, digest and counters is the same."""
    session_id = await _compacted(store)
    blocks = await store.chain_blocks(session_id)
    moments = sorted({b.created_at for _, b in blocks if b is not None and b.created_at})

    async def reads() -> list[object]:
        found: list[object] = []
        for moment in [None, *moments]:
            found.append(await store.chain_blocks(session_id, as_of=moment))
            found.append(await store.get_digest(session_id, as_of=moment))
            found.append(await audit_session(store, session_id, as_of=moment))
        found.append(await build_context(store, session_id, max_context_tokens=2_000))
        return found

    whole = await reads()
    monkeypatch.setattr(_context_source, "IDS_PER_STATEMENT", 2)
    chunked = await reads()

    assert chunked == whole
    assert len(moments) >= 2
    assert any(found is not None for found in whole[1::3])  # a digest to find
    assert sum(block is not None for _, block in blocks) >= 3
