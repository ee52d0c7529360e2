"""The live engine's gates, pure: when to compact, and when not to try again yet.

- `budget_limit` (seed 003, window_budget): `max(0, window - reserve_tokens) * trigger_ratio`.
- `threshold_tokens` (seed 001, Hermes): `max(int(window * threshold_percent), floor)`.
- `should_compress` (seed 002, Gleam): `estimated * 100 >= window * trigger_percent`.
- `GatePolicy` holds every knob of the three seeds, the anti-thrashing rule (seed 001) and
  the failure cooldowns (seed 002's 10 minutes, and a ladder for timeouts).
- `FailureGate` is the state of the cooldown; `ThrashingGate` the state of anti-thrashing;
  `RateGate` counts the automatic compactions of the last hour (`max_auto_per_hour`: the
  frequency cap the peers' users asked for when compaction ran 89 times a day). They take
  the time as an argument (monotonic seconds), so no test has to sleep.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from sessionstore.errors import (
    ConfigurationError,
    SummarizerAuthError,
    SummarizerError,
    SummarizerResponseError,
    SummarizerTimeoutError,
    SummarizerUnavailableError,
)
from sessionstore.models import CompactionEvent

__all__ = [
    "EngineGates",
    "FailureGate",
    "FailureKind",
    "GatePolicy",
    "OnFailure",
    "RateGate",
    "ThrashingGate",
    "budget_limit",
    "classify_failure",
    "should_compress",
    "threshold_tokens",
]

OnFailure = Literal["abort", "extractive", "raise"]
"""What a compaction does when its summarizer fails (history is never dropped):
`abort` keeps everything and reports the failure, `extractive` retries with the offline
`ExtractiveSummarizer` and records that it did, `raise` keeps everything and raises."""

FailureKind = Literal["unavailable", "timeout", "auth", "response"]


def _check_window(window: int) -> None:
    if isinstance(window, bool) or not isinstance(window, int):
        raise TypeError(f"the window must be an int, got {type(window).__name__}")
    if window <= 0:
        raise ValueError(f"the window must be positive, got {window}")


def budget_limit(window: int, *, trigger_ratio: float = 0.75, reserve_tokens: int = 2048) -> float:
    """Return seed 003's gate line: the headroom carved off first, then the ratio applied.

    `max(0, window - reserve_tokens) * trigger_ratio`: a reserve larger than the window
    gives 0, never a negative limit.

    Raises:
        ValueError: a window that is not positive, a ratio outside (0, 1], a negative reserve.
    """
    _check_window(window)
    if not 0 < trigger_ratio <= 1:
        raise ValueError(f"trigger_ratio must be in (0, 1], got {trigger_ratio}")
    if reserve_tokens < 0:
        raise ValueError(f"reserve_tokens must not be negative, got {reserve_tokens}")
    return max(0, window - reserve_tokens) * trigger_ratio


def threshold_tokens(
    window: int, *, threshold_percent: float = 0.75, min_context_tokens: int = 0
) -> int:
    """Return seed 001's threshold: `max(int(window * threshold_percent), min_context_tokens)`.

    The floor keeps a small percentage of a small window from firing on almost nothing.

    Raises:
        ValueError: a window that is not positive, a percent outside (0, 1], a negative floor.
    """
    _check_window(window)
    if not 0 < threshold_percent <= 1:
        raise ValueError(f"threshold_percent must be in (0, 1], got {threshold_percent}")
    if min_context_tokens < 0:
        raise ValueError(f"min_context_tokens must not be negative, got {min_context_tokens}")
    return max(int(window * threshold_percent), min_context_tokens)


def should_compress(estimated_tokens: int, model_window: int, trigger_percent: int) -> bool:
    """Return seed 002's trigger: True once the estimate reaches `trigger_percent`% of the window.

    Integer arithmetic, as in the seed: `estimated_tokens * 100 >= model_window * trigger_percent`.

    Raises:
        ValueError: negative tokens, a window that is not positive, a percent outside 1..100.
    """
    _check_window(model_window)
    if estimated_tokens < 0:
        raise ValueError(f"estimated_tokens must not be negative, got {estimated_tokens}")
    if isinstance(trigger_percent, bool) or not isinstance(trigger_percent, int):
        raise TypeError(f"trigger_percent must be an int, got {type(trigger_percent).__name__}")
    if not 1 <= trigger_percent <= 100:
        raise ValueError(f"trigger_percent must be in 1..100, got {trigger_percent}")
    return estimated_tokens * 100 >= model_window * trigger_percent


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """Every knob of the live engine's gates, named as the seeds name them.

    The threshold is seed 003's `budget_limit` (`trigger_ratio` of the window less
    `reserve_tokens`) unless `threshold_percent` is set, in which case it is seed 001's
    (`threshold_percent` of the whole window). Either way `min_context_tokens` is a floor
    (seed 001), and the threshold never exceeds the window. The gate fires when the
    context reaches the threshold (seed 001's `>=`).

    Raises:
        ConfigurationError: a knob out of range (the message names it).
    """

    trigger_ratio: float = 0.75
    """Seed 003: the fraction of the usable window (window less the reserve) that fires."""
    reserve_tokens: int = 2048
    """Seed 003: headroom carved off the window before the ratio applies."""
    threshold_percent: float | None = None
    """Seed 001: when set, the fraction of the whole window that fires (no reserve)."""
    min_context_tokens: int = 0
    """Seed 001's floor: the threshold is never below this many tokens."""
    ineffective_savings: float = 0.10
    """Seed 001: a compaction saving less than this fraction of the context is ineffective."""
    ineffective_limit: int = 2
    """Seed 001: this many ineffective compactions in a row stop automatic compaction."""
    unavailable_cooldown: float = 600.0
    """Seed 002: seconds without automatic compaction after the summarizer was unreachable."""
    timeout_ladder: tuple[float, ...] = (60.0, 120.0, 300.0, 600.0)
    """Seconds of cooldown after the 1st, 2nd, ... timeout in a row (the last one repeats)."""
    on_failure: OnFailure = "abort"
    """What a compaction whose summarizer fails does (see `OnFailure`)."""
    max_summary_overrun: float = 1.25
    """A digest over this multiple of its token budget counts as a failed summary."""
    durable: bool = True
    """Ours: an engine's gates start from the session's recorded compactions (its
    compaction events: failures, automatic and forced compactions, their savings and
    times), read at its first automatic compaction. So the cooldown, anti-thrashing and
    the hourly cap hold for an engine made for each request or in another process (a
    session object per turn, as a web server makes them), not only for one kept between
    turns. False: each engine starts with open gates."""
    max_auto_per_hour: int | None = 30
    """Ours: at most this many automatic compactions in any hour (None: no cap). Each one
    that saves enough passes anti-thrashing, yet an agent whose context refills fast (or a
    summary that grows back) can compact again and again, a summarizer call each time
    (PEERS: claude-code #94580, 89 in one session; hermes-agent #117574; openclaw
    #78367). Past the cap the context is still built to fit (trimmed); a forced
    compaction is never capped."""

    def __post_init__(self) -> None:
        problems = []
        if not 0 < self.trigger_ratio <= 1:
            problems.append(f"trigger_ratio must be in (0, 1], got {self.trigger_ratio}")
        if self.reserve_tokens < 0:
            problems.append(f"reserve_tokens must not be negative, got {self.reserve_tokens}")
        if self.threshold_percent is not None and not 0 < self.threshold_percent <= 1:
            problems.append(f"threshold_percent must be in (0, 1], got {self.threshold_percent}")
        if self.min_context_tokens < 0:
            problems.append(
                f"min_context_tokens must not be negative, got {self.min_context_tokens}"
            )
        if not 0 <= self.ineffective_savings < 1:
            problems.append(
                f"ineffective_savings must be in [0, 1), got {self.ineffective_savings}"
            )
        if self.ineffective_limit < 1:
            problems.append(f"ineffective_limit must be at least 1, got {self.ineffective_limit}")
        if not (math.isfinite(self.unavailable_cooldown) and self.unavailable_cooldown >= 0):
            problems.append(
                f"unavailable_cooldown must be a finite number >= 0, got "
                f"{self.unavailable_cooldown}"
            )
        if not self.timeout_ladder or any(
            not (math.isfinite(step) and step >= 0) for step in self.timeout_ladder
        ):
            problems.append(
                f"timeout_ladder must be finite numbers >= 0, got {self.timeout_ladder!r}"
            )
        if self.on_failure not in ("abort", "extractive", "raise"):
            problems.append(
                f"on_failure must be 'abort', 'extractive' or 'raise', got {self.on_failure!r}"
            )
        cap: object = self.max_auto_per_hour
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            problems.append(
                f"max_auto_per_hour must be None or an int >= 1, got {self.max_auto_per_hour!r}"
            )
        if not self.max_summary_overrun >= 1:
            problems.append(
                f"max_summary_overrun must be at least 1, got {self.max_summary_overrun}"
            )
        if problems:
            raise ConfigurationError("invalid GatePolicy: " + "; ".join(problems))

    def threshold(self, window: int) -> int:
        """Return the tokens at which a context of this window should be compacted."""
        if self.threshold_percent is not None:
            line = threshold_tokens(
                window,
                threshold_percent=self.threshold_percent,
                min_context_tokens=self.min_context_tokens,
            )
        else:
            limit = budget_limit(
                window, trigger_ratio=self.trigger_ratio, reserve_tokens=self.reserve_tokens
            )
            line = max(int(limit), self.min_context_tokens)
        return min(line, window)

    def over_threshold(self, tokens: int, window: int) -> bool:
        """Return True when `tokens` reach the threshold of `window`."""
        return tokens >= self.threshold(window)


def classify_failure(error: BaseException) -> FailureKind | None:
    """Return which kind of summarizer failure `error` is, or None when it is not one."""
    if isinstance(error, SummarizerAuthError):
        return "auth"
    if isinstance(error, SummarizerTimeoutError | TimeoutError):
        return "timeout"
    if isinstance(error, SummarizerUnavailableError | ConnectionError):
        return "unavailable"
    if isinstance(error, SummarizerError):
        return "response"
    return None


@dataclass(slots=True)
class FailureGate:
    """The failure cooldown: when automatic compaction may call the summarizer again.

    An unreachable summarizer (or a bad answer) waits `unavailable_cooldown` seconds (or
    the server's `retry_after`, when longer); timeouts in a row climb `timeout_ladder`; a
    refused credential stops automatic compaction until `clear` (a forced compaction).
    """

    until: float = 0.0
    stopped: bool = False
    timeouts: int = 0
    kind: FailureKind | None = None
    error: str | None = None

    def remaining(self, now: float) -> float:
        """Return the seconds of cooldown left (`inf` while stopped)."""
        if self.stopped:
            return math.inf
        return max(0.0, self.until - now)

    def record(self, error: BaseException, now: float, policy: GatePolicy) -> FailureKind:
        """Record a summarizer failure at `now` and return its kind.

        Raises:
            TypeError: `error` is not a summarizer failure (see `classify_failure`).
        """
        kind = classify_failure(error)
        if kind is None:
            raise TypeError(f"not a summarizer failure: {type(error).__name__}")
        self.kind = kind
        self.error = f"{type(error).__name__}: {error}"
        if kind == "auth":
            self.stopped = True
            return kind
        if kind == "timeout":
            ladder = policy.timeout_ladder
            wait = ladder[min(self.timeouts, len(ladder) - 1)]
            self.timeouts += 1
        else:
            self.timeouts = 0
            retry_after = getattr(error, "retry_after", None)
            wait = max(policy.unavailable_cooldown, float(retry_after or 0.0))
        self.until = now + wait
        return kind

    def clear(self) -> None:
        """Forget every failure (a success, or a forced compaction)."""
        self.until = 0.0
        self.stopped = False
        self.timeouts = 0
        self.kind = None


@dataclass(slots=True)
class ThrashingGate:
    """Seed 001's anti-thrashing: ineffective compactions in a row stop automatic ones."""

    ineffective: int = 0
    savings: list[float] = field(default_factory=list)

    def record(self, saved: float, policy: GatePolicy) -> None:
        """Record an automatic compaction that saved the fraction `saved` of the context."""
        self.savings.append(saved)
        del self.savings[:-8]
        self.ineffective = self.ineffective + 1 if saved < policy.ineffective_savings else 0

    def thrashing(self, policy: GatePolicy) -> bool:
        """Return True while automatic compaction is stopped."""
        return self.ineffective >= policy.ineffective_limit

    def clear(self) -> None:
        """Start counting again (a forced compaction)."""
        self.ineffective = 0


_HOUR = 3600.0


@dataclass(slots=True)
class RateGate:
    """The automatic compactions of the last hour, against `GatePolicy.max_auto_per_hour`."""

    times: deque[float] = field(default_factory=deque)

    def record(self, now: float, policy: GatePolicy) -> None:
        """Record an automatic compaction that ran (its summarizer was called) at `now`."""
        cap = policy.max_auto_per_hour
        if cap is None:
            return
        self.times.append(now)
        while len(self.times) > cap:
            self.times.popleft()

    def wait(self, now: float, policy: GatePolicy) -> float:
        """Return the seconds before another automatic compaction may run (0: now)."""
        cap = policy.max_auto_per_hour
        if cap is None or len(self.times) < cap:
            return 0.0
        return max(0.0, self.times[-cap] + _HOUR - now)

    def clear(self) -> None:
        """Start counting again (a forced compaction, a reset session)."""
        self.times.clear()


ENGINE_DETAILS = "engine"
"""The key of an `ended` compaction event's details the engine writes (trigger, fallback)."""
_RECORDED_ERRORS: dict[str, type[SummarizerError]] = {
    "SummarizerAuthError": SummarizerAuthError,
    "SummarizerTimeoutError": SummarizerTimeoutError,
    "TimeoutError": SummarizerTimeoutError,
    "SummarizerUnavailableError": SummarizerUnavailableError,
    "ConnectionError": SummarizerUnavailableError,
    "ConnectionRefusedError": SummarizerUnavailableError,
    "ConnectionResetError": SummarizerUnavailableError,
    "ConnectionAbortedError": SummarizerUnavailableError,
    "SummarizerResponseError": SummarizerResponseError,
    "SummarizerError": SummarizerError,
}
"""A failed compaction's recorded error (`Type: message`) by its type: the summarizer's."""


@dataclass(slots=True)
class EngineGates:
    """An engine's three gates: the failure cooldown, anti-thrashing and the hourly cap.

    An engine lives them as it compacts; `replay` rebuilds them from a session's
    compaction events (`GatePolicy.durable`).
    """

    failures: FailureGate = field(default_factory=FailureGate)
    thrashing: ThrashingGate = field(default_factory=ThrashingGate)
    rate: RateGate = field(default_factory=RateGate)

    def forced(self) -> None:
        """A forced compaction: every gate starts again."""
        self.failures.clear()
        self.thrashing.clear()
        self.rate.clear()

    def automatic(
        self, saved: float, now: float, policy: GatePolicy, *, digest_only: bool = False
    ) -> None:
        """An automatic compaction that ran at `now`, saving the fraction `saved`.

        One that only folded loops the budget left out into the session digest counts
        towards the hourly cap, not anti-thrashing: it keeps those loops in the context,
        and was never meant to make it smaller.
        """
        if not digest_only:
            self.thrashing.record(saved, policy)
        self.rate.record(now, policy)

    @classmethod
    def replay(
        cls,
        events: Sequence[CompactionEvent],
        *,
        overlay: str,
        policy: GatePolicy,
        at: Callable[[datetime], float],
    ) -> EngineGates:
        """Replay the `ended` events of `overlay`, oldest first, as the engine lived them.

        A failure whose error is a summarizer's starts its cooldown (a refused credential
        stops); a forced compaction clears every gate; an automatic one counts towards
        anti-thrashing (the share its loops' tokens fell by) and the hourly cap, and, when
        no fallback wrote it, ends the cooldown. Other compactions that succeeded (the
        command line's, a caller's own) are not the engine's and change nothing; a
        summarizer's failure counts wherever it happened. `at` turns an event's time into
        the engine's clock.
        """
        gates = cls()
        for event in events:
            details = event.details
            if event.event != "ended" or details.get("overlay", "default") != overlay:
                continue
            if details.get("status") == "failed":
                error = _recorded_error(details.get("error"))
                if error is not None:
                    gates.failures.record(error, at(event.created_at), policy)
                continue
            engine = details.get(ENGINE_DETAILS)
            if not isinstance(engine, Mapping):
                continue  # a success not the engine's: the command line's, a caller's own
            trigger = engine.get("trigger")
            if trigger == "forced":
                gates.forced()
            elif trigger == "auto":
                if not engine.get("fallback"):
                    gates.failures.clear()
                before, after = event.tokens_before, event.tokens_after
                saved = 1 - after / before if before > 0 and after is not None else 0.0
                digest_only = event.block_id is None and bool(details.get("digest_loops"))
                gates.automatic(
                    max(0.0, saved), at(event.created_at), policy, digest_only=digest_only
                )
        return gates


def _recorded_error(error: object) -> SummarizerError | None:
    """The summarizer error a failed compaction recorded, or None for any other error."""
    if not isinstance(error, str):
        return None
    name, _, message = error.partition(": ")
    kind = _RECORDED_ERRORS.get(name)
    return None if kind is None else kind(message)
