import copy
import itertools
import json
from typing import Any

import pytest
from pydantic import ValidationError

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
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
    from_anthropic,
    from_openai,
    to_anthropic,
)
from sessionstore.errors import FormatError
from tests.datasets import DATASET, DATASET_LABEL

PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6"
    "kgAAAABJRU5ErkJggg=="
)
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxkh8hJQq3wYJ4eRS0iMP3sGZpnn3LUfJ9ZBW5grAK5Jr5KwYJ"


def _image(data: str = PNG_BASE64) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def _tool_use(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


SYSTEM = "You are a careful coding agent."

AGENT_RUN: list[dict[str, Any]] = [
    {"role": "user", "content": "The tests in tests/test_io.py fail. Fix them."},
    {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "Run the tests first, and read the file.",
                "signature": SIGNATURE,
            },
            {"type": "text", "text": "Let me look."},
            _tool_use("toolu_01", "bash", command="pytest tests/test_io.py -x"),
            _tool_use("toolu_02", "read_file", path="src/io.py", range=[1, 40]),
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "content": "E   AssertionError: b'' != b'x'",
                "is_error": True,
            },
            {
                "type": "tool_result",
                "tool_use_id": "toolu_02",
                "content": [
                    {"type": "text", "text": "def read(path):"},
                    {"type": "text", "text": "    ..."},
                ],
            },
            {"type": "text", "text": "Also, the CI screenshot:"},
            _image(),
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFmT"},
            _tool_use("toolu_03", "edit", path="src/io.py", old="...", new="return f.read()"),
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_03", "content": "", "is_error": False}
        ],
    },
    {"role": "assistant", "content": [_tool_use("toolu_04", "screenshot")]},
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_04", "content": [_image()]},
        ],
    },
    {"role": "assistant", "content": [_tool_use("toolu_05", "bash", command="true")]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_05"}]},
    {"role": "assistant", "content": [_tool_use("toolu_06", "bash", command="true")]},
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_06", "content": []}],
    },
    {"role": "assistant", "content": [_tool_use("toolu_07", "bash", command="ls")]},
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_07",
                "content": [{"type": "text", "text": "a.py"}],
            },
        ],
    },
    {"role": "assistant", "content": "Fixed: `read` now returns the file's bytes."},
    {
        "role": "user",
        "content": [
            {"type": "image", "source": {"type": "url", "url": "https://example.test/ci.png"}},
            {"type": "text", "text": "CI is green now, thanks!"},
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Glad to help."}]},
    {"role": "user", "content": [{"type": "text", "text": "Bye."}]},
]


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


# ── round trip ─────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "system",
    [
        SYSTEM,
        None,
        "",
        [{"type": "text", "text": SYSTEM}],
        [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}],
    ],
    ids=["string", "none", "empty", "one-block", "two-blocks"],
)
def test_realistic_conversation_round_trips_exactly(system):
    pristine = copy.deepcopy(AGENT_RUN)
    imported = from_anthropic(AGENT_RUN, system=system)
    assert to_anthropic(imported) == (system, pristine)
    assert pristine == AGENT_RUN, "from_anthropic must not change its input"


def test_round_trip_keeps_unknown_message_keys():
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi", "x-trace": "t1"},
        {"role": "assistant", "content": [_tool_use("t1", "f")], "x-id": 7},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            "x": {"a": [1]},
        },
    ]
    imported = from_anthropic(messages)
    assert imported[2].extra == {"anthropic": {"fields": {"x": {"a": [1]}}}}
    assert to_anthropic(imported) == (None, messages)


def test_merged_messages_keep_the_unknown_keys_of_each():
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "a", "x": 1},
        {"role": "user", "content": "b", "x": 2, "y": 3},
        {"role": "assistant", "content": "c"},
    ]
    _, exported = to_anthropic(from_anthropic(messages))
    assert exported == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "x": 1,
            "y": 3,
        },
        {"role": "assistant", "content": "c"},
    ]


# ── the mapping ────────────────────────────────────────────────────────────────


def test_user_message_with_tool_results_and_text_splits_into_several_messages():
    imported = from_anthropic(AGENT_RUN, system=SYSTEM)
    assert [m.kind for m in imported[:7]] == [
        "system",
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "user",
        "assistant",
    ]
    first, second = imported[3], imported[4]
    assert isinstance(first, ToolResultMessage)
    assert isinstance(second, ToolResultMessage)
    assert (first.tool_call_id, first.tool_name, first.is_error) == ("toolu_01", "bash", True)
    assert first.content == [TextContent(text="E   AssertionError: b'' != b'x'")]
    assert (second.tool_call_id, second.tool_name, second.is_error) == (
        "toolu_02",
        "read_file",
        False,
    )
    assert second.content == [TextContent(text="def read(path):"), TextContent(text="    ...")]
    assert imported[5] == UserMessage(
        content=[
            TextContent(text="Also, the CI screenshot:"),
            ImageContent(data=PNG_BASE64, mime_type="image/png"),
        ]
    )


