"""A scope count past what a chain can hold is a typed error before any SQL (issue 17, item 15).

`FixedCount(2**63 - 1)` used to reach the database, where the query's `count + 2` overflowed
(`OverflowError` on SQLite, `StorageError` on PostgreSQL). The model now refuses it, on
every path that takes a scope, and the largest count it accepts works on both backends.
"""

from __future__ import annotations

import pytest

from sessionstore import (
    CompactionConfig,
    ConfigurationError,
    FixedCount,
    SessionStore,
    audit_session,
    build_context,
    compact_session_loops,
)
from sessionstore.models import MAX_INT
from tests.factories import conversation


@pytest.mark.parametrize("count", [MAX_INT + 1, 2**63 - 1, 2**63, 10**20])
def test_a_scope_count_past_a_chain_is_a_configuration_error(count: int) -> None:
    with pytest.raises(ConfigurationError, match="count"):
        FixedCount(count)
    with pytest.raises(ConfigurationError, match="count"):
        CompactionConfig(compaction_scope={"kind": "fixed_count", "count": count})


async def test_the_largest_scope_count_works_on_every_backend(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="scope")
    await store.start_loop(session.id)
    await store.append_messages(session.id, conversation(turns=3))
    await store.start_loop(session.id)
    await store.append_messages(session.id, conversation(turns=2))
    scope = FixedCount(MAX_INT)
    context = await build_context(store, session.id, max_context_tokens=100_000, scope=scope)
    assert len(context.loop_ids) == 2
    result = await compact_session_loops(
        store, session.id, config=CompactionConfig(compaction_scope=scope)
    )
    assert result.loop_ids == context.loop_ids
    audit = await audit_session(store, session.id, scope=scope)
    assert all(loop.in_scope for loop in audit.loops)
