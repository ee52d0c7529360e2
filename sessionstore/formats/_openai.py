"""Import and export of the OpenAI chat-completions message format.

`from_openai` turns a list of chat-completions messages (`role` = `system`, `developer`,
`user`, `assistant` or `tool`) into our messages, and `to_openai` turns them back, so
that `to_openai(from_openai(messages)) == messages` for any conversation `from_openai`
accepts, up to the two normalisations named below (`cache_control` on parts, a missing
tool-call `type`).

The canonical mapping needs no hints in the common case:

- string content is one `TextContent`; `None` assistant content (the usual companion of
  `tool_calls`) is an empty block list, and an empty block list exports as `None` for the
  assistant and as `""` for the other roles;
- `tool_calls` become `ToolCall` blocks after the content, with `arguments` kept as the
  JSON text the model wrote, byte for byte;
- a tool message's `tool_name` is the name of the most recent earlier tool call with its
  `tool_call_id` (ids can be reused within one conversation), or `""` when there is none;
- a `data:<mime>;base64,<data>` image URL becomes `ImageContent(data=..., mime_type=...)`,
  any other URL `ImageContent(url=...)`.

Whatever the canonical export would not reproduce is kept in `extra["openai"]`, and only
that: `"role": "developer"` (a developer message, stored as a `SystemMessage`),
`"content": "parts"` (content given as a list of parts where a string or `None` would
do) or `"content": "absent"` (no `content` key), `"name": true` (a tool message that
carried its tool's `name`), `"reasoning": <key>` (the key that held the assistant's
reasoning text, see below) and `"fields"`: message keys restored verbatim on export,
such as `refusal`, `annotations`, `audio`, or a known key whose value the canonical
export would write differently (`"tool_calls": []`, `"name": null`).

OpenAI chat has no field for thinking, so `ThinkingContent` blocks are dropped on export,
unless `extra["openai"]["reasoning"]` names a key (`"reasoning_content"`, as in
OpenAI-compatible servers such as DeepSeek and vLLM, or `"reasoning"`): then the thinking
text is written under that key. On import, a string under either key becomes a
`ThinkingContent` block and sets that hint. Also dropped on export, as OpenAI has no
field for them: `is_error` of tool results, `model`, `stop_reason` and `usage` of
assistant messages, and `client_id`. Import drops the `cache_control` key of content
parts (a request directive of some OpenAI-compatible gateways, not part of the history)
and reads a tool call without `type` as a `function` call, which export writes out.

Kinds OpenAI has no role for are exported as `user` messages whose text renders them
readably: a shell command with its output and exit code, a summary behind a clear
prefix, a custom message's type and data (custom messages with `display=False` are
skipped).

>>> from_openai([{"role": "user", "content": "hi"}])[0].text
'hi'
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from pydantic import JsonValue, ValidationError

from sessionstore.errors import FormatError, describe_validation_error
from sessionstore.formats._messages import check_is_message, format_hints
from sessionstore.formats._text import render_as_text
from sessionstore.models import (
    AssistantMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["from_openai", "openai_items", "to_openai"]

_FORMAT = "openai"
_MESSAGE_KEYS: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls"}),
    "tool": frozenset({"role", "content", "name", "tool_call_id"}),
}
_REASONING_KEYS = ("reasoning_content", "reasoning")
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
_IGNORED_PART_KEYS = frozenset({"cache_control"})

_Block: TypeAlias = TextContent | ImageContent


class _Invalid(Exception):
    """A problem with one message; `from_openai` adds the message index."""


def from_openai(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Import a conversation in the OpenAI chat-completions format.

    Args:
        messages: The `messages` list of a chat-completions request, as plain dicts.

    Returns:
        Our messages, one per OpenAI message, in order.

    Raises:
        FormatError: `messages` is not a list of messages, or one of them is malformed
            (no or an unknown role, a tool message without `tool_call_id`, a tool call
            without id or name, a value of the wrong type). The message names the index
            of the bad message and the problem.

    Examples:
        >>> [m.kind for m in from_openai([{"role": "system", "content": "Be brief."}])]
        ['system']
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise FormatError(f"expected a list of messages, got {type(messages).__name__}")
    result: list[Message] = []
    tool_names: dict[str, str] = {}
    for index, raw in enumerate(messages):
        try:
            message = _import_message(raw, tool_names)
        except _Invalid as exc:
            raise FormatError(f"message {index}: {exc}") from None
        except ValidationError as exc:
            raise FormatError(f"message {index}: {describe_validation_error(exc)}") from exc
        result.append(message)
    return result


def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Export messages as an OpenAI chat-completions `messages` list.

    Messages imported with `from_openai` come back exactly as they were given; see the
    module docstring for what the format cannot carry.

    Raises:
        FormatError: a message cannot be expressed (an inline image without a
            `mime_type`, or an object that is not one of our messages).
    """
    return openai_items(messages)


