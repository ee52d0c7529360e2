import copy
import json
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

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
    UserMessage,
    from_openai,
    to_openai,
)
from sessionstore.errors import FormatError
from sessionstore.models import AssistantContent
from tests.datasets import DATASET, DATASET_LABEL

PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6"
    "kgAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def transcripts() -> list[dict[str, Any]]:
    files = sorted(DATASET.glob("*.jsonl"))
    if not files:
        pytest.skip(f"the real-transcripts dataset is not at {DATASET_LABEL}")
    conversations: list[dict[str, Any]] = []
    for path in files:
        with path.open(encoding="utf-8") as lines:
            conversations.extend(json.loads(line) for line in lines if line.strip())
    return conversations


def _blocks(message: Message) -> Sequence[AssistantContent]:
    """The content blocks of a message of a kind that has them (the four OpenAI roles)."""
    assert isinstance(message, SystemMessage | UserMessage | AssistantMessage | ToolResultMessage)
    return message.content


# ── the dataset ────────────────────────────────────────────────────────────────


def test_dataset_round_trip_is_exact(transcripts):
    for conversation in transcripts:
        original = conversation["messages"]
        pristine = copy.deepcopy(original)
        exported = to_openai(from_openai(original))
        assert exported == pristine, conversation["id"]
        assert original == pristine, "from_openai must not change its input"


def test_dataset_imports_without_hints(transcripts):
    """The canonical mapping covers real data: no message needs `extra`."""
    for conversation in transcripts:
        for index, message in enumerate(from_openai(conversation["messages"])):
            assert message.extra == {}, (conversation["id"], index)


def test_dataset_maps_roles_content_and_tool_calls(transcripts):
    expected_kind = {"system": "system", "user": "user", "assistant": "assistant"}
    expected_kind["tool"] = "tool_result"
    for conversation in transcripts:
        originals = conversation["messages"]
        imported = from_openai(originals)
        assert len(imported) == len(originals)
        for original, message in zip(originals, imported, strict=True):
            assert message.kind == expected_kind[original["role"]]
            content = original["content"]
            texts = [b.text for b in _blocks(message) if isinstance(b, TextContent)]
            assert texts == ([] if content is None else [content])
            if isinstance(message, AssistantMessage):
                calls = [
                    (c["id"], c["function"]["name"], c["function"]["arguments"])
                    for c in original.get("tool_calls", [])
                ]
                assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == calls
            if isinstance(message, ToolResultMessage):
                assert message.tool_call_id == original["tool_call_id"]


def test_dataset_tool_names_come_from_the_most_recent_call_with_that_id(transcripts):
    reused_with_other_name = 0
    for conversation in transcripts:
        originals = conversation["messages"]
        imported = from_openai(originals)
        seen: dict[str, str] = {}
        for index, (original, message) in enumerate(zip(originals, imported, strict=True)):
            for call in original.get("tool_calls") or []:
                name = call["function"]["name"]
                if seen.get(call["id"], name) != name:
                    reused_with_other_name += 1
                seen[call["id"]] = name
            if original["role"] == "tool":
                # Every call in this set is answered right after it, so the nearest
                # earlier assistant message that made a call with this id is the source.
                previous = next(
                    o
                    for o in reversed(originals[:index])
                    if any(c["id"] == original["tool_call_id"] for c in o.get("tool_calls") or [])
                )
                (expected,) = [
                    c["function"]["name"]
                    for c in previous["tool_calls"]
                    if c["id"] == original["tool_call_id"]
                ]
                assert isinstance(message, ToolResultMessage)
                assert message.tool_name == expected, (conversation["id"], index)
    if not any(c["id"].startswith("tau-bench") for c in transcripts):
        pytest.skip("no tau-bench conversations, which are the ones with reused ids")
    assert reused_with_other_name > 0, "the dataset should exercise reused ids"


# ── tool-call ids ──────────────────────────────────────────────────────────────


