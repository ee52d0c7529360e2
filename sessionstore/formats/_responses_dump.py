"""The items of a message imported from Responses-API items, read from its stored JSON.

`to_openai_responses` needs a validated message. An SDK session that reads thousands of
stored messages can skip that for the messages it imported: `items_from_dump` fills each
item's record from the blocks of the message's JSON dump, as `to_openai_responses` fills
it from the model's blocks, and says when a message needs the model instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessionstore.formats._responses import _TOOL_CALL_TYPES, RESPONSES_FORMAT, item_type
from sessionstore.formats._responses_export import kept_items

__all__ = ["items_from_dump"]

_DUMPED_KIND = {"text": "text", "image": "image", "thinking": "thinking", "tool_call": "call"}
"""A block's `type` in a message's JSON dump, and its slot kind."""


def items_from_dump(dump: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Return the items of a message imported here, from its JSON dump, without a model.

    What `to_openai_responses([message])` returns for such a message, computed straight
    from `message.model_dump(mode="json")` as the store keeps it, decoded with
    `json.loads`: an SDK session's full read, without validating each message into a
    model and copying its record back out. The dump's objects become the items (they
    are filled in place), so give a fresh decode, used for nothing else.

    Returns:
        The items; None when the message was not imported here, or its blocks no longer
        match its record (a compacted or redacted copy, a message written by hand):
        export the validated message with `to_openai_responses` then.
    """
    kind = dump.get("kind")
    if kind == "custom":
        data = dump.get("data")
        return (
            [data] if dump.get("custom_type") == RESPONSES_FORMAT and type(data) is dict else None
        )
    extra, content = dump.get("extra"), dump.get("content")
    hints = extra.get(RESPONSES_FORMAT) if type(extra) is dict else None
    records = hints.get("items") if type(hints) is dict else None
    if type(records) is not list or type(content) is not list:
        return None
    kept = kept_items(hints, records)  # type: ignore[arg-type]  # hints is a dict here
    items: list[dict[str, Any]] = []
    at, end = 0, len(content)
    for number, record in enumerate(records):
        item = record.get("item") if type(record) is dict else None
        whole = item is None and kept is not None
        if whole:
            item = kept[number]  # type: ignore[index]  # kept is not None
        slots = record.get("slots") if item is not None else None
        if type(item) is not dict or type(slots) is not list:
            return None
        for slot in slots:
            if at == end or type(slot) is not list or not slot:
                return None
            block = content[at]
            at += 1
            if type(block) is not dict or _DUMPED_KIND.get(str(block.get("type"))) != slot[0]:
                return None
            if not _fill_from_dump(item, slot, block):
                return None
        if kind == "tool_result":
            if whole:
                item["call_id"] = dump.get("tool_call_id")
            else:
                item = {"call_id": dump.get("tool_call_id"), **item}
        items.append(item)
    return items if at == end else None


def _fill_from_dump(item: dict[str, Any], slot: list[Any], block: dict[str, Any]) -> bool:
    """Put a dumped block's value at its slot's place in `item`, as `_fill` does."""
    kind = slot[0]
    if kind != "call" and len(slot) < 2:
        return False
    if kind == "text":
        value = block.get("text")
    elif kind == "call":
        arguments_key = _TOOL_CALL_TYPES.get(item_type(item) or "")
        if arguments_key is None:
            return False
        item["call_id"], item["name"] = block.get("id"), block.get("name")
        item[arguments_key] = block.get("arguments")
        return True
    elif kind == "thinking":
        value = block.get("thinking")
    elif block.get("url") is not None:
        value = block["url"]
    elif block.get("mime_type") is None:
        return False  # the model path raises the error this deserves
    else:
        value = f"data:{block['mime_type']};base64,{block.get('data')}"
    target: Any = item
    try:
        for step in slot[1:-1]:
            target = target[step]
        if type(target) is not dict:
            return False
        target[slot[-1]] = value
    except (KeyError, IndexError, TypeError):
        return False
    return True
