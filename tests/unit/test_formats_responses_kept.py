"""The records of items whose JSON text is kept: slots only, and the older form with copies."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore import (
    FormatError,
    TextContent,
    ThinkingContent,
    from_openai_responses,
    redact_message,
    to_openai_responses,
)
from sessionstore.formats._responses import from_openai_responses_json
from sessionstore.formats._responses_dump import items_from_dump
from sessionstore.formats._responses_export import export_each
from sessionstore.models import MESSAGE_ADAPTER, Message
from sessionstore.models._limits import STORED
from sessionstore.models._messages import canonical_payload, message_payload
from tests.unit.test_formats_responses import EVERY_ITEM, items

# An assistant message as a version before slot-only records stored it (its canonical
# payload, verbatim): each record holds the item with its block values taken out, and
# the kept JSON text holds the items again.
OLD_PAYLOAD = (
    '{"content":[{"text":"I\'ll run the tests.","type":"text"},{"arguments":"{\\"command\\": '
    '\\"pytest -x\\"}","id":"call_00000000","name":"bash","type":"tool_call"}],"extra":'
    '{"openai_responses":{"items":[{"item":{"content":[{"annotations":[],"type":"output_text"}],'
    '"id":"msg_00000000","role":"assistant","status":"completed","type":"message"},"slots":'
    '[["text","content",0,"text"]]},{"item":{"id":"fc_00000000","status":"completed","type":'
    '"function_call"},"slots":[["call"]]}],"json":"[{\\"id\\":\\"msg_00000000\\",\\"type\\":'
    '\\"message\\",\\"role\\":\\"assistant\\",\\"status\\":\\"completed\\",\\"content\\":'
    '[{\\"type\\":\\"output_text\\",\\"text\\":\\"I\'ll run the tests.\\",'
    '\\"annotations\\":[]}]},{\\"type\\":\\"function_call\\",\\"id\\":\\"fc_00000000\\",'
    '\\"call_id\\":\\"call_00000000\\",\\"name\\":\\"bash\\",\\"arguments\\":\\"{\\\\\\"command'
    '\\\\\\": \\\\\\"pytest -x\\\\\\"}\\",\\"status\\":\\"completed\\"}]"}},"kind":"assistant",'
    '"model":null,"name":null,"stop_reason":null,"usage":null}'
)
OLD_ITEMS: list[dict[str, Any]] = [
    {
        "id": "msg_00000000",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "I'll run the tests.", "annotations": []}],
    },
    {
        "type": "function_call",
        "id": "fc_00000000",
        "call_id": "call_00000000",
        "name": "bash",
        "arguments": json.dumps({"command": "pytest -x"}),
        "status": "completed",
    },
]


def _kept(given: list[dict[str, Any]]) -> list[Message]:
    return from_openai_responses_json(given, [json.dumps(item) for item in given])


def _stored(message: Message) -> Message:
    return MESSAGE_ADAPTER.validate_json(message.model_dump_json(), context=STORED)


def _hints(message: Message) -> dict[str, Any]:
    hints: dict[str, Any] = message.extra.get("openai_responses", {})  # type: ignore[assignment]  # a dict here
    return hints


def _dump(message: Message) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(message_payload(message)))
    return loaded


def _changed(message: Message) -> Message:
    """A compacted copy: every text and thinking block says something else."""
    content = getattr(message, "content", None)
    if not isinstance(content, list):
        return message
    blocks = [
        TextContent(text=f"<{b.text}>")
        if isinstance(b, TextContent)
        else ThinkingContent(thinking=f"<{b.thinking}>")
        if isinstance(b, ThinkingContent)
        else b
        for b in content
    ]
    return message.model_copy(update={"content": blocks})


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_a_kept_item_keeps_only_its_slots() -> None:
    messages = _kept(EVERY_ITEM)
    records = [record for message in messages for record in _hints(message).get("items", [])]
    assert records
    assert all(set(record) == {"slots"} for record in records)
    # Smaller than the older form (the records with copies, and the same kept text).
    old = [
        p.model_copy(
            update={"extra": {"openai_responses": {**_hints(p), "json": _hints(k)["json"]}}}
        )
        if p.extra
        else k
        for p, k in zip(from_openai_responses(EVERY_ITEM), messages, strict=True)
    ]
    for new_form, old_form in zip(messages, old, strict=True):
        assert to_openai_responses([_stored(old_form)]) == to_openai_responses([new_form])
    new_bytes = sum(len(canonical_payload(message_payload(m))) for m in messages)
    old_bytes = sum(len(canonical_payload(message_payload(m))) for m in old)
    assert new_bytes < 0.9 * old_bytes
    assert to_openai_responses([_stored(m) for m in messages]) == EVERY_ITEM
    dumped = [items_from_dump(_dump(m)) for m in messages]
    assert [item for found in dumped for item in found or []] == EVERY_ITEM


def test_an_item_not_within_limits_keeps_its_copy_and_is_refused_as_before() -> None:
    # What the strict parse of its text does not prove within limits keeps a copy in its
    # record, so the model's checks see the item as they always did: a NaN (which
    # json.dumps writes) and a tuple (written as a list) are refused, naming the item.
    item = {"role": "user", "content": "x", "score": 1}
    (message,) = from_openai_responses_json([item], [json.dumps(item)])
    assert "item" not in _hints(message)["items"][0]
    for bad in ({**item, "score": math.nan}, {**item, "tags": ("a",)}):
        with pytest.raises(FormatError, match="item 1: invalid UserMessage"):
            from_openai_responses_json([item, bad], [json.dumps(item), json.dumps(bad)])


@given(st.lists(items, max_size=8))
def test_compacted_kept_messages_export_as_compacted_copies_did(
    given_items: list[dict[str, Any]],
) -> None:
    for kept, plain in zip(_kept(given_items), from_openai_responses(given_items), strict=True):
        changed_kept, changed_plain = _changed(_stored(kept)), _changed(_stored(plain))
        expected = to_openai_responses([changed_plain])
        assert _same(to_openai_responses([changed_kept]), expected)
        from_dump = items_from_dump(_dump(changed_kept))
        if from_dump is not None:
            assert _same(from_dump, expected)
        assert _same(to_openai_responses([_stored(kept)]), to_openai_responses([plain]))


def test_a_message_in_the_old_form_reads_back_the_same() -> None:
    old = MESSAGE_ADAPTER.validate_json(OLD_PAYLOAD, context=STORED)
    assert canonical_payload(message_payload(old)).decode() == OLD_PAYLOAD
    assert to_openai_responses([old]) == OLD_ITEMS
    assert items_from_dump(json.loads(OLD_PAYLOAD)) == OLD_ITEMS
    # A compacted copy of it: the new text in the recorded structure.
    (expected,) = from_openai_responses(OLD_ITEMS)
    assert _same(to_openai_responses([_changed(old)]), to_openai_responses([_changed(expected)]))
    assert _same(items_from_dump(_dump(_changed(old))), to_openai_responses([_changed(expected)]))
    # Written today, the same items are stored in the new form, and read back the same.
    (new,) = _kept(OLD_ITEMS)
    assert [set(r) for r in _hints(new)["items"]] == [{"slots"}, {"slots"}]
    assert to_openai_responses([_stored(new)]) == OLD_ITEMS


def test_a_redacted_kept_message_exports_in_its_structure() -> None:
    # The redacted copy's blocks differ from the kept text (redacted too): the items come
    # from the kept text, with the redacted values at their slots.
    given = [
        {"role": "user", "content": "my password=hunter2xyz ok", "id": "u1"},
        {"type": "function_call_output", "call_id": "c", "output": "Bearer abcdefghijklmnop123456"},
    ]
    for message in _kept(given):
        redacted = redact_message(message)
        assert redacted.content != message.content  # type: ignore[union-attr]
        (item,) = to_openai_responses([redacted])
        assert "hunter2xyz" not in json.dumps(item)
        assert "abcdefghijklmnop123456" not in json.dumps(item)
        assert set(item) == set(to_openai_responses([message])[0])


def _not_json(message: Message) -> Message:
    """A copy whose kept text is not JSON (written by hand): its records or canonical form."""
    hints = _hints(message)
    if not hints:
        return message
    return message.model_copy(
        update={"extra": {"openai_responses": {**hints, "json": hints.get("json", "") + "]"}}}
    )


def _mixed(given: list[dict[str, Any]], forms: list[str]) -> tuple[list[Message], list[Message]]:
    """The stored kept messages of `given`, and copies of them of each form: `k` kept,
    `p` plain (imported without a kept text), `c` compacted, `b` a kept text not JSON."""
    kept = [_stored(m) for m in _kept(given)]
    plain = [_stored(m) for m in from_openai_responses(given)]
    make = {"k": lambda i: kept[i], "p": lambda i: plain[i], "c": lambda i: _changed(kept[i])}
    mixed = [
        make.get(form, lambda i: _not_json(kept[i]))(index % len(kept))
        for index, form in enumerate(forms)
        if kept
    ]
    return kept, mixed


@given(st.lists(items, max_size=8), st.lists(st.sampled_from("kpcb"), max_size=8))
def test_export_each_exports_each_message_as_to_openai_responses_does(
    given_items: list[dict[str, Any]], forms: list[str]
) -> None:
    # Kept, plain, compacted and broken copies side by side: the one parse of all kept
    # texts gives what one export a message gives, in the same order.
    kept, mixed = _mixed(given_items, forms)
    expected = [to_openai_responses([message]) for message in mixed]
    assert export_each(mixed) == expected
    # One broken text sends every message through its own parse, with the same result.
    if kept:
        broken = [*mixed, _not_json(kept[0])]
        assert export_each(broken) == [*expected, to_openai_responses([broken[-1]])]
    assert export_each(kept) == [to_openai_responses([message]) for message in kept]


def test_export_each_names_the_message_it_cannot_export() -> None:
    (message,) = from_openai_responses([{"role": "user", "content": "hi"}])
    with pytest.raises(FormatError, match="message 1: "):
        export_each([message, "not a message"])  # type: ignore[list-item]  # what it refuses


@given(st.lists(items, max_size=8), st.lists(st.sampled_from("kpcb"), max_size=8))
def test_verbatim_messages_export_from_their_kept_texts_as_raw_reads_do(
    given_items: list[dict[str, Any]], forms: list[str]
) -> None:
    # A stored message flagged verbatim exports as it does unflagged: its kept text holds
    # it. Only the flag's trust differs: a compacted copy flagged verbatim (which a built
    # context never flags) comes back as the kept items, where the comparison of its
    # blocks exports it as a compacted copy.
    kept, mixed = _mixed(given_items, forms)
    flags = [form in "kp" for form in forms][: len(mixed)]
    assert export_each(mixed, flags) == export_each(mixed)
    assert export_each(kept, [True] * len(kept)) == export_each(kept)
    changed = [_changed(m) for m in kept]
    assert export_each(changed, [True] * len(kept)) == [
        json.loads(_hints(m)["json"]) if _hints(m) else to_openai_responses([m]) for m in changed
    ]


def test_a_verbatim_flag_does_not_trust_a_kept_text_that_is_not_its_items() -> None:
    # A kept text that is not one object an item record (written by hand) is compared as
    # before, and so exported from the records.
    (message,) = _kept([{"role": "user", "content": "hi", "id": "u1"}])
    hints = _hints(message)
    odd = message.model_copy(
        update={"extra": {"openai_responses": {**hints, "json": '[{"a": 1}, {"b": 2}]'}}}
    )
    assert export_each([odd], [True]) == export_each([odd]) == [to_openai_responses([odd])]
    assert export_each([odd], [True]) != [[{"a": 1}, {"b": 2}]]
