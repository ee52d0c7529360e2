"""Import and export of Google ADK events (`google.adk.events.Event`).

Install with `pip install "sessionstore[adk]"`. `from_adk_events` turns events into our
messages and `to_adk_events` turns them back, so that
`to_adk_events(from_adk_events(events)) == events`: each event is kept as the JSON that
ADK's own database service stores (`event.model_dump(mode="json", exclude_none=True)`),
and read back with `Event.model_validate`.

What the model said goes into message blocks, so it is counted, compacted, searched and
audited like any other message; the rest of the event (ids, author, timestamp, actions
and their state delta, usage and grounding metadata, ...) is kept in `extra["adk"]`:

- an event whose content has the role `model` is one `AssistantMessage`: text parts are
  text blocks, thought parts thinking blocks, function calls tool-call blocks (their
  `args` as JSON text), images (inline or by URI) image blocks; `name` is the event's
  author, `model`, `stop_reason` and `usage` come from the event;
- any other event with content is one `UserMessage` of its text and image parts,
  followed by one `ToolResultMessage` per function response part (the response as JSON
  text, named after the function); an event that holds only function responses has no
  `UserMessage`;
- an event with nothing a model reads (no content, or only parts of other kinds: a
  state change, a transfer, an escalation) is one `CustomMessage` of `custom_type`
  `"adk"` with `display=False`, so it is stored and audited but never sent to a model.

The first message of an event carries the event's JSON with the values that went into
blocks taken out, and the number of messages the event became; every message records
where its blocks go back. On export, the values come from the blocks. Messages without
that record, or whose blocks no longer match it (a summary, a compacted or redacted
copy, a message from another format), are exported canonically: user text and images as
a `user` event, assistant blocks as a `model` event, a tool result as a function
response; kinds ADK has no part for are rendered as user text, as `to_openai` does.

>>> from google.adk.events import Event
>>> from google.genai import types
>>> event = Event(author="user", content=types.Content(role="user", parts=[types.Part(text="hi")]))
>>> to_adk_events(from_adk_events([event])) == [event]
True
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any, TypeAlias

from pydantic import JsonValue, ValidationError

from sessionstore.errors import FormatError, MissingDependencyError, describe_validation_error
from sessionstore.formats._messages import check_is_message, format_hints
from sessionstore.formats._text import render_as_text
from sessionstore.models import (
    TOOL_ID_MAX_LENGTH,
    TOOL_NAME_MAX_LENGTH,
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
    from google.adk.events.event import Event
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        'the ADK format needs google-adk: pip install "sessionstore[adk]"'
    ) from exc

__all__ = ["ADK_FORMAT", "from_adk_events", "to_adk_events"]

ADK_FORMAT = "adk"
"""The key of `extra` (and the `custom_type` of events with nothing a model reads)."""

_Block: TypeAlias = TextContent | ThinkingContent | ToolCall | ImageContent
_MISSING_ID = "adk-call-without-id"


# ── import ─────────────────────────────────────────────────────────────────────


def from_adk_events(events: Sequence[Event]) -> list[Message]:
    """Import ADK events, in order.

    Returns:
        Our messages: one or more per event (see the module docstring).

    Raises:
        FormatError: `events` is not a list of ADK events, or an event holds a value
            sessionstore cannot store (a number that is not finite, JSON nested too deep).
    """
    given: object = events
    if isinstance(given, str | bytes) or not isinstance(given, Sequence):
        raise FormatError(f"expected a list of ADK events, got {type(given).__name__}")
    result: list[Message] = []
    for index, event in enumerate(events):
        if not isinstance(event, Event):
            raise FormatError(f"event {index}: expected an ADK Event, got {type(event).__name__}")
        try:
            result.extend(_import_event(event.model_dump(mode="json", exclude_none=True)))
        except ValidationError as exc:
            raise FormatError(f"event {index}: {describe_validation_error(exc)}") from exc
        except ValueError as exc:  # pydantic-core refuses a value it cannot dump as JSON
            raise FormatError(f"event {index}: {exc}") from exc
    return result


def _import_event(event: dict[str, Any]) -> list[Message]:
    # `event` is a fresh dump: its parts are edited in place, the fields read below are not.
    skeleton = event
    content = skeleton.get("content")
    parts: list[Any] = content.get("parts") or [] if isinstance(content, dict) else []
    role = content.get("role") if isinstance(content, dict) else None
    is_model = role == "model"
    blocks: list[_Block] = []
    slots: list[list[JsonValue]] = []
    results: list[tuple[ToolResultMessage, list[JsonValue]]] = []
    for number, part in enumerate(parts):
        if not isinstance(part, dict):
            continue
        response = part.get("function_response")
        if isinstance(response, dict) and _is_name(response.get("name")):
            results.append(_import_response(response, number))
            continue
        block = _take_block(part, number, is_model=is_model)
        if block is not None:
            blocks.append(block[0])
            slots.append(block[1])
    author = event.get("author")
    messages: list[tuple[Message, list[list[JsonValue]]]] = []
    if is_model and blocks:
        usage = event.get("usage_metadata")
        messages.append(
            (
                AssistantMessage(
                    content=blocks,
                    name=author if isinstance(author, str) else None,
                    model=_text_or_none(event.get("model_version")),
                    stop_reason=_text_or_none(event.get("finish_reason")),
                    usage=_usage(usage) if isinstance(usage, dict) else None,
                ),
                slots,
            )
        )
    elif blocks:
        messages.append((UserMessage(content=blocks), slots))
    messages.extend((result, [slot]) for result, slot in results)
    if not messages:
        return [
            CustomMessage(
                custom_type=ADK_FORMAT,
                display=False,
                extra={ADK_FORMAT: {"event": skeleton, "messages": 1, "slots": []}},
            )
        ]
    out: list[Message] = []
    for index, (message, message_slots) in enumerate(messages):
        record: dict[str, JsonValue] = {"slots": message_slots}  # type: ignore[dict-item]  # lists of JSON values
        if index == 0:
            record.update(event=skeleton, messages=len(messages))
        else:
            record["of"] = index
        out.append(message.model_copy(update={"extra": {ADK_FORMAT: record}}))
    return out


def _take_block(
    part: dict[str, Any], number: int, *, is_model: bool
) -> tuple[_Block, list[JsonValue]] | None:
    """Move the model-readable value of a part into a block; return it with its slot."""
    text = part.get("text")
    if isinstance(text, str):
        del part["text"]
        if part.get("thought") is True and is_model:
            return ThinkingContent(thinking=text), ["thought", number]
        return TextContent(text=text), ["text", number]
    call = part.get("function_call")
    if is_model and isinstance(call, dict) and _is_name(call.get("name")):
        call_id, args = call.get("id"), call.get("args")
        has_id = isinstance(call_id, str) and 0 < len(call_id) <= TOOL_ID_MAX_LENGTH
        has_args = isinstance(args, dict)
        block = ToolCall(
            id=call_id if has_id else _MISSING_ID,
            name=call["name"],
            arguments=json.dumps(args, ensure_ascii=False) if has_args else "{}",
        )
        del call["name"]
        if has_id:
            del call["id"]
        if has_args:
            del call["args"]
        return block, ["call", number, has_id, has_args]
    inline = part.get("inline_data")
    if isinstance(inline, dict) and _is_image(inline.get("mime_type")):
        data = inline.get("data")
        standard = _standard_base64(data)
        if standard is not None:
            del inline["data"]
            return ImageContent(data=standard, mime_type=inline["mime_type"]), ["image", number]
    file_data = part.get("file_data")
    if isinstance(file_data, dict) and _is_image(file_data.get("mime_type")):
        uri = file_data.get("file_uri")
        if isinstance(uri, str):
            del file_data["file_uri"]
            return ImageContent(url=uri, mime_type=file_data["mime_type"]), ["image_url", number]
    return None


def _import_response(
    response: dict[str, Any], number: int
) -> tuple[ToolResultMessage, list[JsonValue]]:
    call_id, value = response.get("id"), response.get("response")
    has_id = isinstance(call_id, str) and 0 < len(call_id) <= TOOL_ID_MAX_LENGTH
    has_value = isinstance(value, dict)
    message = ToolResultMessage(
        tool_call_id=call_id if has_id else _MISSING_ID,
        tool_name=response["name"],
        content=[TextContent(text=json.dumps(value, ensure_ascii=False))] if has_value else [],
        is_error=isinstance(value, dict) and list(value) == ["error"],
    )
    del response["name"]
    if has_id:
        del response["id"]
    if has_value:
        del response["response"]
    return message, ["result", number, has_id, has_value]


def _usage(usage: dict[str, Any]) -> Usage:
    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and value >= 0 else 0

    reasoning = count("thoughts_token_count")
    return Usage(
        input_tokens=count("prompt_token_count") + count("tool_use_prompt_token_count"),
        output_tokens=count("candidates_token_count") + reasoning,
        cache_read_tokens=count("cached_content_token_count"),
        reasoning_tokens=reasoning,
    )


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= TOOL_NAME_MAX_LENGTH


def _is_image(mime_type: Any) -> bool:
    return isinstance(mime_type, str) and mime_type.startswith("image/")


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _standard_base64(data: Any) -> str | None:
    """Return pydantic's URL-safe base64 as standard base64, if it converts back exactly."""
    if not isinstance(data, str):
        return None
    try:
        raw = base64.urlsafe_b64decode(data)
    except (binascii.Error, ValueError):
        return None
    if base64.urlsafe_b64encode(raw).decode() != data:
        return None
    return base64.b64encode(raw).decode()


