"""Import of OpenAI Responses-API input items (what openai-agents sessions hold), and the mapping.

`from_openai_responses` turns a list of Responses input items into our messages and
`to_openai_responses` (in `_responses_export`) turns them back, so that
`to_openai_responses(from_openai_responses(items)) == items` for every item: nothing is
normalised away.

The mapping keeps what the model said in message blocks (so it is counted, compacted,
redacted and audited like any other message) and everything else in
`extra["openai_responses"]`:

- a `message` item of role `user`, `system` or `developer` is one `UserMessage` or
  `SystemMessage`: string content is one text block, `input_text` parts are text blocks,
  `input_image` parts with an `image_url` are image blocks;
- the items a model call emits (`reasoning`, an assistant `message`, `function_call`,
  `custom_tool_call`, and the hosted calls: web and file search, computer, code
  interpreter, image generation, shell, patch, MCP, tool search) are grouped, as long as
  they follow one another, into one `AssistantMessage`: reasoning summary and content
  texts are thinking blocks, `output_text` and `refusal` parts are text blocks, function
  and custom tool calls are tool-call blocks (a custom call's `input` as its arguments);
  hosted calls travel in `extra` only;
- a `function_call_output` or `custom_tool_call_output` is one `ToolResultMessage`
  (string output as one text block, `input_text` and `input_image` parts as blocks),
  named after the earlier call with its id;
- any other item (the other call outputs, MCP approval responses, item references,
  compaction items, and types this module does not know) is a `CustomMessage` of
  `custom_type` `"openai_responses"` whose `data` is the item, verbatim.

For each item, `extra["openai_responses"]["items"]` holds the item with the values that
went into blocks taken out, and the places they go back to (with
`from_openai_responses_json`, only the places: the kept JSON text holds the item; records
of older versions hold both, and read back the same). On export those values come
from the blocks, so a compacted or redacted copy of a message exports its new text in the
original structure. A message whose blocks no longer match that record (or that has
none: a summary, a message written by hand) is exported canonically: text as an easy
input message (`{"role": ..., "content": text}`), tool calls as `function_call` items,
tool results as `function_call_output` items; thinking is left out, because the
Responses API accepts a reasoning item only with the id the model gave it. Kinds with no
Responses equivalent (summaries, shell commands, other custom messages) are exported as
user messages whose text renders them, as `to_openai` does.

>>> from sessionstore.formats._responses_export import to_openai_responses
>>> messages = from_openai_responses([{"role": "user", "content": "hi"}])
>>> messages[0].text, to_openai_responses(messages)
('hi', [{'role': 'user', 'content': 'hi'}])
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

from pydantic import BaseModel, JsonValue, ValidationError
from pydantic_core import from_json

from sessionstore.errors import FormatError, describe_validation_error
from sessionstore.formats._responses_canonical import _Invalid
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
    UserMessage,
)
from sessionstore.models._limits import CHECKED_JSON, MAX_JSON_DEPTH, json_copy_within_limits

__all__ = [
    "CALL_OUTPUT_TYPES",
    "RECORD_DEPTH",
    "RESPONSES_FORMAT",
    "checked_copies",
    "from_openai_responses",
    "from_openai_responses_json",
    "item_type",
]

RESPONSES_FORMAT = "openai_responses"
"""The key of `extra` (and the `custom_type` of pass-through items) this format owns."""
JSON_KEY = "json"
"""With `from_openai_responses_json`: the key, in `extra[RESPONSES_FORMAT]`, of the JSON
text of a list of the message's items, as they were given."""

CALL_OUTPUT_TYPES: Mapping[str, str] = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
    "program": "program_output",
}
"""Call item types and the type of the item that answers them (by `call_id`)."""

_MODEL_ITEM_TYPES = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "tool_search_call",
    }
)
_TOOL_CALL_TYPES = {"function_call": "arguments", "custom_tool_call": "input"}
_TOOL_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
_TEXT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
_THINKING_PARTS = {"summary_text": "text", "reasoning_text": "text"}
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)

_Path: TypeAlias = list[str | int]
_Block: TypeAlias = dict[str, Any] | ImageContent
"""A block as `_import` builds it: a dict the message validates (an image: a model)."""
_Built = TypeVar("_Built", bound=BaseModel)
RECORD_DEPTH = 4
"""How deep an item's record sits in a message's `extra`: extra, format, items, record."""
_KIND_OF: dict[type, str] = {
    TextContent: "text",
    ImageContent: "image",
    ThinkingContent: "thinking",
    ToolCall: "call",
}


