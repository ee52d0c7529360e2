"""Sessions, tenants, loops and imported sessions, on every backend (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import text

from sessionstore import (
    CompactionBlock,
    Message,
    SessionStore,
    TurnRange,
    UserMessage,
    make_engine,
)
from sessionstore.errors import (
    ConflictError,
    LoopNotFoundError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)
from tests.factories import (
    AssistantMessageFactory,
    conversation,
)
from tests.integration.store._helpers import new_session

# ── sessions ───────────────────────────────────────────────────────────────────


async def test_create_and_get_session_round_trips_fields(store: SessionStore) -> None:
    created = await store.create_session(
        app_name="app", user_id="ada", title="Fix the bug", metadata={"repo": "x", "n": [1, 2]}
    )
    fetched = await store.get_session(created.id)
    assert fetched == created
    assert fetched.version == 1
    assert fetched.active_loop_id is None
    assert fetched.created_at.tzinfo is not None
    assert fetched.created_at.utcoffset() == timedelta(0)
    assert abs(fetched.created_at - datetime.now(UTC)) < timedelta(minutes=1)


async def test_create_session_with_taken_id_is_refused(store: SessionStore) -> None:
    await store.create_session(session_id="s-1", app_name="app", user_id="ada")
    with pytest.raises(SessionExistsError) as info:
        await store.create_session(session_id="s-1", app_name="app", user_id="ada")
    assert info.value.session_id == "s-1"


async def test_create_session_rejects_bad_arguments(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="app_name and user_id"):
        await store.create_session(app_name="app")
    with pytest.raises(ValueError, match="1 to 128"):
        await store.create_session(session_id="x" * 129, app_name="a", user_id="b")


async def test_unknown_session_is_not_found_everywhere(store: SessionStore) -> None:
    for call in (
        store.get_session("nope"),
        store.append_messages("nope", [UserMessage(content="hi")]),
        store.get_messages("nope"),
        store.start_loop("nope"),
        store.delete_session("nope"),
        store.list_loops("nope"),
        store.get_history("nope"),
    ):
        with pytest.raises(SessionNotFoundError):
            await call


async def test_list_sessions_pages_newest_first_without_gaps(store: SessionStore) -> None:
    created = [await new_session(store, title=f"t{i}") for i in range(7)]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await store.list_sessions(limit=3, cursor=cursor)
        seen.extend(s.id for s in page.items)
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 3
    assert seen == created[::-1]


async def test_list_sessions_filters_by_tenant(store: SessionStore) -> None:
    mine = await store.create_session(app_name="app", user_id="ada")
    await store.create_session(app_name="app", user_id="bob")
    await store.create_session(app_name="other", user_id="ada")
    page = await store.list_sessions(app_name="app", user_id="ada")
    assert [s.id for s in page.items] == [mine.id]
    assert len((await store.list_sessions(app_name="app")).items) == 2
    with pytest.raises(ValueError, match="needs app_name"):
        await store.list_sessions(user_id="ada")


async def test_list_sessions_rejects_bad_cursor_and_limit(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="invalid cursor"):
        await store.list_sessions(cursor="not-a-cursor")
    with pytest.raises(ValueError, match="limit"):
        await store.list_sessions(limit=0)


async def test_delete_session_removes_everything(store: SessionStore, db_url: str) -> None:
    session_id = await new_session(store)
    await store.append_messages(session_id, conversation(3))
    loop = (await store.get_session(session_id)).active_loop_id
    assert loop is not None
    await store.write_block(
        session_id, loop, CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=0))
    )
    await store.delete_session(session_id)
    with pytest.raises(SessionNotFoundError):
        await store.get_session(session_id)
    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn:
            for table in ("messages", "loops", "blocks"):
                count = await conn.scalar(text(f"SELECT count(*) FROM sessionstore_{table}"))
                assert count == 0, table
    finally:
        await engine.dispose()


# ── tenants ────────────────────────────────────────────────────────────────────


async def test_tenant_handle_never_sees_other_tenants(store: SessionStore) -> None:
    ada = store.for_tenant("app", "ada")
    bob = store.for_tenant("app", "bob")
    ada_session = await ada.create_session(title="ada's")
    await ada.append_messages(ada_session.id, [UserMessage(content="secret")])
    assert ada_session.user_id == "ada"
    assert (await bob.list_sessions()).items == []
    for call in (
        bob.get_session(ada_session.id),
        bob.get_messages(ada_session.id),
        bob.append_messages(ada_session.id, [UserMessage(content="x")]),
        bob.delete_session(ada_session.id),
        bob.start_loop(ada_session.id),
        bob.get_history(ada_session.id),
    ):
        with pytest.raises(SessionNotFoundError) as info:
            await call
        # The same error, word for word, as for a session that does not exist.
        assert str(info.value) == str(SessionNotFoundError(ada_session.id))
    assert [s.id for s in (await ada.list_sessions()).items] == [ada_session.id]
    assert len(await ada.get_messages(ada_session.id)) == 1


async def test_tenant_handle_creates_only_for_its_tenant(store: SessionStore) -> None:
    ada = store.for_tenant("app", "ada")
    with pytest.raises(ValueError, match="own tenant"):
        await ada.create_session(user_id="bob")
    with pytest.raises(ValueError, match="non-empty"):
        store.for_tenant("", "x")


# ── loops ──────────────────────────────────────────────────────────────────────


async def test_first_append_starts_a_root_loop(store: SessionStore) -> None:
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, [UserMessage(content="hi")])
    session = await store.get_session(session_id)
    assert session.active_loop_id == stored[0].loop_id
    (loop,) = await store.list_loops(session_id)
    assert (loop.parent_loop_id, loop.sequence, loop.depth, loop.closed_at) == (None, 0, 0, None)


async def test_start_loop_continues_the_active_chain(store: SessionStore) -> None:
    session_id = await new_session(store)
    first = await store.start_loop(session_id)
    second = await store.start_loop(session_id)
    third = await store.start_loop(session_id)
    assert (first.parent_loop_id, second.parent_loop_id, third.parent_loop_id) == (
        None,
        first.id,
        second.id,
    )
    assert [first.depth, second.depth, third.depth] == [0, 1, 2]
    assert [first.sequence, second.sequence, third.sequence] == [0, 1, 2]
    assert (await store.get_loop(session_id, first.id)).closed_at is not None
    assert (await store.get_loop(session_id, third.id)).closed_at is None
    chain = await store.active_chain(session_id)
    assert [loop.id for loop in chain] == [first.id, second.id, third.id]
    assert [loop.id for loop in await store.active_chain(session_id, limit=2)] == [
        second.id,
        third.id,
    ]


async def test_branch_from_an_earlier_loop_and_switch_back(store: SessionStore) -> None:
    session_id = await new_session(store)
    root = await store.start_loop(session_id)
    old_tip = await store.start_loop(session_id)
    branch = await store.start_loop(session_id, parent_loop_id=root.id)
    assert branch.parent_loop_id == root.id
    assert branch.depth == 1
    assert (await store.get_session(session_id)).active_loop_id == branch.id
    assert [loop.id for loop in await store.active_chain(session_id)] == [root.id, branch.id]
    # The tip left behind stays open and can be resumed.
    assert (await store.get_loop(session_id, old_tip.id)).closed_at is None
    await store.switch_loop(session_id, old_tip.id)
    assert [loop.id for loop in await store.active_chain(session_id)] == [root.id, old_tip.id]
    chain = await store.active_chain(session_id, loop_id=branch.id)
    assert [loop.id for loop in chain] == [root.id, branch.id]
    assert len(await store.list_loops(session_id)) == 3


async def test_loops_of_another_session_are_not_found(store: SessionStore) -> None:
    one = await new_session(store)
    other = await new_session(store)
    foreign = await store.start_loop(other)
    with pytest.raises(LoopNotFoundError):
        await store.start_loop(one, parent_loop_id=foreign.id)
    with pytest.raises(LoopNotFoundError):
        await store.append_messages(one, [UserMessage(content="x")], loop_id=foreign.id)
    with pytest.raises(LoopNotFoundError):
        await store.switch_loop(one, foreign.id)
    with pytest.raises(LoopNotFoundError):
        await store.get_messages(one, foreign.id)
    with pytest.raises(LoopNotFoundError):
        await store.get_loop(one, 10**9)


async def test_append_to_a_closed_loop_is_refused(store: SessionStore) -> None:
    session_id = await new_session(store)
    first = await store.start_loop(session_id)
    await store.start_loop(session_id)
    with pytest.raises(ConflictError, match="closed"):
        await store.append_messages(session_id, [UserMessage(content="late")], loop_id=first.id)
    closed = await store.close_loop(
        session_id, (await store.get_session(session_id)).active_loop_id or 0
    )
    assert closed.closed_at is not None


# ── import_session ─────────────────────────────────────────────────────────────


async def test_import_session_writes_chained_loops_in_one_go(store: SessionStore) -> None:
    loops: list[Sequence[Message]] = [
        conversation(2),
        conversation(1),
        [UserMessage(content="last")],
    ]
    session = await store.import_session(
        loops, session_id="imported", app_name="app", user_id="ada", title="t", metadata={"k": 1}
    )
    assert (session.id, session.title, session.metadata, session.loop_count) == (
        "imported",
        "t",
        {"k": 1},
        3,
    )
    chain = await store.active_chain(session.id)
    assert [loop.message_count for loop in chain] == [len(loop) for loop in loops]
    assert [loop.closed_at is None for loop in chain] == [False, False, True]
    assert chain[-1].id == session.active_loop_id
    history = await store.get_history(session.id)
    assert [m.message for m in history] == [m for loop in loops for m in loop]
    # The session continues like any other.
    await store.append_messages(session.id, [AssistantMessageFactory.build(calls=0)])
    assert (await store.start_loop(session.id)).sequence == 3


async def test_import_session_is_all_or_nothing(store: SessionStore) -> None:
    bad: list[Sequence[Message]] = [
        conversation(1),
        [UserMessage(content="ok"), {"kind": "tool_result"}],  # type: ignore[list-item]  # the wrong type is the point
    ]
    with pytest.raises(ValidationError):
        await store.import_session(bad, session_id="half", app_name="app", user_id="ada")
    with pytest.raises(SessionNotFoundError):
        await store.get_session("half")
    dup = [[UserMessage(content="a", client_id="x")], [UserMessage(content="b", client_id="x")]]
    with pytest.raises(ConflictError, match="twice"):
        await store.import_session(dup, session_id="dup", app_name="app", user_id="ada")
    await store.import_session([conversation(1)], session_id="taken", app_name="app", user_id="ada")
    with pytest.raises(SessionExistsError):
        await store.import_session(
            [conversation(1)], session_id="taken", app_name="app", user_id="ada"
        )
    assert (await store.get_session("taken")).loop_count == 1


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


async def test_a_refused_session_writes_nothing(store: SessionStore) -> None:
    """Metadata the model refuses (here 300 levels deep) used to be committed first, and
    then broke every read of the tenant's sessions (issue 10, defect 1)."""
    kept = await store.create_session(app_name="a", user_id="u", title="kept")
    with pytest.raises(ValueError, match="metadata"):
        await store.create_session(app_name="a", user_id="u", metadata=_deep(300))
    with pytest.raises(ValueError, match="metadata"):
        await store.import_session(
            [[UserMessage(content="hi")]], app_name="a", user_id="u", metadata=_deep(300)
        )
    page = await store.list_sessions()
    assert [session.id for session in page.items] == [kept.id]
    assert (await store.get_session(kept.id)).title == "kept"


