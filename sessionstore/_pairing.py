"""Tool calls and their results: the synthetic result a call with none is given.

Providers refuse a tool call without its result; the loader and the strategies both
answer such a call (an interrupted run) with the same synthetic error result.
"""

from __future__ import annotations

from sessionstore.models import TextContent, ToolResultMessage

__all__ = ["INTERRUPTED_RESULT", "interrupted_result"]

INTERRUPTED_RESULT = "[interrupted: no result was recorded for this tool call]"
"""The text of the synthetic result given to a tool call that has none."""


def interrupted_result(call_id: str, tool_name: str) -> ToolResultMessage:
    """Return the synthetic error result of a tool call that has none."""
    return ToolResultMessage(
        tool_call_id=call_id,
        tool_name=tool_name,
        content=[TextContent(text=INTERRUPTED_RESULT)],
        is_error=True,
    )