def _copied(value: Any) -> Any:
    """Return a copy of a JSON value: new dicts and lists all the way down.

    What `copy.deepcopy` does for JSON, several times faster: no memo, no dispatch by type
    beyond the three containers JSON has (a tuple, which `json.dumps` accepts, stays one).
    """
    kind = type(value)
    if kind is dict:
        return {key: _copied(inner) for key, inner in value.items()}
    if kind is list:
        return [_copied(inner) for inner in value]
    if kind is tuple:
        return tuple(_copied(inner) for inner in value)
    return value


# ── import ─────────────────────────────────────────────────────────────────────


def from_openai_responses(
    items: Sequence[Mapping[str, Any]], *, tool_names: Mapping[str, str] | None = None
) -> list[Message]:
    """Import Responses-API input items (the items an openai-agents session stores).

    Args:
        items: The items, as plain dicts, in order.
        tool_names: Tool names by call id, for outputs whose call is not in `items`.

    Returns:
        Our messages, in order: one per item, except that the items of one model call
        that follow one another are one assistant message.

    Raises:
        FormatError: `items` is not a list of objects, or an item is malformed (a
            message without a known role, a call without `call_id` or `name`, an output
            without `call_id`). The message names the index of the bad item.
    """
    return _import(items, tool_names, None)


def from_openai_responses_json(
    items: Sequence[Mapping[str, Any]],
    texts: Sequence[str],
    *,
    tool_names: Mapping[str, str] | None = None,
    copies: Sequence[Any] | None = None,
) -> list[Message]:
    """Import items as `from_openai_responses` does, each message keeping its items' JSON.

    `extra["openai_responses"]["json"]` of each message is the JSON text of the list of
    the items it stands for, joined from `texts`, so a reader of the stored message can
    answer with the items exactly as given, with one `json.loads` and no model (the
    openai-agents session's raw mode). `to_openai_responses` does not read it: a
    compacted or redacted copy of the message still exports its own blocks, in the
    structure of the kept items: the record of an item that the text proves within limits
    holds only its slots, not a copy of the item.

    Args:
        items: The items, as plain dicts, in order.
        texts: `json.dumps(item)` of each item (ASCII, as the SDK's own sessions store it).
        tool_names: Tool names by call id, for outputs whose call is not in `items`.
        copies: `checked_copies(items, texts)`, when the caller has it already; by
            default each item's copy is made here (`json_copy_within_limits`).

    Raises:
        FormatError: as `from_openai_responses`; or `texts` (or `copies`) does not match
            `items` in length.
    """
    if len(texts) != len(items):
        raise FormatError(f"expected the JSON text of {len(items)} items, got {len(texts)}")
    if copies is not None and len(copies) != len(items):
        raise FormatError(f"expected the copies of {len(items)} items, got {len(copies)}")
    return _import(items, tool_names, texts, copies)


def checked_copies(items: Sequence[Any], texts: Sequence[str]) -> list[Any]:
    """Return `json_copy_within_limits` of each item and its text, as an import uses them.

    Each text must be one JSON value, an encoder's output for its item (as the
    openai-agents session makes them): the texts are then parsed in one call, and the
    parse compared with the items at once, which costs half of a parse and a comparison
    an item. A text that nests too deep for a record, or a batch whose joined parse fails
    or differs, is copied item by item, so every copy (or None) is what
    `json_copy_within_limits` gives. Texts that are not each one JSON value could join
    into a parse that equals the items while a text is not its item's: do not pass them.
    """
    limit = MAX_JSON_DEPTH - RECORD_DEPTH
    if len(texts) == len(items) and all(
        text.count("[") + text.count("{") < limit for text in texts
    ):
        try:
            parsed = from_json("[" + ",".join(texts) + "]", allow_inf_nan=False)
        except (TypeError, ValueError):  # not strict JSON, or a str that is not valid Unicode
            parsed = None
        if type(parsed) is list and len(parsed) == len(items) and parsed == list(items):
            return parsed
    return [
        json_copy_within_limits(item, text, nested_in=RECORD_DEPTH)
        for item, text in zip(items, texts, strict=True)
    ]


