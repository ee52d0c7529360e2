"""Block strategies: pure code that turns one loop's messages into a `CompactionBlock`.

A block is an overlay: it never changes a raw message. It names the turns kept verbatim
(`keep_first`), and gives replacement messages for summarised turns (`keep_compacted`)
and for recent turns with their tool output truncated (`keep_recent`). Every replacement
message lists the ids of the raw messages it stands for.

The layout of the most recent loop, for `keep_first_turns=2`, `keep_recent_turns=3`:

```
turn:     0   1 | 2   3   4   5   6 | 7   8   9
          keep_first | keep_compacted      | keep_recent
          (raw)      | (one line per turn) | (tool output truncated)
```

An older loop gets `keep_compacted` over the whole loop and nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from sessionstore._loop_messages import LoopMessages, message_columns
from sessionstore._turns import TurnMap
from sessionstore.config import CompactionConfig
from sessionstore.models import (
    AssistantMessage,
    CompactedSection,
    CompactionBlock,
    LoopRecord,
    StoredMessage,
    ToolResultMessage,
    TurnRange,
)

__all__ = ["LoopView", "SectionLayout", "SectionedBlockStrategy", "section_layout"]


@dataclass(frozen=True, slots=True)
class LoopView:
    """What a block strategy sees of one loop: its record and all its messages, in order."""

    loop: LoopRecord
    messages: Sequence[StoredMessage]
    turn_map: TurnMap
    previous: CompactionBlock | None = None
    """The loop's current block for the overlay being written (with its messages), if any:
    a summarizing strategy carries its digest forward."""

    @classmethod
    def of(
        cls,
        loop: LoopRecord,
        messages: Sequence[StoredMessage],
        previous: CompactionBlock | None = None,
    ) -> LoopView:
        """Build the view, with the turn map taken from the messages' turn indices."""
        _, turns, _ = message_columns(messages)
        return cls(loop, messages, TurnMap.from_turn_indexes(turns), previous)

    def open_turn(self) -> int | None:
        """Return the loop's latest turn while a tool call of it has no result yet.

        A tool result joins the latest turn when an assistant message that made tool
        calls began it (see `TurnAssigner`). While one of those calls is unanswered, its
        result is still to come: a block covering the turn would stand for the turn
        without it, and no context would show it. None when the loop is closed or empty,
        its latest turn is of another kind, or every call there has its result (a result
        appended later answers none of them: the context leaves it out as an orphan,
        raw or not).
        """
        if self.loop.closed_at is not None or not self.turn_map.ranges:
            return None
        start, end = self.turn_map.ranges[-1]
        opener = self.messages[start].message
        if not isinstance(opener, AssistantMessage) or not opener.tool_calls:
            return None
        answered = {
            stored.message.tool_call_id
            for stored in self.messages[start + 1 : end]
            if isinstance(stored.message, ToolResultMessage)
        }
        if all(call.id in answered for call in opener.tool_calls):
            return None
        return len(self.turn_map.ranges) - 1

    def settled(self) -> LoopView:
        """Return the view without an open latest turn (see `open_turn`); else itself.

        A compaction builds its block from the settled turns and leaves the open one raw,
        after the block, so the results still to come join a raw turn.
        """
        turn = self.open_turn()
        if turn is None:
            return self
        count = self.turn_map.ranges[turn][0]
        messages = self.messages
        head = messages.head(count) if isinstance(messages, LoopMessages) else messages[:count]
        return LoopView(self.loop, head, TurnMap(self.turn_map.ranges[:turn]), self.previous)

    def turn_messages(self, turns: TurnRange) -> Sequence[StoredMessage]:
        """Return the messages of an inclusive turn range."""
        return self.turn_map.messages_for_range(turns, self.messages)

    def tokens(self, start: int = 0, stop: int | None = None) -> int:
        """Return the cached token count of `messages[start:stop]`, without building them.

        A view the store builds for a compaction holds its messages as columns
        (`LoopMessages`): sums and ids come from those, and a message is built only
        when it is indexed.
        """
        messages = self.messages
        if isinstance(messages, LoopMessages):
            return sum(messages.token_counts[start:stop])
        return sum(m.token_count for m in messages[start:stop])

    def message_ids(self, start: int = 0, stop: int | None = None) -> list[int]:
        """Return the ids of `messages[start:stop]`, without building them (see `tokens`)."""
        messages = self.messages
        if isinstance(messages, LoopMessages):
            return list(messages.ids[start:stop])
        return [m.id for m in messages[start:stop]]