async def test_refused_event_details_write_nothing(store: SessionStore) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    with pytest.raises(ValueError, match="details"):
        await store.record_compaction_event(
            session.id, event="started", tokens_before=1, details=_deep(300)
        )
    assert await store.list_compaction_events(session.id) == []
    assert (await store.get_session(session.id)).version == session.version


async def test_a_naive_cursor_is_a_bad_argument(store: SessionStore) -> None:
    """A cursor whose time has no zone used to fail as a StorageError (issue 10, defect 12)."""
    import base64
    import json

    naive = base64.urlsafe_b64encode(json.dumps(["2026-01-01T00:00:00", "x"]).encode()).decode()
    with pytest.raises(ValueError, match="invalid cursor"):
        await store.list_sessions(cursor=naive)


async def test_a_storage_error_shows_no_sql_and_no_message_content(
    store: SessionStore, db_url: str
) -> None:
    """Driver errors become StorageError without the statement or its parameters.

    (A NUL on PostgreSQL used to be the driver error here; it is stored now, so the
    error is a real constraint violation with message contents in its parameters.)
    """
    from sqlalchemy.exc import SQLAlchemyError

    from sessionstore.store._db_errors import storage_error

    secret = "the-confidential-text-of-a-message"
    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn:
            with pytest.raises(SQLAlchemyError) as driver:
                await conn.execute(
                    text(
                        "INSERT INTO sessionstore_messages (session_id, loop_id, position, "
                        "turn_index, kind, payload, token_count, content_hash, created_at) "
                        "VALUES ('no-such-session', 1, 0, 0, 'user', :payload, 1, 'x', "
                        "CURRENT_TIMESTAMP)"
                    ),
                    {"payload": f'{{"content": "{secret}"}}'},
                )
    finally:
        await engine.dispose()
    assert secret in str(driver.value)  # SQLAlchemy's own text shows the parameters
    caught = storage_error(driver.value)
    assert isinstance(caught, StorageError)
    text_ = str(caught)
    assert secret not in text_
    assert "INSERT INTO" not in text_.upper()
