"""Boundaries: split_history, the slice planner, forced_boundary and sanitize_orphans."""

from __future__ import annotations

import doctest
import itertools
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore._pairing import INTERRUPTED_RESULT
from sessionstore._tokens import HeuristicTokenCounter, message_tokens
from sessionstore.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies import _plan
from sessionstore.strategies._plan import (
    Compress,
    NoCompression,
    SlicePlanner,
    fit_suffix,
    forced_boundary,
    plan_slice,
    prefix_tokens,
    sanitize_orphans,
    split_history,
)
from sessionstore.strategies._units import answered_calls, unit_of, unit_starts
from tests.property import loop_batches
from tests.unit._histories import (
    DATASETS,
    ask,
    bash,
    check_pairs,
    load_conversations,
    result,
    valid_histories,
)

PROPERTY = settings(derandomize=True, max_examples=100, deadline=None)


class Fixed(HeuristicTokenCounter):
    """Every message costs 10 tokens, so budgets read as message counts."""

    def count_message(self, message: Message) -> int:
        return 10


def chat(count: int) -> list[Message]:
    """A system prompt, then alternating user / assistant messages."""
    messages: list[Message] = [SystemMessage(content="be brief")]
    for i in range(count):
        messages.append(
            UserMessage(content=f"q{i}") if i % 2 == 0 else AssistantMessage(content="a")
        )
    return messages


def tool_loop(units: int, calls: int = 1) -> list[Message]:
    """A system prompt and one request, then `units` tool units of `calls` calls each."""
    messages: list[Message] = [SystemMessage(content="agent"), UserMessage(content="fix it")]
    for u in range(units):
        ids = [f"c{u}_{k}" for k in range(calls)]
        messages.append(ask(*(bash(i, "ls") for i in ids)))
        messages += [result(i, "out") for i in ids]
    return messages


def is_unit_boundary(messages: Sequence[Message], index: int) -> bool:
    return index in (0, len(messages)) or not isinstance(messages[index], ToolResultMessage)


# ── Compress ───────────────────────────────────────────────────────────────────


def test_compress_ranges_must_partition_from_zero() -> None:
    plan = Compress(range(0, 2), range(2, 5), range(5, 9))
    assert plan.split(list("abcdefghi")) == (["a", "b"], ["c", "d", "e"], ["f", "g", "h", "i"])
    with pytest.raises(ValueError, match="covers 9"):
        plan.split(list("abc"))
    with pytest.raises(ValueError, match="contiguous"):
        Compress(range(1, 2), range(2, 5), range(5, 9))
    with pytest.raises(ValueError, match="contiguous"):
        Compress(range(0, 2), range(3, 5), range(5, 9))
    with pytest.raises(ValueError, match="non-empty middle"):
        Compress(range(0, 2), range(2, 2), range(2, 9))
    with pytest.raises(ValueError, match="step 1"):
        Compress(range(0, 2), range(2, 6, 2), range(6, 9))


# ── split_history ──────────────────────────────────────────────────────────────


def test_split_keeps_the_head_and_a_token_budgeted_tail() -> None:
    history = chat(20)  # 21 messages, 10 tokens each
    plan = split_history(history, protect_first_n=3, tail_token_budget=50, counter=Fixed())
    # 30 tokens reach the minimum of 3 messages, two more reach the budget of 50.
    assert plan == Compress(range(0, 3), range(3, 16), range(16, 21))
    assert isinstance(plan, Compress)
    assert plan.middle_tokens == 130
    assert plan.tail_tokens == 50


def test_split_tail_follows_the_token_budget_not_a_count() -> None:
    history = chat(20)
    big = split_history(history, protect_first_n=3, tail_token_budget=100, counter=Fixed())
    small = split_history(history, protect_first_n=3, tail_token_budget=30, counter=Fixed())
    assert isinstance(big, Compress)
    assert isinstance(small, Compress)
    assert len(big.tail) == 10
    assert len(small.tail) == 3


