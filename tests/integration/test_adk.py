"""`SessionStoreSessionService` against ADK's session contract, on SQLite and PostgreSQL.

Written from ADK's documentation of `BaseSessionService` and `GetSessionConfig`, and from
what its own `InMemorySessionService` and `DatabaseSessionService` do: the same test runs on
ADK's in-memory service too (the `reference` parameter), so a behaviour asserted here is
one ADK itself has. Skipped when the `adk` extra is not installed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

pytest.importorskip("google.adk")

from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError as AdkNotFound
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore import CompactionConfig, FixedCount, SessionStore, compact_session_loops
from sessionstore.formats.adk import from_adk_events, to_adk_events
from sessionstore.integrations.adk import SessionStoreSessionService
from sessionstore.models import AssistantMessage, ToolResultMessage, UserMessage

APP = "my_app"


@pytest.fixture(params=["store", "reference"])
async def service(
    request: pytest.FixtureRequest, store: SessionStore
) -> AsyncIterator[BaseSessionService]:
    """Ours on each backend, and ADK's in-memory service as the reference."""
    if request.param == "reference":
        yield InMemorySessionService()
    else:
        yield SessionStoreSessionService(store)


@pytest.fixture
async def ours(store: SessionStore) -> SessionStoreSessionService:
    return SessionStoreSessionService(store)


def user_event(text: str, **fields: object) -> Event:
    return Event(
        invocation_id=str(fields.pop("invocation_id", "inv")),
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        **fields,
    )


def state_event(delta: Mapping[str, object], **fields: object) -> Event:
    return Event(
        invocation_id="inv",
        author=str(fields.pop("author", "user")),
        actions=EventActions(state_delta=dict(delta)),
        **fields,
    )


def tool_turn(call_id: str) -> list[Event]:
    call = types.FunctionCall(id=call_id, name="lookup", args={"city": "Paris", "n": 2})
    answer = types.FunctionResponse(id=call_id, name="lookup", response={"temp": 21.5})
    return [
        Event(
            invocation_id="inv",
            author="agent",
            content=types.Content(
                role="model",
                parts=[types.Part(text="thinking", thought=True), types.Part(function_call=call)],
            ),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=12, candidates_token_count=5, total_token_count=17
            ),
        ),
        Event(
            invocation_id="inv",
            author="agent",
            content=types.Content(role="user", parts=[types.Part(function_response=answer)]),
        ),
        Event(
            invocation_id="inv",
            author="agent",
            content=types.Content(role="model", parts=[types.Part(text="21.5 degrees")]),
        ),
    ]


# ── sessions ────────────────────────────────────────────────────────────────────


async def test_a_missing_session_is_none(service: BaseSessionService) -> None:
    assert await service.get_session(app_name=APP, user_id="u", session_id="nope") is None


async def test_create_get_delete(service: BaseSessionService) -> None:
    before = time.time()
    session = await service.create_session(app_name=APP, user_id="u", state={"key": "value"})
    assert session.id
    assert (session.app_name, session.user_id, session.state) == (APP, "u", {"key": "value"})
    assert before - 1 <= session.last_update_time <= time.time() + 1
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got == session
    await service.delete_session(app_name=APP, user_id="u", session_id=session.id)
    assert await service.get_session(app_name=APP, user_id="u", session_id=session.id) is None
    # Deleting what is not there is not an error.
    await service.delete_session(app_name=APP, user_id="u", session_id=session.id)


async def test_a_chosen_id_is_kept_and_cannot_be_taken_twice(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="chat-1")
    assert session.id == "chat-1"
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=APP, user_id="u", session_id="chat-1")


async def test_a_padded_id_reads_and_deletes(service: BaseSessionService) -> None:
    await service.create_session(app_name=APP, user_id="u", session_id=" padded ")
    got = await service.get_session(app_name=APP, user_id="u", session_id="padded")
    assert got is not None
    assert got.id == "padded"
    await service.delete_session(app_name=APP, user_id="u", session_id=" padded")
    assert await service.get_session(app_name=APP, user_id="u", session_id="padded") is None


