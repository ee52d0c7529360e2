"""Units: an assistant message with the tool results that answer it, which no cut may split.

The pairing rule is the loader's (`sessionstore._overlay.pair_tool_calls`): a tool result
answers a call of the assistant message that opens the run of tool results it is in,
once. Call ids may repeat in a session, so a result is never paired by id alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionstore.models import AssistantMessage, Message, ToolCall, ToolResultMessage

__all__ = ["answered_calls", "unit_of", "unit_starts"]


def unit_starts(messages: Sequence[Message]) -> list[int]:
    """Return the index of the first message of each unit, in order.

    A tool result belongs to the unit before it; every other message starts a unit.
    A tool result at index 0 (an orphan) starts one too.
    """
    return [
        index
        for index, message in enumerate(messages)
        if index == 0 or not isinstance(message, ToolResultMessage)
    ]


def unit_of(messages: Sequence[Message], index: int) -> int:
    """Return the start of the unit that holds `messages[index]` (`index` itself at a start)."""
    while index > 0 and isinstance(messages[index], ToolResultMessage):
        index -= 1
    return index


def answered_calls(messages: Sequence[Message]) -> dict[int, ToolCall]:
    """Return, for each tool result that pairs, the index of the result -> the call it answers.

    A result that answers no open call of the assistant message before its run (an
    orphan, or a second result for the same call) is left out.
    """
    answered: dict[int, ToolCall] = {}
    open_calls: dict[str, ToolCall] = {}
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            call = open_calls.pop(message.tool_call_id, None)
            if call is not None:
                answered[index] = call
            continue
        open_calls = (
            {call.id: call for call in message.tool_calls}
            if isinstance(message, AssistantMessage)
            else {}
        )
    return answered
