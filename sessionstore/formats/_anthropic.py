"""Import and export of the Anthropic Messages format.

`from_anthropic` turns the `system` and `messages` of a Messages API request into our
messages, and `to_anthropic` turns them back, so that a conversation imported with
`from_anthropic` exports to the same `(system, messages)`, up to the normalisations
listed at the end (which only touch input the API would merge, ignore or reject).

The mapping, block by block:

- `text` is `TextContent`; `image` is `ImageContent` (a `base64` source becomes
  `data` + `mime_type`, a `url` source `url`);
- `thinking` is `ThinkingContent` with its `signature`, and `redacted_thinking` is
  `ThinkingContent(redacted=True)` whose `signature` holds the block's `data`;
- `tool_use` is a `ToolCall` whose `arguments` are the JSON text of `input`;
- each `tool_result` block of a user message becomes its own `ToolResultMessage`, with
  the `tool_name` of the most recent earlier `tool_use` with that id, and the user text
  and images around it become `UserMessage`s, in order.

Anthropic requires user and assistant turns to alternate, so `to_anthropic` merges
consecutive messages of the same role: tool results and the user text after them become
one user message again, and so do the kinds Anthropic has no role for (shell commands,
summaries, displayed custom messages), which are rendered as user text. All system
messages go, in order, to the top-level `system`.

String content is one text block, so the common case needs no hints. Whatever the
canonical export would not reproduce is kept in `extra["anthropic"]`, and only that:
`"content": "parts"` (a list of blocks where a string would do, or, for a tool result,
where no `content` key would do), `"explicit_is_error": true` (a tool result that said
`"is_error": false`) and `"fields"` (message keys other than `role` and `content`,
kept on the first of our messages made from that message and restored verbatim on the
Anthropic message it exports into).

Not carried (dropped on import, or on export because Anthropic has no field for them):
the `cache_control` of blocks (a request directive, not part of the history), unknown
block keys whose value is `null` (as SDKs dump unset fields), message `name`s, image
`detail`, `model`, `stop_reason` and `usage`, `client_id`, and thinking blocks without
a signature, which the API rejects (for example reasoning imported from OpenAI-compatible
servers). Empty text blocks are left out of multi-block messages, which the API rejects
too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pydantic import JsonValue, ValidationError

from sessionstore.errors import FormatError, describe_validation_error

# Private helpers shared by the format modules; they live in the OpenAI module, which
# needs them first.
from sessionstore.formats._messages import Rendered, check_is_message, format_hints
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

__all__ = ["from_anthropic", "to_anthropic"]

_FORMAT = "anthropic"
_IGNORED_BLOCK_KEYS = frozenset({"cache_control"})
_USER_BLOCKS = ("text", "image", "tool_result")
_ASSISTANT_BLOCKS = ("text", "image", "thinking", "redacted_thinking", "tool_use")
_TOOL_RESULT_BLOCKS = ("text", "image")

_UserBlock: TypeAlias = TextContent | ImageContent
_AssistantBlock: TypeAlias = TextContent | ThinkingContent | ToolCall | ImageContent


class _Invalid(Exception):
    """A problem with one message; the caller adds where it is."""


def from_anthropic(
    messages: Sequence[Mapping[str, Any]],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> list[Message]:
    """Import a conversation in the Anthropic Messages format.

    Args:
        messages: The `messages` of a Messages API request, as plain dicts.
        system: The request's `system`: a string, a list of text blocks, or None.

    Returns:
        Our messages: a `SystemMessage` first when `system` is given, then one message
        per assistant message, and for a user message one `ToolResultMessage` per
        `tool_result` block and one `UserMessage` per run of text and image blocks.

    Raises:
        FormatError: `messages` is not a list of messages, or one of them (or `system`)
            is malformed; the message names the index of the bad message and the problem.

    Examples:
        >>> messages = [{"role": "user", "content": "hi"}]
        >>> [m.kind for m in from_anthropic(messages, system="Be brief.")]
        ['system', 'user']
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise FormatError(f"expected a list of messages, got {type(messages).__name__}")
    result: list[Message] = []
    if system is not None:
        try:
            result.append(_import_system(system))
        except _Invalid as exc:
            raise FormatError(f"system: {exc}") from None
    tool_names: dict[str, str] = {}
    for index, raw in enumerate(messages):
        try:
            result.extend(_import_message(raw, tool_names))
        except _Invalid as exc:
            raise FormatError(f"message {index}: {exc}") from None
        except ValidationError as exc:
            raise FormatError(f"message {index}: {describe_validation_error(exc)}") from exc
    return result