def openai_items(messages: Sequence[Message], first_index: int = 0) -> list[dict[str, Any]]:
    """`to_openai`, for part of a longer list that starts at `first_index` (named in errors)."""
    result: list[dict[str, Any]] = []
    for index, message in enumerate(messages, first_index):
        check_is_message(index, message)
        try:
            item = _export_message(message)
        except _Invalid as exc:
            raise FormatError(f"message {index}: {exc}") from None
        if item is not None:
            result.append(item)
    return result


# ── import ─────────────────────────────────────────────────────────────────────


def _import_message(raw: Any, tool_names: dict[str, str]) -> Message:
    if not isinstance(raw, Mapping):
        raise _Invalid(f"expected an object, got {type(raw).__name__}")
    if "role" not in raw:
        raise _Invalid("the message has no 'role'")
    role = raw["role"]
    if not isinstance(role, str) or role not in _MESSAGE_KEYS:
        raise _Invalid(f"role {role!r} is not supported (expected one of {_role_list()})")
    hints: dict[str, JsonValue] = {}
    fields: dict[str, Any] = {k: v for k, v in raw.items() if k not in _MESSAGE_KEYS[role]}
    blocks = _import_content(raw, role, hints, fields)
    message: Message
    if role in ("system", "developer"):
        if role == "developer":
            hints["role"] = "developer"
        texts: list[TextContent] = []
        for number, block in enumerate(blocks):
            if not isinstance(block, TextContent):
                raise _Invalid(f"content part {number} is an image; system messages hold text")
            texts.append(block)
        name = _import_name(raw, fields)
        message = SystemMessage(content=texts, name=name, extra=_extra(hints, fields))
    elif role == "user":
        name = _import_name(raw, fields)
        message = UserMessage(content=blocks, name=name, extra=_extra(hints, fields))
    elif role == "assistant":
        message = _import_assistant(raw, blocks, hints, fields)
        for call in message.tool_calls:
            tool_names[call.id] = call.name
    else:
        message = _import_tool(raw, blocks, hints, fields, tool_names)
    return message


def _import_assistant(
    raw: Mapping[str, Any],
    blocks: list[_Block],
    hints: dict[str, JsonValue],
    fields: dict[str, Any],
) -> AssistantMessage:
    content: list[TextContent | ThinkingContent | ToolCall | ImageContent] = []
    for key in _REASONING_KEYS:
        if isinstance(fields.get(key), str):
            content.append(ThinkingContent(thinking=fields.pop(key)))
            hints["reasoning"] = key
            break
    content.extend(blocks)
    if "tool_calls" in raw:
        calls = _import_tool_calls(raw["tool_calls"])
        if not calls:
            fields["tool_calls"] = raw["tool_calls"]
        content.extend(calls)
    name = _import_name(raw, fields)
    return AssistantMessage(content=content, name=name, extra=_extra(hints, fields))