async def test_session_ids_are_per_user(service: BaseSessionService) -> None:
    first = await service.create_session(app_name=APP, user_id="u1", session_id="s1")
    await service.append_event(first, user_event("hello"))
    await service.create_session(app_name=APP, user_id="u2", session_id="s1")
    other = await service.get_session(app_name=APP, user_id="u2", session_id="s1")
    assert other is not None
    assert (other.user_id, other.events) == ("u2", [])
    same_id_other_app = await service.get_session(app_name="other", user_id="u1", session_id="s1")
    assert same_id_other_app is None


async def test_list_sessions_of_a_user_and_of_every_user(service: BaseSessionService) -> None:
    for user, sid in [("u1", "a"), ("u1", "b"), ("u2", "c")]:
        await service.create_session(
            app_name=APP, user_id=user, session_id=sid, state={"key": f"value-{sid}"}
        )
    await service.create_session(app_name="other", user_id="u1", session_id="z")
    mine = (await service.list_sessions(app_name=APP, user_id="u1")).sessions
    assert sorted(s.id for s in mine) == ["a", "b"]
    assert {s.id: s.state for s in mine} == {"a": {"key": "value-a"}, "b": {"key": "value-b"}}
    every = (await service.list_sessions(app_name=APP, user_id=None)).sessions
    assert sorted((s.user_id, s.id) for s in every) == [("u1", "a"), ("u1", "b"), ("u2", "c")]
    assert all(s.events == [] for s in every)
    assert (await service.list_sessions(app_name=APP, user_id="nobody")).sessions == []


async def test_list_sessions_is_oldest_update_first(service: BaseSessionService) -> None:
    now = time.time()
    sessions = [
        await service.create_session(app_name=APP, user_id="u", session_id=sid)
        for sid in ("s1", "s2", "s3")
    ]
    # Touch them in another order: s2, then s1.
    await service.append_event(sessions[1], user_event("x", timestamp=now + 10))
    await service.append_event(sessions[0], user_event("y", timestamp=now + 20))
    listed = (await service.list_sessions(app_name=APP, user_id="u")).sessions
    assert [s.id for s in listed] == ["s3", "s2", "s1"]
    assert listed[-1].last_update_time == pytest.approx(now + 20, abs=1e-6)


# ── events ─────────────────────────────────────────────────────────────────────


