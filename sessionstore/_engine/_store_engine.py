"""`StoreContextEngine`: the default `ContextEngine`, on one stored session.

It measures the context (a provider's reported usage when there is one, through
`ContextTracker`; else the loaded tokens of `build_context`), gates automatic compaction
(`GatePolicy`: threshold, anti-thrashing, failure cooldown), and compacts through
`compact_session_loops`, so every compaction is a non-destructive overlay with its events.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sessionstore._compaction import (
    CompactionCallbacks,
    CompactionResult,
    compact_session_loops,
)
from sessionstore._context import build_context
from sessionstore._engine import _foldable as foldable
from sessionstore._engine._contract import CompressionOutcome, EngineStatus
from sessionstore._engine._gate import (
    ENGINE_DETAILS,
    EngineGates,
    GatePolicy,
    RateGate,
    ThrashingGate,
    classify_failure,
)
from sessionstore._engine._inputs import CheckedSummarizer, ForcedCut, clean_focus, usage_counts
from sessionstore._redact import redact, redact_message
from sessionstore._tokens import HeuristicTokenCounter, TokenCounter
from sessionstore._tracker import ContextTracker
from sessionstore.config import CompactionConfig, validated_config
from sessionstore.errors import LoopNotFoundError, SessionNotFoundError
from sessionstore.models import (
    BranchSummaryMessage,
    CompactionEnded,
    Message,
    StoredMessage,
)
from sessionstore.store import SessionStore, TenantStore
from sessionstore.strategies import (
    BlockCompactionStrategy,
    SummarizingBlockCompaction,
    get_block_strategy,
)
from sessionstore.summarizers import (
    ExtractiveSummarizer,
    Summarizer,
    SummaryRequest,
    summary_budget,
)

__all__ = ["StoreContextEngine"]

_RECORDED_EVENTS = 200
"""The newest compaction events an engine reads its gates' state from (`GatePolicy.durable`):
two events a compaction, enough for the hourly cap's count and the runs the gates follow."""


