"""The live engine's pure gates: the three seeds' thresholds, cooldowns and anti-thrashing."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore._engine import GatePolicy, budget_limit, should_compress, threshold_tokens
from sessionstore._engine._gate import (
    EngineGates,
    FailureGate,
    RateGate,
    ThrashingGate,
    classify_failure,
)
from sessionstore._engine._inputs import clean_focus
from sessionstore.errors import (
    ConfigurationError,
    SummarizerAuthError,
    SummarizerResponseError,
    SummarizerTimeoutError,
    SummarizerUnavailableError,
)
from sessionstore.models import CompactionEvent


def test_budget_limit_carves_the_reserve_then_applies_the_ratio() -> None:
    assert budget_limit(128_000) == (128_000 - 2048) * 0.75
    assert budget_limit(1_000, reserve_tokens=2048) == 0  # never negative
    with pytest.raises(ValueError, match="trigger_ratio"):
        budget_limit(1_000, trigger_ratio=0)


def test_hermes_threshold_has_a_floor() -> None:
    assert threshold_tokens(200_000, threshold_percent=0.5) == 100_000
    assert threshold_tokens(32_000, threshold_percent=0.5, min_context_tokens=20_000) == 20_000
    with pytest.raises(ValueError, match="min_context_tokens"):
        threshold_tokens(1_000, min_context_tokens=-1)


def test_gleam_should_compress_is_integer_percent() -> None:
    assert should_compress(75, 100, 75)
    assert not should_compress(74, 100, 75)
    with pytest.raises(ValueError, match=r"1\.\.100"):
        should_compress(1, 100, 0)
    with pytest.raises(TypeError):
        should_compress(1, 100, 0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window"):
        should_compress(1, 0, 50)


@settings(derandomize=True, max_examples=200)
@given(
    window=st.integers(1, 2_000_000),
    tokens=st.integers(0, 3_000_000),
    percent=st.integers(1, 100),
)
def test_gleam_trigger_is_monotone_in_tokens(window: int, tokens: int, percent: int) -> None:
    if should_compress(tokens, window, percent):
        assert should_compress(tokens + 1, window, percent)


@settings(derandomize=True, max_examples=200)
@given(
    window=st.integers(1, 2_000_000),
    ratio=st.floats(0.01, 1.0),
    reserve=st.integers(0, 100_000),
    floor=st.integers(0, 3_000_000),
    hermes=st.booleans(),
)
def test_the_threshold_never_exceeds_the_window(
    window: int, ratio: float, reserve: int, floor: int, hermes: bool
) -> None:
    policy = GatePolicy(
        trigger_ratio=ratio,
        reserve_tokens=reserve,
        threshold_percent=ratio if hermes else None,
        min_context_tokens=floor,
    )
    assert 0 <= policy.threshold(window) <= window
    assert policy.threshold(window) >= min(floor, window)


def test_policy_refuses_bad_knobs_naming_them() -> None:
    with pytest.raises(ConfigurationError, match="trigger_ratio"):
        GatePolicy(trigger_ratio=1.5)
    with pytest.raises(ConfigurationError, match="timeout_ladder"):
        GatePolicy(timeout_ladder=())
    with pytest.raises(ConfigurationError, match="on_failure"):
        GatePolicy(on_failure="drop")  # type: ignore[arg-type]
    for cap in (0, -1, 2.5, True):
        with pytest.raises(ConfigurationError, match="max_auto_per_hour"):
            GatePolicy(max_auto_per_hour=cap)  # type: ignore[arg-type]


def test_failures_are_classified() -> None:
    assert classify_failure(SummarizerAuthError("401")) == "auth"
    assert classify_failure(SummarizerTimeoutError("t")) == "timeout"
    assert classify_failure(TimeoutError()) == "timeout"
    assert classify_failure(SummarizerUnavailableError("down")) == "unavailable"
    assert classify_failure(ConnectionRefusedError()) == "unavailable"
    assert classify_failure(SummarizerResponseError("empty")) == "response"
    assert classify_failure(KeyError("x")) is None


def test_cooldown_ladder_retry_after_and_auth_stop() -> None:
    policy = GatePolicy()
    gate = FailureGate()
    for expected in (60, 120, 300, 600, 600):
        gate.record(SummarizerTimeoutError("slow"), 0.0, policy)
        assert gate.remaining(0.0) == expected
    gate.record(SummarizerUnavailableError("busy", retry_after=900), 0.0, policy)
    assert gate.remaining(0.0) == 900
    assert gate.timeouts == 0  # the ladder starts again
    gate.record(SummarizerAuthError("403"), 0.0, policy)
    assert math.isinf(gate.remaining(1e9))
    gate.clear()
    assert gate.remaining(0.0) == 0
    with pytest.raises(TypeError):
        gate.record(KeyError("x"), 0.0, policy)


def test_thrashing_needs_ineffective_compactions_in_a_row() -> None:
    policy = GatePolicy()
    gate = ThrashingGate()
    gate.record(0.05, policy)
    gate.record(0.5, policy)  # an effective one resets the count
    gate.record(0.05, policy)
    assert not gate.thrashing(policy)
    gate.record(0.09, policy)
    assert gate.thrashing(policy)
    gate.clear()
    assert not gate.thrashing(policy)


def test_the_hourly_cap_counts_a_sliding_hour() -> None:
    policy = GatePolicy(max_auto_per_hour=3)
    gate = RateGate()
    for now in (0.0, 10.0, 20.0):
        assert gate.wait(now, policy) == 0
        gate.record(now, policy)
    assert gate.wait(30.0, policy) == 3570  # the first of the three leaves the hour then
    assert gate.wait(3600.0, policy) == 0
    gate.record(3600.0, policy)
    assert gate.wait(3605.0, policy) == 5  # 10.0 + 3600 - 3605
    assert len(gate.times) == 3  # never more than the cap is kept
    gate.clear()
    assert gate.wait(3605.0, policy) == 0
    unbounded = GatePolicy(max_auto_per_hour=None)
    for now in range(1_000):
        gate.record(float(now), unbounded)
    assert gate.wait(1_000.0, unbounded) == 0
    assert not gate.times


def test_focus_topic_control_characters_are_made_safe() -> None:
    assert clean_focus("auth\x00 \x1b[0m\nflow") == "auth [0m flow"
    assert clean_focus("\x00\x01") is None
    assert len(clean_focus("x" * 2_000) or "") == 500
    with pytest.raises(TypeError):
        clean_focus(3)  # type: ignore[arg-type]


# ── the gates as the session's compaction events leave them (GatePolicy.durable) ─────

_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def ended(
    seconds: float,
    *,
    trigger: str | None = "auto",
    saved: float = 0.5,
    error: str | None = None,
    fallback: str | None = None,
    overlay: str = "default",
    digest_loops: int = 0,
) -> CompactionEvent:
    details: dict[str, Any] = {"status": "failed" if error else "ok", "overlay": overlay}
    if digest_loops:
        details["digest_loops"] = digest_loops
    if error:
        details["error"] = error
    elif trigger is not None:
        details["engine"] = {"trigger": trigger, "fallback": fallback}
    return CompactionEvent(
        id=int(seconds * 10),
        session_id="s",
        loop_id=1,
        block_id=None,
        event="ended",
        tokens_before=1_000,
        tokens_after=None if error else round(1_000 * (1 - saved)),
        duration_ms=1.0,
        details=details,
        created_at=_T0 + timedelta(seconds=seconds),
    )


def replayed(*events: CompactionEvent, policy: GatePolicy | None = None) -> EngineGates:
    """Replay with the engine's clock at 0 s of the events' time line."""
    return EngineGates.replay(
        events,
        overlay="default",
        policy=policy or GatePolicy(),
        at=lambda moment: (moment - _T0).total_seconds(),
    )


def test_a_recorded_failure_starts_its_cooldown() -> None:
    gates = replayed(ended(100, error="SummarizerTimeoutError: slow"))
    assert gates.failures.remaining(100) == 60
    gates = replayed(
        ended(0, error="SummarizerTimeoutError: slow"),
        ended(100, error="SummarizerTimeoutError: slow"),
    )
    assert gates.failures.remaining(100) == 120  # the ladder climbs across engines too
    assert math.isinf(replayed(ended(0, error="SummarizerAuthError: 401")).failures.remaining(9e9))
    assert replayed(ended(0, error="SummarizerUnavailableError: down")).failures.remaining(0) == 600
    # Not a summarizer's failure (a caller's strategy raised): no cooldown.
    assert replayed(ended(0, error="KeyError: 'x'")).failures.remaining(0) == 0


def test_recorded_automatic_compactions_count_for_thrashing_and_the_hourly_cap() -> None:
    gates = replayed(ended(0, saved=0.05), ended(10, saved=0.02))
    assert gates.thrashing.thrashing(GatePolicy())
    assert not replayed(ended(0, saved=0.05), ended(10, saved=0.5)).thrashing.thrashing(
        GatePolicy()
    )
    capped = GatePolicy(max_auto_per_hour=2)
    gates = replayed(ended(0), ended(10), policy=capped)
    assert gates.rate.wait(20, capped) == 3_580


def test_a_fold_into_the_session_digest_alone_is_not_an_ineffective_compaction() -> None:
    """It keeps loops a budget leaves out in the context; it never meant to save tokens."""
    folds = [ended(10 * i, saved=0.0, digest_loops=3) for i in range(4)]
    gates = replayed(*folds)
    assert not gates.thrashing.thrashing(GatePolicy())
    assert gates.thrashing.ineffective == 0
    capped = GatePolicy(max_auto_per_hour=4)
    assert replayed(*folds, policy=capped).rate.wait(40, capped) > 0  # the hourly cap holds
    # Between two compactions that saved too little, a fold does not reset the count.
    gates = replayed(
        ended(0, saved=0.02), ended(5, saved=0.0, digest_loops=2), ended(10, saved=0.0)
    )
    assert gates.thrashing.thrashing(GatePolicy())
    live = EngineGates()
    live.automatic(0.0, 0, GatePolicy(), digest_only=True)
    live.automatic(0.0, 1, GatePolicy(), digest_only=True)
    assert not live.thrashing.thrashing(GatePolicy())


def test_a_recorded_forced_compaction_clears_every_gate_and_others_change_nothing() -> None:
    capped = GatePolicy(max_auto_per_hour=2)
    gates = replayed(
        ended(0, error="SummarizerAuthError: 401"),
        ended(1, saved=0.01),
        ended(2, saved=0.01),
        ended(3, trigger="forced"),
        policy=capped,
    )
    assert gates.failures.remaining(4) == 0
    assert not gates.thrashing.thrashing(capped)
    assert gates.rate.wait(4, capped) == 0
    # The command line's compactions (no engine details), another overlay: not the engine's.
    gates = replayed(
        ended(0, error="SummarizerUnavailableError: down"),
        ended(1, trigger=None),
        ended(2, overlay="other"),
    )
    assert gates.failures.remaining(2) == 598
    # An automatic success ends the cooldown, unless the fallback wrote it.
    assert replayed(ended(0, error="SummarizerError: x"), ended(1)).failures.remaining(1) == 0
    fallback = replayed(ended(0, error="SummarizerError: x"), ended(1, fallback="extractive"))
    assert fallback.failures.remaining(1) == 599