async def test_events_come_back_equal_and_in_order(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    events = [user_event("what is the weather in Paris?"), *tool_turn("call-1")]
    for event in events:
        await service.append_event(session, event)
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert got.events == events
    assert got == session


async def test_an_event_with_every_field_round_trips(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    event = Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(
            role="user",
            parts=[
                types.Part(text="look"),
                types.Part.from_bytes(data=b"\x89PNG\xfb\xff", mime_type="image/png"),
                types.Part(
                    file_data=types.FileData(file_uri="gs://b/f.png", mime_type="image/png")
                ),
                types.Part.from_bytes(data=b"%PDF", mime_type="application/pdf"),
            ],
        ),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(
            web_search_queries=["query1"],
            search_entry_point=types.SearchEntryPoint(sdk_blob=b"blob"),
        ),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        timestamp=1700000000.123,
        input_transcription=types.Transcription(text="in", finished=True),
        output_transcription=types.Transcription(text="out", finished=True),
    )
    await service.append_event(session, event)
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got == session
    assert got is not None
    assert got.events == [event]


async def test_a_partial_event_is_not_stored(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    partial = user_event("stream", partial=True)
    assert await service.append_event(session, partial) is partial
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert got.events == []


async def test_an_equal_redelivery_is_stored_once(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    event = state_event({"count": 1})
    await service.append_event(session, event)
    await service.append_event(session, event.model_copy(deep=True))
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert len(got.events) == 1


async def test_last_update_time_is_the_newest_event_time(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    stamp = session.last_update_time + 10
    await service.append_event(session, user_event("x", timestamp=stamp))
    assert session.last_update_time == pytest.approx(stamp, abs=1e-6)
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert got.last_update_time == pytest.approx(stamp, abs=1e-6)


async def test_appending_to_a_deleted_session_fails(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    await service.delete_session(app_name=APP, user_id="u", session_id=session.id)
    with pytest.raises(AdkNotFound):
        await service.append_event(session, user_event("late"))


# ── GetSessionConfig ───────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("num_recent_events", "after", "expected"),
    [
        (None, None, [0, 1, 2, 3, 4]),
        (0, None, []),
        (2, None, [3, 4]),
        (10, None, [0, 1, 2, 3, 4]),
        (None, 2, [2, 3, 4]),
        (None, 2.5, [3, 4]),
        (None, 100, []),
        (3, 3, [3, 4]),
        (2, 1, [3, 4]),
    ],
)
async def test_get_session_config_filters_events(
    service: BaseSessionService,
    num_recent_events: int | None,
    after: float | None,
    expected: list[int],
) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    base = 1_700_000_000.0
    for index in range(5):
        await service.append_event(
            session, state_event({f"k{index}": index}, author="agent", timestamp=base + index)
        )
    config = GetSessionConfig(
        num_recent_events=num_recent_events,
        after_timestamp=None if after is None else base + after,
    )
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id, config=config)
    assert got is not None
    assert [round(e.timestamp - base) for e in got.events] == expected
    # The state is the session's whole state, whatever the filter.
    assert got.state == {f"k{i}": i for i in range(5)}


def test_a_negative_num_recent_events_is_refused() -> None:
    with pytest.raises(ValueError, match="num_recent_events"):
        GetSessionConfig(num_recent_events=-1)


# ── state ──────────────────────────────────────────────────────────────────────


async def test_app_state_is_shared_by_every_user_of_the_app(service: BaseSessionService) -> None:
    first = await service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"app:k1": "v1"}
    )
    await service.append_event(first, state_event({"app:k2": "v2"}))
    second = await service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert second.state == {"app:k1": "v1", "app:k2": "v2"}
    again = await service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert again is not None
    assert again.state == {"app:k1": "v1", "app:k2": "v2"}
    elsewhere = await service.create_session(app_name="other", user_id="u1")
    assert elsewhere.state == {}


async def test_user_state_is_shared_by_the_users_sessions_only(
    service: BaseSessionService,
) -> None:
    first = await service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"user:k1": "v1"}
    )
    await service.append_event(first, state_event({"user:k2": "v2"}))
    mine = await service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert mine.state == {"user:k1": "v1", "user:k2": "v2"}
    theirs = await service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert theirs.state == {}
    assert await service.get_user_state(app_name=APP, user_id="u1") == {"k1": "v1", "k2": "v2"}
    assert await service.get_user_state(app_name=APP, user_id="u2") == {}


async def test_session_state_is_not_shared(service: BaseSessionService) -> None:
    first = await service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"sk1": "v1"}
    )
    await service.append_event(first, state_event({"sk2": "v2"}))
    got = await service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert got is not None
    assert got.state == {"sk1": "v1", "sk2": "v2"}
    other = await service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert other.state == {}


async def test_a_later_delta_wins_and_scopes_merge(service: BaseSessionService) -> None:
    session = await service.create_session(
        app_name=APP, user_id="u", state={"k": 1, "app:a": 1, "user:u": 1}
    )
    await service.append_event(session, state_event({"k": 2, "app:a": 2, "user:u": 2}))
    await service.append_event(session, state_event({"k": {"nested": [1, 2]}, "user:u": 3}))
    expected = {"k": {"nested": [1, 2]}, "app:a": 2, "user:u": 3}
    assert session.state == expected
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert got.state == expected


