"""The built-in block strategy: raw first turns, one line per middle turn, truncated recent turns.

`DefaultBlockCompaction` is stateless and runs offline: every parameter comes from the
`CompactionConfig`, the one-liners from a `Summarizer` (`OneLineSummarizer` by
default) and the token counts from a `TokenCounter` (the heuristic by default).
"""

from __future__ import annotations

from sessionstore._tokens import HeuristicTokenCounter, TokenCounter
from sessionstore._turns import TurnMap
from sessionstore.config import CompactionConfig
from sessionstore.models import (
    BashExecutionMessage,
    CompactedSection,
    CompactionSummaryMessage,
    ReplacementMessage,
    StoredMessage,
    ToolResultMessage,
    TurnRange,
)
from sessionstore.strategies._block import LoopView, SectionedBlockStrategy, section_layout
from sessionstore.strategies._diff_cut import cut_output
from sessionstore.strategies._legacy import truncate_tool_result
from sessionstore.summarizers import OneLineSummarizer, TurnSummarizer

__all__ = ["DefaultBlockCompaction", "truncated_copy"]


def truncated_copy(raw: StoredMessage, max_lines: int, counter: TokenCounter) -> ReplacementMessage:
    """Return a `keep_recent` replacement of `raw`: tool output cut to `max_lines` lines.

    The output is cut by `cut_output`: head and tail as the seed's level 1, keeping the
    error lines of the middle, and a diff by its unchanged lines, so what it changed
    stays. A message that needs no cut is the raw message itself, with its cached token
    count.
    """
    message = raw.message
    if isinstance(message, ToolResultMessage):
        message = truncate_tool_result(message, max_lines, cut_output)
    elif isinstance(message, BashExecutionMessage):
        output = cut_output(message.output, max_lines)
        if output != message.output:
            message = message.model_copy(update={"output": output})
    token_count = raw.token_count if message is raw.message else counter.count_message(message)
    return ReplacementMessage(message=message, covers=[raw.id], token_count=token_count)


