"""OpenAI Responses-API items in and out: the exact round trip of every item type."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import (
    AssistantMessage,
    CompactionSummaryMessage,
    FormatError,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    from_openai_responses,
    to_openai_responses,
)
from sessionstore.formats._responses import from_openai_responses_json
from sessionstore.formats._responses_dump import items_from_dump
from sessionstore.integrations._item_json import json_items
from sessionstore.models import MESSAGE_ADAPTER, Message
from sessionstore.models._messages import message_payload

PNG = "iVBORw0KGgo="

EVERY_ITEM: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
    {"role": "user", "content": "add 1 and 2"},
    {
        "type": "message",
        "role": "user",
        "id": "msg_u",
        "status": "completed",
        "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "high"},
            {"type": "input_image", "image_url": "data:image/png;base64,not base64!"},
            {"type": "input_image", "file_id": "file_1", "detail": "auto"},
            {"type": "input_file", "file_id": "file_2", "filename": "a.pdf"},
        ],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "first"},
            {"type": "summary_text", "text": "second"},
        ],
        "content": [{"type": "reasoning_text", "text": "raw thought"}],
        "encrypted_content": "opaque",
        "status": "completed",
    },
    {"type": "reasoning", "id": "rs_2", "summary": []},
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "add",
        "arguments": '{"a": 1, "b":2}',
        "status": "completed",
    },
    {"type": "function_call", "call_id": "call_2", "name": "look", "arguments": "not json"},
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "x"},
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "3"},
    {
        "type": "function_call_output",
        "id": "fco_2",
        "status": "completed",
        "call_id": "call_2",
        "output": [
            {"type": "input_text", "text": "a picture"},
            {"type": "input_image", "image_url": "https://example.com/a.png"},
            {"type": "input_file", "file_id": "file_3"},
        ],
    },
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "3", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": "not that"},
        ],
    },
    {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c3", "name": "patch", "input": "diff"},
    {"type": "custom_tool_call_output", "call_id": "c3", "output": "applied"},
    {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": "cc1",
        "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
        "pending_safety_checks": [],
        "status": "completed",
    },
    {
        "type": "computer_call_output",
        "call_id": "cc1",
        "output": {"type": "computer_screenshot", "image_url": "https://example.com/s.png"},
    },
    {
        "type": "local_shell_call",
        "id": "ls",
        "call_id": "l1",
        "status": "completed",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
    },
    {"type": "local_shell_call_output", "id": "l1", "output": "a b"},
    {"type": "shell_call", "call_id": "sh1", "action": {"commands": ["pwd"]}},
    {
        "type": "shell_call_output",
        "call_id": "sh1",
        "output": [{"stdout": "/", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    },
    {
        "type": "apply_patch_call",
        "call_id": "ap1",
        "status": "completed",
        "operation": {"type": "create_file", "path": "a.py", "diff": "+x"},
    },
    {"type": "apply_patch_call_output", "call_id": "ap1", "status": "completed"},
    {"type": "mcp_list_tools", "id": "ml", "server_label": "s", "tools": []},
    {
        "type": "mcp_approval_request",
        "id": "mr",
        "server_label": "s",
        "name": "t",
        "arguments": "{}",
    },
    {"type": "mcp_approval_response", "approval_request_id": "mr", "approve": True},
    {
        "type": "mcp_call",
        "id": "mc",
        "server_label": "s",
        "name": "t",
        "arguments": "{}",
        "output": "ok",
    },
    {"type": "image_generation_call", "id": "ig", "status": "completed", "result": PNG},
    {
        "type": "code_interpreter_call",
        "id": "ci",
        "code": "1+1",
        "container_id": "c",
        "status": "completed",
        "outputs": None,
    },
    {"type": "file_search_call", "id": "fs", "queries": ["q"], "status": "completed"},
    {"type": "compaction", "encrypted_content": "zz"},
    {"type": "item_reference", "id": "ref_1"},
    {"id": "ref_2"},
    {"role": "assistant", "content": "plain"},
    {"type": "a_type_from_the_future", "payload": {"x": [1, 2.5, None, "y"]}},
]


def test_every_item_type_round_trips_exactly() -> None:
    messages = from_openai_responses(EVERY_ITEM)
    assert to_openai_responses(messages) == EVERY_ITEM
    # And through the stored JSON, as the store keeps them.
    stored = [MESSAGE_ADAPTER.validate_json(m.model_dump_json()) for m in messages]
    assert to_openai_responses(stored) == EVERY_ITEM


def test_each_item_alone_round_trips_exactly() -> None:
    for item in EVERY_ITEM:
        assert to_openai_responses(from_openai_responses([item])) == [item]


def test_what_the_model_said_is_in_the_blocks() -> None:
    system, developer, _user, rich, assistant, *_ = from_openai_responses(EVERY_ITEM)
    assert system.kind == developer.kind == "system"
    assert isinstance(rich, UserMessage)
    assert [type(b) for b in rich.content] == [TextContent, ImageContent, ImageContent]
    assert rich.content[1] == ImageContent(data=PNG, mime_type="image/png", detail="high")
    # One model call's items are one assistant message: a turn of its own.
    assert isinstance(assistant, AssistantMessage)
    assert [type(b).__name__ for b in assistant.content] == [
        "ThinkingContent",
        "ThinkingContent",
        "ThinkingContent",
        "ToolCall",
        "ToolCall",
    ]
    assert assistant.tool_calls[1] == ToolCall(id="call_2", name="look", arguments="not json")


def test_tool_results_are_named_after_their_call() -> None:
    messages = from_openai_responses(EVERY_ITEM)
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.tool_name) for r in results] == [
        ("call_1", "add"),
        ("call_2", "look"),
        ("c3", "patch"),
    ]
    (alone,) = from_openai_responses(
        [{"type": "function_call_output", "call_id": "x", "output": ""}], tool_names={"x": "bash"}
    )
    assert isinstance(alone, ToolResultMessage)
    assert alone.tool_name == "bash"


def test_changed_blocks_export_their_new_text_in_the_old_structure() -> None:
    (result,) = from_openai_responses(
        [{"type": "function_call_output", "call_id": "c", "output": "long output", "id": "o"}]
    )
    truncated = result.model_copy(update={"content": [TextContent(text="long…")]})
    assert to_openai_responses([truncated]) == [
        {"type": "function_call_output", "call_id": "c", "output": "long…", "id": "o"}
    ]


def test_a_message_whose_blocks_no_longer_match_is_exported_canonically() -> None:
    (assistant,) = from_openai_responses(EVERY_ITEM[4:8])
    fewer = assistant.model_copy(update={"content": assistant.content[-1:]})  # type: ignore[union-attr]
    assert to_openai_responses([fewer]) == [
        {"type": "function_call", "call_id": "call_2", "name": "look", "arguments": "not json"}
    ]


def test_messages_of_other_origins_are_exported_canonically() -> None:
    messages: list[Message] = [
        UserMessage(content=[TextContent(text="see"), ImageContent(url="https://x/y.png")]),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="hidden"),
                TextContent(text="a"),
                TextContent(text="b"),
                ToolCall(id="c", name="f", arguments="{}"),
            ]
        ),
        ToolResultMessage(tool_call_id="c", content="done"),
        CompactionSummaryMessage(summary="earlier work"),
    ]
    items = to_openai_responses(messages)
    assert items[:4] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
            ],
        },
        {"role": "assistant", "content": "a\nb"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "done"},
    ]
    assert items[4]["role"] == "user"
    assert "earlier work" in items[4]["content"]


@pytest.mark.parametrize(
    ("items", "match"),
    [
        ("not a list", "list of items"),
        ([42], "item 0: expected an object"),
        ([{"role": "robot", "content": "x"}], "item 0: role 'robot'"),
        ([{"type": "function_call", "name": "f", "arguments": "{}"}], "call_id"),
        ([{"type": "function_call", "call_id": "c", "arguments": "{}"}], "name"),
        ([{"type": "function_call_output", "output": "x"}], "call_id"),
    ],
)
def test_malformed_items_are_refused_with_their_index(items: Any, match: str) -> None:
    with pytest.raises(FormatError, match=match):
        from_openai_responses(items)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=6,
)
text_parts: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"type": st.sampled_from(["input_text", "output_text"]), "text": st.text(max_size=8)},
    optional={"annotations": st.just([])},
)
items = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "system", "developer", "assistant"]),
            "content": st.text(max_size=8) | st.lists(text_parts, max_size=3),
        },
        optional={"type": st.just("message"), "id": st.text(max_size=4)},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call"),
            "call_id": st.text(min_size=1, max_size=4),
            "name": st.text(min_size=1, max_size=4),
            "arguments": st.text(max_size=8),
        },
        optional={"id": st.text(max_size=4), "extra_key": json_values},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call_output"),
            "call_id": st.text(min_size=1, max_size=4),
            "output": st.text(max_size=8) | st.lists(text_parts, max_size=2),
        },
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("reasoning"),
            "id": st.text(max_size=4),
            "summary": st.lists(
                st.fixed_dictionaries(
                    {"type": st.just("summary_text"), "text": st.text(max_size=8)}
                ),
                max_size=2,
            ),
        },
        optional={"encrypted_content": st.text(max_size=6)},
    ),
    st.dictionaries(st.sampled_from(["type", "id", "data"]), json_values, max_size=3).filter(
        lambda d: (
            d.get("type")
            not in (
                None,
                "message",
                "function_call",
                "function_call_output",
                "custom_tool_call",
                "custom_tool_call_output",
                "reasoning",
            )
        )
    ),
)


@given(st.lists(items, max_size=8))
def test_any_item_list_round_trips_exactly(given_items: list[dict[str, Any]]) -> None:
    messages = from_openai_responses(given_items)
    stored = [MESSAGE_ADAPTER.validate_json(m.model_dump_json()) for m in messages]
    assert json.dumps(to_openai_responses(stored), sort_keys=True) == json.dumps(
        given_items, sort_keys=True
    )


# ── the stored forms an SDK session reads back without a model ─────────────────


def _dump(message: Message) -> dict[str, Any]:
    """The message as the store keeps it, decoded as the SDK session decodes it."""
    loaded: dict[str, Any] = json.loads(json.dumps(message_payload(message)))
    return loaded


def test_a_dump_gives_the_items_the_model_gives() -> None:
    messages = from_openai_responses(EVERY_ITEM)
    from_dumps = [items_from_dump(_dump(m)) for m in messages]
    assert all(items is not None for items in from_dumps)
    assert [item for items in from_dumps for item in items or []] == EVERY_ITEM


@given(st.lists(items, max_size=8))
def test_any_dump_gives_the_items_the_model_gives(given_items: list[dict[str, Any]]) -> None:
    for message in from_openai_responses(given_items):
        found = items_from_dump(_dump(message))
        assert found is not None
        assert json.dumps(found, sort_keys=True) == json.dumps(
            to_openai_responses([message]), sort_keys=True
        )


def test_a_dump_that_needs_the_model_is_left_to_it() -> None:
    (imported,) = from_openai_responses([{"role": "user", "content": "hi"}])
    changed = imported.model_copy(
        update={"content": [TextContent(text="a"), TextContent(text="b")]}
    )
    hand_written = UserMessage(content="hi")
    summary = CompactionSummaryMessage(summary="s", tokens_before=10)
    for message in (changed, hand_written, summary):
        assert items_from_dump(_dump(message)) is None
    # A slot naming a place that is not there: the model path says what is wrong.
    dump = _dump(imported)
    dump["extra"]["openai_responses"]["items"][0]["slots"] = [["text"]]
    assert items_from_dump(dump) is None


def test_the_json_variant_keeps_each_messages_items_as_given() -> None:
    texts = [json.dumps(item) for item in EVERY_ITEM]
    messages = from_openai_responses_json(EVERY_ITEM, texts)
    plain = from_openai_responses(EVERY_ITEM)
    assert [type(m) for m in messages] == [type(m) for m in plain]
    kept = [json.loads(m.extra["openai_responses"]["json"]) for m in messages]  # type: ignore[index, call-overload, arg-type]
    assert [item for items in kept for item in items] == EVERY_ITEM
    # Each message's own items, in the grouping `to_openai_responses` exports.
    assert kept == [to_openai_responses([m]) for m in plain]
    assert to_openai_responses(messages) == EVERY_ITEM
    # A compacted copy exports its own blocks, not the kept text.
    user = next(m for m in messages if isinstance(m, UserMessage))
    copy = user.model_copy(update={"content": [TextContent(text="shorter")]})
    assert "shorter" in json.dumps(to_openai_responses([copy]))


def test_the_json_variant_needs_one_text_an_item() -> None:
    with pytest.raises(FormatError, match="JSON text of 2 items, got 1"):
        from_openai_responses_json([{"role": "user", "content": "a"}] * 2, ["{}"])


@given(st.lists(items, max_size=8))
def test_the_kept_json_exports_as_the_records_do(given_items: list[dict[str, Any]]) -> None:
    texts = [json.dumps(item) for item in given_items]
    kept = from_openai_responses_json(given_items, texts)
    stored = [MESSAGE_ADAPTER.validate_json(m.model_dump_json()) for m in kept]
    plain = from_openai_responses(given_items)
    for with_json, without in zip(stored, plain, strict=True):
        assert json.dumps(to_openai_responses([with_json]), sort_keys=True) == json.dumps(
            to_openai_responses([without]), sort_keys=True
        )


@settings(deadline=None)  # a batch of large items: no deadline on a loaded machine
@given(st.lists(items, max_size=8))
def test_the_sessions_texts_and_copies_build_what_json_dumps_builds(
    given_items: list[dict[str, Any]],
) -> None:
    raw, texts, copies = json_items(given_items)
    built = from_openai_responses_json(raw, texts, copies=copies)
    dumps = [json.dumps(item, separators=(",", ":")) for item in given_items]
    expected = from_openai_responses_json(given_items, dumps)

    def decoded(message: Message) -> dict[str, Any]:
        dump = message.model_dump()
        hints = dump["extra"].get("openai_responses", {})
        if "json" in hints:
            hints["json"] = json.loads(hints["json"])
        return dump

    assert [decoded(m) for m in built] == [decoded(m) for m in expected]
    assert json.dumps(to_openai_responses(built), sort_keys=True) == json.dumps(
        given_items, sort_keys=True
    )


def test_the_json_variant_needs_one_copy_an_item_when_given_copies() -> None:
    with pytest.raises(FormatError, match="copies of 2 items, got 1"):
        from_openai_responses_json(
            [{"role": "user", "content": "a"}] * 2, ["{}", "{}"], copies=[None]
        )
