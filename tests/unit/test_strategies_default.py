"""DefaultBlockCompaction: the three sections, their budgets and a real transcript."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    CompactedSection,
    CompactionBlock,
    CompactionConfig,
    CompactionSummaryMessage,
    ContextConfig,
    DefaultBlockCompaction,
    HeuristicTokenCounter,
    ImageContent,
    LoopView,
    Message,
    TextContent,
    TokenCounter,
    ToolCall,
    ToolResultMessage,
    TurnRange,
    TurnSummarizer,
    compact_messages,
)
from sessionstore._tokens import message_tokens
from sessionstore.formats._jsonl import parse_conversation_line
from sessionstore.strategies import (
    total_tokens,
)
from tests.unit._loops import loop_of, stored, tool_turn, user

# ── checking blocks ───────────────────────────────────────────────────────────


def cfg(**knobs: int) -> CompactionConfig:
    return CompactionConfig(**knobs)


def turn_ids(view: LoopView, start: int, end: int) -> list[int]:
    """The ids of the messages of turns `start..end` (inclusive)."""
    first, last = view.turn_map.ranges[start][0], view.turn_map.ranges[end][1]
    return [m.id for m in view.messages[first:last]]


def check_block(
    view: LoopView,
    block: CompactionBlock,
    config: CompactionConfig,
    counter: TokenCounter | None = None,
) -> None:
    """The invariants every block from DefaultBlockCompaction holds."""
    counter = counter or HeuristicTokenCounter()
    compacted, recent = block.keep_compacted, block.keep_recent
    if compacted is not None:
        r = compacted.range
        covers = [i for m in compacted.messages for i in m.covers]
        assert len(covers) == len(set(covers)), "a raw message is covered twice"
        ids = turn_ids(view, r.start_turn, r.end_turn)
        assert set(covers) <= set(ids)
        assert sorted(covers) == covers  # in order, oldest first
        tokens = [m.token_count for m in compacted.messages]
        assert all(t is not None for t in tokens)
        assert sum(t or 0 for t in tokens) <= config.max_summary_tokens
        for m in compacted.messages:
            assert m.token_count == counter.count_message(m.message)
        has_marker = bool(compacted.messages) and "omitted_turns" in str(
            compacted.messages[-1].message.extra
        )
        if has_marker or len(compacted.messages) == len(compacted.range):
            assert covers == ids, "every raw message of the section is covered"
        else:  # a budget too small for the marker: the first turns, then nothing
            assert covers == ids[: len(covers)]
    if recent is not None:
        r = recent.range
        assert [m.covers for m in recent.messages] == [[i] for i in turn_ids(view, *r_of(r))]
        assert r.end_turn == view.turn_map.turn_count() - 1
    sections = [s for s in (block.keep_compacted, block.keep_recent) if s is not None]
    after = (
        sum(m.token_count for m in view.turn_messages(block.keep_first)) if block.keep_first else 0
    )
    after += sum(m.token_count or 0 for s in sections for m in s.messages)
    assert block.tokens_after == after
    assert block.tokens_before == sum(m.token_count for m in view.messages)


def r_of(turn_range: TurnRange | None) -> tuple[int, int]:
    assert turn_range is not None
    return turn_range.start_turn, turn_range.end_turn


def summaries(section: CompactedSection | None) -> list[str]:
    assert section is not None
    texts = []
    for replacement in section.messages:
        assert isinstance(replacement.message, CompactionSummaryMessage)
        texts.append(replacement.message.summary)
    return texts


# ── layout ─────────────────────────────────────────────────────────────────────


def test_most_recent_loop_gets_all_three_sections() -> None:
    view = loop_of(20)
    config = cfg(keep_first_turns=2, keep_recent_turns=3)
    block = DefaultBlockCompaction().compact(view, config, is_most_recent=True)
    assert block.strategy == "default"
    assert block.config == config.snapshot()
    assert r_of(block.keep_first) == (0, 1)
    assert block.keep_compacted is not None
    assert r_of(block.keep_compacted.range) == (2, 16)
    assert block.keep_recent is not None
    assert r_of(block.keep_recent.range) == (17, 19)
    assert block.tokens_after < block.tokens_before
    check_block(view, block, config)


def test_short_loop_has_no_middle() -> None:
    view = loop_of(3)
    block = DefaultBlockCompaction().compact(view, cfg(), is_most_recent=True)
    assert r_of(block.keep_first) == (0, 1)
    assert block.keep_compacted is None
    assert block.keep_recent is not None
    assert r_of(block.keep_recent.range) == (2, 2)
    check_block(view, block, cfg())


def test_keep_first_larger_than_the_loop_is_clamped() -> None:
    view = loop_of(3)
    config = cfg(keep_first_turns=5)
    block = DefaultBlockCompaction().compact(view, config, is_most_recent=True)
    assert r_of(block.keep_first) == (0, 2)
    assert block.keep_compacted is None
    assert block.keep_recent is None
    assert block.tokens_after == block.tokens_before
    check_block(view, block, config)


def test_zero_keep_recent_compacts_to_the_end() -> None:
    view = loop_of(6)
    config = cfg(keep_first_turns=0, keep_recent_turns=0)
    block = DefaultBlockCompaction().compact(view, config, is_most_recent=True)
    assert block.keep_first is None
    assert block.keep_recent is None
    assert block.keep_compacted is not None
    assert r_of(block.keep_compacted.range) == (0, 5)
    check_block(view, block, config)


def test_older_loop_is_compacted_whole() -> None:
    view = loop_of(6)
    block = DefaultBlockCompaction().compact(view, cfg(), is_most_recent=False)
    assert block.keep_first is None
    assert block.keep_recent is None
    assert block.keep_compacted is not None
    assert r_of(block.keep_compacted.range) == (0, 5)
    assert summaries(block.keep_compacted) == [
        "[Summary] turn 0: User: please fix the bug",
        *[f"[Summary] turn {i}: step {i} [used 1 tool(s): bash]" for i in range(1, 6)],
    ]
    check_block(view, block, cfg())


def test_empty_loop_gives_an_empty_block() -> None:
    view = stored([])
    for is_most_recent in (True, False):
        block = DefaultBlockCompaction().compact(view, cfg(), is_most_recent=is_most_recent)
        assert (block.keep_first, block.keep_compacted, block.keep_recent) == (None, None, None)
        assert (block.tokens_before, block.tokens_after) == (0, 0)


# ── keep_recent ────────────────────────────────────────────────────────────────


def test_recent_turns_truncate_tool_and_bash_output_one_replacement_per_message() -> None:
    long = "\n".join(f"line {i}" for i in range(10))
    image = ImageContent(url="https://example.org/x.png")
    tool = ToolResultMessage(
        tool_call_id="t1", tool_name="bash", content=[TextContent(text=long), image]
    )
    short_tool = ToolResultMessage(tool_call_id="t2", tool_name="bash", content="fine")
    call = AssistantMessage(
        content=[
            TextContent(text=long),
            ToolCall(id="t1", name="bash"),
            ToolCall(id="t2", name="bash"),
        ]
    )
    bash = BashExecutionMessage(command="make", output=long, exit_code=2)
    view = stored([user(), call, tool, short_tool, bash, user("thanks")])
    config = cfg(keep_first_turns=0, tool_output_max_lines=2)
    section = DefaultBlockCompaction().keep_recent(view, view.turn_map, config)
    assert section is not None
    assert r_of(section.range) == (0, 3)
    assert [r.covers for r in section.messages] == [[1], [2], [3], [4], [5], [6]]
    cut = "line 0\n\n[... 8 lines truncated ...]\n\nline 9"
    new_tool, new_bash = section.messages[2].message, section.messages[4].message
    assert new_tool == tool.model_copy(update={"content": [TextContent(text=cut), image]})
    assert new_bash == bash.model_copy(update={"output": cut})
    for index in (0, 1, 3, 5):  # unchanged: the raw message itself, its cached count
        assert section.messages[index].message is view.messages[index].message
        assert section.messages[index].token_count == view.messages[index].token_count
    for index in (2, 4):
        replacement = section.messages[index]
        assert replacement.token_count == message_tokens(replacement.message)
        assert replacement.token_count < view.messages[index].token_count


# ── keep_compacted ─────────────────────────────────────────────────────────────


def test_compacted_one_liners_cover_their_turns() -> None:
    view = loop_of(8)
    config = cfg(keep_first_turns=2, keep_recent_turns=2)
    section = DefaultBlockCompaction().keep_compacted(view, view.turn_map, config, True)
    assert section is not None
    assert summaries(section) == [
        f"[Summary] turn {i}: step {i} [used 1 tool(s): bash]" for i in range(2, 6)
    ]
    for turn, replacement in zip(range(2, 6), section.messages, strict=True):
        assert replacement.covers == turn_ids(view, turn, turn)
        assert isinstance(replacement.message, CompactionSummaryMessage)
        assert replacement.message.tokens_before == sum(
            m.token_count for m in view.messages if m.id in replacement.covers
        )


def test_turns_past_the_budget_are_dropped_behind_a_marker() -> None:
    view = loop_of(40)
    config = cfg(keep_first_turns=0, keep_recent_turns=0, max_summary_tokens=100)
    section = DefaultBlockCompaction().keep_compacted(view, view.turn_map, config, True)
    assert section is not None
    lines = summaries(section)
    kept = len(lines) - 1
    assert 0 < kept < 40
    assert lines[-1] == f"[Context compacted: {40 - kept} turns omitted]"
    marker = section.messages[-1]
    assert marker.message.extra == {"sessionstore": {"omitted_turns": 40 - kept}}
    assert marker.covers == turn_ids(view, kept, 39)
    assert sum(r.token_count or 0 for r in section.messages) <= 100
    check_block(view, DefaultBlockCompaction().compact(view, config, True), config)


def test_the_marker_takes_the_place_of_one_liners_when_it_needs_room() -> None:
    view = loop_of(5)
    config = cfg(keep_first_turns=0, keep_recent_turns=0)
    strategy = DefaultBlockCompaction()
    full = strategy.keep_compacted(view, view.turn_map, config, True)
    assert full is not None
    tokens = [r.token_count or 0 for r in full.messages]
    # Room for the first four one-liners exactly: the fifth does not fit, and the
    # marker for it needs the room of the fourth.
    tight = cfg(keep_first_turns=0, keep_recent_turns=0, max_summary_tokens=sum(tokens[:4]))
    section = strategy.keep_compacted(view, view.turn_map, tight, True)
    assert section is not None
    assert summaries(section)[-1] == "[Context compacted: 2 turns omitted]"
    assert [r.covers for r in section.messages[:-1]] == [turn_ids(view, i, i) for i in range(3)]
    assert section.messages[-1].covers == turn_ids(view, 3, 4)
    assert sum(r.token_count or 0 for r in section.messages) <= sum(tokens[:4])


def test_a_budget_too_small_for_the_marker_leaves_what_fits() -> None:
    view = loop_of(5)
    config = cfg(keep_first_turns=0, keep_recent_turns=0, max_summary_tokens=3)
    section = DefaultBlockCompaction().keep_compacted(view, view.turn_map, config, True)
    assert section is not None
    assert r_of(section.range) == (0, 4)
    assert section.messages == []


@settings(max_examples=150, deadline=None)
@given(
    shape=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 400)), min_size=1, max_size=30),
    max_summary_tokens=st.integers(1, 400),
    keep_first=st.integers(0, 4),
    keep_recent=st.integers(0, 6),
    is_most_recent=st.booleans(),
)
def test_compacted_section_never_exceeds_max_summary_tokens(
    shape: list[tuple[int, int]],
    max_summary_tokens: int,
    keep_first: int,
    keep_recent: int,
    is_most_recent: bool,
) -> None:
    messages: list[Message] = []
    for i, (calls, size) in enumerate(shape):
        if calls == 0:
            messages.append(user("w " * size))
        else:
            names = ["read", "bash", "read"][:calls]
            messages += tool_turn(i, text="t" * size, names=names, output="x\n" * size)
    view = stored(messages)
    config = cfg(
        keep_first_turns=keep_first,
        keep_recent_turns=keep_recent,
        max_summary_tokens=max_summary_tokens,
        tool_output_max_lines=3,
    )
    block = DefaultBlockCompaction().compact(view, config, is_most_recent)
    check_block(view, block, config)
    assert block == DefaultBlockCompaction().compact(view, config, is_most_recent)


def test_compaction_is_deterministic() -> None:
    view = loop_of(30, output="\n".join("o" * 20 for _ in range(80)))
    config = cfg(keep_recent_turns=5, max_summary_tokens=150)
    first = DefaultBlockCompaction().compact(view, config, is_most_recent=True)
    second = DefaultBlockCompaction().compact(view, config, is_most_recent=True)
    assert first == second
    assert first.model_dump_json() == second.model_dump_json()


# ── injected summarizer and counter, and the cost of a large loop ──────────────


class CountingSummarizer:
    def __init__(self) -> None:
        self.calls = 0

    def summarize_turn(self, messages: Sequence[Message]) -> str:
        self.calls += 1
        return f"{len(messages)} message(s)"


class CountingCounter(HeuristicTokenCounter):
    def __init__(self) -> None:
        self.messages = 0

    def count_message(self, message: Message) -> int:
        self.messages += 1
        return 2 * super().count_message(message)


def test_injected_summarizer_and_counter_are_used() -> None:
    summarizer, counter = CountingSummarizer(), CountingCounter()
    assert isinstance(summarizer, TurnSummarizer)
    assert isinstance(counter, TokenCounter)
    view = loop_of(6)
    config = cfg(keep_first_turns=0, keep_recent_turns=0)
    block = DefaultBlockCompaction(summarizer, counter).compact(view, config, True)
    assert summaries(block.keep_compacted) == [
        "[Summary] turn 0: 1 message(s)",
        *[f"[Summary] turn {i}: 2 message(s)" for i in range(1, 6)],
    ]
    check_block(view, block, config, counter)


def test_a_ten_thousand_message_loop_is_summarised_lazily_and_not_recounted() -> None:
    """Not timed: counts the work instead. The budget bounds the summarizer calls, and
    untouched recent messages keep their cached token counts."""
    messages: list[Message] = [user()]
    for i in range(1, 5_000):
        messages += tool_turn(i, text=f"step {i}")
    view = stored(messages)
    assert len(view.messages) == 9_999
    summarizer, counter = CountingSummarizer(), CountingCounter()
    strategy = DefaultBlockCompaction(summarizer, counter)

    config = cfg(keep_first_turns=2, keep_recent_turns=10_000)  # all but 2 turns are recent
    block = strategy.compact(view, config, is_most_recent=True)
    assert block.keep_recent is not None
    assert len(block.keep_recent.messages) == 9_999 - 3
    assert counter.messages == 0  # nothing was cut, so nothing was recounted
    assert summarizer.calls == 0

    config = cfg(keep_first_turns=2, keep_recent_turns=10)
    block = strategy.compact(view, config, is_most_recent=True)
    assert block.keep_compacted is not None
    kept = len(block.keep_compacted.messages) - 1  # the marker is last
    # Every kept line, the line that did not fit, and the line or two popped to make room
    # for the marker: about a hundred calls, not five thousand.
    assert kept + 2 <= summarizer.calls <= kept + 3
    assert summarizer.calls < 200
    assert block.keep_compacted.messages[-1].covers == turn_ids(view, 2 + kept, 4_989)

    everything = cfg(keep_first_turns=0, keep_recent_turns=0, max_summary_tokens=10**9)
    summarizer.calls = 0
    block = strategy.compact(view, everything, is_most_recent=False)
    assert summarizer.calls == 5_000
    assert block.keep_compacted is not None
    assert len(block.keep_compacted.messages) == 5_000


# ── a real transcript ──────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "name", ["mini_swe_agent_gemini3pro_swebench_verified.jsonl", "tau_bench_gpt4o_airline.jsonl"]
)
def test_real_transcript_compacts_within_its_bounds(dataset_dir: Path, name: str) -> None:
    path = dataset_dir / name
    if not path.exists():
        pytest.skip(f"{name} is not in the dataset")
    with path.open(encoding="utf-8") as lines:
        conversations = [parse_conversation_line(next(lines)) for _ in range(2)]
    config = cfg(keep_first_turns=2, keep_recent_turns=4, max_summary_tokens=300)
    strategy = DefaultBlockCompaction()
    for conversation in conversations:
        first_id = 1
        views = []
        for loop_id, loop in enumerate(conversation.loops, start=1):
            views.append(stored(loop, loop_id=loop_id, first_id=first_id))
            first_id += len(loop)
        before = after = 0
        for view in views:
            block = strategy.compact(view, config, is_most_recent=view is views[-1])
            check_block(view, block, config)
            before += block.tokens_before
            after += block.tokens_after
        assert after < before
        whole = [m for loop in conversation.loops for m in loop]
        budget = total_tokens(whole) // 3
        legacy = ContextConfig(max_context_tokens=budget + 1_000, system_prompt_tokens=1_000)
        context = compact_messages(whole, legacy)
        assert context == compact_messages(whole, legacy)
        # Only keep_within_budget's own marker may go past the budget.
        kept = context[1:] if total_tokens(context) > budget else context
        assert total_tokens(kept) <= budget
        assert context[-1] is whole[-1] or isinstance(whole[-1], ToolResultMessage)
