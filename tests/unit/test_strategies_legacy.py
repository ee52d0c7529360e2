"""The legacy, stateless compaction: the seed's three levels, exactly."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionStrategy,
    CompactionSummaryMessage,
    ContextConfig,
    CustomMessage,
    DefaultCompaction,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    compact_messages,
)
from sessionstore._tokens import message_tokens
from sessionstore.strategies import (
    keep_within_budget,
    level1_truncate_tool_outputs,
    level2_summarize_old_turns,
    level3_drop_middle,
    total_tokens,
    truncate_head_tail,
)
from tests.factories import conversation

IMAGE = ImageContent(data=base64.b64encode(b"png").decode())


def lines(count: int, prefix: str = "line") -> str:
    return "\n".join(f"{prefix} {i}" for i in range(count))


def text_of(message: Message) -> str:
    assert isinstance(message, UserMessage)
    return message.text


def assistant(*texts: str, calls: tuple[str, ...] = ()) -> AssistantMessage:
    blocks: list[TextContent | ToolCall] = [TextContent(text=t) for t in texts]
    blocks += [ToolCall(id=call, name="bash", arguments="{}") for call in calls]
    return AssistantMessage(content=blocks)


def result(call: str, text: str = "ok") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call, tool_name="bash", content=text)


def config(budget: int, **knobs: int) -> ContextConfig:
    return ContextConfig(max_context_tokens=budget + 100, system_prompt_tokens=100, **knobs)


# ── truncate_head_tail ─────────────────────────────────────────────────────────


def test_truncate_head_tail_keeps_a_short_text_as_it_is() -> None:
    text = lines(50)
    assert truncate_head_tail(text, 50) is text
    assert truncate_head_tail(text + "\n", 50) == text + "\n"  # a final newline is no line
    assert truncate_head_tail("", 0) == ""


def test_truncate_head_tail_keeps_head_and_tail_around_the_exact_marker() -> None:
    assert truncate_head_tail(lines(10), 4) == (
        "line 0\nline 1\n\n[... 6 lines truncated ...]\n\nline 8\nline 9"
    )


def test_truncate_head_tail_gives_the_extra_line_of_an_odd_count_to_the_tail() -> None:
    assert truncate_head_tail(lines(10), 5) == (
        "line 0\nline 1\n\n[... 5 lines truncated ...]\n\nline 7\nline 8\nline 9"
    )
    assert truncate_head_tail(lines(3), 1) == "\n\n[... 2 lines truncated ...]\n\nline 2"


def test_truncate_head_tail_with_zero_lines_keeps_only_the_marker() -> None:
    assert truncate_head_tail(lines(3), 0) == "\n\n[... 3 lines truncated ...]\n\n"


def test_truncate_head_tail_counts_lines_like_rust_str_lines() -> None:
    assert truncate_head_tail("a\r\nb\r\nc\r\n", 2) == "a\n\n[... 1 lines truncated ...]\n\nc"
    assert truncate_head_tail("a\nb\nc\r", 2) == "a\n\n[... 1 lines truncated ...]\n\nc\r"
    form_feed = "a\fb\x0bc\u2028d"  # one line: only "\n" ends a line
    assert truncate_head_tail(form_feed, 1) is form_feed
    assert truncate_head_tail("a\n\n\nb", 2) == "a\n\n[... 2 lines truncated ...]\n\nb"


def _rust_lines(text: str) -> list[str]:
    """Rust's `str::lines`, written the plain way (the reference for the fast version)."""
    pieces = text.split("\n")
    if pieces[-1] == "":
        pieces.pop()
    ended = len(pieces) if text.endswith("\n") else len(pieces) - 1
    return [p[:-1] if i < ended and p.endswith("\r") else p for i, p in enumerate(pieces)]


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="ab\r\n\f", max_size=40), max_lines=st.integers(0, 8))
def test_truncate_head_tail_matches_the_seed_on_rust_lines(text: str, max_lines: int) -> None:
    lines = _rust_lines(text)
    if len(lines) <= max_lines:
        expected = text
    else:
        head, tail = max_lines // 2, max_lines - max_lines // 2
        expected = (
            "\n".join(lines[:head])
            + f"\n\n[... {len(lines) - head - tail} lines truncated ...]\n\n"
            + "\n".join(lines[len(lines) - tail :])
        )
    assert truncate_head_tail(text, max_lines) == expected