def test_blocks_map_to_our_content():
    imported = from_anthropic(AGENT_RUN)
    assistant = imported[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.content == [
        ThinkingContent(thinking="Run the tests first, and read the file.", signature=SIGNATURE),
        TextContent(text="Let me look."),
        ToolCall(id="toolu_01", name="bash", arguments='{"command": "pytest tests/test_io.py -x"}'),
        ToolCall(
            id="toolu_02", name="read_file", arguments='{"path": "src/io.py", "range": [1, 40]}'
        ),
    ]
    redacted = imported[5]
    assert isinstance(redacted, AssistantMessage)
    assert redacted.content[0] == ThinkingContent(
        thinking="", redacted=True, signature="EmwKAhgBEgy3va3pzix/LafPsn4aDFmT"
    )
    url_image = imported[-3]
    assert isinstance(url_image, UserMessage)
    assert url_image.content[0] == ImageContent(url="https://example.test/ci.png")


def test_common_case_needs_no_hints():
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Let me check."}, _tool_use("t1", "f", q=1)],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "42"},
                {"type": "text", "text": "and?"},
            ],
        },
        {"role": "assistant", "content": "It is 42."},
    ]
    imported = from_anthropic(messages, system="rules")
    assert [m.extra for m in imported] == [{}] * 6
    assert to_anthropic(imported) == ("rules", messages)


@pytest.mark.parametrize(
    ("messages", "hints"),
    [
        ([{"role": "user", "content": [{"type": "text", "text": "x"}]}], {"content": "parts"}),
        ([{"role": "assistant", "content": [{"type": "text", "text": "x"}]}], {"content": "parts"}),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t", "content": []}],
                }
            ],
            {"content": "parts"},
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": False}],
                }
            ],
            {"explicit_is_error": True},
        ),
        ([{"role": "user", "content": "x", "x": 1}], {"fields": {"x": 1}}),
    ],
)
def test_hints_hold_only_what_the_canonical_export_misses(messages, hints):
    (imported,) = from_anthropic(messages)
    assert imported.extra == {"anthropic": hints}


def test_reused_tool_use_id_resolves_to_the_latest_call():
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [_tool_use("t1", "think")]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
        {"role": "assistant", "content": [_tool_use("t1", "cancel")]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "done"},
                {"type": "tool_result", "tool_use_id": "t9", "content": "stray"},
            ],
        },
    ]
    imported = from_anthropic(messages)
    names = [m.tool_name for m in imported if isinstance(m, ToolResultMessage)]
    assert names == ["think", "cancel", ""]
    assert to_anthropic(imported) == (None, messages)


def test_cache_control_and_null_keys_are_dropped():
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "b", "citations": None},
            ],
        }
    ]
    system = [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]
    imported = from_anthropic(messages, system=system)
    assert to_anthropic(imported) == (
        [{"type": "text", "text": "s"}],
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ],
    )


# ── export ─────────────────────────────────────────────────────────────────────


def test_consecutive_same_role_messages_merge_and_alternate():
    messages: list[Message] = [
        SystemMessage(content="one"),
        UserMessage(content="a"),
        BashExecutionMessage(command="make", output="ok", exit_code=0),
        CustomMessage(custom_type="hidden", display=False),
        AssistantMessage(content="x"),
        AssistantMessage(content=[ToolCall(id="t1", name="f", arguments='{"k": 1}')]),
        ToolResultMessage(tool_call_id="t1", content="r"),
        CompactionSummaryMessage(summary="earlier"),
        SystemMessage(content="two"),
        UserMessage(content=""),
        AssistantMessage(content="y"),
    ]
    system, exported = to_anthropic(messages)
    assert system == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert exported == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "Ran `make`\n```\nok\n```\nExit code: 0"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "x"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"k": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                {"type": "text", "text": "[Summary of earlier conversation]\nearlier"},
            ],
        },
        {"role": "assistant", "content": "y"},
    ]


def test_lone_rendered_message_is_a_string():
    _, exported = to_anthropic([CompactionSummaryMessage(summary="s")])
    assert exported == [{"role": "user", "content": "[Summary of earlier conversation]\ns"}]


def test_unsigned_thinking_and_empty_text_blocks_are_left_out():
    message = AssistantMessage(
        content=[
            ThinkingContent(thinking="from another provider"),
            TextContent(text=""),
            ToolCall(id="t1", name="f"),
        ]
    )
    assert to_anthropic([message]) == (
        None,
        [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            }
        ],
    )


