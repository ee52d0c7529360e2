"""`ContextTracker`: the live gate that keeps one session's context size between model calls.

It anchors on the prompt size the provider reports and estimates what was appended
since, so the agent knows when to compact before the next call.
"""

from __future__ import annotations

from sessionstore._tokens import HeuristicTokenCounter, TokenCounter
from sessionstore.config import CompactionConfig, should_compact
from sessionstore.models import Message

__all__ = ["ContextTracker"]


class ContextTracker:
    """The running size of one session's context, between model calls.

    Like Codex and Hermes, it trusts the provider: after each call, `record_usage`
    anchors the total on the prompt size the provider reported (plus the completion,
    which the next prompt will carry). Messages appended since are estimated with the
    counter and added on top, until the next report replaces them.

    All counts leave out the system prompt (and tool definitions): give their size as
    `system_prompt_tokens`, and it is added back wherever the whole window matters
    (`headroom`, `usage_ratio`, `should_compact`).

    >>> from sessionstore.models import ToolResultMessage
    >>> tracker = ContextTracker(max_context_tokens=10_000, system_prompt_tokens=1_000)
    >>> tracker.record_usage(prompt_tokens=7_000, completion_tokens=500)
    >>> tracker.add(ToolResultMessage(tool_call_id="c1", tool_name="bash", content="x" * 4_000))
    1009
    >>> tracker.estimated_tokens  # 7,000 + 500 - 1,000 anchored, 1,009 estimated
    7509
    >>> tracker.should_compact()  # 8,509 of 10,000 is past the default 85%
    True

    Args:
        counter: Estimates the messages added between reports (the heuristic by default).
        max_context_tokens: The model's context window, in tokens.
        system_prompt_tokens: The size of what every prompt holds besides the messages.

    Raises:
        ValueError: `max_context_tokens` is not positive, or
            `system_prompt_tokens` is negative or leaves no room for messages.
    """

    def __init__(
        self,
        counter: TokenCounter | None = None,
        *,
        max_context_tokens: int,
        system_prompt_tokens: int = 0,
    ) -> None:
        if max_context_tokens <= 0:
            raise ValueError(f"max_context_tokens must be positive, got {max_context_tokens}")
        if system_prompt_tokens < 0:
            raise ValueError(
                f"system_prompt_tokens must not be negative, got {system_prompt_tokens}"
            )
        if system_prompt_tokens >= max_context_tokens:
            raise ValueError(
                f"system_prompt_tokens ({system_prompt_tokens}) leaves no room in "
                f"max_context_tokens ({max_context_tokens})"
            )
        self._counter: TokenCounter = counter if counter is not None else HeuristicTokenCounter()
        self._max_context_tokens = max_context_tokens
        self._system_prompt_tokens = system_prompt_tokens
        self._anchor = 0
        self._pending = 0
        self._last_reported: int | None = None

    @property
    def counter(self) -> TokenCounter:
        """The counter that estimates messages added between reports."""
        return self._counter

    @property
    def max_context_tokens(self) -> int:
        """The model's context window."""
        return self._max_context_tokens

    @property
    def system_prompt_tokens(self) -> int:
        """The size of what every prompt holds besides the messages."""
        return self._system_prompt_tokens

    @property
    def estimated_tokens(self) -> int:
        """The messages' tokens now: the last anchor plus the estimates added since."""
        return self._anchor + self._pending

    @property
    def pending_tokens(self) -> int:
        """The estimated tokens added since the last report or reset."""
        return self._pending

    @property
    def last_reported(self) -> int | None:
        """The `prompt_tokens` of the last report, or None before one or after a `reset`."""
        return self._last_reported

    @property
    def headroom(self) -> int:
        """The tokens left in the window; negative when the context no longer fits."""
        return self._max_context_tokens - self._system_prompt_tokens - self.estimated_tokens

    @property
    def usage_ratio(self) -> float:
        """The fraction of the window in use, system prompt included (above 1 when over)."""
        return (self._system_prompt_tokens + self.estimated_tokens) / self._max_context_tokens

    def add(self, *messages: Message) -> int:
        """Estimate messages appended since the last report and return their tokens."""
        count = self._counter.count_message
        tokens = sum(count(message) for message in messages)
        self._pending += tokens
        return tokens

    def add_tokens(self, tokens: int) -> None:
        """Add a count made elsewhere (for example a stored message's cached `token_count`).

        Raises:
            ValueError: `tokens` is negative.
        """
        if tokens < 0:
            raise ValueError(f"tokens must not be negative, got {tokens}")
        self._pending += tokens

    def record_usage(self, prompt_tokens: int, completion_tokens: int = 0) -> None:
        """Anchor on what the provider reported for a call, dropping the pending estimates.

        The new total is `prompt_tokens + completion_tokens - system_prompt_tokens` (never
        below 0): the provider's prompt includes the system prompt, and the response will
        be part of the next prompt. So either add the response with `add` *before* this
        call, or not at all. Report the whole prompt, cached tokens included (Anthropic
        reports those apart from `input_tokens`).

        A `CalibratedTokenCounter` used as `counter` is not fed by this: call its
        `record_usage` with the messages that were sent, if you want it to learn.

        Raises:
            ValueError: `prompt_tokens` is not positive or `completion_tokens` is negative.
        """
        if prompt_tokens <= 0:
            raise ValueError(f"prompt_tokens must be positive, got {prompt_tokens}")
        if completion_tokens < 0:
            raise ValueError(f"completion_tokens must not be negative, got {completion_tokens}")
        self._anchor = max(prompt_tokens + completion_tokens - self._system_prompt_tokens, 0)
        self._pending = 0
        self._last_reported = prompt_tokens

    def reset(self, context_tokens: int) -> None:
        """Start again from a context of `context_tokens` (after a compaction or a rebuild).

        `context_tokens` counts the messages only, like `estimated_tokens`; the next
        report replaces it.

        Raises:
            ValueError: `context_tokens` is negative.
        """
        if context_tokens < 0:
            raise ValueError(f"context_tokens must not be negative, got {context_tokens}")
        self._anchor = context_tokens
        self._pending = 0
        self._last_reported = None

    def should_compact(self, config: CompactionConfig | None = None) -> bool:
        """Return True when the context, system prompt included, should be compacted now.

        The rule is `sessionstore.config.should_compact`: with the default configuration,
        once the context passes 85% of the window.
        """
        return should_compact(
            self._system_prompt_tokens + self.estimated_tokens, self._max_context_tokens, config
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(estimated_tokens={self.estimated_tokens}, "
            f"max_context_tokens={self._max_context_tokens}, "
            f"system_prompt_tokens={self._system_prompt_tokens})"
        )
