"""Appends that follow a store's own last append to a session, on every backend.

On PostgreSQL such an append takes the session's lock and writes its rows in one
statement, using the loop state the store cached; these tests make that state stale in
every way another writer can, and check the append still lands where it belongs. Each runs
twice on PostgreSQL: with a cursor listener on the store's engine (as an application's
tracing), which keeps the statement on SQLAlchemy's execution, and without, where it goes as
asyncpg's own prepared statement (`_pg_append.insert_on_driver`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event

from sessionstore import (
    AssistantMessage,
    SessionStore,
    StoredMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessionstore.errors import (
    AmbiguousSessionError,
    ConflictError,
    SessionNotFoundError,
    StaleWriteError,
)
from sessionstore.store import _pg_append
from tests.conftest import BACKENDS
from tests.routing import Recorder

SQLITE = [param for param in BACKENDS if param.id == "sqlite"]


@pytest.fixture(params=["traced", "on_driver"])
async def store(
    request: pytest.FixtureRequest, db_url: str, routing_recorder: Recorder
) -> AsyncIterator[SessionStore]:
    """The `store` fixture's store; on PostgreSQL also one with a cursor listener."""
    if not db_url.startswith("postgresql"):
        if request.param == "on_driver":
            pytest.skip("PostgreSQL only: SQLite has one path")
        kwargs = {}
    else:
        kwargs = routing_recorder.engine_kwargs()
    async with SessionStore.from_url(db_url, **kwargs) as opened:
        if kwargs and request.param == "traced":
            event.listen(opened.engine.sync_engine, "before_cursor_execute", _traced)
        yield opened


def _traced(*_: Any) -> None:
    """A cursor listener (as an application's tracing): SQLAlchemy's path runs."""


async def test_each_variant_takes_its_path(
    store: SessionStore, request: pytest.FixtureRequest
) -> None:
    if store.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's two paths")
    on_driver = request.node.callspec.params["store"] == "on_driver"
    assert _pg_append.drives(store.engine.sync_engine) is on_driver


async def _session(store: SessionStore, user: str = "ada", session_id: str | None = None) -> str:
    return (await store.create_session(app_name="app", user_id=user, session_id=session_id)).id


def _texts(history: list[StoredMessage]) -> list[str]:
    return [m.message.content[0].text for m in history]  # type: ignore[union-attr]  # user messages


def _call(n: int) -> AssistantMessage:
    return AssistantMessage(
        content=[ToolCall(id=f"c{n}", name="ls")], model="m-1", usage=Usage(input_tokens=n)
    )


async def test_appends_of_two_stores_interleaved_keep_positions_turns_and_usage(
    store: SessionStore, db_url: str
) -> None:
    sid = await _session(store)
    async with SessionStore.from_url(db_url) as other:
        for n in range(3):
            await store.append_messages(sid, [UserMessage(content=f"q{n}")])
            await other.append_messages(sid, [_call(n)])
            await store.append_messages(sid, [ToolResultMessage(tool_call_id=f"c{n}", content="")])
            await store.append_messages(sid, [UserMessage(content=f"again {n}")])
        history = await other.get_history(sid)
    assert [m.position for m in history] == list(range(12))
    assert [m.turn_index for m in history] == [0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 7, 8]
    (loop,) = await store.list_loops(sid)
    assert (loop.message_count, loop.turn_count) == (12, 9)
    assert loop.token_total == sum(m.token_count for m in history)
    usage = await store.usage(sid)
    assert usage.calls == 3
    assert usage.usage == Usage(input_tokens=0 + 1 + 2)


async def test_an_append_follows_the_active_loop_another_store_started(
    store: SessionStore, db_url: str
) -> None:
    sid = await _session(store)
    first = await store.append_messages(sid, [UserMessage(content="one")])
    async with SessionStore.from_url(db_url) as other:
        started = await other.start_loop(sid)
    second = await store.append_messages(sid, [UserMessage(content="two")])
    assert second[0].loop_id == started.id != first[0].loop_id
    assert second[0].position == 0
    third = await store.append_messages(sid, [UserMessage(content="three")], loop_id=started.id)
    assert (third[0].loop_id, third[0].position) == (started.id, 1)


async def test_a_stale_expected_version_writes_nothing(store: SessionStore) -> None:
    sid = await _session(store)
    await store.append_messages(sid, [UserMessage(content="one")])
    version = (await store.get_session(sid)).version
    await store.append_messages(sid, [UserMessage(content="two")], expected_version=version)
    with pytest.raises(StaleWriteError):
        await store.append_messages(sid, [_call(1)], expected_version=version)
    assert _texts(await store.get_history(sid)) == ["one", "two"]
    assert (await store.usage(sid)).calls == 0
    assert (await store.get_session(sid)).version == version + 1