def _call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_reused_tool_call_id_resolves_to_the_latest_call():
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "cancel it"},
        {"role": "assistant", "content": None, "tool_calls": [_call("call_1", "think")]},
        {"role": "tool", "tool_call_id": "call_1", "content": ""},
        {"role": "assistant", "content": None, "tool_calls": [_call("call_1", "cancel")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "done"},
        {"role": "tool", "tool_call_id": "call_unknown", "content": "stray"},
    ]
    imported = from_openai(messages)
    names = [m.tool_name for m in imported if isinstance(m, ToolResultMessage)]
    assert names == ["think", "cancel", ""]
    assert to_openai(imported) == messages


def test_tool_name_is_looked_up_only_in_earlier_messages():
    messages: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": "call_1", "content": "early"},
        {"role": "assistant", "content": None, "tool_calls": [_call("call_1", "late")]},
    ]
    first = from_openai(messages)[0]
    assert isinstance(first, ToolResultMessage)
    assert first.tool_name == ""


def test_tool_message_name_is_kept_and_restored():
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "search")]},
        {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "[]"},
    ]
    imported = from_openai(messages)
    assert imported[1].extra == {"openai": {"name": True}}
    assert to_openai(imported) == messages


def test_tool_message_without_name_gets_no_name_on_export():
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "search")]},
        {"role": "tool", "tool_call_id": "c1", "content": "[]"},
    ]
    exported = to_openai(from_openai(messages))
    assert "name" not in exported[1]
    assert exported == messages


# ── exact round trip of variants ───────────────────────────────────────────────

VARIANTS: dict[str, list[dict[str, Any]]] = {
    "assistant None with tool calls": [
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "f", '{"a": 1}')]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ],
    "assistant empty string with tool calls": [
        {"role": "assistant", "content": "", "tool_calls": [_call("c1", "f")]},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
    ],
    "assistant None without tool calls": [{"role": "assistant", "content": None}],
    "assistant empty string": [{"role": "assistant", "content": ""}],
    "assistant without content key": [
        {"role": "assistant", "tool_calls": [_call("c1", "f")]},
    ],
    "several tool calls, arguments byte for byte": [
        {
            "role": "assistant",
            "content": "Two things.",
            "tool_calls": [
                _call("c1", "f", '{"b": 2,   "a": "\\u00e9"}'),
                _call("c2", "g", '{"truncated": '),
                _call("c3", "h", ""),
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "tool", "tool_call_id": "c2", "content": "2"},
        {"role": "tool", "tool_call_id": "c3", "content": "3"},
    ],
    "empty tool_calls list": [{"role": "assistant", "content": "hi", "tool_calls": []}],
    "null tool_calls": [{"role": "assistant", "content": "hi", "tool_calls": None}],
    "user content as a parts list": [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]},
    ],
    "user content as an empty parts list": [{"role": "user", "content": []}],
    "user content null": [{"role": "user", "content": None}],
    "user empty string": [{"role": "user", "content": ""}],
    "user with two text parts": [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}]},
    ],
    "assistant content as a parts list": [
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
    ],
    "assistant content as an empty parts list": [{"role": "assistant", "content": []}],
    "tool content as a parts list": [
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "f")]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "out"}]},
    ],
    "system content as a parts list": [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
    ],
    "developer role": [{"role": "developer", "content": "Use tools."}],
    "names on user, assistant and system": [
        {"role": "system", "content": "rules", "name": "ops"},
        {"role": "user", "content": "hi", "name": "alice"},
        {"role": "assistant", "content": "hello", "name": "bot"},
    ],
    "null name": [{"role": "user", "content": "hi", "name": None}],
    "unknown assistant keys": [
        {
            "role": "assistant",
            "content": "Sure.",
            "refusal": None,
            "annotations": [{"type": "url_citation", "url_citation": {"url": "https://x.test"}}],
            "audio": {"id": "audio_1"},
        },
    ],
    "unknown keys on every role": [
        {"role": "system", "content": "s", "x-trace": 1},
        {"role": "user", "content": "u", "metadata": {"k": [1, 2]}},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "f")], "x": True},
        {"role": "tool", "tool_call_id": "c1", "content": "t", "x": None},
    ],
    "reasoning_content": [
        {"role": "assistant", "content": "42", "reasoning_content": "Let me think."},
    ],
    "reasoning": [{"role": "assistant", "content": "42", "reasoning": ""}],
    "images": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_BASE64}"}},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.test/cat.jpg", "detail": "low"},
                },
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,not base64!", "detail": "high"},
                },
            ],
        },
    ],
    "a single image": [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}],
        },
    ],
}