def test_openai_image_detail_and_names_are_not_exported():
    message = UserMessage(
        content=[ImageContent(url="https://x.test/a.png", detail="high")], name="alice"
    )
    assert to_anthropic([message])[1] == [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}
            ],
        }
    ]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("[1, 2]", "tool call 't1' has arguments that are not a JSON object (list)"),
        ('{"a": ', "tool call 't1' has arguments that are not valid JSON"),
        ("", "tool call 't1' has arguments that are not valid JSON"),
    ],
)
def test_tool_arguments_that_are_not_a_json_object_cannot_be_exported(arguments, expected):
    messages: list[Message] = [
        UserMessage(content="go"),
        AssistantMessage(content=[ToolCall(id="t1", name="f", arguments=arguments)]),
    ]
    with pytest.raises(FormatError) as info:
        to_anthropic(messages)
    assert str(info.value).startswith(f"message 1: {expected}")


def test_inline_image_without_mime_type_cannot_be_exported():
    with pytest.raises(FormatError, match=r"^message 0: an inline image has no mime_type"):
        to_anthropic([ToolResultMessage(tool_call_id="t", content=[ImageContent(data=PNG_BASE64)])])


def test_exporting_something_that_is_not_a_message_raises_format_error():
    with pytest.raises(FormatError, match=r"message 0: expected a sessionstore message, got str"):
        to_anthropic(["hi"])  # type: ignore[list-item]  # the wrong type is the point


# ── from OpenAI to Anthropic ───────────────────────────────────────────────────


def _assert_valid_anthropic(
    system: Any, messages: list[dict[str, Any]], *, open_end: bool = False
) -> None:
    """Check Anthropic's rules; `open_end`: the last message may hold unanswered calls (a
    conversation that stopped right after its final call, as a harness's `submit` does)."""
    assert system is None or isinstance(system, str | list)
    assert messages, "no messages"
    assert messages[0]["role"] == "user"
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles)), "roles must alternate"
    for index, message in enumerate(messages):
        content = message["content"]
        assert isinstance(content, str) or content, f"message {index} is empty"
        blocks = content if isinstance(content, list) else []
        assert {"type": "text", "text": ""} not in blocks, (
            f"message {index} has an empty text block"
        )
        calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if not calls or (open_end and index == len(messages) - 1):
            continue
        assert index + 1 < len(messages), f"tool_use in message {index} is not answered"
        answer = messages[index + 1]["content"]
        answered = [b["tool_use_id"] for b in answer if b["type"] == "tool_result"]
        assert answered == calls, f"message {index}: {calls} answered by {answered}"
        assert all(isinstance(b["input"], dict) for b in blocks if b["type"] == "tool_use")


def test_openai_dataset_converts_to_valid_anthropic(transcripts):
    for conversation in transcripts:
        originals = conversation["messages"]
        system, messages = to_anthropic(from_openai(originals))
        last = originals[-1]
        _assert_valid_anthropic(
            system, messages, open_end=last["role"] == "assistant" and bool(last.get("tool_calls"))
        )
        assert system == originals[0]["content"], conversation["id"]
        calls = [c for m in originals for c in m.get("tool_calls") or []]
        uses = [
            b
            for m in messages
            if isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "tool_use"
        ]
        assert [(u["id"], u["name"], u["input"]) for u in uses] == [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls
        ], conversation["id"]
        results = [
            b
            for m in messages
            if isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "tool_result"
        ]
        tools = [m for m in originals if m["role"] == "tool"]
        assert [(r["tool_use_id"], r.get("content")) for r in results] == [
            (t["tool_call_id"], t["content"]) for t in tools
        ], conversation["id"]


def test_openai_dataset_round_trips_through_anthropic(transcripts):
    """OpenAI -> sessionstore -> Anthropic -> sessionstore keeps every message's content.

    Anthropic's roles alternate, so consecutive user messages (a harness's demonstration
    before the task) arrive as one user message holding their blocks in order.
    """
    for conversation in transcripts:
        ours = from_openai(conversation["messages"])
        system, messages = to_anthropic(ours)
        again = from_anthropic(messages, system=system)
        assert _merged_users(again) == _merged_users(ours), conversation["id"]


