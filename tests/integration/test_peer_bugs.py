"""Bugs the peers' users hit (../shared/PEERS.md), each as a test sessionstore must pass."""

from __future__ import annotations

import json

import pytest

from sessionstore import (
    AssistantMessage,
    CompactionConfig,
    FixedCount,
    Session,
    SessionStore,
    SummarizingBlockCompaction,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    build_context,
    compact_session_loops,
)
from sessionstore.errors import SummarizerResponseError
from tests.factories import conversation
from tests.integration._helpers import check_valid
from tests.integration.test_live_engine import TextSummarizer

CONFIG = CompactionConfig(
    keep_first_turns=1, keep_recent_turns=2, max_summary_tokens=200, block_strategy="default"
)


async def looped_session(store: SessionStore, loops: int, turns: int) -> Session:
    """A session of `loops` loops of `turns` turns each."""
    session = await store.create_session(app_name="app", user_id="u")
    for index in range(loops):
        if index:
            await store.start_loop(session.id)
        await store.append_messages(session.id, conversation(turns=turns))
    return session


async def test_compaction_keeps_all_older_history(store: SessionStore) -> None:
    """openai-agents #5010 / #3116: compaction deleted older history, or cleared then failed."""
    session = await looped_session(store, loops=6, turns=5)
    before = await store.get_history(session.id)
    await compact_session_loops(store, session.id, config=CONFIG)
    after = await store.get_history(session.id)
    assert [(m.id, m.content_hash) for m in after] == [(m.id, m.content_hash) for m in before]


async def test_a_message_limit_never_orphans_a_tool_output(store: SessionStore) -> None:
    """openai-agents #4322, langchain #33245: a cut between a call and its output."""
    session = await store.create_session(app_name="app", user_id="u")
    big = "\n".join(f"row {i}: " + "x" * 60 for i in range(200))
    messages: list[UserMessage | AssistantMessage | ToolResultMessage] = [
        UserMessage(content="look at the data")
    ]
    for index in range(12):
        call = ToolCall(id=f"c{index}", name="read", arguments=json.dumps({"n": index}))
        messages.append(AssistantMessage(content=[TextContent(text="reading"), call]))
        messages.append(ToolResultMessage(tool_call_id=call.id, tool_name="read", content=big))
    await store.append_messages(session.id, messages)
    for budget in (800, 1500, 4000, 9000, 20000):
        context = await build_context(store, session.id, max_context_tokens=budget)
        check_valid(context)
        # Cut to fit: bulky outputs shortened first, then whole units dropped.
        assert any(item.source == "shortened" for item in context.items)


async def test_the_last_user_message_anchors_the_task(store: SessionStore) -> None:
    """hermes-agent #10896: after compaction the agent lost task B and redid task A."""
    session = await store.create_session(app_name="app", user_id="u")
    await store.append_messages(session.id, conversation(turns=20))
    task_b = UserMessage(content="Task B: now migrate the billing tables.")
    await store.append_messages(session.id, [task_b, *conversation(turns=20)[1:]])
    await compact_session_loops(store, session.id, config=CONFIG)
    context = await build_context(store, session.id, max_context_tokens=2000, config=CONFIG)
    check_valid(context)
    assert task_b in context.messages


async def test_compaction_never_edits_tool_call_arguments(store: SessionStore) -> None:
    """hermes-agent #13574: arguments sliced mid-string became invalid JSON."""
    session = await store.create_session(app_name="app", user_id="u")
    arguments = json.dumps({"path": "a.py", "content": "\n".join(["line"] * 500)})
    call = ToolCall(id="w1", name="write_file", arguments=arguments)
    await store.append_messages(
        session.id,
        [
            UserMessage(content="write it"),
            AssistantMessage(content=[call]),
            ToolResultMessage(tool_call_id="w1", tool_name="write_file", content="ok"),
            AssistantMessage(content="done"),
        ],
    )
    config = CompactionConfig(keep_first_turns=0, keep_recent_turns=3, tool_output_max_lines=2)
    await compact_session_loops(store, session.id, config=config)
    context = await build_context(store, session.id, max_context_tokens=100_000, config=config)
    calls = [c for m in context.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert [c.arguments for c in calls] == [arguments]
    json.loads(calls[0].arguments)


async def test_a_pending_call_is_not_summarised_away(store: SessionStore) -> None:
    """adk-python #4740 / #5602: compaction summarised away a long-running call."""
    session = await store.create_session(app_name="app", user_id="u")
    await store.append_messages(session.id, conversation(turns=15))
    pending = ToolCall(id="deploy", name="deploy", arguments="{}")
    await store.append_messages(session.id, [AssistantMessage(content=[pending])])
    config = CompactionConfig(
        keep_first_turns=1, keep_recent_turns=2, compaction_scope=FixedCount(0)
    )
    await compact_session_loops(store, session.id, config=config)
    context = await build_context(store, session.id, max_context_tokens=50_000, config=config)
    check_valid(context)
    assert [(c.call_id, c.at_end) for c in context.interrupted_calls] == [("deploy", True)]
    assert any(
        isinstance(m, AssistantMessage) and m.tool_calls and m.tool_calls[0].id == "deploy"
        for m in context.messages
    )


async def test_an_empty_digest_is_refused_not_written(store: SessionStore) -> None:
    """letta #2601, hermes-agent #29559: a summarizer's failure folded turns into nothing."""
    session = await looped_session(store, loops=3, turns=12)
    before = await build_context(store, session.id, max_context_tokens=100_000)
    blank = TextSummarizer(text=" \n")  # a model that answered with nothing
    for scope in (FixedCount(0), FixedCount(1)):
        config = CompactionConfig(keep_first_turns=1, keep_recent_turns=2, compaction_scope=scope)
        with pytest.raises(SummarizerResponseError, match="empty digest"):
            await compact_session_loops(
                store, session.id, strategy=SummarizingBlockCompaction(blank), config=config
            )
    assert len(blank.requests) == 2
    for loop in await store.list_loops(session.id):
        assert await store.get_block(session.id, loop.id) is None
    after = await build_context(store, session.id, max_context_tokens=100_000)
    assert [item.message_id for item in after.items] == [item.message_id for item in before.items]


async def test_a_call_never_answered_does_not_block_later_compaction(store: SessionStore) -> None:
    """adk-python #7236: one orphaned call silently disabled all later compaction."""
    session = await store.create_session(app_name="app", user_id="u")
    lost = ToolCall(id="lost", name="deploy", arguments="{}")
    await store.append_messages(
        session.id, [*conversation(turns=6), AssistantMessage(content=[lost])]
    )
    for _ in range(3):  # the run was interrupted; the next ones go on
        await store.start_loop(session.id)
        await store.append_messages(session.id, conversation(turns=10))
    first = await compact_session_loops(store, session.id, config=CONFIG)
    assert len(first.blocks) == 4  # every loop, the one with the lost call too
    await store.append_messages(session.id, conversation(turns=10))
    again = await compact_session_loops(store, session.id, config=CONFIG)
    assert again.blocks
    context = await build_context(store, session.id, max_context_tokens=100_000, config=CONFIG)
    check_valid(context)
