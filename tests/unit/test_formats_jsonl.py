"""Conversation lines: parsing and one loop per user request."""

from __future__ import annotations

import json

import pytest

from sessionstore import AssistantMessage, Message, SystemMessage, UserMessage
from sessionstore.errors import FormatError
from sessionstore.formats._jsonl import parse_conversation_line, split_into_loops


def test_every_user_message_starts_a_loop_and_the_system_prompt_joins_the_first() -> None:
    messages: list[Message] = [
        SystemMessage(content="s"),
        UserMessage(content="u1"),
        AssistantMessage(content="a1"),
        UserMessage(content="u2"),
        UserMessage(content="u3"),
        AssistantMessage(content="a3"),
    ]
    loops = split_into_loops(messages)
    assert [[m.kind for m in loop] for loop in loops] == [
        ["system", "user", "assistant"],
        ["user"],
        ["user", "assistant"],
    ]
    assert split_into_loops([]) == []
    assert len(split_into_loops([AssistantMessage(content="x"), UserMessage(content="u")])) == 2


def test_parse_line_keeps_id_title_and_metadata() -> None:
    line = json.dumps(
        {
            "id": "conv-1",
            "source": "src",
            "license": "MIT",
            "meta": {"a": 1},
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        }
    )
    conversation = parse_conversation_line(line)
    assert conversation.session_id == "conv-1"
    assert conversation.title == "conv-1"
    assert conversation.metadata == {"source": "src", "license": "MIT", "meta": {"a": 1}}
    assert [[m.kind for m in loop] for loop in conversation.loops] == [["user", "assistant"]]


def test_a_line_without_a_usable_id_gets_a_stable_derived_one() -> None:
    line = json.dumps({"id": "x" * 200, "messages": []})
    first = parse_conversation_line(line)
    assert first.session_id == parse_conversation_line(line.encode()).session_id
    assert len(first.session_id) == 32
    assert first.title == "x" * 200


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"id": "a"}', "no 'messages'"),
        ('{"id": 5, "messages": []}', "'id' must be a string"),
        ('{"messages": [], "metadata": []}', "'metadata' must be an object"),
        ('{"messages": [{"content": "no role"}]}', "message 0"),
    ],
)
def test_bad_lines_raise_format_error(line: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse_conversation_line(line)
