"""The JSON of the OpenAI Agents SDK's items, for `SessionStoreSession`: written and read back.

`json_items` writes the items a session is given as the JSON texts its messages keep (as
the SDK's own sessions store them) with their copies proven within limits; `decoded`
(`sessionstore.formats._json_texts`, shared with the export) reads many kept texts back in
one parse, and `item_lists` gathers their items.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any, cast

from pydantic_core import to_json

from sessionstore.formats._json_texts import decoded
from sessionstore.formats._responses import RECORD_DEPTH, checked_copies
from sessionstore.models._limits import json_copy_within_limits

__all__ = ["decoded", "item_lists", "json_items"]

_ITEM_JSON = json.JSONEncoder(separators=(",", ":"))
"""`json.dumps(item, separators=(",", ":"))`, without building an encoder for each item."""


def json_items(
    items: Sequence[Any],
) -> tuple[list[Mapping[str, Any]], list[str], list[Any]]:
    """Return the items as mappings, their JSON, and their copies proven within limits.

    The SDK's own sessions store `json.dumps(item)`, so that is the check, as in the SDK;
    the text is what the message keeps (see `from_openai_responses_json`), and the copies
    are `checked_copies` of the texts (None for an item they do not prove within limits).

    pydantic-core writes an item's JSON in a third of `json.dumps`' time. Its text is kept
    when it is ASCII without DEL (the same escapes as `json.dumps`; a float may be
    written in another, equal form) and its parse equals the item (`checked_copies`).
    Any other item (not JSON, or with a value pydantic-core writes and `json.dumps`
    refuses or writes otherwise: a tuple, a key that is not a string, a date, NaN) keeps
    the text of `json.dumps`, which refuses what the SDK's sessions refuse, as a
    `TypeError` naming the first such item.
    """
    texts = [_fast_json(item) for item in items]
    slow = [index for index, text in enumerate(texts) if not text]
    if slow:
        _dump(items, texts, slow)
    copies = checked_copies(items, texts)
    if None in copies:
        redo = [index for index, copy in enumerate(copies) if copy is None]
        _dump(items, texts, redo)
        for index in redo:
            copies[index] = json_copy_within_limits(
                items[index], texts[index], nested_in=RECORD_DEPTH
            )
    return [cast(Mapping[str, Any], item) for item in items], texts, copies


def _dump(items: Sequence[Any], texts: list[str], indices: Sequence[int]) -> None:
    """Write `json.dumps` of the items at `indices` into `texts`; refuse the first not JSON.

    The `TypeError` names the first item of all that `json.dumps` refuses, as when every
    item went through it.
    """
    encode = _ITEM_JSON.encode
    try:
        for index in indices:
            texts[index] = encode(items[index])
    except (TypeError, ValueError):
        for index, item in enumerate(items):
            try:
                encode(item)
            except (TypeError, ValueError) as error:
                raise TypeError(f"item {index} cannot be stored: {error}") from None
        raise  # pragma: no cover - the same encoder refused an item just now


def _fast_json(item: Any) -> str:
    """pydantic-core's JSON of `item` when it is ASCII without DEL, else "" (not JSON)."""
    try:
        data = to_json(item)
    except Exception:  # anything it cannot write: json.dumps then says why
        return ""
    if data.isascii() and b"\x7f" not in data:
        return data.decode("ascii")
    return ""


def item_lists(units: list[Any]) -> list[Any] | None:
    """The items of the units, in order, if every unit is a list of dicts (SDK items).

    None when one is not: a kept text written by hand may not be. By the set of types, so
    the loops over thousands of units and items run in C, and the items are gathered in
    the same pass that checks them.
    """
    if not set(map(type, units)) <= {list}:
        return None
    items = list(chain.from_iterable(units))
    return items if set(map(type, items)) <= {dict} else None