class DefaultBlockCompaction(SectionedBlockStrategy):
    """The default `BlockCompactionStrategy`, the seed's `DefaultBlockCompaction`.

    - `keep_first`: turns `0..keep_first_turns-1`, clamped to the loop.
    - `keep_recent`: the last `keep_recent_turns` turns after those, one replacement per
      raw message, with each tool result's text and each bash execution's output cut
      to `tool_output_max_lines` lines (`truncate_head_tail`; a unified diff loses its
      unchanged lines first, `cut_output`). A message that needs no
      cut is the raw message itself, with its cached token count.
    - `keep_compacted`: the turns in between (an older loop: every turn), one
      `CompactionSummaryMessage` `"[Summary] turn {i}: {one-liner}"` per turn, oldest
      first, until the next one would pass `max_summary_tokens`. The turns left over
      are covered by one marker, `"[Context compacted: {n} turns omitted]"` (with
      `extra={"sessionstore": {"omitted_turns": n}}`), for which room is made by
      dropping one-liners from the end if needed.

    Every replacement lists the ids of the raw messages it stands for, so each raw
    message of a section is covered exactly once. The replacements of `keep_compacted`
    never hold more than `max_summary_tokens` tokens; when that budget is too small for
    even the marker, the section holds only the one-liners that fit (possibly none),
    and the turns after them are covered by no replacement.

    Limitation: past the budget, turns are dropped rather than summarised together. A
    strategy that calls a model to digest all turns within the budget can subclass
    this one and override `keep_compacted`.

    Args:
        summarizer: writes each turn's one-liner.
        counter: counts the tokens of the replacements it writes.
    """

    name = "default"

    def __init__(
        self, summarizer: TurnSummarizer | None = None, counter: TokenCounter | None = None
    ) -> None:
        self.summarizer: TurnSummarizer = OneLineSummarizer() if summarizer is None else summarizer
        self.counter: TokenCounter = HeuristicTokenCounter() if counter is None else counter

    def __repr__(self) -> str:
        return f"DefaultBlockCompaction(summarizer={self.summarizer!r}, counter={self.counter!r})"

    def keep_first(
        self, view: LoopView, turn_map: TurnMap, config: CompactionConfig
    ) -> TurnRange | None:
        """Return turns `0..keep_first_turns-1`, clamped to the loop (None when empty)."""
        return section_layout(turn_map.turn_count(), config, is_most_recent=True).keep_first

    def keep_recent(
        self, view: LoopView, turn_map: TurnMap, config: CompactionConfig
    ) -> CompactedSection | None:
        """Return the recent turns, one replacement per raw message, tool output truncated."""
        turns = section_layout(turn_map.turn_count(), config, is_most_recent=True).keep_recent
        if turns is None:
            return None
        start, end = turn_map.msg_range(turns)
        max_lines = config.tool_output_max_lines
        replacements = [self._truncated(view.messages[i], max_lines) for i in range(start, end)]
        return CompactedSection(range=turns, messages=replacements)

    def keep_compacted(
        self, view: LoopView, turn_map: TurnMap, config: CompactionConfig, is_most_recent: bool
    ) -> CompactedSection | None:
        """Return one summary line per turn within `max_summary_tokens`, then a marker."""
        layout = section_layout(turn_map.turn_count(), config, is_most_recent=is_most_recent)
        turns = layout.keep_compacted
        if turns is None:
            return None
        budget = config.max_summary_tokens
        messages = view.messages
        # (one-liner, tokens of the raw messages it covers), oldest first
        kept: list[tuple[ReplacementMessage, int]] = []
        used = 0
        turn = turns.start_turn
        # Summarise lazily: a 10,000-turn loop with a 2,000-token budget asks the
        # summarizer for the hundred-odd lines that fit, not for every turn.
        while turn <= turns.end_turn:
            start, end = turn_map.ranges[turn]
            raw = messages[start:end]
            raw_tokens = view.tokens(start, end)
            line = self.summarizer.summarize_turn([m.message for m in raw])
            summary = CompactionSummaryMessage(
                summary=f"[Summary] turn {turn}: {line}", tokens_before=raw_tokens
            )
            tokens = self.counter.count_message(summary)
            if used + tokens > budget:
                break
            covers = view.message_ids(start, end)
            kept.append(
                (ReplacementMessage(message=summary, covers=covers, token_count=tokens), raw_tokens)
            )
            used += tokens
            turn += 1
        marker = None
        if turn <= turns.end_turn:
            marker = self._omitted_marker(kept, used, view, turn_map, turns, budget)
        replacements = [replacement for replacement, _ in kept]
        if marker is not None:
            replacements.append(marker)
        return CompactedSection(range=turns, messages=replacements)

    def _truncated(self, raw: StoredMessage, max_lines: int) -> ReplacementMessage:
        return truncated_copy(raw, max_lines, self.counter)

    def _omitted_marker(
        self,
        kept: list[tuple[ReplacementMessage, int]],
        used: int,
        view: LoopView,
        turn_map: TurnMap,
        turns: TurnRange,
        budget: int,
    ) -> ReplacementMessage | None:
        """Return the marker for the turns of `turns` after `kept`, popping one-liners to fit.

        `used` is the tokens of `kept`. The one-liners popped from `kept` are covered by
        the marker instead. None when the marker does not fit even with `kept` empty.
        """
        first_omitted = turns.start_turn + len(kept)
        end = turn_map.ranges[turns.end_turn][1]
        omitted_tokens = view.tokens(turn_map.ranges[first_omitted][0], end)
        while True:
            omitted = turns.end_turn + 1 - first_omitted
            marker = CompactionSummaryMessage(
                summary=f"[Context compacted: {omitted} turns omitted]",
                tokens_before=omitted_tokens,
                extra={"sessionstore": {"omitted_turns": omitted}},
            )
            tokens = self.counter.count_message(marker)
            if used + tokens <= budget:
                start = turn_map.ranges[first_omitted][0]
                covers = view.message_ids(start, end)
                return ReplacementMessage(message=marker, covers=covers, token_count=tokens)
            if not kept:
                return None
            popped, popped_raw_tokens = kept.pop()
            used -= popped.token_count or 0
            omitted_tokens += popped_raw_tokens
            first_omitted -= 1
