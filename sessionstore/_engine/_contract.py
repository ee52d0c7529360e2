"""The `ContextEngine` contract (seed 001), and the values it returns.

An agent runtime drives one engine per conversation:

1. `on_session_start()` when the conversation begins (or resumes);
2. `update_from_response(usage)` after every model call;
3. `should_compress()` after every turn, and `compress()` when it says so;
4. `compress(force=True)` for a user's `/compact`, after `has_content_to_compress()`;
5. `update_model(context_length)` when the model (and so the window) changes;
6. `on_session_reset()` on `/new` or `/reset`, `on_session_end()` at a real end.

What touches the store or a model is async; the gates are sync and cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from sessionstore._engine._gate import FailureKind

__all__ = ["CompressionOutcome", "ContextEngine", "EngineStatus"]

OutcomeStatus = Literal["compacted", "noop", "skipped", "failed"]


@dataclass(frozen=True, slots=True)
class CompressionOutcome:
    """What one `compress` call did.

    `status` is `compacted` (blocks or a digest written), `noop` (nothing worth writing),
    `skipped` (a gate refused an automatic compaction: `reason` says which) or `failed`
    (the summarizer failed and the policy kept everything: `error` says why).
    """

    status: OutcomeStatus
    forced: bool = False
    tokens_before: int = 0
    """The context's loaded tokens before (messages only, as `build_context` counts them)."""
    tokens_after: int = 0
    """The same, after (equal to `tokens_before` unless something was written)."""
    block_ids: tuple[int, ...] = ()
    fallback: str | None = None
    """`extractive` when the offline summarizer stood in for a failed one."""
    reason: str | None = None
    """Why it was skipped, or which failure the fallback replaced."""
    error: str | None = None
    """`Type: message` of the summarizer failure (`failed`, or replaced by a fallback)."""
    failure_kind: FailureKind | None = None
    feedback: tuple[str, ...] = ()
    """The user-facing lines of the compaction (`CompactionFeedback.lines()`)."""

    @property
    def saved(self) -> float:
        """The fraction of the context saved (0 when nothing was, or there was nothing)."""
        if self.tokens_before <= 0:
            return 0.0
        return max(0.0, (self.tokens_before - self.tokens_after) / self.tokens_before)


@dataclass(frozen=True, slots=True)
class EngineStatus:
    """A snapshot of a live engine, for display and logging (seed 001's `get_status`)."""

    tokens: int
    """The prompt's tokens now, system prompt included (anchored or measured)."""
    anchored: bool
    """True when `tokens` rests on a provider's reported usage, False on a measurement."""
    context_length: int
    threshold_tokens: int
    usage_percent: float
    """`tokens` as a percentage of `context_length`, capped at 100."""
    compression_count: int
    """Compactions that wrote something, since the session started or was reset."""
    last_prompt_tokens: int
    """The prompt tokens of the last `update_from_response` (0 before one)."""
    last_savings: float | None
    """The fraction the last compaction saved, or None before one."""
    ineffective_count: int
    """Automatic compactions in a row that saved under the policy's fraction."""
    thrashing: bool
    """True while anti-thrashing stops automatic compaction (until a forced one)."""
    cooldown_remaining: float
    """Seconds before automatic compaction may call the summarizer again (`inf`: stopped)."""
    stopped: bool
    """True after a refused credential, until a forced compaction."""
    fallback_count: int
    """Compactions the offline summarizer finished after the configured one failed."""
    last_error: str | None

    def to_dict(self) -> dict[str, Any]:
        """Return the status as a JSON-able dict (an infinite cooldown becomes None)."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        if data["cooldown_remaining"] == float("inf"):
            data["cooldown_remaining"] = None
        return data


@runtime_checkable
class ContextEngine(Protocol):
    """Decides when a conversation's context is compacted, and compacts it (seed 001)."""

    def update_from_response(self, usage: Mapping[str, Any] | object) -> None:
        """Anchor the context size on a provider's reported usage after a model call."""
        ...

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """Return True when an automatic compaction should run now."""
        ...

    async def compress(
        self, *, focus_topic: str | None = None, force: bool = False
    ) -> CompressionOutcome:
        """Compact the context; `force` (a user's `/compact`) ignores every gate."""
        ...

    async def has_content_to_compress(self, *, force: bool = False) -> bool:
        """Return True when a compaction would have something to fold."""
        ...

    async def on_session_start(self) -> None:
        """Load what the engine needs about the conversation (its current size)."""
        ...

    async def on_session_end(self) -> None:
        """Release what the engine holds at a real end of the conversation."""
        ...

    def on_session_reset(self) -> None:
        """Forget the per-conversation state (counts, token tracking)."""
        ...

    def get_status(self) -> EngineStatus:
        """Return the counts for display."""
        ...

    def update_model(self, context_length: int, *, system_prompt_tokens: int | None = None) -> None:
        """Follow a switch of model: a new window, perhaps a new system prompt size."""
        ...
