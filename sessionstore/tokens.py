"""Token accounting: the `TokenCounter` protocol and the seed's byte heuristic.

The heuristic is the one the seed specifies, kept exactly so that budgets mean the
same thing everywhere: ceil(UTF-8 bytes / 4) for text, clamp(decoded bytes / 750, 85,
16000) for an image, name + arguments + 8 for a tool call, +4 framing for a message,
content + tool name + 8 for a tool result, JSON + 4 for an extension message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "HeuristicTokenCounter",
    "TokenCounter",
    "content_tokens",
    "estimate_tokens",
    "message_tokens",
]

IMAGE_BYTES_PER_TOKEN = 750
IMAGE_MIN_TOKENS = 85
IMAGE_MAX_TOKENS = 16_000
MESSAGE_FRAMING = 4
TOOL_CALL_OVERHEAD = 8
TOOL_RESULT_OVERHEAD = 8


def estimate_tokens(text: str) -> int:
    """Return ceil(UTF-8 bytes / 4): about four bytes a token for English text."""
    return -(-len(text.encode()) // 4)


def content_tokens(
    content: Iterable[TextContent | ImageContent | ThinkingContent | ToolCall],
) -> int:
    """Return the heuristic token count of a list of content blocks."""
    total = 0
    for block in content:
        if isinstance(block, TextContent):
            total += estimate_tokens(block.text)
        elif isinstance(block, ImageContent):
            total += min(
                max(block.decoded_size() // IMAGE_BYTES_PER_TOKEN, IMAGE_MIN_TOKENS),
                IMAGE_MAX_TOKENS,
            )
        elif isinstance(block, ThinkingContent):
            total += estimate_tokens(block.thinking)
        else:
            total += estimate_tokens(block.name) + estimate_tokens(block.arguments)
            total += TOOL_CALL_OVERHEAD
    return total


def message_tokens(message: Message) -> int:
    """Return the heuristic token count of one message, framing included.

    The seed names user, assistant, tool result and extension messages. The other kinds
    are counted as the text the model is shown for them, plus the message framing.
    """
    if isinstance(message, UserMessage | AssistantMessage | SystemMessage):
        return content_tokens(message.content) + MESSAGE_FRAMING
    if isinstance(message, ToolResultMessage):
        return (
            content_tokens(message.content)
            + estimate_tokens(message.tool_name)
            + TOOL_RESULT_OVERHEAD
        )
    if isinstance(message, CustomMessage):
        data = json.dumps(message.data, separators=(",", ":"), ensure_ascii=False)
        return estimate_tokens(data) + MESSAGE_FRAMING
    if isinstance(message, BashExecutionMessage):
        return estimate_tokens(message.command) + estimate_tokens(message.output) + MESSAGE_FRAMING
    if isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
        return estimate_tokens(message.summary) + MESSAGE_FRAMING
    raise TypeError(f"not a message: {type(message).__name__}")


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens. The store caches `count_message` once per message, when appended."""

    def count_text(self, text: str) -> int:
        """Return the token count of a text."""
        ...

    def count_message(self, message: Message) -> int:
        """Return the token count of one message, framing included."""
        ...


class HeuristicTokenCounter:
    """The default counter: the seed's byte heuristic, offline and deterministic."""

    def count_text(self, text: str) -> int:
        """Return ceil(UTF-8 bytes / 4)."""
        return estimate_tokens(text)

    def count_message(self, message: Message) -> int:
        """Return the heuristic token count of one message."""
        return message_tokens(message)