async def test_temp_state_lives_in_the_invocation_only(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    event = state_event({"temp:scratch": "v1", "sk": "v2"}, author="agent1")
    await service.append_event(session, event)
    assert session.state["temp:scratch"] == "v1"  # the next agent of the invocation reads it
    assert event.actions.state_delta == {"sk": "v2"}  # but it is not stored
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert got.state == {"sk": "v2"}
    assert got.events[0].actions.state_delta == {"sk": "v2"}


async def test_temp_keys_given_at_creation_are_dropped(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u", state={"temp:t": 1, "k": 2})
    assert session.state == {"k": 2}


# ── concurrency (ours: the store's version; ADK's in-memory service has no stale check) ──


async def test_a_stale_copy_cannot_append(ours: SessionStoreSessionService) -> None:
    session = await ours.create_session(app_name=APP, user_id="u")
    await ours.append_event(session, state_event({"sk1": "v1"}))
    fresh = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert fresh is not None
    stale = fresh.model_copy(deep=True)
    await ours.append_event(fresh, state_event({"sk2": "v2"}))
    with pytest.raises(StaleSessionError, match="modified in storage"):
        await ours.append_event(stale, state_event({"sk3": "v3"}))
    final = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert final is not None
    assert final.state == {"sk1": "v1", "sk2": "v2"}
    assert len(final.events) == 2
    # The copy that kept up goes on appending.
    await ours.append_event(fresh, state_event({"sk4": "v4"}))


async def test_of_two_concurrent_writers_of_one_version_one_wins(
    ours: SessionStoreSessionService,
) -> None:
    session = await ours.create_session(app_name=APP, user_id="u")
    for round_ in range(4):
        latest = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
        assert latest is not None
        copies = [latest.model_copy(deep=True) for _ in range(2)]
        results = await asyncio.gather(
            *(
                ours.append_event(copy, state_event({f"r{round_}": index}))
                for index, copy in enumerate(copies)
            ),
            return_exceptions=True,
        )
        assert sorted(type(r).__name__ for r in results) == ["Event", "StaleSessionError"]
    final = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert final is not None
    assert len(final.events) == 4


async def test_concurrent_user_state_changes_are_all_kept(ours: SessionStoreSessionService) -> None:
    sessions = [await ours.create_session(app_name=APP, user_id="u") for _ in range(4)]
    await asyncio.gather(
        *(
            ours.append_event(session, state_event({f"user:k{index}": index}))
            for index, session in enumerate(sessions)
        )
    )
    assert await ours.get_user_state(app_name=APP, user_id="u") == {f"k{i}": i for i in range(4)}


# ── what sessionstore adds ─────────────────────────────────────────────────────


async def test_events_are_messages_of_the_tenant(
    ours: SessionStoreSessionService, store: SessionStore
) -> None:
    session = await ours.create_session(app_name=APP, user_id="u", session_id="chat")
    for event in [user_event("weather in Paris?"), *tool_turn("call-1"), user_event("thanks")]:
        await ours.append_event(session, event)
    sid = ours.store_session_id(app_name=APP, user_id="u", session_id="chat")
    tenant = store.for_tenant(APP, "u")
    stored = await tenant.get_session(sid)
    assert stored.title == "chat"
    history = [m.message for m in await tenant.get_history(sid)]
    kinds = [type(m) for m in history]
    assert kinds == [
        UserMessage,
        AssistantMessage,
        ToolResultMessage,
        AssistantMessage,
        UserMessage,
    ]
    assert [loop.message_count for loop in await tenant.list_loops(sid)] == [4, 1]
    hits = await tenant.search("Paris")
    assert {hit.session_id for hit in hits} == {sid}
    usage = await tenant.usage(sid)
    assert usage.usage.input_tokens == 12
    # Another tenant sees none of it.
    with pytest.raises(Exception, match="not found"):
        await store.for_tenant(APP, "intruder").get_session(sid)


async def test_stored_messages_are_never_changed_by_state(
    ours: SessionStoreSessionService, store: SessionStore
) -> None:
    """Raw is sacred: state changes add messages, they never rewrite one."""
    session = await ours.create_session(app_name=APP, user_id="u", state={"user:n": 0})
    tenant = store.for_tenant(APP, "u")
    sid = ours.store_session_id(app_name=APP, user_id="u", session_id=session.id)
    await ours.append_event(session, state_event({"n": 1, "user:n": 1}))
    before = [m.model_dump() for m in await tenant.get_history(sid)]
    for n in range(2, 5):
        await ours.append_event(session, state_event({"n": n, "user:n": n}))
    after = [m.model_dump() for m in await tenant.get_history(sid)]
    assert after[: len(before)] == before
    assert await ours.get_user_state(app_name=APP, user_id="u") == {"n": 4}


def test_the_service_needs_an_unscoped_store(store: SessionStore) -> None:
    with pytest.raises(TypeError, match="unscoped"):
        SessionStoreSessionService(store.for_tenant(APP, "u"))  # type: ignore[arg-type]


# ── the format, pure ───────────────────────────────────────────────────────────

_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_part = st.one_of(
    _text.map(lambda t: types.Part(text=t)),
    _text.map(lambda t: types.Part(text=t, thought=True)),
    st.binary(max_size=20).map(lambda b: types.Part.from_bytes(data=b, mime_type="image/png")),
    st.tuples(st.none() | _text.filter(bool), st.dictionaries(_text, _json, max_size=3)).map(
        lambda c: types.Part(function_call=types.FunctionCall(id=c[0], name="tool", args=c[1]))
    ),
    st.tuples(st.none() | _text.filter(bool), st.dictionaries(_text, _json, max_size=3)).map(
        lambda c: types.Part(
            function_response=types.FunctionResponse(id=c[0], name="tool", response=c[1])
        )
    ),
)
_event = st.builds(
    lambda role, parts, author, delta: Event(
        invocation_id="inv",
        author=author,
        content=None if parts is None else types.Content(role=role, parts=parts),
        actions=EventActions(state_delta=delta),
    ),
    st.sampled_from(["user", "model", None]),
    st.none() | st.lists(_part, max_size=4),
    st.sampled_from(["user", "agent"]),
    st.dictionaries(_text, _json, max_size=2),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_event, max_size=4))
def test_any_events_round_trip_exactly(events: list[Event]) -> None:
    messages = from_adk_events(events)
    before = [m.model_dump() for m in messages]
    assert to_adk_events(messages) == events
    assert [m.model_dump() for m in messages] == before  # exporting changes no message
    assert to_adk_events(messages) == events


def test_edited_messages_export_canonically() -> None:
    (message,) = from_adk_events([user_event("secret plan")])
    assert isinstance(message, UserMessage)
    redacted = message.model_copy(update={"content": [], "extra": message.extra})
    (event,) = to_adk_events([redacted])
    # The record no longer matches its blocks: the new content, not the stored text.
    assert event.content is not None
    assert "secret" not in event.model_dump_json()


# ── ours against ADK's in-memory service, on random histories ─────────────────

_keys = st.sampled_from(["a", "b", "app:x", "user:y", "temp:t"])
_step: st.SearchStrategy[tuple[str, dict[str, int]]] = st.one_of(
    st.tuples(st.just("user"), st.dictionaries(_keys, st.integers(0, 9), max_size=2)),
    st.tuples(st.just("agent"), st.dictionaries(_keys, st.integers(0, 9), max_size=2)),
    st.tuples(st.just("tool"), st.just({})),
)
_configs = st.builds(
    GetSessionConfig,
    num_recent_events=st.none() | st.integers(0, 45),
    after_timestamp=st.none() | st.integers(0, 80).map(lambda t: 1_700_000_000.0 + t),
)


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(_step, min_size=1, max_size=40), configs=st.lists(_configs, max_size=4))
async def test_random_histories_read_back_as_adk_reads_them(
    ours: SessionStoreSessionService,
    steps: list[tuple[str, dict[str, int]]],
    configs: list[GetSessionConfig],
) -> None:
    """State folded from the active loop, and events read from the tail, equal ADK's reads."""
    reference = InMemorySessionService()
    app, user = f"app-{uuid.uuid4().hex[:8]}", "u"
    sessions = [
        await service.create_session(app_name=app, user_id=user, session_id="s", state={"a": -1})
        for service in (ours, reference)
    ]
    base = 1_700_000_000.0
    for index, (kind, delta) in enumerate(steps):
        if kind == "tool":
            events = tool_turn(f"call-{index}")
        elif kind == "user":
            events = [user_event(f"request {index}", actions=EventActions(state_delta=delta))]
        else:
            events = [state_event(delta, author="agent")]
        for offset, event in enumerate(events):
            event.timestamp = base + 2 * index + offset / 10
            for service, session in zip((ours, reference), sessions, strict=True):
                await service.append_event(session, event.model_copy(deep=True))
    for config in [None, *configs]:
        mine, theirs = [
            await service.get_session(app_name=app, user_id=user, session_id="s", config=config)
            for service in (ours, reference)
        ]
        assert mine is not None
        assert theirs is not None
        assert mine.state == theirs.state
        assert mine.events == theirs.events
        assert mine.last_update_time == pytest.approx(theirs.last_update_time, abs=1e-6)


