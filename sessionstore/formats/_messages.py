"""What the provider formats share about sessionstore messages: the type check and hints."""

from __future__ import annotations

from typing import TypeAlias

from pydantic import JsonValue

from sessionstore.errors import FormatError
from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["MESSAGE_TYPES", "Rendered", "check_is_message", "format_hints"]

MESSAGE_TYPES = (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)

Rendered: TypeAlias = (
    BashExecutionMessage | BranchSummaryMessage | CompactionSummaryMessage | CustomMessage
)
"""The kinds that provider formats have no role for, exported as rendered user text."""


def check_is_message(index: int, message: object) -> None:
    if not isinstance(message, MESSAGE_TYPES):
        raise FormatError(
            f"message {index}: expected a sessionstore message, got {type(message).__name__}"
        )


def format_hints(message: Message, key: str) -> dict[str, JsonValue]:
    """Return `message.extra[key]`, the hints a format module stored, or `{}`."""
    hints = message.extra.get(key)
    return hints if isinstance(hints, dict) else {}
