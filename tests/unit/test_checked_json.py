"""Values checked once from their JSON text: `json_copy_within_limits` and the SDK import.

The openai-agents session has the `json.dumps` text of every item it stores; a copy parsed
from that text is taken as checked, so what the import builds from it is not validated
again. These tests hold that such a copy is only ever what the full checks accept, and
that every item the full checks refuse is still refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sessionstore import FormatError, from_openai_responses
from sessionstore.formats._responses import (
    JSON_KEY,
    RECORD_DEPTH,
    RESPONSES_FORMAT,
    checked_copies,
    from_openai_responses_json,
)
from sessionstore.integrations._item_json import json_items
from sessionstore.models import MAX_JSON_DEPTH, MESSAGE_ADAPTER, Message
from sessionstore.models._limits import check_json, json_copy_within_limits


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(json_values)
def test_a_copy_is_equal_and_new(value: Any) -> None:
    copy = json_copy_within_limits(value, json.dumps(value))
    assert copy == value
    assert check_json(copy, "value") == value
    if isinstance(value, dict | list) and value:
        assert copy is not value


@pytest.mark.parametrize(
    "value",
    [
        {"text": "a\ud800b"},  # a lone surrogate (json.dumps escapes it)
        {"key\udc00": 1},
        {"n": float("nan")},
        [float("inf")],
        {"t": (1, 2)},  # json.dumps writes a tuple as a list
        {1: "a"},  # and a key that is not a string as one
        _nested(MAX_JSON_DEPTH),
    ],
)
def test_what_the_full_check_would_look_at_gets_no_copy(value: Any) -> None:
    assert json_copy_within_limits(value, json.dumps(value)) is None


def test_a_text_that_is_not_the_values_gets_no_copy() -> None:
    assert json_copy_within_limits({"a": 1}, '{"a":2}') is None
    assert json_copy_within_limits({"a": 1}, "not json") is None


def test_the_depth_a_copy_will_be_nested_in_counts() -> None:
    value = _nested(MAX_JSON_DEPTH - 5)
    assert json_copy_within_limits(value, json.dumps(value)) == value
    assert json_copy_within_limits(value, json.dumps(value), nested_in=5) is None


def _checked_import(items: list[Any]) -> list[Message]:
    return from_openai_responses_json(items, [json.dumps(item) for item in items])


items = st.lists(
    st.one_of(
        st.fixed_dictionaries({"role": st.sampled_from(["user", "system"]), "content": st.text()}),
        st.fixed_dictionaries(
            {
                "type": st.just("function_call"),
                "call_id": st.text(min_size=1, max_size=8),
                "name": st.text(min_size=1, max_size=8),
                "arguments": st.text(max_size=20),
            },
            optional={"meta": json_values},
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("function_call_output"),
                "call_id": st.text(min_size=1, max_size=8),
                "output": st.text(),
            },
            optional={"meta": json_values},
        ),
        st.fixed_dictionaries({"type": st.just("other_output"), "data": json_values}),
    ),
    max_size=6,
)


@given(items)
def test_a_checked_import_builds_what_validation_builds(given_items: list[Any]) -> None:
    for message in _checked_import(given_items):
        revalidated = MESSAGE_ADAPTER.validate_python(message.model_dump())
        assert revalidated == message
        assert json.dumps(revalidated.model_dump(), sort_keys=True) == json.dumps(
            message.model_dump(), sort_keys=True
        )


def _call(**extra: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", **extra}


@pytest.mark.parametrize(
    "item",
    [
        {"role": "user", "content": "a\ud800b"},
        _call(note="a\ud800b"),
        _call(n=float("nan")),
        {"type": "other_output", "n": float("inf")},
        _call(t=(1, 2)),
        {"type": "other_output", "d": {1: "a"}},
        _call(d=_nested(MAX_JSON_DEPTH - 3)),
        {"type": "other_output", "d": _nested(MAX_JSON_DEPTH + 1)},
    ],
)
def test_items_the_checks_refuse_are_refused_with_their_text(item: dict[str, Any]) -> None:
    with pytest.raises((FormatError, ValidationError)):
        from_openai_responses([item])
    with pytest.raises((FormatError, ValidationError)):
        _checked_import([item])


def test_items_near_the_depth_limit_are_kept_either_way() -> None:
    for item in (_call(d=_nested(MAX_JSON_DEPTH - 6)), {"type": "x", "d": _nested(62)}):
        (message,) = _checked_import([item])
        assert message.extra[RESPONSES_FORMAT][JSON_KEY] == "[" + json.dumps(item) + "]"  # type: ignore[index, call-overload]


# ── the openai-agents session's texts and copies of a batch ────────────────────


def _json_items(items: list[Any]) -> Any:
    """The openai-agents session's texts and copies of `items` (`SessionStoreSession`'s own)."""
    return json_items(items)


@given(st.lists(json_values, max_size=8))
def test_checked_copies_are_the_copies_item_by_item(values: list[Any]) -> None:
    texts = [json.dumps(value) for value in values]
    expected = [
        json_copy_within_limits(v, t, nested_in=RECORD_DEPTH)
        for v, t in zip(values, texts, strict=True)
    ]
    assert checked_copies(values, texts) == expected


def test_checked_copies_of_a_batch_with_one_refused_item_copy_the_others() -> None:
    values = [{"a": 1}, {"n": float("nan")}, {"t": (1, 2)}, _nested(MAX_JSON_DEPTH - 3), ["x"]]
    texts = [json.dumps(value) for value in values]
    assert checked_copies(values, texts) == [{"a": 1}, None, None, None, ["x"]]


@settings(deadline=None)  # a batch of large items: no deadline on a loaded machine
@given(st.lists(st.one_of(json_values, st.tuples(st.integers()), st.dates()), max_size=6))
def test_the_sessions_texts_decode_to_what_json_dumps_decodes_to(values: list[Any]) -> None:
    items = [{"type": "x", "v": value} for value in values]
    try:
        expected = [json.dumps(item, separators=(",", ":")) for item in items]
    except TypeError:
        with pytest.raises(TypeError, match=r"item \d+ cannot be stored"):
            _json_items(items)
        return
    raw, texts, copies = _json_items(items)
    assert raw == items
    assert [json.loads(text) for text in texts] == [json.loads(text) for text in expected]
    for item, text, copy in zip(items, texts, copies, strict=True):
        assert copy == json_copy_within_limits(item, text, nested_in=RECORD_DEPTH)
        if copy is None or not _holds_a_float(item):  # a float may be written otherwise
            assert text == json.dumps(item, separators=(",", ":"))


def _holds_a_float(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_a_float(inner) for inner in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_a_float(inner) for inner in value)
    return isinstance(value, float)


def test_the_first_item_json_dumps_refuses_is_named() -> None:
    import datetime

    # pydantic-core writes a date and bytes; json.dumps refuses them, as the SDK does.
    items = [{"a": 1}, {"d": datetime.date(2026, 1, 1)}, {"role": "user", "content": "é"}, {1, 2}]
    with pytest.raises(TypeError, match="item 1 cannot be stored"):
        _json_items(items)
    with pytest.raises(TypeError, match="item 2 cannot be stored"):
        _json_items([{"a": "é"}, {"a": "\x7f"}, {"b": b"x"}])
