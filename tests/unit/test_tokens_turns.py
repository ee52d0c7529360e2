"""The seed token heuristic and the turn rules."""

from __future__ import annotations

import base64

from sessionstore import (
    AssistantMessage,
    CustomMessage,
    HeuristicTokenCounter,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    TokenCounter,
    ToolCall,
    ToolResultMessage,
    TurnMap,
    TurnRange,
    UserMessage,
    estimate_tokens,
)
from sessionstore._tokens import message_tokens
from sessionstore._turns import TurnAssigner


def test_estimate_tokens_is_ceil_of_utf8_bytes_over_four() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("é") == 1  # two bytes
    assert estimate_tokens("日本語") == 3  # nine bytes


def test_message_tokens_follow_the_seed() -> None:
    user = UserMessage(content="abcdefgh")  # 2 + framing 4
    assert message_tokens(user) == 6
    call = ToolCall(id="c", name="bash", arguments='{"x": 1}')  # 1 + 2 + 8
    assistant = AssistantMessage(
        content=[TextContent(text="ab"), ThinkingContent(thinking="abcdefghi"), call]
    )
    assert message_tokens(assistant) == 1 + 3 + 11 + 4
    result = ToolResultMessage(tool_call_id="c", tool_name="bash", content="abcd")  # 1 + 1 + 8
    assert message_tokens(result) == 10
    custom = CustomMessage(custom_type="t", data={"a": 1})  # sent as '[t]\n{\n  "a": 1\n}'
    assert message_tokens(custom) == 4 + 4  # 16 bytes -> 4, + framing
    hidden = CustomMessage(custom_type="t", data={"a": 1}, display=False)
    assert message_tokens(hidden) == 0  # not sent, not counted


def test_image_tokens_are_clamped() -> None:
    small = ImageContent(data=base64.b64encode(b"x" * 100).decode())
    mid = ImageContent(data=base64.b64encode(b"x" * 750 * 200).decode())
    huge = ImageContent(data=base64.b64encode(b"x" * 750 * 20_000).decode())
    url = ImageContent(url="https://example.org/x.png")
    tokens = [message_tokens(UserMessage(content=[i])) - 4 for i in (small, mid, huge, url)]
    assert tokens == [85, 200, 16_000, 85]


def test_heuristic_counter_implements_the_protocol() -> None:
    counter = HeuristicTokenCounter()
    assert isinstance(counter, TokenCounter)
    assert counter.count_text("abcdefgh") == 2
    assert counter.count_message(UserMessage(content="abcd")) == 5


def test_turn_assigner_rules() -> None:
    assigner = TurnAssigner()
    kinds: list[Message] = [
        UserMessage(content="q"),
        AssistantMessage(content=[ToolCall(id="a", name="t"), ToolCall(id="b", name="t")]),
        ToolResultMessage(tool_call_id="b", content="x"),
        ToolResultMessage(tool_call_id="a", content="y"),
        ToolResultMessage(tool_call_id="nope", content="orphan"),
        AssistantMessage(content="answer"),
        ToolResultMessage(tool_call_id="a", content="late"),
    ]
    # The orphan stays in the turn of the calls before it; after a plain answer, a
    # late result is a turn of its own.
    assert [assigner.assign(m) for m in kinds] == [0, 1, 1, 1, 1, 2, 3]
    assert assigner.next_turn == 4


class _T:
    def __init__(self, turn: int | None) -> None:
        self.turn_index = turn


def test_turn_map_groups_consecutive_turns() -> None:
    items = [_T(0), _T(1), _T(1), _T(None), _T(None), _T(2)]
    turn_map = TurnMap.from_messages(items)
    assert turn_map.turn_count() == 5
    assert turn_map.turn_msg_range(1) == (1, 3)
    assert turn_map.turn_msg_range(9) is None
    assert turn_map.msg_range(TurnRange(start_turn=1, end_turn=3)) == (1, 5)
    assert list(turn_map.messages_for_range(TurnRange(start_turn=0, end_turn=1), "abcdef")) == [
        "a",
        "b",
        "c",
    ]
    assert TurnMap.from_bounds([(0, 0), (1, 2)]) == TurnMap(((0, 1), (1, 3)))
