"""Message validation and lossless JSON round trips."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sessionstore import (
    AssistantMessage,
    CustomMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    TurnRange,
    UserMessage,
)
from sessionstore.models import StoredMessage, content_hash, message_from_json, message_payload
from sessionstore.models._batch import decoded_records


def test_string_content_becomes_one_text_block() -> None:
    assert UserMessage(content="hi").content == [TextContent(text="hi")]
    assert SystemMessage(content="s").text == "s"


def test_tool_call_arguments_accept_a_dict_and_keep_text_verbatim() -> None:
    call = ToolCall(id="c", name="bash", arguments={"command": "ls"})
    assert call.parsed_arguments() == {"command": "ls"}
    odd = ToolCall(id="c", name="bash", arguments='{"a":1,   "b" : 2}')
    assert odd.arguments == '{"a":1,   "b" : 2}'
    broken = ToolCall(id="c", name="bash", arguments="{oops")
    with pytest.raises(ValueError, match="Expecting"):
        broken.parsed_arguments()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"kind": "tool_result", "tool_call_id": ""}, "tool_call_id"),
        ({"kind": "assistant", "content": [{"type": "tool_call", "id": "x", "name": ""}]}, "name"),
        ({"kind": "user", "content": [{"type": "video"}]}, "content"),
        ({"kind": "user", "content": "x", "colour": "red"}, "colour"),
        ({"kind": "custom", "data": 1}, "custom_type"),
        ({"kind": "nope"}, "kind"),
    ],
)
def test_validation_errors_name_the_field(payload: dict[str, object], field: str) -> None:
    from sessionstore.models import MESSAGE_ADAPTER

    with pytest.raises(ValidationError) as info:
        MESSAGE_ADAPTER.validate_python(payload)
    assert field in str(info.value)


def test_image_needs_exactly_one_valid_source() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        ImageContent()
    with pytest.raises(ValidationError, match="exactly one"):
        ImageContent(data="aGk=", url="https://x")
    with pytest.raises(ValidationError, match="base64"):
        ImageContent(data="not base64!")
    assert ImageContent(data="aGVsbG8=").decoded_size() == 5
    assert ImageContent(data="aGk=").decoded_size() == 2
    assert ImageContent(url="https://x").decoded_size() == 0


def test_messages_are_immutable() -> None:
    message = UserMessage(content="x")
    with pytest.raises(ValidationError, match="frozen"):
        message.name = "y"


def test_turn_range_is_ordered_and_inclusive() -> None:
    turns = TurnRange(start_turn=2, end_turn=4)
    assert len(turns) == 3
    assert 2 in turns
    assert 4 in turns
    assert 5 not in turns
    with pytest.raises(ValidationError, match="before start_turn"):
        TurnRange(start_turn=3, end_turn=1)


def test_hash_ignores_client_id_but_not_content() -> None:
    a = message_payload(UserMessage(content="x", client_id="1"))
    b = message_payload(UserMessage(content="x", client_id="2"))
    c = message_payload(UserMessage(content="y"))
    assert content_hash(a) == content_hash(b) != content_hash(c)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
texts = st.text(max_size=200)
messages = st.one_of(
    st.builds(UserMessage, content=st.lists(st.builds(TextContent, text=texts), max_size=3)),
    st.builds(
        AssistantMessage,
        content=st.lists(
            st.one_of(
                st.builds(TextContent, text=texts),
                st.builds(
                    ToolCall, id=st.text(min_size=1), name=st.text(min_size=1), arguments=texts
                ),
            ),
            max_size=4,
        ),
    ),
    st.builds(
        ToolResultMessage,
        tool_call_id=st.text(min_size=1),
        tool_name=texts,
        content=texts,
        is_error=st.booleans(),
    ),
    st.builds(CustomMessage, custom_type=st.text(min_size=1), data=json_values),
)


@settings(max_examples=200, derandomize=True)
@given(messages)
def test_every_message_survives_json(message: Message) -> None:
    restored = message_from_json(message.model_dump_json())
    assert restored == message


@settings(max_examples=200, derandomize=True)
@given(messages, st.dictionaries(st.text(), json_values, max_size=3))
def test_the_stored_payload_is_the_models_json_dump(
    message: Message, extra: dict[str, object]
) -> None:
    """`message_payload` dumps `extra` apart (faster): the same dict, keys in the same order."""
    message = message.model_copy(update={"extra": extra})
    payload = message_payload(message)
    dumped = message.model_dump(mode="json", exclude={"client_id"})
    assert payload == dumped
    assert list(payload) == list(dumped)
    assert json.dumps(payload) == json.dumps(dumped)


@settings(max_examples=200, derandomize=True)
@given(st.lists(messages, max_size=4), st.none() | st.text(min_size=1, max_size=20))
def test_decoded_records_match_lazily_decoded_ones(
    batch: list[Message], client_id: str | None
) -> None:
    """The batch decode of a read builds the records the lazy path builds, field for field."""
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    rows = [
        (i + 1, 7, i, i, 3, "h" * 64, client_id, at, json.dumps(message_payload(message)))
        for i, message in enumerate(batch)
    ]
    decoded = decoded_records(rows, "s")
    lazy = [
        StoredMessage._from_columns(mid, "s", loop, pos, turn, tokens, digest, when, text, cid)
        for mid, loop, pos, turn, tokens, digest, cid, when, text in rows
    ]
    assert decoded == lazy
    for record, other, message in zip(decoded, lazy, batch, strict=True):
        assert record.message == message.model_copy(update={"client_id": client_id})
        assert record.model_dump() == other.model_dump()
        assert record.model_fields_set == set(StoredMessage.model_fields)
    texts = [(f"{at:%Y-%m-%d %H:%M:%S.%f}", row[-1]) for row in rows]
    parsed = decoded_records(
        [(*row[:7], when, text) for row, (when, text) in zip(rows, texts, strict=True)],
        "s",
        lambda value: datetime.fromisoformat(value).replace(tzinfo=UTC),
    )
    assert parsed == decoded