def test_split_takes_a_unit_crossing_the_budget_up_to_the_soft_ceiling() -> None:
    history = tool_loop(6, calls=3)  # 2 + 6 units of 4 messages
    # Units cost 40; a budget of 60 takes one unit (40), then the next unit would make
    # 80 <= 90 (1.5x), so it is kept whole rather than cut.
    plan = split_history(history, protect_first_n=2, tail_token_budget=60, counter=Fixed())
    assert isinstance(plan, Compress)
    assert len(plan.tail) == 8
    assert plan.tail_tokens == 80
    # With no slack, the crossing unit goes to the middle.
    strict = split_history(
        history, protect_first_n=2, tail_token_budget=60, soft_ceiling=1.0, counter=Fixed()
    )
    assert isinstance(strict, Compress)
    assert len(strict.tail) == 4


def test_split_never_cuts_inside_a_unit() -> None:
    history = tool_loop(5, calls=4)
    for budget in range(0, 220, 5):
        for first in range(0, 8):
            plan = split_history(
                history, protect_first_n=first, tail_token_budget=budget, counter=Fixed()
            )
            if isinstance(plan, Compress):
                assert is_unit_boundary(history, plan.middle.start)
                assert is_unit_boundary(history, plan.tail.start)


def test_split_head_widens_to_the_end_of_its_unit() -> None:
    history = tool_loop(6, calls=3)
    plan = split_history(history, protect_first_n=3, tail_token_budget=40, counter=Fixed())
    assert isinstance(plan, Compress)
    assert plan.head == range(0, 6)  # the first unit's results stay with their call


def test_split_never_folds_leading_system_messages() -> None:
    history = [SystemMessage(content="rules"), SystemMessage(content="more"), *chat(12)[1:]]
    plan = split_history(history, protect_first_n=0, tail_token_budget=30, counter=Fixed())
    assert isinstance(plan, Compress)
    assert plan.head == range(0, 2)


def test_split_keeps_at_least_min_tail_messages() -> None:
    history = chat(20)
    plan = split_history(history, protect_first_n=3, tail_token_budget=0, counter=Fixed())
    assert isinstance(plan, Compress)
    assert len(plan.tail) == 3
    five = split_history(
        history, protect_first_n=3, tail_token_budget=0, min_tail_messages=5, counter=Fixed()
    )
    assert isinstance(five, Compress)
    assert len(five.tail) == 5


def test_split_moves_the_tail_back_to_the_last_user_message() -> None:
    """Hermes #10896: the active task must never be folded into the summary."""
    history: list[Message] = [SystemMessage(content="s"), UserMessage(content="first task")]
    history += [AssistantMessage(content="working") for _ in range(6)]
    history.append(UserMessage(content="now do task B"))
    history += tool_loop(8)[2:]
    plan = split_history(history, protect_first_n=2, tail_token_budget=30, counter=Fixed())
    assert isinstance(plan, Compress)
    assert plan.tail.start == 8
    assert isinstance(history[plan.tail.start], UserMessage)


def test_split_last_user_right_after_the_head_gives_no_compression() -> None:
    """Hermes moved such a cut one past the request, folding it; we fold nothing instead."""
    history: list[Message] = [SystemMessage(content="s"), UserMessage(content="do it")]
    history += tool_loop(10)[2:]
    plan = split_history(history, protect_first_n=1, tail_token_budget=30, counter=Fixed())
    assert isinstance(plan, NoCompression)
    assert "latest user message" in plan.reason
    # With the request in the head, the tool loop after it can be folded.
    folded = split_history(history, protect_first_n=2, tail_token_budget=30, counter=Fixed())
    assert isinstance(folded, Compress)


@pytest.mark.parametrize(
    ("history", "kwargs", "reason"),
    [
        ([], {}, "no messages"),
        (chat(2), {"protect_first_n": 3}, "protected head"),
        (chat(10), {"tail_token_budget": 10_000}, "fits the tail budget"),
        (chat(6), {"tail_token_budget": 0, "min_tail_messages": 4}, "reaches the head"),
        (chat(8), {"tail_token_budget": 0, "min_middle_messages": 4}, "worth a summary"),
    ],
)
def test_split_says_why_it_compresses_nothing(
    history: list[Message], kwargs: dict[str, int], reason: str
) -> None:
    plan = split_history(history, **{"protect_first_n": 3, **kwargs}, counter=Fixed())
    assert isinstance(plan, NoCompression)
    assert reason in plan.reason


