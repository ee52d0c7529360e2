"""`canonical_message` writes the bytes `canonical_payload(message_payload(...))` writes.

The append hashes and stores what `canonical_message` returns; every content hash ever
stored was computed from the dump, so the two must agree byte for byte, for every kind,
block, string and JSON value.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import field_serializer

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessionstore.models import canonical_message, canonical_payload, message_payload

# Control characters, quotes, backslashes, line separators and non-ASCII: every escape.
texts = st.text(
    st.characters(exclude_categories=["Cs"]) | st.sampled_from('"\\/\x00\x1f\x7f\u2028é'),
    max_size=40,
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
counts = st.integers(0, 2**40)
images = st.one_of(
    st.builds(
        ImageContent, data=st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode())
    ),
    st.builds(ImageContent, url=texts, mime_type=st.none() | texts, detail=st.none() | texts),
)
blocks = st.one_of(
    st.builds(TextContent, text=texts),
    st.builds(ThinkingContent, thinking=texts, signature=st.none() | texts, redacted=st.booleans()),
    st.builds(ToolCall, id=texts.filter(bool), name=texts.filter(bool), arguments=texts),
    images,
)
usages = st.builds(
    Usage,
    input_tokens=counts,
    output_tokens=counts,
    cache_read_tokens=counts,
    reasoning_tokens=st.sampled_from([0, 0, 7]),
)
messages = st.one_of(
    st.builds(
        UserMessage,
        content=st.lists(st.builds(TextContent, text=texts) | images, max_size=3),
        name=st.none() | texts,
    ),
    st.builds(
        AssistantMessage,
        content=st.lists(blocks, max_size=4),
        model=st.none() | texts,
        stop_reason=st.none() | texts,
        usage=st.none() | usages,
    ),
    st.builds(
        ToolResultMessage,
        tool_call_id=texts.filter(bool),
        tool_name=texts,
        content=texts,
        is_error=st.booleans(),
    ),
    st.builds(
        BashExecutionMessage,
        command=texts,
        output=texts,
        exit_code=st.none() | st.integers(-(2**70), 2**70),
    ),
    st.builds(CustomMessage, custom_type=texts.filter(bool), data=json_values),
    st.builds(BranchSummaryMessage, summary=texts, from_loop_id=st.none() | st.integers(0)),
    st.builds(CompactionSummaryMessage, summary=texts, tokens_before=st.none() | st.integers(0)),
    st.builds(SystemMessage, content=st.lists(st.builds(TextContent, text=texts), max_size=2)),
)


@settings(max_examples=400, derandomize=True)
@given(messages, st.none() | st.dictionaries(texts, json_values, max_size=3), st.none() | texts)
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
