"""Sessions built for the context and compaction tests, and the checks a built context passes."""

from __future__ import annotations

from sessionstore import (
    AssistantMessage,
    BuiltContext,
    CompactionConfig,
    SessionStore,
    ToolResultMessage,
)
from tests.factories import conversation

SMALL = CompactionConfig(keep_first_turns=1, keep_recent_turns=2, max_summary_tokens=300)


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