# ── export ─────────────────────────────────────────────────────────────────────


def to_adk_events(messages: Sequence[Message]) -> list[Event]:
    """Export messages as ADK events, in order.

    Messages imported by `from_adk_events` and unchanged since come back as the events
    they were; any other message is exported canonically (see the module docstring).

    Raises:
        FormatError: an item of `messages` is not a sessionstore message, or a stored
            event no longer validates as an ADK event.
    """
    events: list[Event] = []
    index = 0
    while index < len(messages):
        check_is_message(index, messages[index])
        group = _group(messages, index)
        if group is not None:
            event = _restored_event(messages[index : index + group])
            if event is not None:
                events.append(event)
                index += group
                continue
        canonical = _canonical(messages[index])
        if canonical is not None:
            events.append(canonical)
        index += 1
    return events


def _group(messages: Sequence[Message], index: int) -> int | None:
    """Return how many messages from `index` make one recorded event, or None."""
    hints = format_hints(messages[index], ADK_FORMAT)
    count = hints.get("messages")
    if not isinstance(hints.get("event"), dict) or not isinstance(count, int) or count < 1:
        return None
    if index + count > len(messages):
        return None
    for offset in range(1, count):
        check_is_message(index + offset, messages[index + offset])
        if format_hints(messages[index + offset], ADK_FORMAT).get("of") != offset:
            return None
    return count


