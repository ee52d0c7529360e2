"""Turns: a loop's messages grouped by model call, and the map from turn to messages.

A turn is one model call and what answers it: an assistant message plus the tool
results for its tool calls. A user message is a turn of its own, and so is every other
kind of message. Turns are numbered per loop from 0 and cover contiguous positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from sessionstore.models import AssistantMessage, Message, ToolResultMessage, TurnRange

__all__ = ["TurnAssigner", "TurnMap"]

_T = TypeVar("_T")


class _HasTurn(Protocol):
    @property
    def turn_index(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class TurnMap:
    """Turn index → the half-open range of message indices `[start, end)` it covers."""

    ranges: tuple[tuple[int, int], ...]

    @classmethod
    def from_messages(cls, messages: Sequence[_HasTurn]) -> TurnMap:
        """Group consecutive messages by `turn_index`; one without a turn index is its own group."""
        return cls.from_turn_indexes(message.turn_index for message in messages)

    @classmethod
    def from_turn_indexes(cls, turn_indexes: Iterable[int | None]) -> TurnMap:
        """Group consecutive equal turn indices (see `from_messages`), given the indices alone."""
        ranges: list[tuple[int, int]] = []
        previous: int | None = None
        for index, turn in enumerate(turn_indexes):
            if ranges and turn is not None and turn == previous:
                ranges[-1] = (ranges[-1][0], index + 1)
            else:
                ranges.append((index, index + 1))
            previous = turn
        return cls(tuple(ranges))

    @classmethod
    def from_bounds(cls, bounds: Iterable[tuple[int, int]]) -> TurnMap:
        """Build from `(first_index, last_index)` pairs (inclusive), one per turn, in order."""
        return cls(tuple((first, last + 1) for first, last in bounds))

    def turn_count(self) -> int:
        """Return the number of turns."""
        return len(self.ranges)

    def turn_msg_range(self, turn_index: int) -> tuple[int, int] | None:
        """Return the `[start, end)` message index range of one turn, or None if out of range."""
        if 0 <= turn_index < len(self.ranges):
            return self.ranges[turn_index]
        return None

    def msg_range(self, turns: TurnRange) -> tuple[int, int]:
        """Return the `[start, end)` message index range a turn range covers.

        Raises:
            IndexError: the range ends past the last turn.
        """
        if turns.end_turn >= len(self.ranges):
            raise IndexError(
                f"turn range {turns.start_turn}..{turns.end_turn} is out of bounds: "
                f"the loop has {len(self.ranges)} turns"
            )
        return self.ranges[turns.start_turn][0], self.ranges[turns.end_turn][1]

    def messages_for_range(self, turns: TurnRange, messages: Sequence[_T]) -> Sequence[_T]:
        """Return the slice of `messages` that belongs to `turns`."""
        start, end = self.msg_range(turns)
        return messages[start:end]


@dataclass(slots=True)
class TurnAssigner:
    """Assigns turn indices to messages appended to one loop, in order.

    A user message starts a turn, an assistant message starts a turn, and a tool result
    joins the current turn when that turn was opened by an assistant message that made
    tool calls, even when it answers none of them (an orphan between a call and its
    result must not split them into two turns). A tool result after anything else gets
    a turn of its own, and so does every other kind of message, so turns always cover
    contiguous positions.
    """

    next_turn: int = 0
    """The index the next turn will get (the loop's turn count)."""
    open_call_ids: frozenset[str] = field(default_factory=frozenset)
    """The call ids of the current turn's assistant message; empty when it is not one."""

    def assign(self, message: Message) -> int:
        """Return the turn index of `message` and advance the state."""
        if isinstance(message, ToolResultMessage) and self.open_call_ids:
            return self.next_turn - 1
        turn = self.next_turn
        self.next_turn += 1
        if isinstance(message, AssistantMessage):
            self.open_call_ids = frozenset(call.id for call in message.tool_calls)
        else:
            self.open_call_ids = frozenset()
        return turn