def _import_tool(
    raw: Mapping[str, Any],
    blocks: list[_Block],
    hints: dict[str, JsonValue],
    fields: dict[str, Any],
    tool_names: dict[str, str],
) -> ToolResultMessage:
    tool_call_id = raw.get("tool_call_id")
    if "tool_call_id" not in raw:
        raise _Invalid("tool message has no 'tool_call_id'")
    if not isinstance(tool_call_id, str) or not tool_call_id:
        raise _Invalid(f"'tool_call_id' must be a non-empty string, not {tool_call_id!r}")
    tool_name = tool_names.get(tool_call_id, "")
    name = _import_name(raw, fields)
    if name is not None:
        tool_name = name
        hints["name"] = True
    return ToolResultMessage(
        tool_call_id=tool_call_id, tool_name=tool_name, content=blocks, extra=_extra(hints, fields)
    )


def _import_name(raw: Mapping[str, Any], fields: dict[str, Any]) -> str | None:
    if "name" not in raw:
        return None
    name = raw["name"]
    if name is None:
        fields["name"] = None
        return None
    if not isinstance(name, str):
        raise _Invalid(f"'name' must be a string, not {type(name).__name__}")
    return name


def _import_content(
    raw: Mapping[str, Any], role: str, hints: dict[str, JsonValue], fields: dict[str, Any]
) -> list[_Block]:
    if "content" not in raw:
        hints["content"] = "absent"
        return []
    content = raw["content"]
    if content is None:
        if role != "assistant":
            fields["content"] = None
        return []
    if isinstance(content, str):
        return [TextContent(text=content)]
    if not isinstance(content, list):
        raise _Invalid(
            f"'content' must be a string, a list of parts or null, not {type(content).__name__}"
        )
    blocks = [_import_part(number, part) for number, part in enumerate(content)]
    if not blocks or (len(blocks) == 1 and isinstance(blocks[0], TextContent)):
        hints["content"] = "parts"
    return blocks


def _import_part(number: int, part: Any) -> _Block:
    if not isinstance(part, Mapping):
        raise _Invalid(f"content part {number} must be an object, not {type(part).__name__}")
    kind = part.get("type")
    if kind == "text":
        _check_keys(f"content part {number}", part, {"type", "text"}, _IGNORED_PART_KEYS)
        text = part.get("text")
        if not isinstance(text, str):
            raise _Invalid(f"content part {number} has no 'text' string")
        return TextContent(text=text)
    if kind == "image_url":
        _check_keys(f"content part {number}", part, {"type", "image_url"}, _IGNORED_PART_KEYS)
        image = part.get("image_url")
        if not isinstance(image, Mapping) or not isinstance(image.get("url"), str):
            raise _Invalid(f"content part {number} has no 'image_url.url' string")
        _check_keys(f"content part {number} 'image_url'", image, {"url", "detail"})
        detail = image.get("detail")
        if detail is not None and not isinstance(detail, str):
            raise _Invalid(f"content part {number} has a 'detail' that is not a string")
        return _image_from_url(image["url"], detail)
    raise _Invalid(f"content part {number} has unsupported type {kind!r}")


def _image_from_url(url: str, detail: str | None) -> ImageContent:
    match = _DATA_URL.fullmatch(url)
    if match is not None:
        try:
            return ImageContent(data=match[2], mime_type=match[1], detail=detail)
        except ValidationError:
            # Not valid base64: keep the URL as given rather than reject the image.
            pass
    return ImageContent(url=url, detail=detail)


def _import_tool_calls(value: Any) -> list[ToolCall]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Invalid(f"'tool_calls' must be a list, not {type(value).__name__}")
    calls: list[ToolCall] = []
    for number, call in enumerate(value):
        where = f"tool call {number}"
        if not isinstance(call, Mapping):
            raise _Invalid(f"{where} must be an object, not {type(call).__name__}")
        _check_keys(where, call, {"id", "type", "function"})
        # A missing `type` is read as "function" (the only type chat completions had for
        # years); export always writes it.
        if call.get("type", "function") != "function":
            raise _Invalid(f"{where} has unsupported type {call['type']!r}")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise _Invalid(f"{where} has no 'id'")
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise _Invalid(f"{where} (id {call_id!r}) has no 'function' object")
        _check_keys(f"{where} (id {call_id!r}) 'function'", function, {"name", "arguments"})
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise _Invalid(f"{where} (id {call_id!r}) has no function 'name'")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            raise _Invalid(
                f"{where} (id {call_id!r}) needs 'arguments' as JSON text, "
                f"not {type(arguments).__name__}"
            )
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return calls