@dataclass(frozen=True, slots=True)
class SectionLayout:
    """Which turns of a loop each section covers (None: the section is empty)."""

    keep_first: TurnRange | None
    keep_compacted: TurnRange | None
    keep_recent: TurnRange | None


def section_layout(
    turn_count: int, config: CompactionConfig, *, is_most_recent: bool
) -> SectionLayout:
    """Split `turn_count` turns into the three sections.

    Most recent loop: `keep_first` = turns `0..keep_first_turns-1` (clamped to the
    loop), `keep_recent` = the last `keep_recent_turns` turns after those, and
    `keep_compacted` = the turns in between. Older loop: `keep_compacted` = every turn.
    """
    if turn_count <= 0:
        return SectionLayout(None, None, None)
    if not is_most_recent:
        return SectionLayout(None, TurnRange(start_turn=0, end_turn=turn_count - 1), None)
    first_end = min(config.keep_first_turns, turn_count)  # exclusive
    recent_start = max(first_end, turn_count - config.keep_recent_turns)
    return SectionLayout(
        TurnRange(start_turn=0, end_turn=first_end - 1) if first_end > 0 else None,
        TurnRange(start_turn=first_end, end_turn=recent_start - 1)
        if recent_start > first_end
        else None,
        TurnRange(start_turn=recent_start, end_turn=turn_count - 1)
        if turn_count > recent_start
        else None,
    )


class SectionedBlockStrategy(ABC):
    """A `BlockCompactionStrategy` built from its three sections; subclasses give them.

    `compact` assembles the block from `keep_first`, `keep_compacted` and `keep_recent`;
    a strategy that works on the loop as a whole implements the protocol directly.
    Strategies are pure: no I/O, no clock, the same input gives the same block.
    """

    name: str = "custom"
    """Recorded on every block the strategy builds."""

    @abstractmethod
    def keep_first(
        self, view: LoopView, turn_map: TurnMap, config: CompactionConfig
    ) -> TurnRange | None:
        """Return the turns kept verbatim from the start (most recent loop only)."""

    @abstractmethod
    def keep_recent(
        self, view: LoopView, turn_map: TurnMap, config: CompactionConfig
    ) -> CompactedSection | None:
        """Return the recent turns, tool output truncated (most recent loop only)."""

    @abstractmethod
    def keep_compacted(
        self, view: LoopView, turn_map: TurnMap, config: CompactionConfig, is_most_recent: bool
    ) -> CompactedSection | None:
        """Return the summarised turns: the most recent loop's middle, or a whole older loop."""

    def compact(
        self, view: LoopView, config: CompactionConfig, is_most_recent: bool
    ) -> CompactionBlock:
        """Return the block: all three sections for the most recent loop, else the summary."""
        turn_map = view.turn_map
        keep_first = self.keep_first(view, turn_map, config) if is_most_recent else None
        keep_recent = self.keep_recent(view, turn_map, config) if is_most_recent else None
        keep_compacted = self.keep_compacted(view, turn_map, config, is_most_recent)
        tokens_after = view.tokens(*turn_map.msg_range(keep_first)) if keep_first else 0
        for section in (keep_compacted, keep_recent):
            if section is not None:
                tokens_after += sum(r.token_count or 0 for r in section.messages)
        return CompactionBlock(
            keep_first=keep_first,
            keep_compacted=keep_compacted,
            keep_recent=keep_recent,
            strategy=self.name,
            config=config.snapshot(),
            tokens_before=view.tokens(),
            tokens_after=tokens_after,
        )