def _restored_event(group: Sequence[Message]) -> Event | None:
    stored = format_hints(group[0], ADK_FORMAT)["event"]
    assert isinstance(stored, dict)  # checked by _group
    skeleton = _editable(stored)
    for message in group:
        slots = format_hints(message, ADK_FORMAT).get("slots")
        if not isinstance(slots, list) or not _put_back(skeleton, message, slots):
            return None
    try:
        return Event.model_validate(skeleton)
    except ValidationError as exc:
        raise FormatError(
            f"a stored ADK event no longer validates: {describe_validation_error(exc)}"
        ) from exc


def _editable(stored: dict[str, Any]) -> dict[str, Any]:
    """Copy what `_put_back` edits (the parts and the dicts in them); share the rest.

    A deep copy of every event costs more than validating it; what is shared is only read,
    and `Event.model_validate` builds new objects from it.
    """
    event = dict(stored)
    content = event.get("content")
    if isinstance(content, dict):
        content = event["content"] = dict(content)
        parts = content.get("parts")
        if isinstance(parts, list):
            content["parts"] = [_editable_part(part) for part in parts]
    return event


def _editable_part(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    copied = dict(part)
    for key in ("function_call", "function_response", "inline_data", "file_data"):
        if isinstance(copied.get(key), dict):
            copied[key] = dict(copied[key])
    return copied


def _put_back(skeleton: dict[str, Any], message: Message, slots: list[Any]) -> bool:
    """Put the blocks of `message` back where `slots` says; False when they do not fit."""
    content = skeleton.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if isinstance(message, CustomMessage):
        return not slots
    if isinstance(message, ToolResultMessage):
        return len(slots) == 1 and _put_back_result(parts, message, slots[0])
    if not isinstance(message, UserMessage | AssistantMessage):
        return False
    if len(slots) != len(message.content) or not isinstance(parts, list):
        return False
    return _restore(skeleton, list(message.content), slots)


def _restore(skeleton: dict[str, Any], blocks: Sequence[Any], slots: Sequence[Any]) -> bool:
    content = skeleton.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list):
        return not slots
    for block, slot in zip(blocks, slots, strict=True):
        if not isinstance(slot, list) or len(slot) < 2 or not isinstance(slot[1], int):
            return False
        kind, number = slot[0], slot[1]
        if not 0 <= number < len(parts) or not isinstance(parts[number], dict):
            return False
        part = parts[number]
        if kind == "text" and isinstance(block, TextContent):
            part["text"] = block.text
        elif kind == "thought" and isinstance(block, ThinkingContent):
            part["text"] = block.thinking
        elif kind == "call" and isinstance(block, ToolCall) and len(slot) == 4:
            if not _put_back_call(part, block, has_id=slot[2], has_args=slot[3]):
                return False
        elif kind == "image" and isinstance(block, ImageContent) and block.data is not None:
            if not isinstance(part.get("inline_data"), dict):
                return False
            raw = base64.b64decode(block.data)
            part["inline_data"]["data"] = base64.urlsafe_b64encode(raw).decode()
        elif kind == "image_url" and isinstance(block, ImageContent) and block.url is not None:
            if not isinstance(part.get("file_data"), dict):
                return False
            part["file_data"]["file_uri"] = block.url
        else:
            return False
    return True