@pytest.mark.parametrize(
    "config",
    [
        GetSessionConfig(num_recent_events=1),
        GetSessionConfig(num_recent_events=7),
        GetSessionConfig(num_recent_events=200),
        GetSessionConfig(after_timestamp=1_700_000_000.0 + 95),
        GetSessionConfig(after_timestamp=1_700_000_000.0 + 2),
        GetSessionConfig(num_recent_events=5, after_timestamp=1_700_000_000.0 + 98.5),
    ],
    ids=lambda c: f"n={c.num_recent_events},after={c.after_timestamp}",
)
async def test_a_long_history_is_read_from_its_tail(
    ours: SessionStoreSessionService, config: GetSessionConfig
) -> None:
    """Past the first read of the tail (and with tool turns of several messages) reads agree."""
    reference = InMemorySessionService()
    sessions = [
        await s.create_session(app_name=APP, user_id="u", session_id="long")
        for s in (ours, reference)
    ]
    base = 1_700_000_000.0
    for index in range(25):
        events = [user_event(f"q{index}", actions=EventActions(state_delta={"n": index}))]
        events += tool_turn(f"call-{index}")
        for offset, event in enumerate(events):
            event.timestamp = base + 4 * index + offset
            for service, session in zip((ours, reference), sessions, strict=True):
                await service.append_event(session, event.model_copy(deep=True))
    mine, theirs = [
        await s.get_session(app_name=APP, user_id="u", session_id="long", config=config)
        for s in (ours, reference)
    ]
    assert mine is not None
    assert theirs is not None
    assert (mine.state, mine.last_update_time) == (theirs.state, theirs.last_update_time)
    assert mine.events == theirs.events


