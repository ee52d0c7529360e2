"""The context tracker: the live gate between model calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore import (
    CalibratedTokenCounter,
    CompactionConfig,
    ContextTracker,
    HeuristicTokenCounter,
    UserMessage,
    should_compact,
)


def _user(size: int) -> UserMessage:
    return UserMessage(content="x" * size)  # ceil(size / 4) + 4 heuristic tokens


def test_tracker_starts_empty() -> None:
    tracker = ContextTracker(max_context_tokens=10_000, system_prompt_tokens=1_000)
    assert (tracker.estimated_tokens, tracker.pending_tokens, tracker.last_reported) == (0, 0, None)
    assert tracker.headroom == 9_000
    assert tracker.usage_ratio == 0.1
    assert isinstance(tracker.counter, HeuristicTokenCounter)
    assert (tracker.max_context_tokens, tracker.system_prompt_tokens) == (10_000, 1_000)


def test_tracker_adds_estimates_of_appended_messages() -> None:
    tracker = ContextTracker(max_context_tokens=10_000)
    assert tracker.add(_user(8), _user(40)) == 6 + 14
    assert tracker.add() == 0
    tracker.add_tokens(30)
    assert tracker.pending_tokens == tracker.estimated_tokens == 50


def test_tracker_anchors_on_reported_usage() -> None:
    tracker = ContextTracker(max_context_tokens=10_000, system_prompt_tokens=1_000)
    tracker.add(_user(400))
    tracker.record_usage(4_000, 250)
    assert tracker.last_reported == 4_000
    assert tracker.pending_tokens == 0
    assert tracker.estimated_tokens == 3_250  # 4,000 + 250 - 1,000 system prompt
    assert tracker.add(_user(400)) == 104
    assert tracker.estimated_tokens == 3_354
    assert tracker.headroom == 10_000 - 1_000 - 3_354
    assert tracker.usage_ratio == pytest.approx(4_354 / 10_000)


def test_tracker_never_anchors_below_zero() -> None:
    tracker = ContextTracker(max_context_tokens=10_000, system_prompt_tokens=1_000)
    tracker.record_usage(600)  # the system prompt was over-estimated
    assert tracker.estimated_tokens == 0


def test_tracker_reset_starts_again_from_a_known_size() -> None:
    tracker = ContextTracker(max_context_tokens=10_000)
    tracker.record_usage(9_000)
    tracker.add_tokens(500)
    tracker.reset(2_000)
    assert (tracker.estimated_tokens, tracker.pending_tokens, tracker.last_reported) == (
        2_000,
        0,
        None,
    )
    tracker.add_tokens(10)
    assert tracker.estimated_tokens == 2_010


def test_tracker_headroom_goes_negative_when_over() -> None:
    tracker = ContextTracker(max_context_tokens=1_000, system_prompt_tokens=100)
    tracker.add_tokens(1_000)
    assert tracker.headroom == -100
    assert tracker.usage_ratio == 1.1


def test_tracker_uses_its_counter_and_does_not_feed_a_calibrated_one() -> None:
    counter = CalibratedTokenCounter()
    counter.record_estimate(200, 100)
    tracker = ContextTracker(counter, max_context_tokens=10_000)
    assert tracker.add(_user(384)) == 200  # 100 heuristic tokens, doubled
    tracker.record_usage(5_000)
    assert (counter.factor, counter.samples) == (2.0, 1)


def test_tracker_should_compact_at_the_configured_line() -> None:
    tracker = ContextTracker(max_context_tokens=100_000, system_prompt_tokens=4_000)
    tracker.reset(81_000)  # 85,000 with the system prompt: exactly 5% below the 90% line
    assert not tracker.should_compact()
    tracker.add_tokens(1)
    assert tracker.should_compact()
    relaxed = CompactionConfig(compact_at_pct=1.0, compact_budget_threshold_pct=0.0)
    assert not tracker.should_compact(relaxed)


@given(
    max_context=st.integers(1_000, 500_000),
    system_share=st.floats(0, 0.5),
    context_share=st.floats(0, 1.2),
    at_pct=st.floats(0.5, 1.0),
    threshold=st.floats(0, 0.3),
)
def test_tracker_should_compact_is_config_should_compact(
    max_context: int, system_share: float, context_share: float, at_pct: float, threshold: float
) -> None:
    system = int(max_context * system_share)
    context = int(max_context * context_share)
    config = CompactionConfig(compact_at_pct=at_pct, compact_budget_threshold_pct=threshold)
    tracker = ContextTracker(max_context_tokens=max_context, system_prompt_tokens=system)
    tracker.add_tokens(context)
    assert tracker.should_compact(config) == should_compact(context + system, max_context, config)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_context_tokens": 0}, "max_context_tokens must be positive"),
        ({"max_context_tokens": -1}, "max_context_tokens must be positive"),
        ({"max_context_tokens": 100, "system_prompt_tokens": -1}, "must not be negative"),
        ({"max_context_tokens": 100, "system_prompt_tokens": 100}, "leaves no room"),
    ],
)
def test_tracker_refuses_a_bad_window(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ContextTracker(**kwargs)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda t: t.record_usage(0), "prompt_tokens must be positive"),
        (lambda t: t.record_usage(10, -1), "completion_tokens must not be negative"),
        (lambda t: t.add_tokens(-1), "tokens must not be negative"),
        (lambda t: t.reset(-1), "context_tokens must not be negative"),
    ],
)
def test_tracker_refuses_bad_counts(call: Callable[[ContextTracker], object], match: str) -> None:
    tracker = ContextTracker(max_context_tokens=1_000)
    tracker.add_tokens(7)
    with pytest.raises(ValueError, match=match):
        call(tracker)
    assert tracker.estimated_tokens == 7


def test_tracker_repr_shows_the_state() -> None:
    tracker = ContextTracker(max_context_tokens=100, system_prompt_tokens=10)
    tracker.add_tokens(5)
    assert repr(tracker) == (
        "ContextTracker(estimated_tokens=5, max_context_tokens=100, system_prompt_tokens=10)"
    )
