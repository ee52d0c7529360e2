"""Sessions built for the context and compaction tests, and the checks a built context passes."""

from __future__ import annotations

from collections.abc import Sequence

from sessionstore import (
    AssistantMessage,
    BuiltContext,
    CompactionBlock,
    CompactionConfig,
    SessionStore,
    StoredMessage,
    ToolResultMessage,
)
from tests.factories import conversation

# The seed's three levels (keep_first / keep_compacted / keep_recent), whose layout the
# tests that use it check; the config's default strategy summarizes.
SMALL = CompactionConfig(
    keep_first_turns=1, keep_recent_turns=2, max_summary_tokens=300, block_strategy="default"
)


async def session_with_loops(store: SessionStore, loops: int = 5, turns: int = 8) -> str:
    session = await store.create_session(app_name="app", user_id="u")
    for index in range(loops):
        if index:
            await store.start_loop(session.id)
        await store.append_messages(session.id, conversation(turns=turns))
    return session.id


def check_valid(context: BuiltContext) -> None:
    """The three guarantees a built context always holds."""
    assert context.tokens <= context.budget
    open_calls: set[str] = set()
    for message in context.messages:
        if isinstance(message, ToolResultMessage):
            assert message.tool_call_id in open_calls, "a tool result without its call"
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, "a tool call without its result"
        if isinstance(message, AssistantMessage):
            open_calls = {call.id for call in message.tool_calls}
    assert not open_calls


def late_orphans(block: CompactionBlock, messages: Sequence[StoredMessage]) -> set[int]:
    """Check each section of `block` stands for its turns; return the late orphans it misses.

    A section with replacement messages stands for every raw message of its turns, but
    for a tool result that joined a turn after the block covered it and answers no call
    the turn was waiting for: a result for a call the block's turn had answered already,
    or for no call of the turn. That is an orphan, which the context leaves out, raw or
    covered (a block covers a turn only once its calls are answered, see
    `LoopView.open_turn`). Such results are returned.
    """
    missed: set[int] = set()
    for _, section in block.sections():
        if not section.messages:
            continue  # a section that drops its turns on purpose
        covered = {c for r in section.messages for c in r.covers}
        in_turns = [m for m in messages if m.turn_index in section.range]
        for message in in_turns:
            if message.id in covered:
                continue
            result = message.message
            assert isinstance(result, ToolResultMessage), (message.id, section.range)
            turn = [m for m in in_turns if m.turn_index == message.turn_index]
            opener = turn[0].message
            calls = (
                {c.id for c in opener.tool_calls} if isinstance(opener, AssistantMessage) else set()
            )
            answered = {
                m.message.tool_call_id
                for m in turn
                if m.id in covered and isinstance(m.message, ToolResultMessage)
            }
            assert result.tool_call_id not in calls - answered, (message.id, section.range)
            missed.add(message.id)
    return missed