def to_anthropic(
    messages: Sequence[Message],
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """Export messages as the `system` and `messages` of an Anthropic Messages request.

    Consecutive messages of the same role are merged, so the result alternates between
    user and assistant; see the module docstring for what the format cannot carry.

    Returns:
        `(system, messages)`: `system` is None when there is no system message.

    Raises:
        FormatError: a message cannot be expressed: tool call arguments that are not a
            JSON object, an inline image without a `mime_type`, or an object that is not
            one of our messages.
    """
    system_messages: list[SystemMessage] = []
    turns: list[_Turn] = []
    for index, message in enumerate(messages):
        check_is_message(index, message)
        if isinstance(message, SystemMessage):
            system_messages.append(message)
            continue
        try:
            turn = _export_message(message)
        except _Invalid as exc:
            raise FormatError(f"message {index}: {exc}") from None
        if turn is None:
            continue
        if turns and turns[-1].role == turn.role:
            turns[-1].merge(turn)
        else:
            turns.append(turn)
    return _export_system(system_messages), [turn.render() for turn in turns]


# ── import ─────────────────────────────────────────────────────────────────────


def _import_system(system: object) -> SystemMessage:
    if isinstance(system, str):
        return SystemMessage(content=system)
    if not isinstance(system, Sequence):
        raise _Invalid(f"expected a string or a list of text blocks, not {type(system).__name__}")
    texts: list[TextContent] = []
    for number, raw in enumerate(system):
        texts.append(_import_block(number, raw, allowed=("text",)))
    hints: dict[str, JsonValue] = {}
    if len(texts) == 1:
        hints["content"] = "parts"
    return SystemMessage(content=texts, extra=_extra(hints))


def _import_message(raw: Any, tool_names: dict[str, str]) -> list[Message]:
    if not isinstance(raw, Mapping):
        raise _Invalid(f"expected an object, got {type(raw).__name__}")
    if "role" not in raw:
        raise _Invalid("the message has no 'role'")
    role = raw["role"]
    if role == "system":
        raise _Invalid("role 'system' is not a message role; pass it as `system=`")
    if role not in ("user", "assistant"):
        raise _Invalid(f"role {role!r} is not supported (expected 'assistant' or 'user')")
    if "content" not in raw:
        raise _Invalid("the message has no 'content'")
    content = raw["content"]
    fields: dict[str, JsonValue] = {k: v for k, v in raw.items() if k not in ("role", "content")}
    if isinstance(content, str):
        blocks: list[Any] = [TextContent(text=content)]
        is_list = False
    elif isinstance(content, list):
        allowed = _ASSISTANT_BLOCKS if role == "assistant" else _USER_BLOCKS
        blocks = [_import_block(number, b, allowed=allowed) for number, b in enumerate(content)]
        is_list = True
    else:
        raise _Invalid(
            f"'content' must be a string or a list of blocks, not {type(content).__name__}"
        )
    if role == "assistant":
        hints = _list_hint(is_list, blocks)
        message = AssistantMessage(content=blocks, extra=_extra(hints, fields))
        for call in message.tool_calls:
            tool_names[call.id] = call.name
        return [message]
    return _split_user(blocks, is_list, fields, tool_names)


@dataclass
class _ToolResult:
    """A `tool_result` block, read but not yet turned into a `ToolResultMessage`."""

    tool_use_id: str
    content: list[_UserBlock]
    is_error: bool
    hints: dict[str, JsonValue]


def _split_user(
    blocks: list[Any],
    is_list: bool,
    fields: dict[str, JsonValue],
    tool_names: dict[str, str],
) -> list[Message]:
    result: list[Message] = []
    run: list[_UserBlock] = []

    def pending_fields() -> dict[str, JsonValue]:
        return {} if result else fields

    def flush() -> None:
        if run:
            result.append(UserMessage(content=list(run), extra=_extra({}, pending_fields())))
            run.clear()

    for block in blocks:
        if isinstance(block, _ToolResult):
            flush()
            tool_name = tool_names.get(block.tool_use_id, "")
            result.append(
                ToolResultMessage(
                    tool_call_id=block.tool_use_id,
                    tool_name=tool_name,
                    content=block.content,
                    is_error=block.is_error,
                    extra=_extra(block.hints, pending_fields()),
                )
            )
        else:
            run.append(block)
    if len(result) == 0:
        # Only text and images (or nothing): one message, which may need the list hint.
        return [UserMessage(content=run, extra=_extra(_list_hint(is_list, run), fields))]
    flush()
    return result


def _import_block(number: int, raw: Any, *, allowed: Sequence[str]) -> Any:
    where = f"block {number}"
    if not isinstance(raw, Mapping):
        raise _Invalid(f"{where} must be an object, not {type(raw).__name__}")
    kind = raw.get("type")
    if kind not in allowed:
        raise _Invalid(f"{where} has unsupported type {kind!r} (expected one of {list(allowed)})")
    if kind == "text":
        _check_keys(where, raw, {"type", "text"})
        return TextContent(text=_string(where, raw, "text"))
    if kind == "image":
        return _import_image(where, raw)
    if kind == "thinking":
        _check_keys(where, raw, {"type", "thinking", "signature"})
        signature = raw.get("signature")
        if signature is not None and not isinstance(signature, str):
            raise _Invalid(f"{where} has a 'signature' that is not a string")
        return ThinkingContent(thinking=_string(where, raw, "thinking"), signature=signature)
    if kind == "redacted_thinking":
        _check_keys(where, raw, {"type", "data"})
        return ThinkingContent(thinking="", redacted=True, signature=_string(where, raw, "data"))
    if kind == "tool_use":
        return _import_tool_use(where, raw)
    return _import_tool_result(where, raw)


def _import_image(where: str, raw: Mapping[str, Any]) -> ImageContent:
    _check_keys(where, raw, {"type", "source"})
    source = raw.get("source")
    if not isinstance(source, Mapping):
        raise _Invalid(f"{where} has no 'source' object")
    if source.get("type") == "base64":
        _check_keys(f"{where} source", source, {"type", "media_type", "data"})
        return ImageContent(
            data=_string(f"{where} source", source, "data"),
            mime_type=_string(f"{where} source", source, "media_type"),
        )
    if source.get("type") == "url":
        _check_keys(f"{where} source", source, {"type", "url"})
        return ImageContent(url=_string(f"{where} source", source, "url"))
    raise _Invalid(f"{where} has unsupported source type {source.get('type')!r}")


def _import_tool_use(where: str, raw: Mapping[str, Any]) -> ToolCall:
    _check_keys(where, raw, {"type", "id", "name", "input"})
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise _Invalid(f"{where} (tool_use) has no 'id'")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise _Invalid(f"{where} (tool_use {call_id!r}) has no 'name'")
    arguments = raw.get("input")
    if not isinstance(arguments, Mapping):
        raise _Invalid(f"{where} (tool_use {call_id!r}) needs an 'input' object")
    try:
        text = json.dumps(dict(arguments), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _Invalid(
            f"{where} (tool_use {call_id!r}) has an 'input' that is not JSON: {exc}"
        ) from None
    return ToolCall(id=call_id, name=name, arguments=text)


def _import_tool_result(where: str, raw: Mapping[str, Any]) -> _ToolResult:
    _check_keys(where, raw, {"type", "tool_use_id", "content", "is_error"})
    tool_use_id = raw.get("tool_use_id")
    if not isinstance(tool_use_id, str) or not tool_use_id:
        raise _Invalid(f"{where} (tool_result) has no 'tool_use_id'")
    where = f"{where} (tool_result for {tool_use_id!r})"
    hints: dict[str, JsonValue] = {}
    content: list[_UserBlock]
    if "content" not in raw:
        content = []
    elif isinstance(raw["content"], str):
        content = [TextContent(text=raw["content"])]
    elif isinstance(raw["content"], list):
        content = [
            _import_block(number, block, allowed=_TOOL_RESULT_BLOCKS)
            for number, block in enumerate(raw["content"])
        ]
        if len(content) <= 1 and all(isinstance(b, TextContent) for b in content):
            hints["content"] = "parts"
    else:
        raise _Invalid(f"{where} has 'content' that is neither a string nor a list")
    is_error = raw.get("is_error", False)
    if not isinstance(is_error, bool):
        raise _Invalid(f"{where} has an 'is_error' that is not a boolean")
    if "is_error" in raw and not is_error:
        hints["explicit_is_error"] = True
    return _ToolResult(tool_use_id, content, is_error, hints)


def _string(where: str, raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        raise _Invalid(f"{where} has no {key!r} string")
    return value


def _check_keys(where: str, raw: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(
        str(key)
        for key, value in raw.items()
        if key not in allowed and key not in _IGNORED_BLOCK_KEYS and value is not None
    )
    if unknown:
        raise _Invalid(f"{where} has unsupported keys {unknown}")


def _list_hint(is_list: bool, blocks: Sequence[object]) -> dict[str, JsonValue]:
    if is_list and len(blocks) == 1 and isinstance(blocks[0], TextContent):
        return {"content": "parts"}
    return {}


def _extra(
    hints: dict[str, JsonValue], fields: dict[str, JsonValue] | None = None
) -> dict[str, JsonValue]:
    if fields:
        hints = {**hints, "fields": fields}
    return {_FORMAT: hints} if hints else {}


# ── export ─────────────────────────────────────────────────────────────────────


@dataclass
class _Turn:
    """One Anthropic message in the making: the blocks of one or more of our messages."""

    role: str
    blocks: list[dict[str, Any]]
    as_string: bool
    """True when the content is a single text that the canonical export writes as a string."""
    fields: dict[str, Any] = field(default_factory=dict)

    def merge(self, other: _Turn) -> None:
        self.blocks.extend(other.blocks)
        self.as_string = False
        for key, value in other.fields.items():
            self.fields.setdefault(key, value)

    def render(self) -> dict[str, Any]:
        content: str | list[dict[str, Any]]
        if self.as_string:
            content = self.blocks[0]["text"]
        elif len(self.blocks) > 1:
            content = [b for b in self.blocks if b != {"type": "text", "text": ""}]
        else:
            content = self.blocks
        item: dict[str, Any] = {"role": self.role, "content": content}
        item.update(copy.deepcopy(self.fields))
        return item


def _export_message(
    message: AssistantMessage | UserMessage | ToolResultMessage | Rendered,
) -> _Turn | None:
    hints = format_hints(message, _FORMAT)
    fields = hints.get("fields")
    turn: _Turn
    if isinstance(message, AssistantMessage):
        blocks = [b for b in map(_export_assistant_block, message.content) if b is not None]
        turn = _Turn("assistant", blocks, _is_plain_text(message.content, hints))
    elif isinstance(message, UserMessage):
        blocks = [_export_user_block(b) for b in message.content]
        turn = _Turn("user", blocks, _is_plain_text(message.content, hints))
    elif isinstance(message, ToolResultMessage):
        turn = _Turn("user", [_export_tool_result(message, hints)], as_string=False)
    else:
        text = render_as_text(message)
        if text is None:
            return None
        turn = _Turn("user", [{"type": "text", "text": text}], as_string=True)
    if isinstance(fields, dict):
        turn.fields = dict(fields)
    return turn


def _is_plain_text(content: Sequence[object], hints: Mapping[str, JsonValue]) -> bool:
    return (
        len(content) == 1
        and isinstance(content[0], TextContent)
        and hints.get("content") != "parts"
    )


def _export_assistant_block(block: _AssistantBlock) -> dict[str, Any] | None:
    if isinstance(block, ToolCall):
        try:
            arguments = json.loads(block.arguments)
        except ValueError as exc:
            raise _Invalid(
                f"tool call {block.id!r} has arguments that are not valid JSON ({exc}); "
                "Anthropic needs a JSON object as 'input'"
            ) from None
        if not isinstance(arguments, dict):
            raise _Invalid(
                f"tool call {block.id!r} has arguments that are not a JSON object "
                f"({type(arguments).__name__}); Anthropic needs a JSON object as 'input'"
            )
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
    if isinstance(block, ThinkingContent):
        if block.signature is None:
            return None
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.signature}
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    return _export_user_block(block)


def _export_user_block(block: _UserBlock) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if block.url is not None:
        return {"type": "image", "source": {"type": "url", "url": block.url}}
    if block.mime_type is None:
        raise _Invalid("an inline image has no mime_type, which Anthropic needs as 'media_type'")
    source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
    return {"type": "image", "source": source}


def _export_tool_result(
    message: ToolResultMessage, hints: Mapping[str, JsonValue]
) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    content = message.content
    if _is_plain_text(content, hints):
        result["content"] = message.text
    elif content or hints.get("content") == "parts":
        result["content"] = [_export_user_block(b) for b in content]
    if message.is_error or hints.get("explicit_is_error") is True:
        result["is_error"] = message.is_error
    return result


def _export_system(messages: Sequence[SystemMessage]) -> str | list[dict[str, Any]] | None:
    if not messages:
        return None
    if len(messages) == 1 and _is_plain_text(
        messages[0].content, format_hints(messages[0], _FORMAT)
    ):
        return messages[0].content[0].text
    return [{"type": "text", "text": b.text} for m in messages for b in m.content]
