"""Import and export of pydantic-ai message histories (`list[ModelMessage]`).

Install with `pip install "sessionstore[pydantic-ai]"`. `from_pydantic_ai` turns
`result.all_messages()` (or `new_messages()`) into our messages, and `to_pydantic_ai`
turns them back: what comes back dumps, through pydantic-ai's own
`ModelMessagesTypeAdapter`, exactly as the original does after pydantic-ai's own JSON
round trip (which upgrades its deprecated parts, such as `RetryPromptPart`).

The mapping works on the messages' JSON form. What the model said goes into blocks, so
it is counted, compacted, redacted and audited like any other message; the rest of each
message and part (timestamps, ids, run ids, usage, provider details, metadata) is kept in
`extra["pydantic_ai"]`:

- a `ModelRequest` is one message per part: a `SystemPromptPart` is a `SystemMessage`,
  a `UserPromptPart` a `UserMessage` (text, and images given by URL, as blocks), a
  `ToolReturnPart` a `ToolResultMessage` (content that is not a string is kept as its
  JSON text; `is_error` for a failed, denied or retried call), a retry that answers no
  tool call (`RetryFeedbackPart`, a `RetryPromptPart` without `tool_name`) a
  `UserMessage`, and any other part a `CustomMessage` of `custom_type` `"pydantic_ai"`
  whose `data` is the part;
- a `ModelResponse` is one `AssistantMessage`: `TextPart` as text, `ThinkingPart` as
  thinking (with its signature), `ToolCallPart` as a tool call (dict arguments as JSON
  text); other parts (native tool calls and returns, files, compaction) travel in
  `extra` only. `model`, `usage` and `stop_reason` are filled from the response.

The first message of a request carries the request itself and its part count, so export
regroups the parts. Messages without that record (a summary, a message written by hand
or imported from another format) are exported canonically: a text, thinking or tool call
block as the matching part of a `ModelResponse`, anything else as a part of a
`ModelRequest` (`SystemPromptPart`, `UserPromptPart`, `ToolReturnPart`, or a
`UserPromptPart` that renders a kind pydantic-ai has no part for).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any, TypeAlias

from pydantic import JsonValue, ValidationError

from sessionstore.errors import FormatError, MissingDependencyError, describe_validation_error
from sessionstore.formats._messages import check_is_message
from sessionstore.formats._text import render_as_text
from sessionstore.models import (
    AssistantMessage,
    CustomMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

try:
    from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        'the pydantic-ai format needs pydantic-ai: pip install "sessionstore[pydantic-ai]"'
    ) from exc

__all__ = ["PYDANTIC_AI_FORMAT", "from_pydantic_ai", "to_pydantic_ai"]

PYDANTIC_AI_FORMAT = "pydantic_ai"
"""The key of `extra` (and the `custom_type` of pass-through parts) this format owns."""

_ERROR_OUTCOMES = frozenset({"failed", "denied", "retried"})
_Block: TypeAlias = TextContent | ImageContent | ThinkingContent | ToolCall


# ── import ─────────────────────────────────────────────────────────────────────


def from_pydantic_ai(messages: Sequence[ModelMessage]) -> list[Message]:
    """Import a pydantic-ai message history.

    Args:
        messages: `ModelRequest` and `ModelResponse` objects, as `result.all_messages()`
            returns them.

    Returns:
        Our messages, in order: one per request part, one per response.

    Raises:
        FormatError: `messages` is not a list of pydantic-ai messages.
    """
    given: object = messages
    if isinstance(given, str | bytes) or not isinstance(given, Sequence):
        raise FormatError(f"expected a list of messages, got {type(given).__name__}")
    try:
        dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    except Exception as exc:  # pydantic's serializer raises several types for a wrong object
        raise FormatError(f"not a list of pydantic-ai messages: {exc}") from exc
    result: list[Message] = []
    for index, message in enumerate(dumped):
        try:
            if message.get("kind") == "response":
                result.append(_import_response(message))
            else:
                result.extend(_import_request(message))
        except ValidationError as exc:
            raise FormatError(f"message {index}: {describe_validation_error(exc)}") from exc
    return result


def _import_response(message: dict[str, Any]) -> AssistantMessage:
    skeleton = copy.deepcopy(message)
    slots: list[list[Any]] = []
    blocks: list[_Block] = []
    for number, part in enumerate(message.get("parts") or []):
        kind = part.get("part_kind")
        held = skeleton["parts"][number]
        if kind == "text" and isinstance(part.get("content"), str):
            del held["content"]
            blocks.append(TextContent(text=part["content"]))
            slots.append(["text", "parts", number, "content"])
        elif kind == "thinking" and isinstance(part.get("content"), str):
            del held["content"]
            signature = part.get("signature")
            blocks.append(
                ThinkingContent(
                    thinking=part["content"],
                    signature=signature if isinstance(signature, str) else None,
                )
            )
            slots.append(["thinking", "parts", number, "content"])
        elif kind == "tool-call" and part.get("tool_name") and part.get("tool_call_id"):
            args = part.get("args")
            shape = "dict" if isinstance(args, dict) else "str" if isinstance(args, str) else None
            del held["tool_name"], held["tool_call_id"]
            if shape is not None:
                del held["args"]
            arguments = json.dumps(args) if shape == "dict" else args if shape == "str" else "{}"
            blocks.append(
                ToolCall(id=part["tool_call_id"], name=part["tool_name"], arguments=arguments)
            )
            slots.append(["call", "parts", number, shape])
    usage = message.get("usage")
    return AssistantMessage(
        content=blocks,
        model=_str_or_none(message.get("model_name")),
        stop_reason=_str_or_none(message.get("finish_reason")),
        usage=_usage(usage) if isinstance(usage, dict) else None,
        extra={PYDANTIC_AI_FORMAT: {"response": skeleton, "slots": slots}},
    )


def _usage(usage: dict[str, Any]) -> Usage:
    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and value >= 0 else 0

    return Usage(
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        cache_read_tokens=count("cache_read_tokens"),
        cache_write_tokens=count("cache_write_tokens"),
    )


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _import_request(message: dict[str, Any]) -> list[Message]:
    parts = message.get("parts") or []
    envelope = {key: copy.deepcopy(value) for key, value in message.items() if key != "parts"}
    if not parts:
        return [CustomMessage(custom_type=PYDANTIC_AI_FORMAT, data=message)]
    result: list[Message] = []
    for number, part in enumerate(parts):
        record: dict[str, Any] = {}
        if number == 0:
            record.update(request=envelope, parts=len(parts))
        result.append(_import_part(part, record))
    return result


def _import_part(part: dict[str, Any], record: dict[str, Any]) -> Message:
    kind = part.get("part_kind")
    skeleton = copy.deepcopy(part)
    slots: list[list[Any]] = []
    record.update(part=skeleton, slots=slots)

    def extra() -> dict[str, JsonValue]:
        return {PYDANTIC_AI_FORMAT: record}

    if kind == "system-prompt" and isinstance(part.get("content"), str):
        del skeleton["content"]
        slots.append(["text", "content"])
        return SystemMessage(content=part["content"], extra=extra())
    if kind == "user-prompt":
        blocks = _slot_user_content(part, skeleton, slots)
        return UserMessage(content=blocks, extra=extra())
    tool_name, call_id = part.get("tool_name"), part.get("tool_call_id")
    is_tool_answer = kind in ("tool-return", "retry-prompt") and tool_name and call_id
    if is_tool_answer or kind == "retry-feedback" or kind == "retry-prompt":
        text = _slot_text(part, skeleton, slots)
        if is_tool_answer:
            del skeleton["tool_name"], skeleton["tool_call_id"]
            return ToolResultMessage(
                tool_call_id=call_id,
                tool_name=tool_name,
                content=text,
                is_error=kind == "retry-prompt" or part.get("outcome") in _ERROR_OUTCOMES,
                extra=extra(),
            )
        return UserMessage(content=text, extra=extra())
    record.update(part=None)
    return CustomMessage(custom_type=PYDANTIC_AI_FORMAT, data=part, extra=extra())


def _slot_text(part: dict[str, Any], skeleton: dict[str, Any], slots: list[list[Any]]) -> str:
    content = part.get("content")
    del skeleton["content"]
    if isinstance(content, str):
        slots.append(["text", "content"])
        return content
    slots.append(["json", "content"])
    return json.dumps(content, ensure_ascii=False)


def _slot_user_content(
    part: dict[str, Any], skeleton: dict[str, Any], slots: list[list[Any]]
) -> list[TextContent | ImageContent]:
    content = part.get("content")
    if isinstance(content, str):
        del skeleton["content"]
        slots.append(["text", "content"])
        return [TextContent(text=content)]
    blocks: list[TextContent | ImageContent] = []
    if not isinstance(content, list):
        return blocks
    for number, item in enumerate(content):
        if isinstance(item, str):
            skeleton["content"][number] = None
            blocks.append(TextContent(text=item))
            slots.append(["text", "content", number])
        elif (
            isinstance(item, dict)
            and item.get("kind") == "image-url"
            and isinstance(item.get("url"), str)
        ):
            del skeleton["content"][number]["url"]
            blocks.append(ImageContent(url=item["url"]))
            slots.append(["image", "content", number, "url"])
    return blocks


# ── export ─────────────────────────────────────────────────────────────────────


def to_pydantic_ai(messages: Sequence[Message]) -> list[ModelMessage]:
    """Export messages as a pydantic-ai message history (`message_history=`).

    Messages imported with `from_pydantic_ai` come back as they were; see the module
    docstring for the canonical export of the others.

    Raises:
        FormatError: an object that is not one of our messages, or a history pydantic-ai
            refuses.
    """
    dumped: list[dict[str, Any]] = []
    request: dict[str, Any] | None = None
    remaining = 0
    for index, message in enumerate(messages):
        check_is_message(index, message)
        if isinstance(message, AssistantMessage):
            request = None
            dumped.append(_export_response(message))
            continue
        part, envelope, count = _export_part(message)
        if part is None:
            if envelope is not None:  # a whole request kept as it was
                dumped.append(envelope)
                request = None
            continue
        if envelope is not None:
            request = {**envelope, "parts": [part]}
            remaining = count - 1
            dumped.append(request)
        elif request is not None and remaining != 0:
            request["parts"].append(part)
            remaining -= 1
        else:
            request = {"kind": "request", "parts": [part]}
            remaining = -1  # a canonical request takes the parts that follow
            dumped.append(request)
    try:
        return ModelMessagesTypeAdapter.validate_python(dumped)
    except ValidationError as exc:
        raise FormatError(f"pydantic-ai refused the history: {exc}") from exc


def _record(message: Message) -> dict[str, Any] | None:
    record = message.extra.get(PYDANTIC_AI_FORMAT)
    return record if isinstance(record, dict) else None


def _export_response(message: AssistantMessage) -> dict[str, Any]:
    record = _record(message)
    if record is not None and isinstance(record.get("response"), dict):
        restored = _restore(record["response"], record.get("slots"), list(message.content))
        if restored is not None:
            return restored
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            parts.append({"part_kind": "text", "content": block.text})
        elif isinstance(block, ThinkingContent):
            parts.append(
                {"part_kind": "thinking", "content": block.thinking, "signature": block.signature}
            )
        elif isinstance(block, ToolCall):
            parts.append(
                {
                    "part_kind": "tool-call",
                    "tool_name": block.name,
                    "args": block.arguments,
                    "tool_call_id": block.id,
                }
            )
    response: dict[str, Any] = {"kind": "response", "parts": parts}
    if message.model is not None:
        response["model_name"] = message.model
    return response


def _export_part(message: Message) -> tuple[dict[str, Any] | None, dict[str, Any] | None, int]:
    """Return the request part, the request envelope (first part only) and its part count."""
    record = _record(message)
    if isinstance(message, CustomMessage) and message.custom_type == PYDANTIC_AI_FORMAT:
        data = copy.deepcopy(message.data)
        if isinstance(data, dict) and data.get("kind") == "request":
            return None, data, 0
        if record is not None and isinstance(data, dict):
            return data, _envelope(record), _count(record)
    if record is not None and isinstance(record.get("part"), dict):
        content = list(getattr(message, "content", []))
        part = _restore(record["part"], record.get("slots"), content)
        if part is not None:
            if isinstance(message, ToolResultMessage):
                part.update(tool_name=message.tool_name, tool_call_id=message.tool_call_id)
            return part, _envelope(record), _count(record)
    return _canonical_part(message), None, 0


def _envelope(record: dict[str, Any]) -> dict[str, Any] | None:
    envelope = record.get("request")
    return copy.deepcopy(envelope) if isinstance(envelope, dict) else None


def _count(record: dict[str, Any]) -> int:
    count = record.get("parts")
    return count if isinstance(count, int) else 1


def _canonical_part(message: Message) -> dict[str, Any] | None:
    if isinstance(message, SystemMessage):
        return {"part_kind": "system-prompt", "content": message.text}
    if isinstance(message, UserMessage):
        if all(isinstance(b, TextContent) for b in message.content):
            return {"part_kind": "user-prompt", "content": message.text}
        return {
            "part_kind": "user-prompt",
            "content": [
                b.text if isinstance(b, TextContent) else _image_part(b) for b in message.content
            ],
        }
    if isinstance(message, ToolResultMessage):
        return {
            "part_kind": "tool-return",
            "tool_name": message.tool_name,
            "tool_call_id": message.tool_call_id,
            "content": message.text,
            "outcome": "failed" if message.is_error else "success",
        }
    if isinstance(message, AssistantMessage):
        return None  # a response, never a request part
    text = render_as_text(message)
    return None if text is None else {"part_kind": "user-prompt", "content": text}


def _image_part(block: ImageContent) -> dict[str, Any]:
    if block.url is not None:
        return {"kind": "image-url", "url": block.url}
    return {"kind": "binary", "data": block.data, "media_type": block.mime_type or "image/png"}


_BLOCK_OF_SLOT: dict[str, type] = {
    "text": TextContent,
    "json": TextContent,
    "image": ImageContent,
    "thinking": ThinkingContent,
    "call": ToolCall,
}


def _restore(skeleton: dict[str, Any], slots: Any, blocks: list[Any]) -> dict[str, Any] | None:
    """Return the skeleton filled from the blocks, or None when they do not match its slots."""
    if not isinstance(slots, list) or len(slots) != len(blocks):
        return None
    restored = copy.deepcopy(skeleton)
    for slot, block in zip(slots, blocks, strict=True):
        if not isinstance(slot, list) or not slot or _BLOCK_OF_SLOT.get(slot[0]) is not type(block):
            return None
        try:
            _fill(restored, slot, block)
        except (KeyError, IndexError, TypeError):
            return None
    return restored


def _fill(target: Any, slot: list[Any], block: Any) -> None:
    kind, *path = slot
    if kind == "call":
        *steps, shape = path
        for step in steps:
            target = target[step]
        target["tool_name"], target["tool_call_id"] = block.name, block.id
        if shape == "dict":
            try:
                target["args"] = json.loads(block.arguments)
            except ValueError:
                target["args"] = block.arguments  # rewritten into text that is not JSON
        elif shape == "str":
            target["args"] = block.arguments
        return
    for step in path[:-1]:
        target = target[step]
    if kind == "text":
        value: Any = block.text
    elif kind == "json":
        try:
            value = json.loads(block.text)
        except ValueError:
            value = block.text  # shortened or redacted into text that is not JSON
    elif kind == "thinking":
        value = block.thinking
    else:
        value = (
            block.url if block.url is not None else f"data:{block.mime_type};base64,{block.data}"
        )
    target[path[-1]] = value