def _check_keys(
    where: str,
    mapping: Mapping[str, Any],
    allowed: set[str],
    ignored: frozenset[str] = frozenset(),
) -> None:
    unknown = sorted(str(key) for key in mapping if key not in allowed and key not in ignored)
    if unknown:
        raise _Invalid(f"{where} has unsupported keys {unknown}")


def _extra(hints: dict[str, JsonValue], fields: dict[str, Any]) -> dict[str, JsonValue]:
    if fields:
        hints["fields"] = fields
    return {_FORMAT: hints} if hints else {}


def _role_list() -> str:
    return ", ".join(sorted(_MESSAGE_KEYS))


# ── export ─────────────────────────────────────────────────────────────────────


def _export_message(message: Message) -> dict[str, Any] | None:
    hints = format_hints(message, _FORMAT)
    item: dict[str, Any]
    if isinstance(message, SystemMessage):
        role = "developer" if hints.get("role") == "developer" else "system"
        item = {"role": role}
        _export_content(item, list(message.content), hints, empty="")
        _export_name(item, message.name)
    elif isinstance(message, UserMessage):
        item = {"role": "user"}
        _export_content(item, list(message.content), hints, empty="")
        _export_name(item, message.name)
    elif isinstance(message, AssistantMessage):
        item = _export_assistant(message, hints)
    elif isinstance(message, ToolResultMessage):
        item = {"role": "tool", "tool_call_id": message.tool_call_id}
        _export_content(item, list(message.content), hints, empty="")
        if hints.get("name") is True:
            item["name"] = message.tool_name
    else:
        text = render_as_text(message)
        return None if text is None else {"role": "user", "content": text}
    fields = hints.get("fields")
    if isinstance(fields, dict):
        item.update(copy.deepcopy(fields))
    return item


def _export_assistant(message: AssistantMessage, hints: Mapping[str, JsonValue]) -> dict[str, Any]:
    item: dict[str, Any] = {"role": "assistant"}
    blocks = [b for b in message.content if isinstance(b, TextContent | ImageContent)]
    _export_content(item, blocks, hints, empty=None)
    calls = message.tool_calls
    if calls:
        item["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ]
    _export_name(item, message.name)
    reasoning_key = hints.get("reasoning")
    thoughts = [
        b.thinking for b in message.content if isinstance(b, ThinkingContent) and not b.redacted
    ]
    if isinstance(reasoning_key, str) and thoughts:
        item[reasoning_key] = "\n".join(thoughts)
    return item


def _export_content(
    item: dict[str, Any],
    blocks: Sequence[_Block],
    hints: Mapping[str, JsonValue],
    *,
    empty: str | None,
) -> None:
    shape = hints.get("content")
    if shape == "absent" and not blocks:
        return
    if shape != "parts":
        if not blocks:
            item["content"] = empty
            return
        if len(blocks) == 1 and isinstance(blocks[0], TextContent):
            item["content"] = blocks[0].text
            return
    item["content"] = [_export_part(block) for block in blocks]


def _export_part(block: _Block) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if block.url is not None:
        url = block.url
    elif block.mime_type is None:
        raise _Invalid("an inline image has no mime_type, which its data: URL needs")
    else:
        url = f"data:{block.mime_type};base64,{block.data}"
    image: dict[str, Any] = {"url": url}
    if block.detail is not None:
        image["detail"] = block.detail
    return {"type": "image_url", "image_url": image}


def _export_name(item: dict[str, Any], name: str | None) -> None:
    if name is not None:
        item["name"] = name
