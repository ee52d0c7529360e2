"""`SessionStoreSessionService` keeps each session's folded state between calls, by version.

The state a service returns must always be the fold of what is stored: a service that has
kept a session's state must answer exactly as a new service (which reads everything)
does, whoever wrote since, whatever was deleted, whatever the caller did to what it got.
And a service that has kept the states must not read the sessions' events again to list
them (counted on PostgreSQL). On SQLite and PostgreSQL; skipped when the `adk` extra is
not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.session import Session as AdkSession
from google.genai import types
from sqlalchemy import event

from sessionstore import SessionStore
from sessionstore.integrations._adk_state import KEPT_STATE_BYTES
from sessionstore.integrations.adk import SessionStoreSessionService

APP = "my_app"


def step(author: str, text: str, delta: dict[str, Any] | None = None) -> Event:
    return Event(
        invocation_id="inv",
        author=author,
        content=types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text=text)]
        ),
        actions=EventActions(state_delta=delta or {}),
    )


def listed(sessions: list[AdkSession]) -> list[tuple[str, str, dict[str, Any], float]]:
    return [(s.user_id, s.id, s.state, s.last_update_time) for s in sessions]


async def same_as_a_new_service(store: SessionStore, kept: SessionStoreSessionService) -> None:
    """What `kept` lists and gets equals what a service that kept nothing does."""
    new = SessionStoreSessionService(store)
    for user in (None, "u1", "u2"):
        want = (await new.list_sessions(app_name=APP, user_id=user)).sessions
        got = (await kept.list_sessions(app_name=APP, user_id=user)).sessions
        assert listed(got) == listed(want)
    for session in (await new.list_sessions(app_name=APP)).sessions:
        want_one = await new.get_session(
            app_name=APP, user_id=session.user_id, session_id=session.id
        )
        got_one = await kept.get_session(
            app_name=APP, user_id=session.user_id, session_id=session.id
        )
        assert want_one is not None
        assert got_one is not None
        assert (got_one.state, got_one.last_update_time) == (
            want_one.state,
            want_one.last_update_time,
        )
        assert len(got_one.events) == len(want_one.events)


async def test_kept_states_follow_every_writer(store: SessionStore) -> None:
    ours = SessionStoreSessionService(store)
    other = SessionStoreSessionService(store)
    a = await ours.create_session(app_name=APP, user_id="u1", session_id="a", state={"n": 0})
    b = await ours.create_session(app_name=APP, user_id="u2", session_id="b")
    await ours.append_event(a, step("user", "hi", {"n": 1, "user:seen": True}))
    await ours.append_event(a, step("agent", "ok", {"n": 2, "temp:x": 1, "list": [1]}))
    await ours.append_event(b, step("user", "hello", {"m": "x"}))
    await same_as_a_new_service(store, ours)  # kept from its own writes
    # Another service writes to both: ours holds states of versions that are gone.
    a2 = await other.get_session(app_name=APP, user_id="u1", session_id="a")
    b2 = await other.get_session(app_name=APP, user_id="u2", session_id="b")
    assert a2 is not None
    assert b2 is not None
    await other.append_event(a2, step("agent", "more", {"n": 3}))
    await other.append_event(b2, step("user", "again", {"m": "y", "k": {"deep": 1}}))
    await other.append_event(b2, step("agent", "done", {"k": {"deep": 2}}))
    await same_as_a_new_service(store, ours)
    # Ours writes again on a session it read after the other's writes.
    fresh = await ours.get_session(app_name=APP, user_id="u1", session_id="a")
    assert fresh is not None
    await ours.append_event(fresh, step("user", "next run", {"n": 4}))
    await ours.append_event(fresh, step("agent", "fine", {"p": None}))
    await same_as_a_new_service(store, ours)
    got = await ours.get_session(app_name=APP, user_id="u1", session_id="a")
    assert got is not None
    assert got.state == {"n": 4, "list": [1], "p": None, "user:seen": True}


async def test_a_session_deleted_and_created_again_is_not_the_kept_one(
    store: SessionStore,
) -> None:
    ours = SessionStoreSessionService(store)
    first = await ours.create_session(app_name=APP, user_id="u1", session_id="s", state={"v": 1})
    await ours.append_event(first, step("user", "hi", {"v": 2}))
    assert [s.state for s in (await ours.list_sessions(app_name=APP)).sessions] == [{"v": 2}]
    # Another service deletes it and makes one of the same id, up to the same version.
    other = SessionStoreSessionService(store)
    await other.delete_session(app_name=APP, user_id="u1", session_id="s")
    again = await other.create_session(app_name=APP, user_id="u1", session_id="s", state={"v": 9})
    await other.append_event(again, step("user", "hi", {"w": 1}))
    assert [s.state for s in (await ours.list_sessions(app_name=APP)).sessions] == [
        {"v": 9, "w": 1}
    ]
    await same_as_a_new_service(store, ours)
    # The same without events: the same version, no loop; only the creation time differs.
    await ours.create_session(app_name=APP, user_id="u2", session_id="t", state={"v": 1})
    assert [s.state for s in (await ours.list_sessions(app_name=APP, user_id="u2")).sessions] == [
        {"v": 1}
    ]
    await other.delete_session(app_name=APP, user_id="u2", session_id="t")
    await other.create_session(app_name=APP, user_id="u2", session_id="t", state={"v": 5})
    assert [s.state for s in (await ours.list_sessions(app_name=APP, user_id="u2")).sessions] == [
        {"v": 5}
    ]


async def test_changing_a_returned_state_changes_nothing_kept(store: SessionStore) -> None:
    ours = SessionStoreSessionService(store)
    session = await ours.create_session(app_name=APP, user_id="u1", session_id="s")
    await ours.append_event(session, step("user", "hi", {"doc": {"items": [1, 2]}}))
    for _ in range(2):
        (got,) = (await ours.list_sessions(app_name=APP)).sessions
        assert got.state == {"doc": {"items": [1, 2]}}
        got.state["doc"]["items"].append(3)  # the caller's copy
        one = await ours.get_session(app_name=APP, user_id="u1", session_id="s")
        assert one is not None
        assert one.state == {"doc": {"items": [1, 2]}}
        one.state["doc"]["items"].clear()
    session.state["doc"]["items"].append(4)  # the object the appends went through
    await same_as_a_new_service(store, ours)


async def test_a_retried_event_that_writes_nothing_keeps_the_states_right(
    store: SessionStore,
) -> None:
    ours = SessionStoreSessionService(store)
    other = SessionStoreSessionService(store)
    session = await ours.create_session(app_name=APP, user_id="u1", session_id="s")
    await ours.append_event(session, step("user", "hi", {"n": 1}))
    marker = session._storage_update_marker
    copy = await other.get_session(app_name=APP, user_id="u1", session_id="s")
    assert copy is not None
    answer = step("agent", "one", {"n": 2})
    await other.append_event(copy, answer)
    await other.append_event(copy, step("agent", "two", {"n": 3}))
    sid = ours.store_session_id(app_name=APP, user_id="u1", session_id="s")
    before = await store.get_history(sid)
    # Ours sends the first answer again, from where it was (a retry of a write another
    # process made): the store answers with what it has and writes nothing.
    session._storage_update_marker = marker
    await ours.append_event(session, answer)
    assert [m.id for m in await store.get_history(sid)] == [m.id for m in before]
    await same_as_a_new_service(store, ours)
    (got,) = (await ours.list_sessions(app_name=APP)).sessions
    assert got.state == {"n": 3}


async def test_a_retry_at_the_kept_version_does_not_move_the_kept_state(
    store: SessionStore,
) -> None:
    ours = SessionStoreSessionService(store)
    session = await ours.create_session(app_name=APP, user_id="u1", session_id="s")
    await ours.append_event(session, step("user", "hi", {"n": 1}))
    answer = step("agent", "one", {"n": 2})
    await ours.append_event(session, answer)
    # The answer again from the object that wrote it (it forgot its events): nothing is
    # written and the version stays; the next write, another's, takes the next version.
    session.events.clear()
    await ours.append_event(session, answer)
    copy = await SessionStoreSessionService(store).get_session(
        app_name=APP, user_id="u1", session_id="s"
    )
    assert copy is not None
    await SessionStoreSessionService(store).append_event(copy, step("agent", "two", {"n": 7}))
    (got,) = (await ours.list_sessions(app_name=APP)).sessions
    assert got.state == {"n": 7}
    await same_as_a_new_service(store, ours)


@contextmanager
def statements(store: SessionStore) -> Iterator[list[str]]:
    """The statements the store sends meanwhile."""
    sent: list[str] = []

    def log(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    event.listen(store.engine.sync_engine, "before_cursor_execute", log)
    try:
        yield sent
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", log)


async def test_listing_kept_sessions_reads_no_events(store: SessionStore) -> None:
    """A service lists the sessions it kept with as many statements for 2 as for 8."""
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite's reads go straight to the driver, past SQLAlchemy's events")
    ours = SessionStoreSessionService(store)
    counts = []
    for total in (2, 8):
        user = f"user{total}"
        for index in range(total):
            session = await ours.create_session(app_name=APP, user_id=user, session_id=f"s{index}")
            await ours.append_event(session, step("user", "hi", {"i": index}))
            for turn in range(3):
                await ours.append_event(session, step("agent", f"turn {turn}", {"t": turn}))
        with statements(store) as sent:
            got = (await ours.list_sessions(app_name=APP, user_id=user)).sessions
        assert sorted(s.state["i"] for s in got) == list(range(total))
        assert all(s.state["t"] == 2 for s in got)
        counts.append(len(sent))
    assert counts[0] == counts[1]
    # A service that kept nothing reads each session's events.
    with statements(store) as sent:
        await SessionStoreSessionService(store).list_sessions(app_name=APP, user_id="user8")
    assert len(sent) >= counts[1] + 8


async def test_a_state_too_large_to_keep_is_folded_from_the_store_each_time(
    store: SessionStore,
) -> None:
    ours = SessionStoreSessionService(store)
    big = "x" * (KEPT_STATE_BYTES + 10)
    for user, state in (("u1", big), ("u2", "small")):
        session = await ours.create_session(app_name=APP, user_id=user, session_id=user)
        await ours.append_event(session, step("user", "hi", {"doc": state}))
    counts = {}
    for _ in range(2):
        for user, state in (("u1", big), ("u2", "small")):
            with statements(store) as sent:
                (got,) = (await ours.list_sessions(app_name=APP, user_id=user)).sessions
            assert got.state == {"doc": state}
            counts[user] = len(sent)
    if store.engine.dialect.name == "postgresql":
        # The big one's loop is read on every listing, the small one's was kept.
        assert counts["u1"] == counts["u2"] + 1
    await same_as_a_new_service(store, ours)


async def test_a_retried_user_event_with_a_delta_is_stored_once(store: SessionStore) -> None:
    # The first append committed, but its caller never heard back (a timeout); a new
    # service retries with the session as it had it: no event, no version marker. The
    # user event's first message records the state before it, which the retry would
    # compute after the event's own delta: the same event must still be taken as stored.
    first = SessionStoreSessionService(store)
    session = await first.create_session(app_name=APP, user_id="u1", session_id="s")
    held = session.model_copy(deep=True)
    held._storage_update_marker = None
    question = step("user", "hi", {"n": 1})
    await first.append_event(session, question)
    sid = first.store_session_id(app_name=APP, user_id="u1", session_id="s")
    before = [m.id for m in await store.get_history(sid)]
    retry = SessionStoreSessionService(store)
    await retry.append_event(held, question)
    assert [m.id for m in await store.get_history(sid)] == before
    assert held.events[-1].id == question.id
    assert held.state == {"n": 1}
    await retry.append_event(held, step("agent", "hello", {"n": 2}))
    got = await SessionStoreSessionService(store).get_session(
        app_name=APP, user_id="u1", session_id="s"
    )
    assert got is not None
    assert [e.id for e in got.events][:1] == [question.id]
    assert got.state == {"n": 2}
    await same_as_a_new_service(store, retry)
