"""The pure scope rule: resolve_scope, the window to read, its growth, the recorded scope."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import (
    CompactionBlock,
    CompactionConfig,
    FixedCount,
    LoopRecord,
    TokenBudget,
    loop_context_tokens,
    resolve_scope,
)
from sessionstore._scope import (
    CONTEXT_SCOPE,
    LEFT_OUT_SUMMARIES,
    TOKEN_BUDGET_WINDOW,
    WINDOW_GROWTH,
    ChainEntry,
    compacted_left_out,
    context_scope,
    grow_window,
    loops_shown,
    recorded_scope,
    scope_window,
    token_budget_window,
)

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def loop(loop_id: int, token_total: int) -> LoopRecord:
    return LoopRecord(
        id=loop_id,
        session_id="s",
        parent_loop_id=loop_id - 1 if loop_id > 1 else None,
        sequence=loop_id - 1,
        depth=loop_id - 1,
        created_at=CREATED,
        closed_at=None,
        message_count=2,
        token_total=token_total,
        turn_count=1,
    )


def block(tokens_before: int, tokens_after: int, **config: Any) -> CompactionBlock:
    return CompactionBlock(tokens_before=tokens_before, tokens_after=tokens_after, config=config)


def chain_of(*costs: int | tuple[int, CompactionBlock]) -> list[ChainEntry]:
    """Loops root first: a bare number is a loop of that many raw tokens without a block."""
    chain: list[ChainEntry] = []
    for index, cost in enumerate(costs, start=1):
        if isinstance(cost, int):
            chain.append((loop(index, cost), None))
        else:
            chain.append((loop(index, cost[0]), cost[1]))
    return chain


# ── loop_context_tokens ────────────────────────────────────────────────────────


def test_loop_context_tokens_is_raw_without_a_block_and_the_block_plus_growth_with_one() -> None:
    assert loop_context_tokens(loop(1, 500), None) == 500
    assert loop_context_tokens(loop(1, 500), block(500, 40)) == 40
    assert loop_context_tokens(loop(1, 650), block(500, 40)) == 190  # 150 appended since
    # A block that claims more than the loop holds never makes the loop cost less.
    assert loop_context_tokens(loop(1, 300), block(500, 40)) == 40


# ── resolve_scope: FixedCount ──────────────────────────────────────────────────


def test_fixed_count_takes_that_many_earlier_loops_or_all_there_are() -> None:
    chain = chain_of(10, 10, 10, 10, 10)
    assert resolve_scope(chain, FixedCount(count=3), 1) == 3
    assert resolve_scope(chain, FixedCount(count=0), 1) == 0
    assert resolve_scope(chain, FixedCount(count=9), 1) == 4
    assert resolve_scope(chain[-1:], FixedCount(count=3), 1) == 0
    # The budget and the cap play no part in a fixed count.
    assert resolve_scope(chain, FixedCount(count=2), 0, summary_cap=1) == 2


def test_an_empty_chain_has_no_earlier_loops() -> None:
    assert resolve_scope([], FixedCount(count=3), 100) == 0
    assert resolve_scope([], TokenBudget(), 100) == 0


# ── resolve_scope: TokenBudget ─────────────────────────────────────────────────


def test_token_budget_walks_back_while_the_loops_fit() -> None:
    chain = chain_of(100, 100, 100, 100)
    assert resolve_scope(chain, TokenBudget(), 400) == 3
    assert resolve_scope(chain, TokenBudget(), 399) == 2
    assert resolve_scope(chain, TokenBudget(), 200) == 1
    assert resolve_scope(chain, TokenBudget(), 199) == 0


def test_token_budget_stops_at_the_first_loop_that_does_not_fit() -> None:
    # The 500-token loop stops the walk even though the root loop would still fit.
    chain = chain_of(10, 500, 100, 100)
    assert resolve_scope(chain, TokenBudget(), 300) == 1
    assert resolve_scope(chain, TokenBudget(), 710) == 3


def test_token_budget_keeps_the_current_loop_even_alone_over_the_budget() -> None:
    assert resolve_scope(chain_of(10, 10, 5_000), TokenBudget(), 100) == 0


def test_token_budget_counts_a_compacted_loop_at_what_its_block_shows() -> None:
    # 1,000 raw tokens, 50 in the context: it fits where the raw loop would not.
    chain = chain_of((1_000, block(1_000, 50)), 100)
    assert resolve_scope(chain, TokenBudget(), 150) == 1
    assert resolve_scope(chain_of(1_000, 100), TokenBudget(), 150) == 0


def test_token_budget_caps_each_loop_at_the_summary_cap() -> None:
    chain = chain_of(1_000, 1_000, 1_000, 100)
    assert resolve_scope(chain, TokenBudget(), 400) == 0
    assert resolve_scope(chain, TokenBudget(), 400, summary_cap=100) == 3
    assert resolve_scope(chain, TokenBudget(), 299, summary_cap=100) == 1
    # The cap applies to the current loop too.
    assert resolve_scope(chain_of(100, 5_000), TokenBudget(), 200, summary_cap=100) == 1


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    costs=st.lists(st.integers(0, 1_000), min_size=1, max_size=12),
    budget=st.integers(0, 5_000),
    cap=st.none() | st.integers(0, 1_000),
)
def test_token_budget_takes_the_longest_suffix_that_fits(
    costs: Sequence[int], budget: int, cap: int | None
) -> None:
    chain = chain_of(*costs)
    count = resolve_scope(chain, TokenBudget(), budget, summary_cap=cap)
    estimates = [cost if cap is None else min(cost, cap) for cost in costs]
    assert 0 <= count <= len(costs) - 1
    taken = estimates[len(costs) - 1 - count :]
    if count:
        assert sum(taken) <= budget
    if count < len(costs) - 1:
        assert sum(taken) + estimates[len(costs) - 2 - count] > budget


# ── scope_window and grow_window ───────────────────────────────────────────────


def test_scope_window_reads_one_loop_more_than_a_fixed_count_can_take() -> None:
    assert scope_window(FixedCount(count=0)) == 2
    assert scope_window(FixedCount(count=3)) == 5
    assert scope_window(TokenBudget()) == TOKEN_BUDGET_WINDOW


def test_grow_window_grows_until_the_attempt_decides() -> None:
    sizes: list[int] = []

    def attempt(size: int) -> str | None:
        sizes.append(size)
        return f"read {size}" if size >= 40 else None

    assert grow_window(3, attempt) == "read 48"
    assert sizes == [3, 12, 48]


def test_grow_window_calls_once_when_the_first_window_is_enough() -> None:
    sizes: list[int] = []

    def attempt(size: int) -> int:
        sizes.append(size)
        return 0  # a falsy result still ends the loop: only None means "too small"

    assert grow_window(1, attempt) == 0
    assert sizes == [1]


@pytest.mark.parametrize("start", [0, -1])
def test_grow_window_refuses_a_window_below_one(start: int) -> None:
    calls: list[int] = []

    def attempt(size: int) -> int:
        calls.append(size)
        return size

    with pytest.raises(ValueError, match="at least 1"):
        grow_window(start, attempt)
    assert calls == []


# ── recorded_scope ─────────────────────────────────────────────────────────────


def test_recorded_scope_without_a_block_or_a_recorded_scope_is_the_context_default() -> None:
    """A loop never compacted is scoped by the budget, not by compaction's FixedCount(3)."""
    default = CONTEXT_SCOPE
    assert default == TokenBudget()
    assert CompactionConfig().compaction_scope == FixedCount(count=3)
    assert recorded_scope(None) == default
    assert recorded_scope(None, FixedCount(count=2)) == FixedCount(count=2)
    assert recorded_scope(None, TokenBudget()) == TokenBudget()
    assert recorded_scope(block(0, 0)) == default
    assert recorded_scope(block(0, 0, keep_first_turns=1), FixedCount(count=7)) == FixedCount(
        count=7
    )