def test_truncate_head_tail_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="max_lines"):
        truncate_head_tail("a", -1)


# ── level 1 ────────────────────────────────────────────────────────────────────


def test_level1_truncates_only_tool_result_text_blocks() -> None:
    tool = ToolResultMessage(
        tool_call_id="c1",
        tool_name="read",
        content=[TextContent(text=lines(10)), IMAGE, TextContent(text="short")],
        is_error=True,
    )
    user = UserMessage(content=lines(10))
    bash = BashExecutionMessage(command="ls", output=lines(10))
    out = level1_truncate_tool_outputs([user, tool, bash], 2)
    assert out[0] is user
    assert out[2] is bash
    truncated = out[1]
    assert isinstance(truncated, ToolResultMessage)
    assert truncated.content == [
        TextContent(text="line 0\n\n[... 8 lines truncated ...]\n\nline 9"),
        IMAGE,
        TextContent(text="short"),
    ]
    assert (truncated.tool_call_id, truncated.tool_name, truncated.is_error) == ("c1", "read", True)


def test_level1_keeps_a_tool_result_that_needs_no_cut() -> None:
    tool = result("c1", lines(3))
    assert level1_truncate_tool_outputs([tool], 3)[0] is tool


# ── level 2 ────────────────────────────────────────────────────────────────────


def test_level2_returns_short_lists_unchanged() -> None:
    messages: list[Message] = [UserMessage(content="hi"), assistant("hello")]
    assert level2_summarize_old_turns(messages, 2) == messages


def test_level2_summarises_assistant_messages_as_the_seed_says() -> None:
    long = "x" * 201
    messages: list[Message] = [
        assistant("first", long, "second", calls=("a",)),
        assistant(long, calls=("b", "c")),
        AssistantMessage(content=[ThinkingContent(thinking="hm")]),
        assistant("y" * 200),
        assistant(""),
    ]
    out = level2_summarize_old_turns(messages, 0)
    assert [text_of(m) for m in out] == [
        "[Summary] first second",
        "[Summary] [Assistant used 2 tool(s)]",
        "[Summary] [Assistant response]",
        "[Summary] " + "y" * 200,
        "[Summary] ",  # an empty text is short: the seed's summary is empty
    ]


def test_level2_drops_the_turns_tool_results_and_orphans_and_keeps_other_messages() -> None:
    others: list[Message] = [
        SystemMessage(content="sys"),
        BashExecutionMessage(command="ls", output="a"),
        CustomMessage(custom_type="note", data=1),
        BranchSummaryMessage(summary="branch"),
        CompactionSummaryMessage(summary="compacted"),
    ]
    user = UserMessage(content="do it")
    messages: list[Message] = [
        user,
        assistant("on it", calls=("a", "b")),
        result("a"),
        result("b"),
        result("orphan"),  # after the turn's results: still skipped, as an orphan
        *others,
        result("orphan-2"),
        UserMessage(content="recent"),
    ]
    out = level2_summarize_old_turns(messages, 1)
    assert out == [user, UserMessage(content="[Summary] on it"), *others, messages[-1]]


def test_level2_boundary_keeps_recent_tool_results_even_when_their_call_was_summarised() -> None:
    call = assistant(calls=("a", "b"))
    messages: list[Message] = [UserMessage(content="go"), call, result("a"), result("b")]
    out = level2_summarize_old_turns(messages, 1)
    assert out == [
        messages[0],
        UserMessage(content="[Summary] [Assistant used 2 tool(s)]"),
        messages[3],
    ]
    # boundary 1: only the user message is a candidate, and it is kept
    assert level2_summarize_old_turns(messages, 3) == messages


def test_level2_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="keep_recent"):
        level2_summarize_old_turns([], -1)


# ── level 3 and keep_within_budget ─────────────────────────────────────────────