def _merged_users(messages: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            texts = [getattr(b, "text", b) for b in message.content]
            if out and out[-1][0] == "user":
                out[-1] = ("user", [*out[-1][1], *texts])
                continue
            out.append(("user", texts))
        else:
            out.append(_essence(message))
    return out


def _essence(message: Any) -> tuple[Any, ...]:
    if isinstance(message, AssistantMessage):
        # Empty text next to a tool call is left out, as Anthropic rejects it.
        blocks = [
            b for b in message.content if b != TextContent(text="") or len(message.content) == 1
        ]
        return (
            "assistant",
            [(b.type, getattr(b, "text", None), getattr(b, "id", None)) for b in blocks],
        )
    if isinstance(message, ToolResultMessage):
        return ("tool_result", message.tool_call_id, message.tool_name, message.text)
    return (message.kind, message.text)


# ── bad input ──────────────────────────────────────────────────────────────────

USER = {"role": "user", "content": "hi"}


def _user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def _assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (USER, "expected a list of messages, got dict"),
        ("hi", "expected a list of messages, got str"),
        ([42], "message 0: expected an object, got int"),
        ([USER, {"content": "x"}], "message 1: the message has no 'role'"),
        ([{"role": "system", "content": "x"}], "message 0: role 'system' is not a message role"),
        ([{"role": "tool", "content": "x"}], "message 0: role 'tool' is not supported"),
        ([{"role": "user"}], "message 0: the message has no 'content'"),
        ([{"role": "user", "content": None}], "message 0: 'content' must be a string or a list"),
        ([_user("hi")], "message 0: block 0 must be an object, not str"),
        (
            [_user({"type": "document", "source": {}})],
            "message 0: block 0 has unsupported type 'document'",
        ),
        ([_user(_tool_use("t", "f"))], "message 0: block 0 has unsupported type 'tool_use'"),
        (
            [USER, _assistant({"type": "tool_result", "tool_use_id": "t"})],
            "message 1: block 0 has unsupported type 'tool_result'",
        ),
        ([_user({"type": "text"})], "message 0: block 0 has no 'text' string"),
        ([_user({"type": "text", "text": "a", "x": 1})], "block 0 has unsupported keys ['x']"),
        (
            [USER, _assistant({"type": "tool_use", "name": "f", "input": {}})],
            "message 1: block 0 (tool_use) has no 'id'",
        ),
        (
            [USER, _assistant({"type": "tool_use", "id": "t", "input": {}})],
            "block 0 (tool_use 't') has no 'name'",
        ),
        (
            [USER, _assistant({"type": "tool_use", "id": "t", "name": "f", "input": "{}"})],
            "block 0 (tool_use 't') needs an 'input' object",
        ),
        (
            [
                USER,
                _assistant(
                    {"type": "tool_use", "id": "t", "name": "f", "input": {"x": float("nan")}}
                ),
            ],
            "block 0 (tool_use 't') has an 'input' that is not JSON",
        ),
        (
            [USER, _assistant({"type": "thinking", "thinking": "x", "signature": 1})],
            "block 0 has a 'signature' that is not a string",
        ),
        ([USER, _assistant({"type": "redacted_thinking"})], "block 0 has no 'data' string"),
        (
            [_user({"type": "tool_result", "content": "x"})],
            "block 0 (tool_result) has no 'tool_use_id'",
        ),
        (
            [_user({"type": "tool_result", "tool_use_id": "t", "content": 5})],
            "block 0 (tool_result for 't') has 'content' that is neither a string nor a list",
        ),
        (
            [_user({"type": "tool_result", "tool_use_id": "t", "is_error": "yes"})],
            "block 0 (tool_result for 't') has an 'is_error' that is not a boolean",
        ),
        (
            [_user({"type": "tool_result", "tool_use_id": "t", "content": [_tool_use("u", "f")]})],
            "message 0: block 0 has unsupported type 'tool_use'",
        ),
        ([_user({"type": "image"})], "block 0 has no 'source' object"),
        (
            [_user({"type": "image", "source": {"type": "file", "file_id": "f"}})],
            "block 0 has unsupported source type 'file'",
        ),
        (
            [_user({"type": "image", "source": {"type": "base64", "data": PNG_BASE64}})],
            "block 0 source has no 'media_type' string",
        ),
    ],
)
def test_bad_input_raises_format_error_naming_the_message(messages, expected):
    with pytest.raises(FormatError) as info:
        from_anthropic(messages)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        (42, "system: expected a string or a list of text blocks, not int"),
        ([_image()], "system: block 0 has unsupported type 'image'"),
    ],
)
def test_bad_system_raises_format_error(system, expected):
    with pytest.raises(FormatError) as info:
        from_anthropic([USER], system=system)
    assert str(info.value).startswith(expected)


def test_validation_errors_become_format_errors_chained_to_the_cause():
    with pytest.raises(FormatError, match=r"^message 1: invalid ImageContent: .*base64") as info:
        from_anthropic([USER, _user(_image("not base64!"))])
    assert isinstance(info.value.__cause__, ValidationError)
