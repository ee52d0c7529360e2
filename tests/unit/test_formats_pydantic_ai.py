"""pydantic-ai message histories in and out, compared with pydantic-ai's own JSON dumps."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from sessionstore import (
    AssistantMessage,
    CompactionSummaryMessage,
    FormatError,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.formats.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from sessionstore.models import MESSAGE_ADAPTER, Message


def dump(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    dumped: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    return dumped


def own_round_trip(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """What pydantic-ai itself gives back after persisting as JSON and loading."""
    return dump(ModelMessagesTypeAdapter.validate_python(dump(messages)))


def history() -> list[ModelMessage]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RetryPromptPart is deprecated, and still in old histories
        retry_for_tool = RetryPromptPart(content="bad args", tool_name="none", tool_call_id="t3")
        retry_feedback = RetryPromptPart(
            content=[{"type": "x", "loc": ("a",), "msg": "wrong", "input": 1}]
        )
    return [
        ModelRequest(
            parts=[SystemPromptPart("Be brief."), UserPromptPart("add 1 and 2")],
            run_id="run-1",
            instructions="Add.",
            metadata={"trace": "abc"},
        ),
        ModelResponse(
            parts=[
                ThinkingPart("hmm", signature="sig", id="th", provider_name="anthropic"),
                TextPart("adding", id="x"),
                ToolCallPart("add", {"a": 1, "b": [2.5, None]}, tool_call_id="t1"),
                ToolCallPart("sub", '{"a":', tool_call_id="t2"),
                ToolCallPart("none", None, tool_call_id="t3"),
                NativeToolCallPart("web_search", {"q": "x"}, tool_call_id="w1"),
                NativeToolReturnPart("web_search", {"hits": []}, tool_call_id="w1"),
            ],
            model_name="claude",
            finish_reason="tool_call",
            usage=RequestUsage(input_tokens=50, output_tokens=7, cache_read_tokens=10),
            provider_response_id="resp_1",
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("add", 3, tool_call_id="t1"),
                ToolReturnPart("sub", {"error": [1, "y"]}, tool_call_id="t2", outcome="failed"),
                retry_for_tool,
            ]
        ),
        ModelRequest(
            parts=[
                retry_feedback,
                UserPromptPart(
                    [
                        "look",
                        ImageUrl(url="https://example.com/a.png"),
                        BinaryContent(data=b"\x89PNG", media_type="image/png"),
                    ]
                ),
            ]
        ),
        ModelResponse(parts=[TextPart("the answer is 3")]),
        ModelResponse(parts=[]),
    ]


def test_a_history_round_trips_as_pydantic_ai_itself_does() -> None:
    messages = history()
    assert dump(to_pydantic_ai(from_pydantic_ai(messages))) == own_round_trip(messages)
    # Through the stored JSON too.
    stored = [
        MESSAGE_ADAPTER.validate_json(m.model_dump_json()) for m in from_pydantic_ai(messages)
    ]
    assert dump(to_pydantic_ai(stored)) == own_round_trip(messages)


def test_current_parts_come_back_unchanged() -> None:
    messages = [m for m in history() if not any(p.part_kind == "retry-prompt" for p in m.parts)]
    assert dump(to_pydantic_ai(from_pydantic_ai(messages))) == dump(messages)


def test_what_the_model_said_is_in_the_blocks() -> None:
    system, user, response, add, sub, retry, feedback, look, *_ = from_pydantic_ai(history())
    assert isinstance(system, SystemMessage)
    assert system.text == "Be brief."
    assert isinstance(user, UserMessage)
    assert user.text == "add 1 and 2"
    assert isinstance(response, AssistantMessage)
    assert response.model == "claude"
    assert response.usage is not None
    assert response.usage.cache_read_tokens == 10
    assert response.content[0] == ThinkingContent(thinking="hmm", signature="sig")
    assert response.tool_calls == [
        ToolCall(id="t1", name="add", arguments='{"a": 1, "b": [2.5, null]}'),
        ToolCall(id="t2", name="sub", arguments='{"a":'),
        ToolCall(id="t3", name="none", arguments="{}"),
    ]
    assert isinstance(add, ToolResultMessage)
    assert (add.tool_name, add.text) == ("add", "3")
    assert isinstance(sub, ToolResultMessage)
    assert sub.is_error
    assert isinstance(retry, ToolResultMessage)
    assert retry.is_error
    assert retry.tool_call_id == "t3"
    assert isinstance(feedback, UserMessage)
    assert "wrong" in feedback.text
    assert isinstance(look, UserMessage)
    assert [b.type for b in look.content] == ["text", "image"]


def test_changed_text_keeps_the_structure() -> None:
    messages = from_pydantic_ai(history())
    add = messages[3]
    assert isinstance(add, ToolResultMessage)
    for text, content in [('[3, "more"]', [3, "more"]), ("3 (shortened", "3 (shortened")]:
        messages[3] = add.model_copy(update={"content": [TextContent(text=text)]})
        request = to_pydantic_ai(messages)[2]
        assert isinstance(request, ModelRequest)
        part = request.parts[0]
        assert isinstance(part, ToolReturnPart)
        assert (part.tool_call_id, part.content) == ("t1", content)


def test_other_messages_are_exported_canonically() -> None:
    messages: list[Message] = [
        CompactionSummaryMessage(summary="earlier: added numbers"),
        UserMessage(content="go on"),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="t"),
                TextContent(text="ok"),
                ToolCall(id="c", name="f", arguments="{}"),
            ],
            model="m",
        ),
        ToolResultMessage(tool_call_id="c", tool_name="f", content="done"),
    ]
    first, response, answer = to_pydantic_ai(messages)
    assert isinstance(first, ModelRequest)
    assert [p.part_kind for p in first.parts] == ["user-prompt", "user-prompt"]
    assert "earlier: added numbers" in str(first.parts[0].content)  # type: ignore[union-attr]
    assert isinstance(response, ModelResponse)
    assert [p.part_kind for p in response.parts] == ["thinking", "text", "tool-call"]
    assert isinstance(answer, ModelRequest)
    assert isinstance(answer.parts[0], ToolReturnPart)
    assert answer.parts[0].content == "done"


def test_not_a_history_is_refused() -> None:
    with pytest.raises(FormatError, match="list of messages"):
        from_pydantic_ai("hello")  # type: ignore[arg-type]
    with pytest.raises(FormatError, match="pydantic-ai messages"):
        from_pydantic_ai([{"kind": "nonsense"}])  # type: ignore[list-item]