# ── the guide ──────────────────────────────────────────────────────────────────

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "adk_agent.py"


def test_the_guide_runs_an_agent_over_two_processes(tmp_path: Path) -> None:
    """docs/guides/adk.md: `write` in one process, `resume` in another, offline."""
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[2])}

    def step(name: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), name],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert step("write") == ["It is 21 °C in Paris."]
    assert step("resume") == [
        "4 events; last answer: It is 21 °C in Paris.",
        "Your first question was: What is the weather in Paris?",
    ]


async def test_an_adk_agent_looks_back_with_the_recall_tools(
    ours: SessionStoreSessionService, store: SessionStore
) -> None:
    """The recall tools are plain functions, so ADK takes them as tools as they are."""
    from collections.abc import AsyncGenerator

    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner

    from sessionstore.recall import recall_tools

    class Recalling(BaseLlm):
        model: str = "scripted"

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            last = (llm_request.contents[-1].parts or [])[-1]
            if last.function_response is not None:
                hits = (last.function_response.response or {})["hits"]
                reply = types.Part(text=" | ".join(hit["snippet"] for hit in hits))
            elif "remind" in (last.text or ""):
                call = types.FunctionCall(name="search_history", args={"query": "codename"})
                reply = types.Part(function_call=call)
            else:
                reply = types.Part(text="noted")
            yield LlmResponse(content=types.Content(role="model", parts=[reply]))

    await ours.create_session(app_name=APP, user_id="u", session_id="chat")
    tools = recall_tools(
        store.for_tenant(APP, "u"),
        session_id=ours.store_session_id(app_name=APP, user_id="u", session_id="chat"),
    )
    agent = LlmAgent(name="assistant", model=Recalling(), tools=tools)
    runner = Runner(agent=agent, app_name=APP, session_service=ours)

    async def ask(text: str) -> str:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        answer = ""
        async for event in runner.run_async(user_id="u", session_id="chat", new_message=message):
            if event.is_final_response() and event.content and event.content.parts:
                answer = event.content.parts[0].text or ""
        return answer

    assert await ask("The project codename is bluefin.") == "noted"
    answer = await ask("Please remind me of it.")
    assert "bluefin" in answer