@pytest.mark.parametrize("messages", list(VARIANTS.values()), ids=list(VARIANTS))
def test_variant_round_trip_is_exact(messages):
    imported = from_openai(messages)
    assert len(imported) == len(messages)
    assert to_openai(imported) == messages


# ── the canonical mapping and its hints ────────────────────────────────────────


def test_string_content_is_one_text_block_without_hints():
    (user,) = from_openai([{"role": "user", "content": "hi"}])
    assert user == UserMessage(content=[TextContent(text="hi")])


def test_assistant_null_content_is_empty_and_empty_string_is_a_text_block():
    none, empty = from_openai(
        [
            {"role": "assistant", "content": None, "tool_calls": [_call("c1", "f")]},
            {"role": "assistant", "content": "", "tool_calls": [_call("c2", "f")]},
        ]
    )
    assert isinstance(none, AssistantMessage)
    assert isinstance(empty, AssistantMessage)
    assert none.content == [ToolCall(id="c1", name="f")]
    assert empty.content == [TextContent(text=""), ToolCall(id="c2", name="f")]
    assert none.extra == empty.extra == {}
    exported = to_openai([none, empty])
    assert exported[0]["content"] is None
    assert exported[1]["content"] == ""


@pytest.mark.parametrize(
    ("message", "hints"),
    [
        ({"role": "developer", "content": "x"}, {"role": "developer"}),
        ({"role": "user", "content": [{"type": "text", "text": "x"}]}, {"content": "parts"}),
        ({"role": "assistant", "content": []}, {"content": "parts"}),
        ({"role": "assistant"}, {"content": "absent"}),
        ({"role": "user", "content": None}, {"fields": {"content": None}}),
        ({"role": "assistant", "content": "x", "refusal": None}, {"fields": {"refusal": None}}),
        ({"role": "assistant", "content": "x", "tool_calls": []}, {"fields": {"tool_calls": []}}),
        (
            {"role": "assistant", "content": "x", "reasoning_content": "hm"},
            {"reasoning": "reasoning_content"},
        ),
        (
            # Two text parts can only be a list, so no hint is needed.
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            None,
        ),
    ],
)
def test_hints_hold_only_what_the_canonical_export_misses(message, hints):
    (imported,) = from_openai([message])
    assert imported.extra == ({} if hints is None else {"openai": hints})


def test_developer_message_is_a_system_message():
    (message,) = from_openai([{"role": "developer", "content": "Use tools."}])
    assert isinstance(message, SystemMessage)
    assert message.text == "Use tools."


def test_unknown_keys_are_restored_as_copies():
    original = [{"role": "assistant", "content": "x", "annotations": [{"type": "a"}]}]
    imported = from_openai(original)
    exported = to_openai(imported)
    exported[0]["annotations"].append({"type": "b"})
    assert to_openai(imported) == original


def test_reasoning_content_becomes_a_thinking_block():
    (message,) = from_openai(
        [{"role": "assistant", "content": "42", "reasoning_content": "six times seven"}]
    )
    assert isinstance(message, AssistantMessage)
    assert message.content == [ThinkingContent(thinking="six times seven"), TextContent(text="42")]


# ── images ─────────────────────────────────────────────────────────────────────


def test_data_url_becomes_inline_image_and_other_urls_stay_urls():
    (message,) = from_openai(VARIANTS["images"])
    assert isinstance(message, UserMessage)
    _, inline, remote, bad = message.content
    assert inline == ImageContent(data=PNG_BASE64, mime_type="image/png")
    assert remote == ImageContent(url="https://example.test/cat.jpg", detail="low")
    assert bad == ImageContent(url="data:image/png;base64,not base64!", detail="high")