def test_recorded_scope_reads_the_scope_a_block_was_compacted_with() -> None:
    assert recorded_scope(block(0, 0, compaction_scope={"kind": "token_budget"})) == TokenBudget()
    fixed = block(0, 0, compaction_scope={"kind": "fixed_count", "count": 5})
    assert recorded_scope(fixed, TokenBudget()) == FixedCount(count=5)
    snapshot = CompactionConfig(compaction_scope=FixedCount(count=1)).snapshot()
    assert recorded_scope(CompactionBlock(config=snapshot)) == FixedCount(count=1)


@pytest.mark.parametrize(
    "garbage",
    [
        "everything",
        {"kind": "nope"},
        {"kind": "fixed_count", "count": -1},
        {"kind": "fixed_count", "count": "many"},
        None,
        [1, 2],
    ],
)
def test_recorded_scope_falls_back_on_garbage(garbage: Any) -> None:
    written_by_hand = block(0, 0, compaction_scope=garbage)
    assert recorded_scope(written_by_hand) == CONTEXT_SCOPE
    assert recorded_scope(written_by_hand, FixedCount(count=2)) == FixedCount(count=2)


# ── the scope of a built context ──────────────────────────────────────────────


def test_a_context_is_scoped_by_an_explicit_choice_only() -> None:
    """The compaction default FixedCount(3) never narrows a context by itself."""
    assert context_scope(None, None) is None
    assert context_scope(None, CompactionConfig()) is None
    assert context_scope(None, CompactionConfig(keep_first_turns=1)) is None
    chosen = CompactionConfig(compaction_scope=FixedCount(count=3))
    assert context_scope(None, chosen) == FixedCount(count=3)
    assert context_scope(None, chosen.within(100)) == FixedCount(count=3)
    assert context_scope(TokenBudget(), chosen) == TokenBudget()
    assert context_scope(FixedCount(count=1), None) == FixedCount(count=1)