class StoreContextEngine:
    """The default `ContextEngine`: the live gate and compaction of one stored session.

    >>> async def agent_turn(engine, model_response):
    ...     engine.update_from_response(model_response.usage)
    ...     if engine.should_compress():
    ...         await engine.compress()

    Args:
        store: The store.
        session_id: The session.
        context_length: The model's window, in tokens.
        system_prompt_tokens: What every prompt holds besides the messages.
        overlay: The overlay compactions write and the context is built from.
        config: The compaction policy (how much is kept; the scope).
        strategy: The block strategy; by default the config's (`"summarize"`:
            `SummarizingBlockCompaction()`, unless the config names another). Only a
            `SummarizingBlockCompaction` gets the focus topic, the forced cut, the checks on
            its summarizer's answer and the extractive fallback; another strategy is run
            as it is (a forced compaction then keeps one recent turn).
        policy: The gates (`GatePolicy`).
        counter: Estimates messages noted between provider reports.
        clock: Monotonic seconds (the cooldowns' time); `time.monotonic` by default.

    Raises:
        ValueError: a window that is not positive, or a system prompt that fills it.
        ConfigurationError: a bad config or an unknown strategy name.
    """

    name = "store"

    def __init__(
        self,
        store: SessionStore | TenantStore,
        session_id: str,
        *,
        context_length: int,
        system_prompt_tokens: int = 0,
        overlay: str = "default",
        config: CompactionConfig | dict[str, Any] | None = None,
        strategy: BlockCompactionStrategy | str | None = None,
        policy: GatePolicy | None = None,
        counter: TokenCounter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.overlay = overlay
        self.config = validated_config(config, CompactionConfig)
        self.strategy: BlockCompactionStrategy = get_block_strategy(
            self.config.block_strategy if strategy is None else strategy
        )
        self.policy = policy if policy is not None else GatePolicy()
        self._clock = clock
        self._tracker = ContextTracker(
            counter if counter is not None else HeuristicTokenCounter(),
            max_context_tokens=context_length,
            system_prompt_tokens=system_prompt_tokens,
        )
        self._gates = EngineGates()
        self._restored = not self.policy.durable
        self.compression_count = 0
        self.fallback_count = 0
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self._last_savings: float | None = None
        self._last_error: str | None = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(session_id={self.session_id!r}, "
            f"context_length={self.context_length}, overlay={self.overlay!r})"
        )

    # ── token state ─────────────────────────────────────────────────────────────

    @property
    def context_length(self) -> int:
        """The model's window."""
        return self._tracker.max_context_tokens

    @property
    def system_prompt_tokens(self) -> int:
        """What every prompt holds besides the messages."""
        return self._tracker.system_prompt_tokens

    @property
    def threshold_tokens(self) -> int:
        """The prompt tokens at which automatic compaction fires."""
        return self.policy.threshold(self.context_length)

    @property
    def tokens(self) -> int:
        """The prompt's tokens now, system prompt included."""
        return self.system_prompt_tokens + self._tracker.estimated_tokens

    def update_from_response(self, usage: Mapping[str, Any] | object) -> None:
        """Anchor the context's size on a model call's reported usage.

        OpenAI's `prompt_tokens` / `completion_tokens`, or Anthropic's `input_tokens` plus
        its cache tokens / `output_tokens`, as a dict or an object.

        Raises:
            TypeError: `usage` is not a mapping or an object, or a count is not an int.
            ValueError: a negative count, or no prompt tokens at all.
        """
        prompt, completion = usage_counts(usage)
        self._tracker.record_usage(prompt, completion)
        self.last_prompt_tokens = prompt
        self.last_completion_tokens = completion

    def note_appended(self, messages: Sequence[StoredMessage]) -> None:
        """Add messages appended since the last usage report (their cached token counts)."""
        for stored in messages:
            self._tracker.add_tokens(stored.token_count)

    async def refresh(self) -> int:
        """Measure the context from the store (dropping any provider anchor); return it."""
        loaded = await self._loaded_tokens()
        self._tracker.reset(loaded)
        return self.tokens

    def update_model(self, context_length: int, *, system_prompt_tokens: int | None = None) -> None:
        """Follow a switch of model: a new window (and perhaps system prompt size).

        The context's size carries over; the threshold follows the new window.

        Raises:
            ValueError: a window that is not positive, or a system prompt that fills it.
        """
        system = self.system_prompt_tokens if system_prompt_tokens is None else system_prompt_tokens
        tracker = ContextTracker(
            self._tracker.counter, max_context_tokens=context_length, system_prompt_tokens=system
        )
        tracker.reset(self._tracker.estimated_tokens)
        self._tracker = tracker

    # ── gates ───────────────────────────────────────────────────────────────────

    async def _restore_gates(self) -> None:
        """Start the gates from the session's recorded compactions (`GatePolicy.durable`)."""
        self._restored = True
        try:
            events = await self.store.list_compaction_events(self.session_id, last=_RECORDED_EVENTS)
        except SessionNotFoundError:
            return
        now, wall = self._clock(), datetime.now(UTC)
        gates = EngineGates.replay(
            events,
            overlay=self.overlay,
            policy=self.policy,
            at=lambda moment: now - (wall - moment).total_seconds(),
        )
        # A failure this engine met before (a branch digest's) leaves no compaction event:
        # the cooldown that ends later is kept.
        if gates.failures.remaining(now) < self._gates.failures.remaining(now):
            gates.failures = self._gates.failures
        else:
            self._last_error = gates.failures.error or self._last_error
        self._gates = gates

    def _blocked(self, *, thrashing: bool = True) -> str | None:
        """Return why automatic compaction may not run now, or None.

        `thrashing`: False leaves anti-thrashing out (a fold into the session digest).
        """
        failures = self._gates.failures
        if failures.stopped:
            return f"stopped after a refused credential ({failures.error}); force to retry"
        remaining = failures.remaining(self._clock())
        if remaining > 0:
            return f"summarizer cooldown, {remaining:.0f}s left ({failures.error})"
        if thrashing and self._gates.thrashing.thrashing(self.policy):
            return (
                f"the last {self._gates.thrashing.ineffective} compactions each saved under "
                f"{self.policy.ineffective_savings:.0%}; force one, or start a new session"
            )
        wait = self._gates.rate.wait(self._clock(), self.policy)
        if wait > 0:
            return (
                f"{self.policy.max_auto_per_hour} automatic compactions in the last hour "
                f"(max_auto_per_hour); the next may run in {wait:.0f}s, or force one"
            )
        return None

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """Return True when an automatic compaction should run now.

        The context (`prompt_tokens` when given, else the tracked size) must reach the
        threshold, and no gate may refuse: no cooldown, not stopped, not thrashing.

        Raises:
            ValueError: negative `prompt_tokens`.
        """
        tokens = self.tokens if prompt_tokens is None else prompt_tokens
        if tokens < 0:
            raise ValueError(f"prompt_tokens must not be negative, got {prompt_tokens}")
        return self.policy.over_threshold(tokens, self.context_length) and self._blocked() is None

    def should_compress_preflight(
        self, messages: Sequence[Message] = (), *, extra_tokens: int = 0
    ) -> bool:
        """Seed 001's pre-flight check, before a model call: compact first?

        A rough estimate, before any usage is reported: the system prompt, `messages`
        (the request about to be sent, counted with the engine's counter) and
        `extra_tokens` (tools, a new input). True when the request would not fit the
        window at all (whatever the gates say: the call would fail; `compress` may still
        be skipped by a gate, and `compress(force=True)` is the way through), or when it
        reaches the threshold and no gate refuses.

        Raises:
            ValueError: negative `extra_tokens`.
        """
        if extra_tokens < 0:
            raise ValueError(f"extra_tokens must not be negative, got {extra_tokens}")
        counter = self._tracker.counter
        estimate = (
            self.system_prompt_tokens
            + sum(counter.count_message(message) for message in messages)
            + extra_tokens
        )
        return estimate > self.context_length or self.should_compress(estimate)

    # ── compaction ──────────────────────────────────────────────────────────────

    async def _loaded_tokens(self) -> int:
        try:
            context = await build_context(
                self.store,
                self.session_id,
                max_context_tokens=self.context_length,
                config=self.config,
                system_prompt_tokens=self.system_prompt_tokens,
                overlay=self.overlay,
                new_overlay=True,  # the overlay this engine compacts into: maybe not yet
            )
        except LoopNotFoundError:
            return 0  # a session without loops has no context yet
        # A loop the budget left out with no digest for it counts: the chain does not fit.
        return context.loaded_tokens + context.left_out_tokens

    def _strategy(
        self, summarizer: Summarizer | None, focus: str | None, force: bool
    ) -> BlockCompactionStrategy:
        """Return the strategy to run: the configured one, given the call's options."""
        base = self.strategy
        if not isinstance(base, SummarizingBlockCompaction):
            return base
        kind = ForcedCut if force else SummarizingBlockCompaction
        chosen = summarizer or CheckedSummarizer(
            base.summarizer, base.counter, self.policy.max_summary_overrun
        )
        return kind(
            chosen,
            counter=base.counter,
            cheap_passes=base.cheap_passes,
            rehydrate=base.rehydrate,
            focus_topic=focus if focus is not None else base.focus_topic,
            redact_secrets=base.redact_secrets,
        )

    async def _run(
        self,
        strategy: BlockCompactionStrategy,
        force: bool,
        details: dict[str, Any],
        digest_only: bool = False,
    ) -> CompactionResult:
        config = self.config
        if force and not isinstance(strategy, SummarizingBlockCompaction):
            config = config.model_copy(
                update={"keep_first_turns": 0, "keep_recent_turns": 1, "keep_recent_tokens": 1}
            )

        def annotate(ended: CompactionEnded) -> None:
            ended.details[ENGINE_DETAILS] = details

        return await compact_session_loops(
            self.store,
            self.session_id,
            None,
            strategy,
            config,
            self.context_length,
            overlay=self.overlay,
            callbacks=CompactionCallbacks(after_compaction_end=annotate),
            system_prompt_tokens=self.system_prompt_tokens,
            digest_only=digest_only,
        )

    async def compress(
        self, *, focus_topic: str | None = None, force: bool = False
    ) -> CompressionOutcome:
        """Compact the session's context now, unless a gate refuses an automatic compaction.

        A forced compaction (a user's `/compact`) ignores the threshold, the cooldown and
        anti-thrashing, clears them, and folds everything before the last user turn. When
        the summarizer fails (unreachable, timeout, refused credential, a bad answer), a
        cooldown starts and the policy's `on_failure` decides: `abort` keeps everything and
        returns a `failed` outcome, `extractive` compacts with `ExtractiveSummarizer`
        instead, `raise` keeps everything and raises. The reason is in the compaction's
        `ended` event (`error` of the failed one; `details["engine"]` of the fallback).

        Args:
            focus_topic: A topic the digest keeps in most detail (control characters are
                replaced by spaces).
            force: Ignore every gate.

        Raises:
            TypeError: `focus_topic` is not a string.
            SummarizerError: the summarizer failed and `on_failure` is `raise`.
        """
        return await self._compress(clean_focus(focus_topic), force)

    async def fold_left_out(self) -> CompressionOutcome:
        """Fold the loops a budget leaves out into the session digest, writing no block.

        `build_with_engine` calls it when the context it built leaves loops out with no
        digest standing for them and the gate does not compact (the context is under the
        threshold, or anti-thrashing stopped automatic compaction: loops too short to
        compact save nothing): without it those loops would vanish from the context. The
        summarizer's cooldown and the hourly cap hold; anti-thrashing does not, and the
        fold does not count towards it (it keeps loops in the context, it was never meant
        to make it smaller). A summarizer failure is handled as `compress` handles it.
        """
        scope = await foldable.in_scope(
            self.store, self.session_id, self.config, self.context_length, self.overlay
        )
        if not scope or not await foldable.pending_digest(
            self.store, self.session_id, scope, self.overlay
        ):
            tokens = self._tracker.estimated_tokens
            return CompressionOutcome(
                "skipped",
                tokens_before=tokens,
                tokens_after=tokens,
                reason="every loop before the scope is in the session digest already",
            )
        return await self._compress(None, False, digest_only=True)

    async def _compress(
        self, focus: str | None, force: bool, *, digest_only: bool = False
    ) -> CompressionOutcome:
        if not force and not self._restored:
            await self._restore_gates()
        blocked = None if force else self._blocked(thrashing=not digest_only)
        if blocked is not None:
            tokens = self._tracker.estimated_tokens
            return CompressionOutcome(
                "skipped", tokens_before=tokens, tokens_after=tokens, reason=blocked
            )
        if force:
            self._gates.forced()
        before = await self._loaded_tokens()
        details: dict[str, Any] = {
            "trigger": "forced" if force else "auto",
            "focus_topic": focus,
            "fallback": None,
        }
        fallback = error_text = None
        kind = None
        try:
            result = await self._run(
                self._strategy(None, focus, force), force, details, digest_only
            )
        except Exception as error:
            kind = classify_failure(error)
            if kind is None:
                raise
            self._gates.failures.record(error, self._clock(), self.policy)
            error_text = redact(f"{type(error).__name__}: {error}")
            self._last_error = error_text
            if self.policy.on_failure == "raise":
                raise
            if self.policy.on_failure == "abort" or not isinstance(
                self.strategy, SummarizingBlockCompaction
            ):
                return CompressionOutcome(
                    "failed",
                    forced=force,
                    tokens_before=before,
                    tokens_after=before,
                    error=error_text,
                    failure_kind=kind,
                )
            fallback = "extractive"
            details.update(fallback=fallback, fallback_reason=error_text, failure_kind=kind)
            result = await self._run(
                self._strategy(ExtractiveSummarizer(), focus, force), force, details, digest_only
            )
            self.fallback_count += 1
        else:
            self._gates.failures.clear()
        after = await self._loaded_tokens() if not result.noop else before
        self._tracker.reset(after)
        outcome = CompressionOutcome(
            "noop" if result.noop else "compacted",
            forced=force,
            tokens_before=before,
            tokens_after=after,
            block_ids=tuple(block.id for block in result.blocks if block.id is not None),
            fallback=fallback,
            reason=None if fallback is None else f"the summarizer failed: {error_text}",
            error=error_text,
            failure_kind=kind,
            feedback=tuple(result.feedback.lines()) if result.feedback else (),
        )
        if not result.noop:
            self.compression_count += 1
        self._last_savings = outcome.saved
        if not force:
            self._gates.automatic(
                outcome.saved, self._clock(), self.policy, digest_only=result.digest_only
            )
        return outcome

    async def has_content_to_compress(self, *, force: bool = False) -> bool:
        """Return True when a compaction would have something to fold (no model call).

        Something to fold is an earlier loop in scope not yet summarised whole, a loop
        before the scope not yet in the session digest, or turns of the current loop a
        compaction would fold (`force`: everything before the last user message; else the
        middle `split_history` finds) that its current block does not fold yet.
        """
        return await foldable.has_content_to_compress(
            self.store,
            self.session_id,
            self.config,
            self.context_length,
            self.overlay,
            force=force,
        )

    # ── branches ────────────────────────────────────────────────────────────────

    async def summarize_branch(
        self,
        abandoned_loop_id: int,
        *,
        into_loop_id: int | None = None,
        focus_topic: str | None = None,
    ) -> StoredMessage:
        """Summarise an abandoned branch into the branch taken (seed 003's branch digest).

        The abandoned branch is the chain from the branch point (the last loop it shares
        with the branch taken) to `abandoned_loop_id`. Its messages are redacted and
        summarised with `SummaryRequest(scope="branch")`, and the digest is appended as a
        `BranchSummaryMessage` to `into_loop_id` (the session's active loop by default).
        A summarizer failure follows `on_failure` (`extractive`: the offline digest
        instead); with `abort` or `raise` nothing is appended and the error is raised.

        Raises:
            ValueError: `abandoned_loop_id` is on the branch taken (nothing was abandoned).
            SummarizerError: the summarizer failed and the policy does not fall back.
            SessionNotFoundError, LoopNotFoundError: no such session or loop.
        """
        focus = clean_focus(focus_topic)
        abandoned = await self.store.active_chain(self.session_id, loop_id=abandoned_loop_id)
        taken = await self.store.active_chain(self.session_id, loop_id=into_loop_id)
        shared = {loop.id for loop in taken}
        branch = [loop for loop in abandoned if loop.id not in shared]
        if not branch or not taken:
            raise ValueError(
                f"loop {abandoned_loop_id} is on the branch taken: there is no abandoned branch"
            )
        messages = [
            redact_message(stored.message)
            for loop in branch
            for stored in await self.store.get_messages(self.session_id, loop.id)
        ]
        folded = sum(loop.token_total for loop in branch)
        request = SummaryRequest(
            messages=messages,
            focus_topic=focus,
            budget_tokens=summary_budget(folded, max_tokens=self.config.max_summary_tokens),
            scope="branch",
        )
        base = self.strategy
        summarizer: Summarizer = ExtractiveSummarizer()
        if isinstance(base, SummarizingBlockCompaction):
            summarizer = base.summarizer
        counter = self._tracker.counter
        fallback_reason = None
        try:
            summary = await CheckedSummarizer(
                summarizer, counter, self.policy.max_summary_overrun
            ).summarize(request)
        except Exception as error:
            if classify_failure(error) is None:
                raise
            self._gates.failures.record(error, self._clock(), self.policy)
            self._last_error = fallback_reason = redact(f"{type(error).__name__}: {error}")
            if self.policy.on_failure != "extractive":
                raise
            summary = await ExtractiveSummarizer().summarize(request)
            self.fallback_count += 1
        digest = BranchSummaryMessage(
            summary=redact(summary.text),
            from_loop_id=abandoned_loop_id,
            extra={
                "sessionstore": {
                    "branch_digest": {
                        "loop_ids": [loop.id for loop in branch],
                        "model": summary.model,
                        "prompt_version": summary.prompt_version,
                        "budget_tokens": request.budget_tokens,
                        "fallback": None if fallback_reason is None else "extractive",
                        "fallback_reason": fallback_reason,
                    }
                }
            },
        )
        (stored,) = await self.store.append_messages(
            self.session_id, [digest], loop_id=taken[-1].id
        )
        self._tracker.add_tokens(stored.token_count)
        return stored

    # ── lifecycle and status ────────────────────────────────────────────────────

    async def on_session_start(self) -> None:
        """Measure the stored context, so the gate works before the first model call."""
        await self.refresh()

    async def on_session_end(self) -> None:
        """Nothing to flush: every compaction is already stored."""

    def on_session_reset(self) -> None:
        """Forget the counts, the token tracking, anti-thrashing and the hourly cap.

        The cooldown stays: it is about the summarizer, not the conversation.
        """
        self._tracker.reset(0)
        self._gates.thrashing = ThrashingGate()
        self._gates.rate = RateGate()
        self.compression_count = 0
        self.fallback_count = 0
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self._last_savings = None
        self._last_error = None

    def get_status(self) -> EngineStatus:
        """Return the counts: tokens now, window, threshold, compactions, gates, last error."""
        tokens = self.tokens
        return EngineStatus(
            tokens=tokens,
            anchored=self._tracker.last_reported is not None,
            context_length=self.context_length,
            threshold_tokens=self.threshold_tokens,
            usage_percent=min(100.0, tokens / self.context_length * 100),
            compression_count=self.compression_count,
            last_prompt_tokens=self.last_prompt_tokens,
            last_savings=self._last_savings,
            ineffective_count=self._gates.thrashing.ineffective,
            thrashing=self._gates.thrashing.thrashing(self.policy),
            cooldown_remaining=self._gates.failures.remaining(self._clock()),
            stopped=self._gates.failures.stopped,
            fallback_count=self.fallback_count,
            last_error=self._last_error,
        )