def test_split_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="tail_token_budget"):
        split_history([], tail_token_budget=-1)
    with pytest.raises(ValueError, match="soft_ceiling"):
        split_history([], soft_ceiling=0.5)
    with pytest.raises(ValueError, match="soft_ceiling"):
        split_history([], soft_ceiling=float("nan"))
    with pytest.raises(TypeError, match="protect_first_n"):
        split_history([], protect_first_n=2.0)  # type: ignore[arg-type]


def test_split_counts_with_the_heuristic_by_default() -> None:
    history: list[Message] = [SystemMessage(content="s"), UserMessage(content="q")]
    history += [AssistantMessage(content="x" * 400) for _ in range(10)]  # 104 tokens each
    plan = split_history(history, protect_first_n=2, tail_token_budget=300)
    assert isinstance(plan, Compress)
    assert plan.tail_tokens == sum(message_tokens(m) for m in history[plan.tail.start :])
    assert len(plan.tail) == 3


@PROPERTY
@given(
    history=valid_histories(),
    first=st.integers(0, 6),
    budget=st.integers(0, 4000),
    min_tail=st.integers(0, 5),
    ceiling=st.sampled_from([1.0, 1.5, 2.0]),
)
def test_split_partitions_whole_units_and_keeps_the_last_user_message(
    history: list[Message], first: int, budget: int, min_tail: int, ceiling: float
) -> None:
    plan = split_history(
        history,
        protect_first_n=first,
        tail_token_budget=budget,
        min_tail_messages=min_tail,
        soft_ceiling=ceiling,
    )
    if isinstance(plan, NoCompression):
        assert plan.reason
        return
    head, middle, tail = plan.split(history)
    assert head + middle + tail == history
    assert len(middle) >= 2
    assert len(head) >= min(first, len(history))
    assert is_unit_boundary(history, plan.middle.start)
    assert is_unit_boundary(history, plan.tail.start)
    users = [i for i, m in enumerate(history) if isinstance(m, UserMessage)]
    if users:
        assert users[-1] not in plan.middle
    assert len(tail) >= min_tail
    counts = [message_tokens(m) for m in history]
    assert plan.tail_tokens == sum(counts[plan.tail.start :])
    assert plan.middle_tokens == sum(counts[plan.middle.start : plan.middle.stop])
    if plan.tail_tokens > budget * ceiling:
        # Over the ceiling only for the minimum tail or the latest user message.
        second = next((s for s in unit_starts(history) if s > plan.tail.start), len(history))
        at_user = bool(users) and plan.tail.start == users[-1]
        assert at_user or len(history) - second < min_tail


# ── the slice planner ──────────────────────────────────────────────────────────


def test_prefix_tokens() -> None:
    assert prefix_tokens([]) == [0]
    assert prefix_tokens([3, 0, 2]) == [0, 3, 3, 5]
    with pytest.raises(ValueError, match="negative"):
        prefix_tokens([1, -1])


def test_fit_suffix_examples() -> None:
    assert fit_suffix([], 0) == 0
    assert fit_suffix([5, 1, 1, 1], 100) == 0
    assert fit_suffix([5, 1, 1, 1], 3) == 1
    assert fit_suffix([5, 1, 1, 1], 0) == 4
    assert fit_suffix([5, 1, 1, 0], 0) == 3
    assert fit_suffix([5, 1, 1, 1], 2, unit_starts=[0, 1, 3]) == 3
    assert fit_suffix([5, 1, 1, 1], 0, unit_starts=[0, 1, 3]) == 4
    with pytest.raises(ValueError, match="budget"):
        fit_suffix([1], -1)
    with pytest.raises(ValueError, match="ascending"):
        fit_suffix([1, 1], 1, unit_starts=[1, 0])
    with pytest.raises(ValueError, match="ascending"):
        fit_suffix([1, 1], 1, unit_starts=[0, 2])


def test_slice_planner_answers_many_budgets_from_one_prefix_sum() -> None:
    planner = SlicePlanner([4, 4, 4, 4], unit_starts=[0, 2])
    assert planner.total == 16
    assert planner.tokens(1, 3) == 8
    assert [planner.fit(b) for b in (0, 7, 8, 15, 16)] == [4, 4, 2, 2, 0]