def test_the_format_examples_run() -> None:
    import doctest

    from sessionstore.formats import adk

    outcome = doctest.testmod(adk)
    assert outcome.attempted > 0
    assert outcome.failed == 0


async def test_a_compaction_between_turns_does_not_make_the_session_stale(
    store: SessionStore, ours: SessionStoreSessionService
) -> None:
    """PEERS: adk-python #5194, a compaction racing the next request made the session stale.

    A compaction moves the stored session's version but not its events: the
    session object the runner holds goes on appending. An event appended meanwhile by
    another writer still makes it stale.
    """
    session = await ours.create_session(app_name=APP, user_id="u")
    for turn in range(8):
        await ours.append_event(session, user_event(f"question {turn}"))
        for event in tool_turn(f"c{turn}"):
            await ours.append_event(session, event)
        report = " ".join(f"line {n} of the report on question {turn}." for n in range(150))
        await ours.append_event(
            session,
            Event(
                invocation_id="inv",
                author="agent",
                content=types.Content(role="model", parts=[types.Part(text=report)]),
            ),
        )
    sid = ours.store_session_id(app_name=APP, user_id="u", session_id=session.id)
    held = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert held is not None
    before = (await store.get_session(sid)).version
    config = CompactionConfig(
        keep_first_turns=1, keep_recent_turns=1, compaction_scope=FixedCount(3)
    )
    result = await compact_session_loops(store, sid, config=config)
    assert result.blocks
    assert (await store.get_session(sid)).version > before
    # The object read before the compaction appends both kinds of event (a model event to
    # the active loop, a user event that opens a loop); after another compaction, so
    # does the object that wrote them.
    await ours.append_event(held, tool_turn("late")[2])
    await ours.append_event(held, user_event("next question"))
    for event in tool_turn("next"):
        await ours.append_event(held, event)
    moved = (await store.get_session(sid)).version
    assert (await compact_session_loops(store, sid, config=config)).blocks
    assert (await store.get_session(sid)).version > moved
    await ours.append_event(held, user_event("and another"))
    # Another writer's event: the copy read before it is stale, as before.
    stale = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert stale is not None
    await ours.append_event(held, state_event({"k": "v"}, author="agent"))
    with pytest.raises(StaleSessionError, match="modified in storage"):
        await ours.append_event(stale, user_event("lost race"))
    final = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert final is not None
    texts = [p.text for e in final.events if e.content for p in e.content.parts or [] if p.text]
    assert "next question" in texts
    assert "lost race" not in texts