async def test_an_append_after_a_closed_loop_is_refused(store: SessionStore, db_url: str) -> None:
    sid = await _session(store)
    [stored] = await store.append_messages(sid, [UserMessage(content="one")])
    async with SessionStore.from_url(db_url) as other:
        await other.close_loop(sid, stored.loop_id)
    with pytest.raises(ConflictError, match="closed"):
        await store.append_messages(sid, [UserMessage(content="two")], loop_id=stored.loop_id)


async def test_an_id_another_tenant_takes_becomes_ambiguous_for_the_unscoped_store(
    store: SessionStore,
) -> None:
    sid = await _session(store, session_id="shared")
    await store.append_messages(sid, [UserMessage(content="one")])
    await _session(store, user="bob", session_id="shared")
    with pytest.raises(AmbiguousSessionError):
        await store.append_messages(sid, [UserMessage(content="two")])
    ada = store.for_tenant("app", "ada")
    assert _texts(await ada.get_history(sid)) == ["one"]
    # A tenant handle names its tenant: its append is not ambiguous.
    await ada.append_messages(sid, [UserMessage(content="two")])
    assert _texts(await ada.get_history(sid)) == ["one", "two"]
    assert await store.for_tenant("app", "bob").get_history(sid) == []


async def test_an_append_to_a_session_deleted_and_made_again_starts_afresh(
    store: SessionStore, db_url: str
) -> None:
    sid = await _session(store, session_id="again")
    await store.append_messages(sid, [UserMessage(content="one")])
    async with SessionStore.from_url(db_url) as other:
        await other.delete_session(sid)
        with pytest.raises(SessionNotFoundError):
            await store.append_messages(sid, [UserMessage(content="lost")])
        await _session(other, session_id="again")
    [stored] = await store.append_messages(sid, [UserMessage(content="two")])
    assert stored.position == 0
    assert _texts(await store.get_history(sid)) == ["two"]


async def test_each_append_bumps_the_version_once_and_expected_versions_chain(
    store: SessionStore,
) -> None:
    sid = await _session(store)
    version = (await store.get_session(sid)).version
    for n in range(4):
        await store.append_messages(
            sid, [UserMessage(content=f"q{n}")], expected_version=version + n
        )
    assert (await store.get_session(sid)).version == version + 4
    assert _texts(await store.get_history(sid)) == ["q0", "q1", "q2", "q3"]


async def test_an_expected_version_another_store_moved_past_writes_nothing(
    store: SessionStore, db_url: str
) -> None:
    sid = await _session(store)
    await store.append_messages(sid, [UserMessage(content="one")])
    version = (await store.get_session(sid)).version
    async with SessionStore.from_url(db_url) as other:
        await other.append_messages(sid, [UserMessage(content="two")])
    # The version this store cached is the one expected, but the session moved on.
    with pytest.raises(StaleWriteError):
        await store.append_messages(sid, [UserMessage(content="three")], expected_version=version)
    assert _texts(await store.get_history(sid)) == ["one", "two"]
    assert (await store.get_session(sid)).version == version + 1
    [stored] = await store.append_messages(sid, [UserMessage(content="three")])
    assert stored.position == 2


@pytest.mark.parametrize("db_url", SQLITE, indirect=True)  # the inline SQLite connection
async def test_the_unscoped_store_looks_a_session_up_and_locks_it_in_one_statement(
    store: SessionStore,
) -> None:
    """SQLite: after its first append to a session the unscoped store locks it by the key
    it found, in one statement that also checks no other tenant took the id (the cases
    where it did, or the session went, are the tests above)."""
    sid = await _session(store)
    await store.append_messages(sid, [UserMessage(content="one")])
    inline = store._runner._inline
    assert inline is not None  # the append ran on it
    raw: Any = inline.connection.driver_connection
    seen: list[str] = []
    raw.set_trace_callback(seen.append)
    try:
        await store.append_messages(sid, [UserMessage(content="two")])
    finally:
        raw.set_trace_callback(None)
    sessions = [s for s in seen if "sessionstore_sessions" in s]
    assert len(sessions) == 1, seen
    assert sessions[0].startswith("UPDATE sessionstore_sessions")
    assert "NOT (EXISTS" in sessions[0]
    assert _texts(await store.get_history(sid)) == ["one", "two"]