def _import(
    items: Sequence[Mapping[str, Any]],
    tool_names: Mapping[str, str] | None,
    texts: Sequence[str] | None,
    copies: Sequence[Any] | None = None,
) -> list[Message]:
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise FormatError(f"expected a list of items, got {type(items).__name__}")
    names = dict(tool_names or {})
    result: list[Message] = []
    records: list[JsonValue] = []
    blocks: list[_Block] = []

    first = 0  # the index of the first item of the model call being grouped
    checked = True  # every record of the group is built from a copy known within limits

    def flush(end: int) -> None:
        if records:
            hints: dict[str, JsonValue] = {"items": list(records)}
            if texts is not None:
                hints[JSON_KEY] = "[" + ",".join(texts[first:end]) + "]"
            extra: dict[str, JsonValue] = {RESPONSES_FORMAT: hints}
            result.append(_built(AssistantMessage, checked, content=list(blocks), extra=extra))
        records.clear()
        blocks.clear()

    for index, item in enumerate(items):
        try:
            if type(item) is not dict and not isinstance(item, Mapping):
                raise _Invalid(f"expected an object, got {type(item).__name__}")  # noqa: TRY301
            # With its JSON text, an item known within limits is copied from the text, and
            # what is built from the copy is not checked again (`json_copy_within_limits`).
            copy = (
                None
                if texts is None
                else copies[index]
                if copies is not None
                else json_copy_within_limits(item, texts[index], nested_in=RECORD_DEPTH)
            )
            kind = item_type(item)  # read once an item: it runs on every item imported
            if _is_model_item(item, kind):
                if not records:
                    first, checked = index, True
                checked = checked and copy is not None
                record, item_blocks = _import_model_item(
                    item, _skeleton(item, texts is not None, copy), kind
                )
                records.append(record)
                blocks.extend(item_blocks)
                for block in item_blocks:
                    if type(block) is dict and block["type"] == "tool_call":
                        names[block["id"]] = block["name"]
                continue
            if records:
                flush(index)
            text = None if texts is None else "[" + texts[index] + "]"
            result.append(_import_input_item(item, names, text, copy, kind))
        except _Invalid as exc:
            raise FormatError(f"item {index}: {exc}") from None
        except ValidationError as exc:
            raise FormatError(f"item {index}: {describe_validation_error(exc)}") from exc
    flush(len(items))
    return result


def item_type(item: Mapping[str, Any]) -> str | None:
    """Return an item's `type`: None when it has none, `""` when it is not a string."""
    kind = item.get("type")
    return kind if kind is None or isinstance(kind, str) else ""


def _is_model_item(item: Mapping[str, Any], kind: str | None) -> bool:
    """Whether `item` (of type `kind`: `item_type(item)`) is emitted by a model call."""
    if kind == "message" or (kind is None and "role" in item):
        return item.get("role") == "assistant"
    return kind in _MODEL_ITEM_TYPES