def test_loops_shown_without_a_digest_are_the_scopes() -> None:
    assert loops_shown(TokenBudget(), [3, 4], None) == [3, 4]
    assert loops_shown(FixedCount(count=1), [3, 4], []) == [3, 4]


def test_a_budget_scope_shows_the_loops_after_the_digest_and_none_it_folds() -> None:
    # The budget reaches back past the digest: the digest stands for loops 1 and 2.
    assert loops_shown(TokenBudget(), [1, 2, 3, 4], [3, 4]) == [3, 4]
    # The budget stops short of the digest: every loop after the digest is still shown.
    assert loops_shown(TokenBudget(), [4], [2, 3, 4]) == [2, 3, 4]


def test_a_fixed_count_shows_its_loops_and_every_loop_after_the_digest() -> None:
    assert loops_shown(FixedCount(count=3), [1, 2, 3, 4], [3, 4]) == [1, 2, 3, 4]
    assert loops_shown(FixedCount(count=0), [4], [2, 3, 4]) == [2, 3, 4]


def test_compacted_left_out_are_the_newest_compacted_loops_when_the_current_one_fills_it() -> None:
    pair: list[int | tuple[int, CompactionBlock]] = [(50, block(500, 50)), 40]
    chain = chain_of(*(pair * 10), 10_000)
    # The current loop alone is over the budget: every loop before it left out.
    assert resolve_scope(chain, TokenBudget(), 1_000) == 0
    shown = compacted_left_out(chain, 0)
    ids = [entry[0].id for entry in chain if entry[1] is not None]
    assert [loop.id for loop in shown] == ids[-LEFT_OUT_SUMMARIES:]
    assert len(shown) == LEFT_OUT_SUMMARIES < 10  # the newest of the ten
    # Earlier loops that fit are what a context shows: no summary of the others.
    assert compacted_left_out(chain, 2) == []


def test_the_token_budget_window_holds_more_than_the_scope() -> None:
    assert token_budget_window(0) == TOKEN_BUDGET_WINDOW
    assert token_budget_window(TOKEN_BUDGET_WINDOW - 2) == TOKEN_BUDGET_WINDOW
    # A scope that fills the window makes it grow, as `grow_window` does.
    assert token_budget_window(TOKEN_BUDGET_WINDOW - 1) == TOKEN_BUDGET_WINDOW * WINDOW_GROWTH