def brute_force(counts: list[int], budget: int, starts: list[int] | None) -> int:
    candidates: list[int] = [*(starts if starts is not None else range(len(counts))), len(counts)]
    return min(s for s in candidates if sum(counts[s:]) <= budget)


@PROPERTY
@given(
    counts=st.lists(st.integers(0, 50), max_size=40),
    budget=st.integers(0, 800),
    picks=st.none() | st.sets(st.integers(0, 39), min_size=1),
)
def test_fit_suffix_matches_brute_force(
    counts: list[int], budget: int, picks: set[int] | None
) -> None:
    starts = sorted({p % len(counts) for p in picks}) if counts and picks else None
    assert fit_suffix(counts, budget, unit_starts=starts) == brute_force(counts, budget, starts)


def test_plan_slice_keeps_the_largest_suffix_of_whole_units() -> None:
    history = tool_loop(5, calls=2)  # 2 + 5 units of 3 messages, 10 tokens each
    plan = plan_slice(history, keep_recent=70, protect_first_n=2, counter=Fixed())
    # Two units (60 tokens) fit, three (90) would not.
    assert plan == Compress(range(0, 2), range(2, 11), range(11, 17))
    assert isinstance(plan, Compress)
    assert (plan.middle_tokens, plan.tail_tokens) == (90, 60)
    # Without the request in the head, the request is the latest user message and the
    # tail reaches back to it: only the system prompt is before it, and it stays.
    alone = plan_slice(history, keep_recent=70, counter=Fixed())
    assert isinstance(alone, NoCompression)
    assert "right after the head" in alone.reason


def test_plan_slice_moves_the_cut_back_to_the_last_user_message() -> None:
    history = [*tool_loop(2), UserMessage(content="next"), *tool_loop(3)[2:]]
    plan = plan_slice(history, keep_recent=10, counter=Fixed())
    assert isinstance(plan, Compress)
    assert plan.tail.start == 6


def test_plan_slice_says_why_it_folds_nothing() -> None:
    everything = plan_slice(chat(4), keep_recent=1000, counter=Fixed())
    assert isinstance(everything, NoCompression)
    assert "fit keep_recent" in everything.reason
    first = plan_slice(
        [UserMessage(content="q"), *tool_loop(3)[2:]], keep_recent=0, counter=Fixed()
    )
    assert isinstance(first, NoCompression)
    assert "right after the head" in first.reason
    with pytest.raises(ValueError, match="keep_recent"):
        plan_slice([], keep_recent=-1)
    with pytest.raises(ValueError, match="protect_first_n"):
        plan_slice([], protect_first_n=-1)


def test_plan_slice_with_no_user_message_may_fold_everything() -> None:
    history = tool_loop(3)[2:]
    plan = plan_slice(history, keep_recent=5, counter=Fixed())
    assert plan == Compress(range(0, 0), range(0, 6), range(6, 6))


@PROPERTY
@given(history=valid_histories(), budget=st.integers(0, 5000), first=st.integers(0, 4))
def test_plan_slice_tail_fits_unless_the_user_message_needs_more(
    history: list[Message], budget: int, first: int
) -> None:
    plan = plan_slice(history, keep_recent=budget, protect_first_n=first)
    counts = [message_tokens(m) for m in history]
    users = [i for i, m in enumerate(history) if isinstance(m, UserMessage)]
    if isinstance(plan, NoCompression):
        assert plan.reason
        return
    head, middle, tail = plan.split(history)
    assert head + middle + tail == history
    assert not any(isinstance(m, SystemMessage) for m in middle)
    assert is_unit_boundary(history, plan.middle.start)
    assert is_unit_boundary(history, plan.tail.start)
    if users:
        assert users[-1] not in plan.middle
    if plan.tail_tokens > budget:
        assert plan.tail.start == users[-1]
    elif plan.tail.start > plan.middle.start:
        # The largest such suffix: one more unit would not fit.
        earlier = unit_of(history, plan.tail.start - 1)
        assert sum(counts[earlier:]) > budget