def _put_back_call(part: dict[str, Any], block: ToolCall, *, has_id: Any, has_args: Any) -> bool:
    call = part.get("function_call")
    if not isinstance(call, dict):
        return False
    call["name"] = block.name
    if has_id:
        call["id"] = block.id
    elif block.id != _MISSING_ID:
        return False
    if has_args:
        try:
            args = json.loads(block.arguments)
        except ValueError:
            return False
        if not isinstance(args, dict):
            return False
        call["args"] = args
    return True


def _put_back_result(parts: Any, message: ToolResultMessage, slot: Any) -> bool:
    if not isinstance(parts, list) or not isinstance(slot, list) or len(slot) != 4:
        return False
    kind, number, has_id, has_value = slot
    if kind != "result" or not isinstance(number, int) or not 0 <= number < len(parts):
        return False
    response = parts[number].get("function_response") if isinstance(parts[number], dict) else None
    if not isinstance(response, dict):
        return False
    response["name"] = message.tool_name
    if has_id:
        response["id"] = message.tool_call_id
    elif message.tool_call_id != _MISSING_ID:
        return False
    if has_value:
        if len(message.content) != 1 or not isinstance(message.content[0], TextContent):
            return False
        try:
            value = json.loads(message.content[0].text)
        except ValueError:
            return False
        if not isinstance(value, dict):
            return False
        response["response"] = value
    elif message.content:
        return False
    return True


def _canonical(message: Message) -> Event | None:
    if isinstance(message, UserMessage):
        return _event("user", "user", [_part(block) for block in message.content])
    if isinstance(message, SystemMessage):
        return _event("user", "user", [types.Part(text=message.text)])
    if isinstance(message, AssistantMessage):
        return _event(message.name or "model", "model", [_part(b) for b in message.content])
    if isinstance(message, ToolResultMessage):
        try:
            value = json.loads(message.text)
        except ValueError:
            value = None
        response = value if isinstance(value, dict) else {"result": message.text}
        if message.is_error and not isinstance(value, dict):
            response = {"error": message.text}
        call = types.FunctionResponse(
            id=None if message.tool_call_id == _MISSING_ID else message.tool_call_id,
            name=message.tool_name or "tool",
            response=response,
        )
        return _event("user", "user", [types.Part(function_response=call)])
    if isinstance(message, CustomMessage) and message.custom_type == ADK_FORMAT:
        return None  # an event with nothing a model reads, whose record is gone
    text = render_as_text(message)
    return None if text is None else _event("user", "user", [types.Part(text=text)])


def _event(author: str, role: str, parts: list[types.Part]) -> Event:
    return Event(author=author, content=types.Content(role=role, parts=parts))


def _part(block: TextContent | ThinkingContent | ToolCall | ImageContent) -> types.Part:
    if isinstance(block, TextContent):
        return types.Part(text=block.text)
    if isinstance(block, ThinkingContent):
        return types.Part(text=block.thinking, thought=True)
    if isinstance(block, ToolCall):
        try:
            args = json.loads(block.arguments)
        except ValueError:
            args = None
        call = types.FunctionCall(
            id=None if block.id == _MISSING_ID else block.id,
            name=block.name,
            args=args if isinstance(args, dict) else {"arguments": block.arguments},
        )
        return types.Part(function_call=call)
    if block.data is not None:
        return types.Part.from_bytes(
            data=base64.b64decode(block.data), mime_type=block.mime_type or "image/png"
        )
    return types.Part(
        file_data=types.FileData(file_uri=block.url, mime_type=block.mime_type or "image/png")
    )
