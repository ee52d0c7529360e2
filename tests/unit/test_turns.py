"""The turn rules: TurnAssigner and TurnMap."""

from __future__ import annotations

from sessionstore import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    TurnMap,
    TurnRange,
    UserMessage,
)
from sessionstore._turns import TurnAssigner


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
