"""`canonical_message` writes the bytes `canonical_payload(message_payload(...))` writes.

The append hashes and stores what `canonical_message` returns; every content hash ever
stored was computed from the dump, so the two must agree byte for byte, for every kind,
block, string and JSON value.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import field_serializer

from sessionstore import (
    AssistantMessage,
    Message,
    TextContent,
    UserMessage,
)
from sessionstore.models import canonical_message, canonical_payload, message_payload
from sessionstore.models._messages import _in_order
from tests.unit._every_message import extras, messages, texts


@settings(max_examples=400, derandomize=True)
@given(messages, st.none() | extras, st.none() | texts)
def test_the_canonical_bytes_are_the_dumps(
    message: Message, extra: dict[str, Any] | None, client_id: str | None
) -> None:
    update: dict[str, Any] = {"client_id": client_id or None}
    if extra is not None:
        update["extra"] = extra
    message = message.model_copy(update=update)
    assert canonical_message(message) == canonical_payload(message_payload(message))


def test_json_values_in_key_order_and_out_of_it() -> None:
    """An importer's records (keys in order, no float) and the rest give the dump's bytes."""
    records = {"fmt": {"items": [{"slots": [["text", 0]]}], "json": '[{"a":"\\n\u00e9"}]'}}
    for extra in (records, {"b": 1, "a": 2}, {"a": 1.5}, {"a": [True, None, 2**70]}):
        message = UserMessage(content="x\ty", extra=extra)
        assert canonical_message(message) == canonical_payload(message_payload(message))


class _Shouting(UserMessage):
    """A subclass whose dump differs from its fields: it must take the dump."""

    @field_serializer("name")
    def _upper(self, name: str | None) -> str | None:
        return None if name is None else name.upper()


def test_a_subclass_or_a_value_only_the_dump_converts_takes_the_dump() -> None:
    shouting = _Shouting(content="hi", name="ann")
    assert canonical_message(shouting) == canonical_payload(message_payload(shouting))
    assert b'"ANN"' in canonical_message(shouting)
    # Unvalidated: a tuple and a set in `extra` (the dump turns both into lists).
    odd_extra: dict[str, Any] = {"a": (1, 2), "b": {3}}
    odd = UserMessage.model_construct(content=[TextContent(text="x")], extra=odd_extra, kind="user")
    assert canonical_message(odd) == canonical_payload(message_payload(odd))


def test_unvalidated_content_of_another_shape_gives_the_dumps_bytes() -> None:
    """Unvalidated content that is no list of blocks (None): the dump's bytes."""
    for odd in (
        UserMessage.model_construct(content=None, kind="user"),  # type: ignore[arg-type]  # unvalidated
        AssistantMessage.model_construct(content=None, kind="assistant"),  # type: ignore[arg-type]  # unvalidated
    ):
        assert canonical_message(odd) == canonical_payload(message_payload(odd))


def test_what_the_dump_refuses_is_refused_the_same_way() -> None:
    nan = UserMessage.model_construct(
        content=[TextContent(text="x")], extra={"a": float("nan")}, kind="user"
    )
    with pytest.raises(ValueError, match="Out of range float"):
        canonical_payload(message_payload(nan))
    with pytest.raises(ValueError, match="Out of range float"):
        canonical_message(nan)
    surrogate = UserMessage.model_construct(
        content=[TextContent.model_construct(text="\ud800", type="text")], kind="user"
    )
    with pytest.raises(UnicodeEncodeError):
        canonical_payload(message_payload(surrogate))
    with pytest.raises(UnicodeEncodeError):
        canonical_message(surrogate)


def _in_order_by_definition(value: object) -> bool:
    """`_in_order` as its docstring defines it, recursively: JSON without floats, keys sorted."""
    if type(value) in (str, int, bool) or value is None:
        return True
    if type(value) is list:
        return all(_in_order_by_definition(item) for item in value)
    if type(value) is dict:
        keys = list(value)
        return (
            all(type(key) is str for key in keys)
            and keys == sorted(keys)
            and all(_in_order_by_definition(item) for item in value.values())
        )
    return False


_keys = st.sampled_from(["a", "b", "c", "é"]) | st.integers(0, 2) | st.none()
_json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(_keys, inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3).map(
            lambda fields: dict(sorted(fields.items()))
        )
    ),
    max_leaves=12,
)


@settings(max_examples=400, derandomize=True)
@given(_json_like)
def test_in_order_is_its_definition(value: object) -> None:
    """The stack walk answers as the recursive definition (sorted dicts drawn often)."""
    assert _in_order(value) is _in_order_by_definition(value)


def test_a_value_nested_past_the_recursion_limit_takes_the_dump() -> None:
    """The walk has no depth limit; what pydantic-core refuses to write goes to the dump."""
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    message = UserMessage.model_construct(
        content=[TextContent(text="x")], extra={"a": deep}, kind="user"
    )
    assert _in_order(message.extra)
    with pytest.raises(ValueError, match="depth") as dumped:
        canonical_payload(message_payload(message))
    with pytest.raises(ValueError, match="depth") as written:
        canonical_message(message)
    assert str(written.value) == str(dumped.value)


def test_a_value_that_holds_itself_is_refused_as_the_dump_refuses_it() -> None:
    """The walk gives up on a cycle (it would never end); the dump's error is raised."""
    message = UserMessage(content="x")
    message.extra["self"] = message.extra  # a validated model's dict, changed in place
    with pytest.raises(ValueError, match="Circular reference") as dumped:
        canonical_payload(message_payload(message))
    with pytest.raises(ValueError, match="Circular reference") as written:
        canonical_message(message)
    assert str(written.value) == str(dumped.value)


def test_a_value_past_the_walks_budget_gives_the_same_bytes() -> None:
    """Past `_IN_ORDER_MAX_CONTAINERS` dicts and lists the canonical encoder writes the bytes."""
    many = {"a": [[index, "x"] for index in range(60_000)]}
    assert not _in_order(many)
    message = UserMessage(content="x", extra=many)
    assert canonical_message(message) == canonical_payload(message_payload(message))