def test_image_round_trip_from_our_model():
    messages: list[UserMessage | ToolResultMessage] = [
        UserMessage(
            content=[
                ImageContent(data=PNG_BASE64, mime_type="image/png", detail="auto"),
                ImageContent(url="https://example.test/a.webp"),
            ]
        ),
        ToolResultMessage(
            tool_call_id="c1", content=[ImageContent(data=PNG_BASE64, mime_type="image/png")]
        ),
    ]
    exported = to_openai(messages)
    assert exported[0]["content"] == [
        {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{PNG_BASE64}", "detail": "auto"},
        },
        {"type": "image_url", "image_url": {"url": "https://example.test/a.webp"}},
    ]
    assert [_blocks(m) for m in from_openai(exported)] == [m.content for m in messages]


def test_inline_image_without_mime_type_cannot_be_exported():
    message = UserMessage(content=[TextContent(text="x"), ImageContent(data=PNG_BASE64)])
    with pytest.raises(FormatError, match=r"message 1: an inline image has no mime_type"):
        to_openai([UserMessage(content="ok"), message])


# ── export of kinds OpenAI has no role for ─────────────────────────────────────


def test_bash_execution_exports_as_readable_user_text():
    (item,) = to_openai(
        [BashExecutionMessage(command="ls -a", output="a.txt\n```b```", exit_code=2)]
    )
    assert item["role"] == "user"
    assert item["content"] == "Ran `ls -a`\n````\na.txt\n```b```\n````\nExit code: 2"


def test_bash_execution_with_multiline_command_and_no_output():
    (item,) = to_openai(
        [BashExecutionMessage(command="echo `a`\nexit", cancelled=True, truncated=True)]
    )
    assert item["content"] == (
        "Ran\n```\necho `a`\nexit\n```\n(no output)\n(output truncated)\n(cancelled by the user)"
    )


def test_summaries_and_custom_messages_export_as_user_text():
    exported = to_openai(
        [
            CompactionSummaryMessage(summary="We fixed the bug.", tokens_before=9000),
            BranchSummaryMessage(summary="Tried plan B."),
            CustomMessage(custom_type="note", data={"k": "é"}),
            CustomMessage(custom_type="hidden", data="secret", display=False),
            CustomMessage(custom_type="text", data="plain"),
            CustomMessage(custom_type="marker"),
        ]
    )
    assert [m["role"] for m in exported] == ["user"] * 5
    assert exported[0]["content"] == "[Summary of earlier conversation]\nWe fixed the bug."
    assert exported[1]["content"].startswith("[Summary of another branch")
    assert exported[1]["content"].endswith("\nTried plan B.")
    assert exported[2]["content"] == '[note]\n{\n  "k": "é"\n}'
    assert exported[3]["content"] == "[text]\nplain"
    assert exported[4]["content"] == "[marker]"
    assert all("secret" not in m["content"] for m in exported)


def test_thinking_is_dropped_on_export_unless_a_hint_names_the_key():
    content = [
        ThinkingContent(thinking="hmm", signature="sig"),
        ThinkingContent(thinking="", signature="opaque", redacted=True),
        TextContent(text="answer"),
    ]
    plain = AssistantMessage(content=content)
    hinted = AssistantMessage(content=content, extra={"openai": {"reasoning": "reasoning_content"}})
    assert to_openai([plain]) == [{"role": "assistant", "content": "answer"}]
    assert to_openai([hinted]) == [
        {"role": "assistant", "content": "answer", "reasoning_content": "hmm"}
    ]


def test_fields_not_in_the_openai_format_are_left_out():
    message = AssistantMessage(
        content="done", model="gpt-4o", stop_reason="stop", client_id="a-1", name="bot"
    )
    result = ToolResultMessage(tool_call_id="c1", tool_name="f", content="boom", is_error=True)
    assert to_openai([message, result]) == [
        {"role": "assistant", "content": "done", "name": "bot"},
        {"role": "tool", "tool_call_id": "c1", "content": "boom"},
    ]


def test_empty_content_exports_as_null_for_assistant_and_empty_string_otherwise():
    exported = to_openai(
        [
            AssistantMessage(content=[]),
            UserMessage(content=[]),
            ToolResultMessage(tool_call_id="c1"),
            SystemMessage(content=[]),
        ]
    )
    assert [m["content"] for m in exported] == [None, "", "", ""]


