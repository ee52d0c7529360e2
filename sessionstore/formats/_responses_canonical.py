"""The canonical Responses-API export of a message with no record of its items.

`to_openai_responses` exports a message whose blocks no longer match its record (or that
has none: a summary, a message written by hand) this way; see `_responses`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessionstore.formats._text import render_as_text
from sessionstore.models import (
    AssistantMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__: list[str] = []


class _Invalid(Exception):
    """A problem with one item; `from_openai_responses` adds the item index."""


def _image_url(block: ImageContent) -> str:
    if block.url is not None:
        return block.url
    if block.mime_type is None:
        raise _Invalid("an inline image has no mime_type, which its data: URL needs")
    return f"data:{block.mime_type};base64,{block.data}"


def _canonical(message: Message) -> list[dict[str, Any]]:
    if isinstance(message, SystemMessage):
        return [{"role": "system", "content": message.text}]
    if isinstance(message, UserMessage):
        return [{"role": "user", "content": _input_content(message.content)}]
    if isinstance(message, AssistantMessage):
        return _canonical_assistant(message)
    if isinstance(message, ToolResultMessage):
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": _input_content(message.content),
            }
        ]
    text = render_as_text(message)
    return [] if text is None else [{"role": "user", "content": text}]


def _input_content(blocks: Sequence[TextContent | ImageContent]) -> str | list[dict[str, Any]]:
    if all(isinstance(b, TextContent) for b in blocks):
        return "\n".join(b.text for b in blocks if isinstance(b, TextContent))
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextContent):
            parts.append({"type": "input_text", "text": block.text})
        else:
            parts.append(
                {
                    "type": "input_image",
                    "image_url": _image_url(block),
                    "detail": block.detail or "auto",
                }
            )
    return parts


def _canonical_assistant(message: AssistantMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in message.content:
        if isinstance(block, TextContent):
            texts.append(block.text)
            continue
        if texts:
            items.append({"role": "assistant", "content": "\n".join(texts)})
            texts = []
        if isinstance(block, ToolCall):
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
    if texts:
        items.append({"role": "assistant", "content": "\n".join(texts)})
    return items