def _skeleton(
    item: Mapping[str, Any], kept: bool, copy: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The copy of `item` its record keeps, or None when its record keeps only the slots.

    An item whose JSON text is kept and known within limits (`copy`) needs no skeleton:
    the kept text holds it (`kept_items` reads it back). Any other item keeps one, so the
    model's checks see it as before.
    """
    if kept and copy is not None:
        return None
    return _copied(dict(item)) if copy is None else copy


def _record(skeleton: dict[str, Any] | None, slots: list[list[Any]]) -> dict[str, JsonValue]:
    record: dict[str, Any] = (
        {"slots": slots} if skeleton is None else {"item": skeleton, "slots": slots}
    )
    return record


def _built(model: type[_Built], checked: bool, **fields: Any) -> _Built:
    """Return `model(**fields)`; when `checked`, its JSON fields are taken as they are.

    `checked`: `extra` (and a custom message's `data`) are built from
    `json_copy_within_limits` copies, so validating them again (the models' JSON checks,
    walks in Python, most of an import's time) is skipped; the other fields are validated.
    """
    if not checked:
        return model(**fields)
    # `model_validate`'s own validator, without its Python wrapper (a call a message).
    return model.__pydantic_validator__.validate_python(fields, context=CHECKED_JSON)  # type: ignore[no-any-return]  # an instance of `model`


def _import_model_item(
    item: Mapping[str, Any], skeleton: dict[str, Any] | None, kind: str | None
) -> tuple[dict[str, JsonValue], list[_Block]]:
    slots: list[list[Any]] = []
    blocks: list[_Block] = []
    if kind in _TOOL_CALL_TYPES:
        arguments_key = _TOOL_CALL_TYPES[kind]
        call_id, name, arguments = item.get("call_id"), item.get("name"), item.get(arguments_key)
        if not isinstance(call_id, str) or not call_id:
            raise _Invalid(f"a {kind} item needs a 'call_id' string")
        if not isinstance(name, str) or not name:
            raise _Invalid(f"a {kind} item needs a 'name' string")
        if isinstance(arguments, str):
            if skeleton is not None:
                for key in ("call_id", "name", arguments_key):
                    del skeleton[key]
            blocks.append(
                {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}
            )
            slots.append(["call"])
    elif kind == "reasoning":
        for key in ("summary", "content"):
            _slot_parts(item, skeleton, key, _THINKING_PARTS, slots, blocks, thinking=True)
    elif kind in (None, "message"):
        _slot_content(item, skeleton, slots, blocks, images=False)
    return _record(skeleton, slots), blocks


def _slot_content(
    item: Mapping[str, Any],
    skeleton: dict[str, Any] | None,
    slots: list[list[Any]],
    blocks: list[_Block],
    *,
    images: bool,
    key: str = "content",
) -> None:
    value = item.get(key)
    if isinstance(value, str):
        if skeleton is not None:
            del skeleton[key]
        blocks.append({"type": "text", "text": value})
        slots.append(["text", key])
    elif isinstance(value, list):
        _slot_parts(item, skeleton, key, _TEXT_PARTS, slots, blocks, images=images)


def _slot_parts(
    item: Mapping[str, Any],
    skeleton: dict[str, Any] | None,
    key: str,
    text_parts: Mapping[str, str],
    slots: list[list[Any]],
    blocks: list[_Block],
    *,
    images: bool = False,
    thinking: bool = False,
) -> None:
    parts = item.get(key)
    if not isinstance(parts, list):
        return
    for number, part in enumerate(parts):
        if not isinstance(part, Mapping):
            continue
        kind = item_type(part)
        text_key = text_parts.get(kind) if kind else None
        if text_key is not None and isinstance(part.get(text_key), str):
            if skeleton is not None:
                del skeleton[key][number][text_key]
            text = part[text_key]
            blocks.append(
                {"type": "thinking", "thinking": text}
                if thinking
                else {"type": "text", "text": text}
            )
            slots.append(["thinking" if thinking else "text", key, number, text_key])
        elif images and kind == "input_image" and isinstance(part.get("image_url"), str):
            detail = part.get("detail")
            if skeleton is not None:
                del skeleton[key][number]["image_url"]
            blocks.append(_image(part["image_url"], detail if isinstance(detail, str) else None))
            slots.append(["image", key, number, "image_url"])


def _image(url: str, detail: str | None) -> ImageContent:
    match = _DATA_URL.fullmatch(url)
    if match is not None:
        try:
            return ImageContent(data=match[2], mime_type=match[1], detail=detail)
        except ValidationError:
            pass  # not valid base64: kept as the URL it was given as
    return ImageContent(url=url, detail=detail)


def _import_input_item(
    item: Mapping[str, Any],
    names: dict[str, str],
    text: str | None,
    copy: dict[str, Any] | None,
    kind: str | None,
) -> Message:
    skeleton = _skeleton(item, text is not None, copy)
    slots: list[list[Any]] = []
    blocks: list[_Block] = []
    if kind in (None, "message") and "role" in item:
        role = item["role"]
        if role not in ("user", "system", "developer"):
            raise _Invalid(f"role {role!r} is not supported (expected user, system or developer)")
        _slot_content(item, skeleton, slots, blocks, images=role == "user")
        extra = {RESPONSES_FORMAT: _hints([_record(skeleton, slots)], text)}
        model: type[UserMessage | SystemMessage] = UserMessage if role == "user" else SystemMessage
        return _built(model, copy is not None, content=blocks, extra=extra)
    if kind in _TOOL_OUTPUT_TYPES:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _Invalid(f"a {kind} item needs a 'call_id' string")
        if skeleton is not None:
            del skeleton["call_id"]
        _slot_content(item, skeleton, slots, blocks, images=True, key="output")
        return _built(
            ToolResultMessage,
            copy is not None,
            tool_call_id=call_id,
            tool_name=names.get(call_id, ""),
            content=blocks,
            extra={RESPONSES_FORMAT: _hints([_record(skeleton, slots)], text)},
        )
    extra = {} if text is None else {RESPONSES_FORMAT: {JSON_KEY: text}}
    data = _copied(dict(item)) if copy is None else copy
    return _built(
        CustomMessage, copy is not None, custom_type=RESPONSES_FORMAT, data=data, extra=extra
    )


def _hints(records: list[JsonValue], text: str | None) -> dict[str, JsonValue]:
    return {"items": records} if text is None else {"items": records, JSON_KEY: text}