def test_cache_control_on_parts_is_dropped():
    (message,) = from_openai(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
                ],
            }
        ]
    )
    assert to_openai([message])[0]["content"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]


# ── bad input ──────────────────────────────────────────────────────────────────

USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ({"role": "user", "content": "hi"}, "expected a list of messages, got dict"),
        ("hello", "expected a list of messages, got str"),
        (None, "expected a list of messages, got NoneType"),
        ([["user", "hi"]], "message 0: expected an object, got list"),
        ([USER, {"content": "hi"}], "message 1: the message has no 'role'"),
        ([USER, {"role": "robot", "content": "x"}], "message 1: role 'robot' is not supported"),
        ([{"role": ["user"], "content": "x"}], "message 0: role ['user'] is not supported"),
        ([USER, {"role": "tool", "content": "x"}], "message 1: tool message has no 'tool_call_id'"),
        (
            [{"role": "tool", "tool_call_id": 7, "content": "x"}],
            "message 0: 'tool_call_id' must be a non-empty string",
        ),
        (
            [USER, {"role": "assistant", "tool_calls": [{"type": "function", "function": {}}]}],
            "message 1: tool call 0 has no 'id'",
        ),
        (
            [{"role": "assistant", "tool_calls": [_call("c1", "f"), _call("c2", "")]}],
            "message 0: tool call 1 (id 'c2') has no function 'name'",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function"}]}],
            "message 0: tool call 0 (id 'c1') has no 'function' object",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {}}}
                    ],
                }
            ],
            "message 0: tool call 0 (id 'c1') needs 'arguments' as JSON text, not dict",
        ),
        (
            [{"role": "assistant", "tool_calls": [{**_call("c1", "f"), "type": "custom"}]}],
            "message 0: tool call 0 has unsupported type 'custom'",
        ),
        (
            [{"role": "assistant", "tool_calls": [{**_call("c1", "f"), "index": 0}]}],
            "message 0: tool call 0 has unsupported keys ['index']",
        ),
        ([{"role": "assistant", "tool_calls": {"id": "c1"}}], "'tool_calls' must be a list"),
        ([{"role": "assistant", "tool_calls": ["c1"]}], "tool call 0 must be an object, not str"),
        ([{"role": "user", "content": 3}], "message 0: 'content' must be a string"),
        ([{"role": "user", "content": ["hi"]}], "content part 0 must be an object, not str"),
        (
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
            "message 0: content part 0 has unsupported type 'input_audio'",
        ),
        ([{"role": "user", "content": [{"type": "text"}]}], "content part 0 has no 'text' string"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "a", "x": 1}]}],
            "content part 0 has unsupported keys ['x']",
        ),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": "https://x"}]}],
            "content part 0 has no 'image_url.url' string",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "u", "detail": 1}}],
                }
            ],
            "content part 0 has a 'detail' that is not a string",
        ),
        ([{"role": "user", "content": "x", "name": 5}], "message 0: 'name' must be a string"),
        (
            [
                {
                    "role": "system",
                    "content": [{"type": "image_url", "image_url": {"url": "https://x"}}],
                }
            ],
            "message 0: content part 0 is an image; system messages hold text",
        ),
    ],
)
def test_bad_input_raises_format_error_naming_the_message(messages, expected):
    with pytest.raises(FormatError) as info:
        from_openai(messages)
    assert expected in str(info.value)


def test_validation_errors_become_format_errors_chained_to_the_cause():
    bad = {"role": "user", "content": "hi", "x-object": object()}
    with pytest.raises(FormatError, match=r"^message 1: invalid UserMessage: ") as info:
        from_openai([USER, bad])
    assert isinstance(info.value.__cause__, ValidationError)


def test_exporting_something_that_is_not_a_message_raises_format_error():
    with pytest.raises(FormatError, match=r"message 1: expected a sessionstore message, got dict"):
        to_openai([UserMessage(content="hi"), USER])  # type: ignore[list-item]  # the wrong type is the point
