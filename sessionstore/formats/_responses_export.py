"""Export of messages as OpenAI Responses-API input items (`to_openai_responses`).

The other half of `sessionstore.formats._responses`, whose docstring says how the
mapping works: a message imported from items comes back as those items, filled from its
blocks (from its kept JSON text when every block still matches it, `_kept`, or from its
records, `_restore`); any other message is exported canonically
(`_responses_canonical`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeGuard

from sessionstore.errors import FormatError
from sessionstore.formats._json_texts import decoded
from sessionstore.formats._messages import check_is_message
from sessionstore.formats._responses import (
    _KIND_OF,
    _TOOL_CALL_TYPES,
    JSON_KEY,
    RESPONSES_FORMAT,
    _copied,
    item_type,
)
from sessionstore.formats._responses_canonical import _canonical, _image_url, _Invalid
from sessionstore.models import (
    CustomMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)
from sessionstore.models._batch import paused_gc

__all__ = ["export_each", "kept_items", "to_openai_responses"]


def to_openai_responses(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Export messages as Responses-API input items.

    Messages imported with `from_openai_responses` come back exactly as they were given;
    see the module docstring for the canonical export of the others.

    Raises:
        FormatError: an object that is not one of our messages, or an inline image
            without a `mime_type`.
    """
    result: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        check_is_message(index, message)
        try:
            result.extend(_export_message(message))
        except _Invalid as exc:
            raise FormatError(f"message {index}: {exc}") from None
    return result


@paused_gc()  # every item survives the call (see paused_gc)
def export_each(
    messages: Sequence[Message], verbatim: Sequence[bool] | None = None, *, first: int = 0
) -> list[list[dict[str, Any]]]:
    """Export each message as its own list of items: `to_openai_responses([m])` for each.

    The kept JSON texts of all the messages are decoded in one parse (`decoded`), not one
    `json.loads` a message: a context of thousands of messages imported from items is
    exported on every read of it. When that parse fails (a kept text that is not JSON),
    each message is exported on its own, as `to_openai_responses` does.

    `verbatim[i]` True says that message `i` is a stored raw message as it was stored (a
    built context's `raw` item that is not `redacted`): its kept text is then
    taken as its items when it is a list of as many objects as the message records,
    without comparing each slot's value with its block, as a raw read of the session
    takes it (`SessionStoreSession` in raw mode). The comparison is what tells a
    compacted, shortened or redacted copy, which keeps the `extra` of the message it
    copies, from the message itself; a stored message is never such a copy.

    `first` is the index of `messages[0]` in the list it was taken from: an error names
    the message by its index there.

    Raises:
        FormatError: as `to_openai_responses`.
    """
    kept: list[tuple[str, list[Any], list[Any]] | None] = []
    for index, message in enumerate(messages, start=first):
        check_is_message(index, message)
        kept.append(None if _is_item_message(message) else _kept_parts(message))
    texts = [parts[0] for parts in kept if parts is not None]
    try:
        parsed: Iterator[Any] | None = iter(decoded(texts))
    except ValueError:  # a kept text is not JSON: each is decoded on its own
        parsed = None
    result: list[list[dict[str, Any]]] = []
    for index, (message, parts) in enumerate(zip(messages, kept, strict=True), start=first):
        try:
            if parts is None or parsed is None:
                result.append(_export_message(message))
                continue
            items = next(parsed)
            restored = (
                items
                if verbatim is not None and verbatim[index - first] and _whole(items, parts[1])
                else _matched(message, items, parts[1], parts[2])
            )
            result.append(_unkept(message) if restored is None else restored)
        except _Invalid as exc:
            raise FormatError(f"message {index}: {exc}") from None
    return result


def _whole(items: Any, records: list[Any]) -> bool:
    """Whether a decoded kept text is a list of one object for each of the item records."""
    return type(items) is list and len(items) == len(records) and set(map(type, items)) <= {dict}


def _is_item_message(message: Message) -> TypeGuard[CustomMessage]:
    """Whether the message holds one Responses item as it is (exported as a copy of it)."""
    return (
        isinstance(message, CustomMessage)
        and message.custom_type == RESPONSES_FORMAT
        and isinstance(message.data, dict)
    )


def _export_message(message: Message) -> list[dict[str, Any]]:
    if _is_item_message(message):
        return [_copied(message.data)]
    restored = _kept(message)
    return _unkept(message) if restored is None else restored


def _unkept(message: Message) -> list[dict[str, Any]]:
    """Export a message whose kept JSON text does not hold it: its records, else canonically."""
    restored = _restore(message)
    return _canonical(message) if restored is None else restored


def _kept_parts(message: Message) -> tuple[str, list[Any], list[Any]] | None:
    """Return the message's kept JSON text, its item records and its content, if it has them."""
    hints = message.extra.get(RESPONSES_FORMAT)
    if type(hints) is not dict:
        return None
    text = hints.get(JSON_KEY)
    records = hints.get("items")
    content = getattr(message, "content", None)
    if type(text) is not str or type(records) is not list or type(content) is not list:
        return None
    return text, records, content


