"""The store's contract, run on every backend (SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

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
    StoredMessage,
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
    ConflictError,
    InvalidBlockError,
    LoopNotFoundError,
    SessionExistsError,
    SessionNotFoundError,
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

PNG_1PX = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAA"
    "AABJRU5ErkJggg=="
)


async def new_session(store: SessionStore, *, title: str | None = None) -> str:
    session = await store.create_session(app_name="app", user_id="ada", title=title)
    return session.id


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
        await store.create_session(session_id="s-1", app_name="app", user_id="bob")
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
    with pytest.raises(ConflictError, match="different content"):
        await store.append_messages(session_id, [UserMessage(content="twice", client_id="req-1")])
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


# ── blocks ─────────────────────────────────────────────────────────────────────


def _summary_block(
    stored: Sequence[StoredMessage], start: int, end: int, overlay: str = "default"
) -> CompactionBlock:
    covered = [m for m in stored if start <= m.turn_index <= end]
    return CompactionBlock(
        overlay=overlay,
        keep_first=TurnRange(start_turn=0, end_turn=0),
        keep_compacted=CompactedSection(
            range=TurnRange(start_turn=start, end_turn=end),
            messages=[
                ReplacementMessage(
                    message=UserMessage(content=f"[Summary] turns {start}-{end}"),
                    covers=[m.id for m in covered],
                )
            ],
        ),
        keep_recent=CompactedSection(
            range=TurnRange(start_turn=end + 1, end_turn=end + 1),
            messages=[
                ReplacementMessage(message=m.message, covers=[m.id])
                for m in stored
                if m.turn_index == end + 1
            ],
        ),
        strategy="test",
        config={"keep_first_turns": 1},
        tokens_before=sum(m.token_count for m in covered),
        tokens_after=10,
    )


async def test_write_and_read_a_block(store: SessionStore) -> None:
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, conversation(6))
    loop_id = stored[0].loop_id
    written = await store.write_block(session_id, loop_id, _summary_block(stored, 1, 4))
    assert written.generation == 1
    assert written.id is not None
    assert written.keep_compacted is not None
    assert all(r.id is not None and r.token_count for r in written.keep_compacted.messages)
    read = await store.get_block(session_id, loop_id)
    assert read == written
    assert await store.get_block(session_id, loop_id, overlay="other") is None


async def test_new_block_supersedes_and_history_keeps_the_old(store: SessionStore) -> None:
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, conversation(6))
    loop_id = stored[0].loop_id
    one = await store.write_block(session_id, loop_id, _summary_block(stored, 1, 3))
    two = await store.write_block(session_id, loop_id, _summary_block(stored, 1, 5))
    cheap = await store.write_block(session_id, loop_id, _summary_block(stored, 1, 2, "cheap"))
    assert (one.generation, two.generation, cheap.generation) == (1, 2, 1)
    assert await store.get_block(session_id, loop_id) == two
    assert await store.get_block(session_id, loop_id, generation=1) == one
    assert await store.get_block(session_id, loop_id, overlay="cheap") == cheap
    assert one.created_at is not None
    assert two.created_at is not None
    assert await store.get_block(session_id, loop_id, as_of=one.created_at) == one
    before = one.created_at - timedelta(seconds=1)
    assert await store.get_block(session_id, loop_id, as_of=before) is None
    assert await store.block_history(session_id, loop_id, overlay="default") == [one, two]
    assert await store.block_history(session_id, loop_id) == [one, two, cheap]


async def test_invalid_blocks_are_refused_and_nothing_is_written(store: SessionStore) -> None:
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, conversation(3))
    loop_id = stored[0].loop_id
    other = await store.append_messages(await new_session(store), conversation(1))
    turns = (await store.get_loop(session_id, loop_id)).turn_count
    out_of_bounds = CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=turns))
    foreign = CompactionBlock(
        keep_compacted=CompactedSection(
            range=TurnRange(start_turn=0, end_turn=1),
            messages=[ReplacementMessage(message=UserMessage(content="s"), covers=[other[0].id])],
        )
    )
    outside = CompactionBlock(
        keep_compacted=CompactedSection(
            range=TurnRange(start_turn=1, end_turn=1),
            messages=[ReplacementMessage(message=UserMessage(content="s"), covers=[stored[0].id])],
        )
    )
    with pytest.raises(InvalidBlockError, match="out of bounds"):
        await store.write_block(session_id, loop_id, out_of_bounds)
    with pytest.raises(InvalidBlockError, match="not in loop"):
        await store.write_block(session_id, loop_id, foreign)
    with pytest.raises(InvalidBlockError, match="outside its turn range"):
        await store.write_block(session_id, loop_id, outside)
    assert await store.block_history(session_id, loop_id) == []


async def test_compaction_events_are_listed_in_order(store: SessionStore) -> None:
    session_id = await new_session(store)
    (message,) = await store.append_messages(session_id, [UserMessage(content="x")])
    started = await store.record_compaction_event(
        session_id, event="started", tokens_before=500, loop_id=message.loop_id
    )
    ended = await store.record_compaction_event(
        session_id,
        event="ended",
        tokens_before=500,
        tokens_after=120,
        duration_ms=3.5,
        loop_id=message.loop_id,
        details={"strategy": "default"},
    )
    assert await store.list_compaction_events(session_id) == [started, ended]
    with pytest.raises(ValueError, match="started"):
        await store.record_compaction_event(session_id, event="paused", tokens_before=0)


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
