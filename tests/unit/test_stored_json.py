"""The decoder of stored payloads builds what `MESSAGE_ADAPTER` builds, without Python checks."""

from __future__ import annotations

import gc
import json
import sys
import weakref
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings

from sessionstore import (
    AssistantMessage,
    CustomMessage,
    ImageContent,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessionstore.models import MESSAGE_ADAPTER, message_payload
from sessionstore.models._batch import _PROMOTE_AT, paused_gc
from sessionstore.models._limits import STORED
from sessionstore.models._stored_json import STORED_VALIDATOR, decode_stored
from tests.unit._every_message import messages


def _state(model: Any) -> Any:
    """Everything that makes a model what it is, nested models included."""
    if isinstance(model, list):
        return [_state(item) for item in model]
    if not hasattr(model, "__pydantic_fields_set__"):
        return model
    fields = {name: _state(value) for name, value in model.__dict__.items()}
    return (
        type(model),
        fields,
        model.__pydantic_fields_set__,
        model.__pydantic_extra__,
        model.__pydantic_private__,
    )


@settings(max_examples=300, derandomize=True)
@given(messages)
def test_a_stored_payload_decodes_to_the_adapters_message(message: Message) -> None:
    """The same classes, fields, fields set and nested models as `validate_json(STORED)`."""
    text = json.dumps(message_payload(message), ensure_ascii=False)
    expected = MESSAGE_ADAPTER.validate_json(text, context=STORED)
    decoded = STORED_VALIDATOR.validate_json(text)
    assert decoded == expected == message.model_copy(update={"client_id": None})
    assert _state(decoded) == _state(expected)
    assert decode_stored(text.encode()) == expected


def test_the_decoder_runs_no_python() -> None:
    """No validator written in Python runs: each would only return at once on a stored value."""
    payloads: list[Message] = [
        UserMessage(content=[TextContent(text="hi"), ImageContent(url="https://x")]),
        AssistantMessage(
            content=[TextContent(text="a"), ToolCall(id="c", name="bash", arguments={"x": 1})],
            usage=Usage(input_tokens=3),
            extra={"openai": {"id": "r1"}},
        ),
        ToolResultMessage(tool_call_id="c", tool_name="bash", content="ok"),
        CustomMessage(custom_type="note", data={"a": [1, 2.5]}),
    ]
    texts_ = [json.dumps(message_payload(m)) for m in payloads]
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            called.append(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        decoded = [STORED_VALIDATOR.validate_json(text) for text in texts_]
    finally:
        sys.setprofile(None)
    assert [c for c in called if c != "test_the_decoder_runs_no_python.<locals>.<listcomp>"] == []
    assert decoded == payloads
    # The adapter runs them (so the test above can fail).
    sys.setprofile(profile)
    try:
        MESSAGE_ADAPTER.validate_json(texts_[1], context=STORED)
    finally:
        sys.setprofile(None)
    assert any("is_stored" in name for name in called)


def test_a_text_the_store_never_writes_still_decodes_as_the_adapter_decodes_it() -> None:
    """A content given as a string is refused by the decoder; `decode_stored` falls back."""
    text = '{"kind": "user", "content": "hi"}'
    assert decode_stored(text) == MESSAGE_ADAPTER.validate_json(text, context=STORED)
    assert decode_stored(text) == UserMessage(content="hi")


def test_new_input_keeps_every_check() -> None:
    """Only the stored decoder leaves the checks out: validating input still runs them."""
    text = json.dumps({"kind": "tool_result", "tool_call_id": "x" * 300, "content": []})
    assert decode_stored(text).tool_call_id == "x" * 300  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="tool_call_id"):
        MESSAGE_ADAPTER.validate_json(text)


def _generation(marker: object) -> int | None:
    for generation in range(3):
        if any(item is marker for item in gc.get_objects(generation)):
            return generation
    return None


def test_a_big_batch_is_promoted_to_the_oldest_generation_unvisited() -> None:
    gc.collect()
    with paused_gc():
        batch = [[i] for i in range(_PROMOTE_AT + 10)]
    assert gc.isenabled()
    assert _generation(batch[-1]) == 2
    with paused_gc():
        small = [[i] for i in range(10)]
    assert _generation(small[-1]) in (0, 1)


def test_objects_the_application_froze_stay_frozen() -> None:
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            batch = [[i] for i in range(_PROMOTE_AT + 10)]
        assert gc.get_freeze_count() == frozen
        assert _generation(batch[-1]) in (0, 1)
    finally:
        gc.unfreeze()


class _Cycle:
    def __init__(self) -> None:
        self.me = self
        self.payload = [str(i) for i in range(50)]  # blocks the heap grows by


def test_cyclic_garbage_moved_with_big_batches_is_freed() -> None:
    """Promoted objects do not count towards the interpreter's full collection: cycles
    that became garbage before big batches must still be freed once they pile up (else
    a long-lived process that reads big histories holds every cycle it ever made)."""
    gc.collect()
    first = _Cycle()
    gone = weakref.ref(first)
    del first  # garbage now, young: promoted with the next batch
    size = 2 * _PROMOTE_AT  # well over: the objects freed meanwhile count against it
    batch: list[list[int]] = []
    for _ in range(200):
        for _ in range(100):
            # The application's cyclic garbage between two reads: too little for the
            # young generation's collection to run before the batch promotes it.
            _Cycle()
        with paused_gc():
            made = [[i] for i in range(size)]
        batch = made  # the batch before is freed now, as a read's caller drops the last
        if gone() is None:
            break
    assert gone() is None
    assert len(batch) == size