def _kept(message: Message) -> list[dict[str, Any]] | None:
    """Return the items kept as JSON (`from_openai_responses_json`), if the blocks still say so.

    What `_restore` returns, without copying the records: the kept text is decoded (new
    objects) and each slot's value in it is compared with its block. A compacted or
    redacted copy (other blocks, the same `extra`) fails the comparison: None.
    """
    parts = _kept_parts(message)
    if parts is None:
        return None
    try:
        items = json.loads(parts[0])
    except ValueError:
        return None
    return _matched(message, items, parts[1], parts[2])


def _matched(
    message: Message, items: Any, records: list[Any], content: list[Any]
) -> list[dict[str, Any]] | None:
    """Return the decoded kept `items` if each slot's value in them is still its block's."""
    if type(items) is not list or len(items) != len(records):
        return None
    at = 0
    for item, record in zip(items, records, strict=True):
        slots = record.get("slots") if type(record) is dict else None
        if type(item) is not dict or type(slots) is not list:
            return None
        for slot in slots:
            if at == len(content) or type(slot) is not list or not slot:
                return None
            block = content[at]
            at += 1
            if _KIND_OF.get(type(block)) != slot[0] or not _holds(item, slot[1:], block):
                return None
        if isinstance(message, ToolResultMessage) and item.get("call_id") != message.tool_call_id:
            return None
    return items if at == len(content) else None


def _holds(item: dict[str, Any], path: list[Any], block: object) -> bool:
    """Whether `item` holds `block`'s value where `_fill` would put it."""
    if isinstance(block, ToolCall):
        arguments_key = _TOOL_CALL_TYPES.get(item_type(item) or "")
        return (
            arguments_key is not None
            and item.get("call_id") == block.id
            and item.get("name") == block.name
            and item.get(arguments_key) == block.arguments
        )
    if isinstance(block, TextContent):
        value: Any = block.text
    elif isinstance(block, ThinkingContent):
        value = block.thinking
    elif isinstance(block, ImageContent):
        if block.url is None and block.mime_type is None:
            return False
        value = _image_url(block)
    else:  # pragma: no cover - _KIND_OF already matched
        return False
    if not path:
        return False
    parent: Any = item
    try:
        for step in path[:-1]:
            parent = parent[step]
    except (KeyError, IndexError, TypeError):
        return False
    return type(parent) is dict and parent.get(path[-1]) == value


def _restore(message: Message) -> list[dict[str, Any]] | None:
    """Return the recorded items filled from the blocks, or None when they do not match."""
    hints = message.extra.get(RESPONSES_FORMAT)
    content = getattr(message, "content", None)
    if not isinstance(hints, dict) or not isinstance(content, list):
        return None
    records = hints.get("items")
    if not isinstance(records, list):
        return None
    kept = kept_items(hints, records)
    blocks = list(content)
    items: list[dict[str, Any]] = []
    at = 0
    for number, record in enumerate(records):
        if not isinstance(record, dict):
            return None
        item, slots = record.get("item"), record.get("slots")
        whole = item is None and kept is not None
        if whole:
            item = kept[number]  # type: ignore[index]  # kept is not None
        if not isinstance(item, dict) or not isinstance(slots, list):
            return None
        item = item if whole else _copied(item)
        for slot in slots:
            if at >= len(blocks) or not isinstance(slot, list) or not slot:
                return None
            block = blocks[at]
            at += 1
            if _KIND_OF.get(type(block)) != slot[0] or not _fill(item, slot[1:], block):
                return None
        if isinstance(message, ToolResultMessage):
            if whole:
                item["call_id"] = message.tool_call_id
            else:
                item = {"call_id": message.tool_call_id, **item}
        items.append(item)
    return items if at == len(blocks) else None


def kept_items(hints: Mapping[str, Any], records: list[Any]) -> list[Any] | None:
    """The items of a message's kept JSON text, when some record keeps only its slots.

    A record of an item whose JSON text is kept holds no copy of the item (the text holds
    it); records written before that, and records without a kept text, each hold one.
    None when every record holds its item, or the text is not a list of one item a record.
    """
    if all(type(record) is not dict or "item" in record for record in records):
        return None
    text = hints.get(JSON_KEY)
    if type(text) is not str:
        return None
    try:
        items = json.loads(text)
    except ValueError:
        return None
    return items if type(items) is list and len(items) == len(records) else None


def _fill(item: dict[str, Any], path: list[Any], block: object) -> bool:
    if isinstance(block, ToolCall):
        arguments_key = _TOOL_CALL_TYPES.get(item_type(item) or "")
        if arguments_key is None:
            return False
        item.update(call_id=block.id, name=block.name)
        item[arguments_key] = block.arguments
        return True
    if isinstance(block, TextContent):
        value: Any = block.text
    elif isinstance(block, ThinkingContent):
        value = block.thinking
    elif isinstance(block, ImageContent):
        value = _image_url(block)
    else:  # pragma: no cover - _KIND_OF already matched
        return False
    target: Any = item
    try:
        for step in path[:-1]:
            target = target[step]
        if not isinstance(target, dict):
            return False
        target[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        return False
    return True
