"""The window of SDK items `get_items(limit)` returns: whole turns, calls with their outputs.

Pure functions over Responses-API items and our messages (no SDK import): which message
answers a call (`is_output`), and the newest `limit` items that start at a turn and hold
no call without its output, nor an output without its call (`window`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sessionstore.formats._responses import CALL_OUTPUT_TYPES, RESPONSES_FORMAT, item_type
from sessionstore.formats._responses_export import export_each
from sessionstore.models import CustomMessage, Message, ToolResultMessage

__all__ = ["OUTPUT_TYPES", "context_window", "dump_is_output", "is_output", "window"]

OUTPUT_TYPES = frozenset(CALL_OUTPUT_TYPES.values()) | {"mcp_approval_response"}
"""The item types that answer a call."""


def dump_is_output(dump: Mapping[str, Any]) -> bool:
    """`is_output` of a message's JSON dump."""
    kind = dump.get("kind")
    if kind == "tool_result":
        return True
    data = dump.get("data")
    return (
        kind == "custom"
        and dump.get("custom_type") == RESPONSES_FORMAT
        and type(data) is dict
        and item_type(data) in OUTPUT_TYPES
    )


def is_output(message: Message) -> bool:
    """Whether a message answers a call: a tool result, or a kept Responses output item."""
    if isinstance(message, ToolResultMessage):
        return True
    return (
        isinstance(message, CustomMessage)
        and message.custom_type == RESPONSES_FORMAT
        and isinstance(message.data, dict)
        and item_type(message.data) in OUTPUT_TYPES
    )


def window(
    starts: Sequence[bool], units: Sequence[list[dict[str, Any]]], limit: int | None
) -> list[dict[str, Any]]:
    """Return the newest `limit` items, starting at a turn, without an unpaired call or output.

    `starts[i]`: message i may start a turn (it is not a call's output); `units[i]`: its items.
    """
    flat = [
        (position == 0 and start, item)
        for start, unit in zip(starts, units, strict=True)
        for position, item in enumerate(unit)
    ]
    if limit is not None:
        if limit <= 0:
            return []
        start = max(0, len(flat) - limit)
        while start < len(flat) and not flat[start][0]:
            start += 1
        flat = flat[start:]
    return _paired([item for _, item in flat])


def context_window(
    messages: Sequence[Message], verbatim: Sequence[bool], limit: int | None
) -> list[dict[str, Any]]:
    """Return `window` of a built context's messages exported as items (`export_each`).

    With `limit`, only the newest messages that give at least `limit` items are exported
    (a run of `limit` messages, then twice as many before it, ...): the window of them is
    the window of all, since a window only moves forward from the `limit`-th newest item.
    A context of thousands of messages read for its newest fifty exports about fifty.
    """
    if limit is None or limit <= 0:
        return window([not is_output(m) for m in messages], export_each(messages, verbatim), limit)
    begin = len(messages)
    units: list[list[dict[str, Any]]] = []
    count = 0
    run = limit
    while begin > 0 and count < limit:
        first = max(0, begin - run)
        part = export_each(messages[first:begin], verbatim[first:begin], first=first)
        units[:0] = part
        count += sum(map(len, part))
        begin, run = first, run * 2
    return window([not is_output(m) for m in messages[begin:]], units, limit)


def _paired(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leave out outputs whose call is absent and calls whose output is absent.

    A reasoning item right before a call that is left out goes with it: the Responses
    API refuses a reasoning item without the item it preceded.
    """
    kinds: list[Any] = []
    calls: set[tuple[str, str]] = set()
    answered: set[tuple[str, str]] = set()
    for item in items:
        kind = item.get("type")
        # Only a string type can be a call's or an output's (`item_type` reads others as "").
        if type(kind) is str and kind in _PAIRED_TYPES:
            pair = (kind, str(item.get("call_id")))
            (calls if kind in CALL_OUTPUT_TYPES else answered).add(pair)
        kinds.append(kind)
    if not calls and not answered:
        return items
    keep = [True] * len(items)
    for index, kind in enumerate(kinds):
        if type(kind) is not str or kind not in _PAIRED_TYPES:
            continue
        call_id = str(items[index].get("call_id"))
        if kind in CALL_OUTPUT_TYPES:
            if (CALL_OUTPUT_TYPES[kind], call_id) not in answered:
                keep[index] = False
                if index and kinds[index - 1] == "reasoning":
                    keep[index - 1] = False
        elif not any((call, call_id) in calls for call in _CALLS_OF.get(kind, ())):
            keep[index] = False
    return [item for item, kept in zip(items, keep, strict=True) if kept]


_PAIRED_TYPES = frozenset(CALL_OUTPUT_TYPES) | OUTPUT_TYPES
"""The item types `_paired` matches by `call_id`: calls and the outputs that answer them."""
_CALLS_OF: dict[str, tuple[str, ...]] = {
    output: tuple(call for call, out in CALL_OUTPUT_TYPES.items() if out == output)
    for output in OUTPUT_TYPES
}
"""For each output type, the call types it answers (none for `mcp_approval_response`)."""
