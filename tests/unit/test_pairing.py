"""The synthetic result a tool call without one is given, the same wherever it is given."""

from __future__ import annotations

from sessionstore import AssistantMessage, Message, TextContent, ToolCall, UserMessage
from sessionstore._pairing import INTERRUPTED_RESULT, interrupted_result
from sessionstore.strategies._plan import sanitize_orphans


def test_interrupted_result_is_an_error_result_of_the_call() -> None:
    result = interrupted_result("call_7", "bash")
    assert (result.tool_call_id, result.tool_name, result.is_error) == ("call_7", "bash", True)
    assert result.content == [TextContent(text=INTERRUPTED_RESULT)]
    assert result.text == INTERRUPTED_RESULT


def test_the_orphan_sanitiser_answers_with_the_interrupted_result() -> None:
    call = ToolCall(id="call_x", name="bash", arguments='{"command": "make"}')
    messages: list[Message] = [UserMessage(content="build it"), AssistantMessage(content=[call])]
    sanitized, _ = sanitize_orphans(messages)
    assert sanitized[-1] == interrupted_result("call_x", "bash")