def test_keep_within_budget_keeps_the_most_recent_run_and_stops_at_the_first_miss() -> None:
    small_old = UserMessage(content="a")  # 5 tokens
    big = UserMessage(content="b" * 400)  # 104 tokens
    recent = [UserMessage(content="c" * 40), UserMessage(content="d" * 40)]  # 14 each
    out = keep_within_budget([small_old, big, *recent], 40)
    # small_old would fit in the 12 tokens left, but the seed breaks at `big`.
    assert out == [UserMessage(content="[Context compacted: 2 messages removed]"), *recent]
    assert total_tokens(out[1:]) <= 40


def test_keep_within_budget_adds_no_marker_when_everything_fits() -> None:
    messages: list[Message] = [UserMessage(content="a"), UserMessage(content="b")]
    assert keep_within_budget(messages, 10) == messages


def test_keep_within_budget_with_no_room_keeps_only_the_marker() -> None:
    messages: list[Message] = [UserMessage(content="a"), UserMessage(content="b")]
    assert keep_within_budget(messages, 4) == [
        UserMessage(content="[Context compacted: 2 messages removed]")
    ]


def test_level3_drops_the_middle_behind_the_exact_marker() -> None:
    messages: list[Message] = [UserMessage(content=f"m{i}") for i in range(10)]
    out = level3_drop_middle(messages, config(1000, keep_first=2, keep_recent=3), 1000)
    marker = UserMessage(content="[Context compacted: 5 messages removed to fit context window]")
    assert out == [*messages[:2], marker, *messages[7:]]


def test_level3_falls_back_to_keep_within_budget_when_the_ends_overlap() -> None:
    messages: list[Message] = [UserMessage(content="x" * 40) for _ in range(8)]  # 14 each
    out = level3_drop_middle(messages, config(50, keep_first=2, keep_recent=10), 50)
    assert out == [UserMessage(content="[Context compacted: 5 messages removed]"), *messages[5:]]
    touching = level3_drop_middle(messages, config(50, keep_first=4, keep_recent=4), 50)
    assert touching == out  # first_end == recent_start: no room to split either


def test_level3_result_over_budget_goes_through_keep_within_budget() -> None:
    messages: list[Message] = [UserMessage(content="x" * 40) for _ in range(10)]  # 14 each
    out = level3_drop_middle(messages, config(60, keep_first=2, keep_recent=3), 60)
    # first 2 + level-3 marker + last 3 is 2*14 + 20 + 3*14 = 90 > 60; of those six, the
    # last three fit (42), then the level-3 marker (20) does not.
    assert out == [UserMessage(content="[Context compacted: 3 messages removed]"), *messages[7:]]


# ── compact_messages ───────────────────────────────────────────────────────────


def test_compact_messages_returns_messages_that_fit_unchanged() -> None:
    messages = conversation(turns=3)
    out = compact_messages(messages, config(total_tokens(messages)))
    assert out == messages
    assert all(a is b for a, b in zip(out, messages, strict=True))
    assert compact_messages(messages) == messages  # the default config: 96,000 tokens


def test_compact_messages_stops_after_level1_when_that_fits() -> None:
    messages: list[Message] = [
        UserMessage(content="go"),
        assistant("on it", calls=("a",)),
        result("a", lines(200)),
        assistant("done"),
    ]
    level1 = level1_truncate_tool_outputs(messages, 10)
    out = compact_messages(messages, config(total_tokens(level1), tool_output_max_lines=10))
    assert out == level1
    assert not any("[Summary]" in getattr(m, "text", "") for m in out)


def test_compact_messages_stops_after_level2_when_that_fits() -> None:
    messages: list[Message] = [UserMessage(content="go")]
    for i in range(6):
        messages += [assistant(f"step {i}", calls=(f"c{i}",)), result(f"c{i}", "y" * 400)]
    knobs = {"tool_output_max_lines": 10, "keep_recent": 2}
    level2 = level2_summarize_old_turns(messages, 2)
    out = compact_messages(messages, config(total_tokens(level2), **knobs))
    assert out == level2
    assert text_of(out[1]) == "[Summary] step 0"


