"""The two plugs a strategy summarises through: `Summarizer` (async) and `TurnSummarizer`.

- `Summarizer` folds many messages into one digest. It may call a model, so it is
  async; it gets a `SummaryRequest` (the messages, the prior digest to update, a focus
  topic, a token budget, the scope) and returns a `Summary` (the text and where it
  came from).
- `TurnSummarizer` writes one deterministic line for one turn; it is pure and sync.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from sessionstore.errors import SummarizerResponseError
from sessionstore.models import Message

__all__ = ["Summarizer", "Summary", "SummaryRequest", "TurnSummarizer"]

SummaryScope = Literal["session", "branch"]


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What a summarizer is asked to fold."""

    messages: Sequence[Message]
    """The messages to fold, oldest first."""
    prior_digest: str | None = None
    """The digest of an earlier compaction, to update rather than start over."""
    focus_topic: str | None = None
    """A topic the digest should keep in most detail (for example from `/compact <topic>`)."""
    budget_tokens: int = 2_000
    """The most tokens the digest may take."""
    scope: SummaryScope = "session"
    """`session`: the history of this conversation; `branch`: an abandoned branch of it."""

    def __post_init__(self) -> None:
        if self.budget_tokens < 1:
            raise ValueError(f"budget_tokens must be at least 1, got {self.budget_tokens}")
        if self.scope not in ("session", "branch"):
            raise ValueError(f"scope must be 'session' or 'branch', got {self.scope!r}")


@dataclass(frozen=True, slots=True)
class Summary:
    """A summarizer's answer, with what is recorded as its provenance."""

    text: str
    model: str
    """The model that wrote it (`extractive` and the like for offline summarizers)."""
    prompt_version: str
    """The version of the prompt or rules that produced it."""
    duration_ms: float = 0.0


def digest_text(summary: object) -> str:
    """Return the text of a summarizer's answer, refusing one that would fold into nothing.

    A digest stands for every message it folds: an empty one, written, would show the
    model nothing of them. Every path that writes a summarizer's answer calls this first.

    Raises:
        SummarizerResponseError: the answer is not a `Summary` with a string `text`, or
            its text is blank (nothing is written).
    """
    text = getattr(summary, "text", None) if isinstance(summary, Summary) else None
    if not isinstance(text, str):
        raise SummarizerResponseError(
            f"the summarizer returned {type(summary).__name__}, not a Summary with a text"
        )
    if not text.strip():
        raise SummarizerResponseError("the summarizer returned an empty digest")
    return text


@runtime_checkable
class Summarizer(Protocol):
    """Folds messages into one digest; may call a model."""

    async def summarize(self, request: SummaryRequest) -> Summary:
        """Return the digest of `request.messages` within `request.budget_tokens`."""
        ...


@runtime_checkable
class TurnSummarizer(Protocol):
    """Writes one line for one turn, deterministically and without I/O."""

    def summarize_turn(self, messages: Sequence[Message]) -> str:
        """Return a one-line summary of one turn: its messages, in order.

        A turn is a user message alone, an assistant message followed by the results of
        its tool calls, or any other single message.
        """
        ...
