"""Appending and reading messages, on every backend (SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from sessionstore import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactedSection,
    CompactionBlock,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    ReplacementMessage,
    SessionStore,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    TurnMap,
    TurnRange,
    Usage,
    UserMessage,
    make_engine,
)
from sessionstore._tokens import message_tokens
from sessionstore.errors import (
    ClientIdConflictError,
    ConflictError,
    InvalidBlockError,
    StaleWriteError,
)
from sessionstore.models import canonical_payload, message_payload
from tests.factories import (
    AssistantMessageFactory,
    BashExecutionMessageFactory,
    CustomMessageFactory,
    UserMessageFactory,
    conversation,
    tool_turn,
)
from tests.integration.store._helpers import new_session

PNG_1PX = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAA"
    "AABJRU5ErkJggg=="
)


# ── messages ───────────────────────────────────────────────────────────────────


async def test_append_assigns_positions_and_turns(store: SessionStore) -> None:
    session_id = await new_session(store)
    calls = [ToolCall(id="a", name="bash"), ToolCall(id="b", name="read")]
    batch: list[Message] = [
        SystemMessage(content="be brief"),
        UserMessage(content="fix it"),
        AssistantMessage(content=[TextContent(text="on it"), *calls]),
        ToolResultMessage(tool_call_id="a", tool_name="bash", content="ok"),
        ToolResultMessage(tool_call_id="b", tool_name="read", content="file"),
        AssistantMessage(content="done"),
        UserMessage(content="thanks"),
        ToolResultMessage(tool_call_id="zzz", content="orphan"),
        CustomMessage(custom_type="note", data={"x": 1}),
    ]
    stored = await store.append_messages(session_id, batch)
    assert [m.position for m in stored] == list(range(len(batch)))
    assert [m.turn_index for m in stored] == [0, 1, 2, 2, 2, 3, 4, 5, 6]
    assert [m.message for m in stored] == batch
    loop = await store.get_loop(session_id, stored[0].loop_id)
    assert loop.message_count == len(batch)
    assert loop.turn_count == 7
    assert loop.token_total == sum(message_tokens(m) for m in batch)


async def test_tool_result_in_a_later_batch_joins_its_assistant_turn(store: SessionStore) -> None:
    session_id = await new_session(store)
    assistant, result = tool_turn()
    assert isinstance(result, ToolResultMessage)
    await store.append_messages(session_id, [UserMessageFactory.build()])
    (a,) = await store.append_messages(session_id, [assistant])
    (r,) = await store.append_messages(session_id, [result])
    assert r.turn_index == a.turn_index == 1
    (u,) = await store.append_messages(session_id, [UserMessageFactory.build()])
    assert u.turn_index == 2
    # A result for the earlier call after a new turn started is an orphan: its own turn.
    (late,) = await store.append_messages(
        session_id, [ToolResultMessage(tool_call_id=result.tool_call_id, content="again")]
    )
    assert late.turn_index == 3


async def test_reused_tool_call_ids_join_the_latest_call(store: SessionStore) -> None:
    session_id = await new_session(store)
    batch: list[Message] = [
        UserMessage(content="q"),
        AssistantMessage(content=[ToolCall(id="call_1", name="search")]),
        ToolResultMessage(tool_call_id="call_1", tool_name="search", content="r1"),
        AssistantMessage(content=[ToolCall(id="call_1", name="search")]),
        ToolResultMessage(tool_call_id="call_1", tool_name="search", content="r2"),
    ]
    stored = await store.append_messages(session_id, batch)
    assert [m.turn_index for m in stored] == [0, 1, 1, 2, 2]


async def test_every_message_kind_round_trips_through_the_database(store: SessionStore) -> None:
    session_id = await new_session(store)
    batch: list[Message] = [
        SystemMessage(content="sys", name="policy"),
        UserMessage(
            content=[
                TextContent(text="look ☃ 日本"),
                ImageContent(data=PNG_1PX, mime_type="image/png"),
                ImageContent(url="https://example.org/a.png", detail="low"),
            ],
            name="ada",
            extra={"openai": {"refusal": None}},
        ),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="hmm", signature="sig"),
                ThinkingContent(thinking="", signature="opaque", redacted=True),
                TextContent(text="calling"),
                ToolCall(id="c1", name="bash", arguments='{"command": "ls",  "x":1}'),
                ToolCall(id="c2", name="bash", arguments="{not json"),
            ],
            model="m",
            stop_reason="tool_calls",
            usage=Usage(input_tokens=10, output_tokens=3),
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="bash", content="a\nb", is_error=True),
        ToolResultMessage(tool_call_id="c2", tool_name="bash", content=[]),
        BashExecutionMessageFactory.build(exit_code=None, cancelled=True),
        CustomMessageFactory.build(display=False, data=[1, "two", {"three": None}]),
        BranchSummaryMessage(summary="left branch", from_loop_id=3),
        CompactionSummaryMessage(summary="earlier", tokens_before=1000),
    ]
    await store.append_messages(session_id, batch)
    stored = await store.get_messages(session_id)
    assert [m.message for m in stored] == batch
    for m in stored:
        payload = message_payload(m.message)
        assert m.content_hash == hashlib.sha256(canonical_payload(payload)).hexdigest()
        assert m.token_count == message_tokens(m.message)


async def test_read_newest_messages_and_turn_ranges(store: SessionStore) -> None:
    session_id = await new_session(store)
    messages = conversation(40)
    stored = await store.append_messages(session_id, messages)
    newest = await store.get_messages(session_id, last=5)
    assert newest == stored[-5:]
    assert await store.get_messages(session_id, last=0) == []
    with pytest.raises(ValueError, match="last"):
        await store.get_messages(session_id, last=-1)
    turn_map = await store.get_turn_map(session_id)
    assert turn_map == TurnMap.from_messages(stored)
    assert turn_map.turn_count() == 42
    turns = await store.get_turns(
        session_id, stored[0].loop_id, TurnRange(start_turn=3, end_turn=5)
    )
    start, end = turn_map.msg_range(TurnRange(start_turn=3, end_turn=5))
    assert turns == stored[start:end]
    with pytest.raises(InvalidBlockError, match="out of bounds"):
        await store.get_turns(session_id, stored[0].loop_id, TurnRange(start_turn=0, end_turn=42))


async def test_history_follows_the_active_chain(store: SessionStore) -> None:
    session_id = await new_session(store)
    first = await store.append_messages(session_id, conversation(1))
    await store.start_loop(session_id)
    second = await store.append_messages(session_id, conversation(2))
    root = first[0].loop_id
    await store.start_loop(session_id, parent_loop_id=root)
    third = await store.append_messages(session_id, [UserMessage(content="other way")])
    assert await store.get_history(session_id) == first + third
    assert await store.get_history(session_id, loop_id=second[0].loop_id) == first + second
    by_id = await store.get_messages_by_id(session_id, [second[1].id, first[0].id])
    assert by_id == [first[0], second[1]]


async def test_a_malformed_message_names_the_field_and_writes_nothing(store: SessionStore) -> None:
    session_id = await new_session(store)
    await store.append_messages(session_id, [UserMessage(content="first")])
    good = {"kind": "user", "content": "fine"}
    bad = {"kind": "tool_result", "tool_call_id": "", "content": "x"}
    with pytest.raises(ValidationError) as info:
        await store.append_messages(session_id, [good, bad])  # type: ignore[list-item]  # the wrong type is the point
    assert "tool_call_id" in str(info.value)
    with pytest.raises(ValidationError, match="kind"):
        await store.append_messages(session_id, [{"kind": "wizard"}])  # type: ignore[list-item]  # the wrong type is the point
    with pytest.raises(TypeError, match="not a message"):
        await store.append_messages(session_id, [42])  # type: ignore[list-item]  # the wrong type is the point
    assert len(await store.get_messages(session_id)) == 1


async def test_client_id_retry_returns_the_stored_message(store: SessionStore) -> None:
    session_id = await new_session(store)
    message = UserMessage(content="once", client_id="req-1")
    (first,) = await store.append_messages(session_id, [message])
    version = (await store.get_session(session_id)).version
    (again,) = await store.append_messages(session_id, [message], expected_version=version - 5)
    assert again == first
    assert again.message.client_id == "req-1"
    assert (await store.get_session(session_id)).version == version
    with pytest.raises(ClientIdConflictError, match="different content") as refused:
        await store.append_messages(session_id, [UserMessage(content="twice", client_id="req-1")])
    assert (refused.value.client_id, refused.value.message_id) == ("req-1", first.id)
    assert isinstance(refused.value, ConflictError)
    # A batch that mixes a retried message with new ones writes only the new ones.
    mixed = await store.append_messages(
        session_id, [message, UserMessage(content="new", client_id="req-2"), message]
    )
    assert [m.id for m in mixed] == [first.id, mixed[1].id, first.id]
    assert mixed[1].position == 1
    assert len(await store.get_messages(session_id)) == 2


async def test_client_id_repeated_in_one_batch(store: SessionStore) -> None:
    session_id = await new_session(store)
    same = UserMessage(content="x", client_id="dup")
    stored = await store.append_messages(session_id, [same, same])
    assert stored[0] == stored[1]
    assert len(await store.get_messages(session_id)) == 1
    with pytest.raises(ConflictError, match="twice in one batch"):
        await store.append_messages(
            session_id,
            [UserMessage(content="a", client_id="d2"), UserMessage(content="b", client_id="d2")],
        )


async def test_stale_version_is_refused(store: SessionStore) -> None:
    session_id = await new_session(store)
    version = (await store.get_session(session_id)).version
    await store.append_messages(session_id, [UserMessage(content="a")], expected_version=version)
    with pytest.raises(StaleWriteError) as info:
        await store.append_messages(
            session_id, [UserMessage(content="b")], expected_version=version
        )
    assert (info.value.expected, info.value.actual) == (version, version + 1)
    with pytest.raises(StaleWriteError):
        await store.start_loop(session_id, expected_version=version)
    assert len(await store.get_messages(session_id)) == 1


async def test_database_refuses_updates_of_immutable_rows(store: SessionStore, db_url: str) -> None:
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, conversation(2))
    loop_id = stored[0].loop_id
    block = await store.write_block(
        session_id,
        loop_id,
        CompactionBlock(
            keep_compacted=CompactedSection(
                range=TurnRange(start_turn=1, end_turn=1),
                messages=[
                    ReplacementMessage(
                        message=UserMessage(content="[Summary]"), covers=[stored[1].id]
                    )
                ],
            )
        ),
    )
    engine = make_engine(db_url)
    statements = [
        f"UPDATE sessionstore_messages SET kind = 'user' WHERE id = {stored[1].id}",
        f"UPDATE sessionstore_blocks SET strategy = 'x' WHERE id = {block.id}",
        "UPDATE sessionstore_block_sections SET end_turn = 5",
        "UPDATE sessionstore_section_messages SET token_count = 0",
    ]
    try:
        for statement in statements:
            with pytest.raises(DBAPIError, match="immutable"):
                async with engine.begin() as conn:
                    await conn.execute(text(statement))
    finally:
        await engine.dispose()
    assert (await store.get_messages(session_id))[1] == stored[1]


async def test_json_payload_survives_unicode_and_nesting(store: SessionStore) -> None:
    session_id = await new_session(store)
    data = {"emoji": "🙂", "nested": {"list": [1, 2.5, None, True]}, "quote": "\"'\\"}
    (stored,) = await store.append_messages(session_id, [CustomMessage(custom_type="t", data=data)])
    (read,) = await store.get_messages(session_id)
    assert read == stored
    assert isinstance(read.message, CustomMessage)
    assert json.loads(json.dumps(read.message.data)) == data


async def test_factories_build_valid_conversations(store: SessionStore) -> None:
    session_id = await new_session(store)
    stored = await store.append_messages(
        session_id, [*conversation(3, calls=2), AssistantMessageFactory.build(calls=0)]
    )
    assert stored[-1].turn_index == stored[-2].turn_index + 1


async def test_append_after_another_store_wrote_reads_the_loop_again(db_url: str) -> None:
    """A store's remembered loop state is only used while no one else has written."""
    async with SessionStore.from_url(db_url) as first, SessionStore.from_url(db_url) as second:
        session = await first.create_session(app_name="app", user_id="ada")
        call = ToolCall(id="c1", name="bash", arguments="{}")
        await first.append_messages(session.id, [UserMessage(content="a")])
        await first.append_messages(session.id, [AssistantMessage(content=[call])])
        await second.append_messages(
            session.id, [ToolResultMessage(tool_call_id="c1", tool_name="bash", content="ok")]
        )
        stored = await first.append_messages(session.id, [UserMessage(content="b")])
        assert (stored[0].position, stored[0].turn_index) == (3, 2)
        again = await second.append_messages(session.id, [UserMessage(content="c")])
        assert (again[0].position, again[0].turn_index) == (4, 3)
        loop = (await first.list_loops(session.id))[0]
        assert (loop.message_count, loop.turn_count) == (5, 4)