def test_compact_messages_reaches_level3() -> None:
    messages: list[Message] = [UserMessage(content=f"{i} " + "z" * 100) for i in range(20)]
    cfg = config(200, keep_first=1, keep_recent=4)
    out = compact_messages(messages, cfg)
    marker = UserMessage(content="[Context compacted: 15 messages removed to fit context window]")
    assert out == [messages[0], marker, *messages[16:]]
    assert total_tokens(out) <= 200


def test_default_compaction_is_the_strategy_and_delegates() -> None:
    strategy = DefaultCompaction()
    assert isinstance(strategy, CompactionStrategy)
    messages = conversation(turns=30)
    cfg = config(800, keep_first=2, keep_recent=5, tool_output_max_lines=4)
    assert strategy.compact(messages, cfg) == compact_messages(messages, cfg)


def test_safe_tool_pairs_drops_orphan_results_and_unanswered_calls() -> None:
    messages: list[Message] = [
        UserMessage(content="go"),
        assistant("a", calls=("a1",)),
        result("a1"),
        *[UserMessage(content="x" * 400) for _ in range(4)],
        assistant("b", calls=("b1", "b2")),
        result("b1"),
        result("b2"),
        assistant("c"),
    ]
    cfg = config(80, keep_first=2, keep_recent=3)
    seed = DefaultCompaction().compact(messages, cfg)
    # The seed: level 2 summarised "b" but kept its results at the boundary...
    assert any(isinstance(m, ToolResultMessage) for m in seed)
    safe = DefaultCompaction(safe_tool_pairs=True).compact(messages, cfg)
    # ... the opt-in drops those orphans.
    assert [m for m in seed if not isinstance(m, ToolResultMessage)] == safe


def test_safe_tool_pairs_strips_calls_whose_result_was_dropped() -> None:
    thinking_call = AssistantMessage(
        content=[ThinkingContent(thinking="t"), ToolCall(id="k1", name="bash")]
    )
    messages: list[Message] = [
        UserMessage(content="go"),
        assistant("keep me", calls=("a1", "a2")),
        result("a1"),
        UserMessage(content="between"),
        assistant(calls=("lost",)),
        UserMessage(content="after"),
        thinking_call,
    ]
    strategy = DefaultCompaction(safe_tool_pairs=True)
    out = strategy.compact(messages, config(10_000))
    assert out == [
        messages[0],
        assistant("keep me", calls=("a1",)),
        messages[2],
        messages[3],
        messages[5],
        AssistantMessage(content=[ThinkingContent(thinking="t")]),
    ]


# ── properties ─────────────────────────────────────────────────────────────────

_messages = st.lists(
    st.one_of(
        st.builds(lambda n: UserMessage(content="u" * n), st.integers(0, 300)),
        st.builds(
            lambda n, k: assistant("a" * n, calls=tuple(f"c{i}" for i in range(k))),
            st.integers(0, 300),
            st.integers(0, 2),
        ),
        st.builds(lambda n: result("c0", lines(n)), st.integers(0, 80)),
        st.builds(lambda n: BashExecutionMessage(command="ls", output="o" * n), st.integers(0, 99)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    messages=_messages,
    budget=st.integers(1, 2_000),
    max_lines=st.integers(1, 20),
    keep_first=st.integers(0, 6),
    keep_recent=st.integers(0, 12),
)
def test_compact_messages_fits_the_budget_but_for_the_last_resort_marker(
    messages: list[Message], budget: int, max_lines: int, keep_first: int, keep_recent: int
) -> None:
    cfg = config(
        budget, tool_output_max_lines=max_lines, keep_first=keep_first, keep_recent=keep_recent
    )
    out = compact_messages(messages, cfg)
    assert out == compact_messages(messages, cfg)  # deterministic
    if total_tokens(out) > budget:
        # Only keep_within_budget's marker may overflow the budget.
        assert text_of(out[0]).startswith("[Context compacted: ")
        assert text_of(out[0]).endswith(" messages removed]")
        assert total_tokens(out[1:]) <= budget
    safe = DefaultCompaction(safe_tool_pairs=True).compact(messages, cfg)
    assert total_tokens(safe) <= total_tokens(out)


def test_total_tokens_is_message_tokens_summed() -> None:
    messages = conversation(turns=2)
    assert total_tokens(messages) == sum(message_tokens(m) for m in messages)