# ── forced_boundary ────────────────────────────────────────────────────────────


def test_forced_boundary_is_the_last_user_message() -> None:
    history = [*tool_loop(2), UserMessage(content="compact now"), AssistantMessage(content="ok")]
    assert forced_boundary(history) == 6
    assert forced_boundary([UserMessage(content="q")]) == 0
    assert forced_boundary(tool_loop(2)[2:]) is None
    assert forced_boundary([]) is None


# ── sanitize_orphans ───────────────────────────────────────────────────────────


def test_sanitize_drops_orphans_and_answers_interrupted_calls() -> None:
    history: list[Message] = [
        UserMessage(content="go"),
        result("ghost", "an orphan"),
        ask(bash("a", "ls"), bash("b", "pwd")),
        result("b", "/repo"),
        result("b", "/repo again"),  # a second result for one call
        UserMessage(content="stop"),
        ask(bash("c", "sleep 100")),
    ]
    messages, report = sanitize_orphans(history)
    check_pairs(messages)
    assert report.dropped == (1, 4)
    assert report.interrupted == ((2, "a"), (6, "c"))
    assert report.sources == (0, 2, 3, None, 5, 6, None)
    assert report.changed
    synthetic = messages[3]
    assert isinstance(synthetic, ToolResultMessage)
    assert (synthetic.tool_call_id, synthetic.tool_name, synthetic.is_error) == ("a", "bash", True)
    assert synthetic.text == INTERRUPTED_RESULT
    for message, source in zip(messages, report.sources, strict=True):
        if source is not None:
            assert message is history[source]


def test_sanitize_leaves_a_valid_history_as_it_is() -> None:
    history = tool_loop(3, calls=2)
    messages, report = sanitize_orphans(history)
    assert messages == history
    assert report.sources == tuple(range(len(history)))
    assert not report.changed


@PROPERTY
@given(batches=loop_batches(max_turns=12))
def test_sanitize_always_returns_valid_pairs(batches: list[list[Message]]) -> None:
    history = list(itertools.chain.from_iterable(batches))
    messages, report = sanitize_orphans(history)
    check_pairs(messages)
    kept = [s for s in report.sources if s is not None]
    assert kept == sorted(kept)
    assert sorted([*kept, *report.dropped]) == list(range(len(history)))
    assert all(isinstance(history[i], ToolResultMessage) for i in report.dropped)
    assert report.sources.count(None) == len(report.interrupted)
    for message, source in zip(messages, report.sources, strict=True):
        if source is not None:
            assert message is history[source]
    assert sanitize_orphans(messages)[1].changed is False


@settings(derandomize=True, max_examples=40, deadline=None)
@given(history=valid_histories())
def test_units_and_pairs_of_valid_histories(history: list[Message]) -> None:
    check_pairs(history)
    answered = answered_calls(history)
    results = [i for i, m in enumerate(history) if isinstance(m, ToolResultMessage)]
    assert sorted(answered) == results
    assert sanitize_orphans(history)[0] == history


def test_the_module_examples_run() -> None:
    outcome = doctest.testmod(_plan)
    assert outcome.failed == 0
    assert outcome.attempted > 0


# ── real transcripts ───────────────────────────────────────────────────────────


@pytest.mark.parametrize("name", DATASETS)
def test_split_history_on_real_transcripts(dataset_dir: Path, name: str) -> None:
    for history in load_conversations(dataset_dir, name, 5):
        total = sum(map(message_tokens, history))
        plan = split_history(history, tail_token_budget=total // 10)
        assert isinstance(plan, Compress)
        head, middle, tail = plan.split(history)
        check_pairs(head)
        check_pairs(middle)
        check_pairs(tail)
        users = [i for i, m in enumerate(history) if isinstance(m, UserMessage)]
        assert users[-1] not in plan.middle
        assert plan.tail_tokens <= total // 10 * 1.5 or plan.tail.start == users[-1]
        sliced = plan_slice(history, keep_recent=total // 4, protect_first_n=2)
        assert isinstance(sliced, Compress)
        check_pairs(sliced.split(history)[2])
        assert sanitize_orphans(history)[0] == history
