"""What the store engine takes in, checked: focus topics, usage reports, summarizer answers.

Also the forced cut (`/compact`, seed 003) as a `SummarizingBlockCompaction` subclass.
Kept apart from `StoreContextEngine` so the engine module holds the engine only.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from sessionstore._redact import redact
from sessionstore._tokens import TokenCounter
from sessionstore.config import CompactionConfig
from sessionstore.errors import (
    SummarizerError,
    SummarizerResponseError,
    SummarizerTimeoutError,
    SummarizerUnavailableError,
)
from sessionstore.models import TurnRange
from sessionstore.strategies import LoopView, SummarizingBlockCompaction
from sessionstore.strategies._plan import forced_boundary
from sessionstore.summarizers import Summarizer, Summary, SummaryRequest
from sessionstore.summarizers._protocol import digest_text

__all__ = ["CheckedSummarizer", "ForcedCut", "clean_focus", "usage_counts"]

_FOCUS_MAX_CHARS = 500


def clean_focus(topic: str | None) -> str | None:
    """Return a focus topic safe to put in a prompt: control characters become spaces.

    Raises:
        TypeError: `topic` is not a string.
    """
    if topic is None:
        return None
    if not isinstance(topic, str):
        raise TypeError(f"focus_topic must be a string, got {type(topic).__name__}")
    text = "".join(" " if unicodedata.category(c).startswith("C") else c for c in topic)
    text = " ".join(text.split())[:_FOCUS_MAX_CHARS]
    return text or None


class CheckedSummarizer:
    """A `Summarizer` whose every failure is a `SummarizerError` the engine's gates know.

    An empty or far-over-budget answer is a `SummarizerResponseError`. Any other exception
    a summarizer raises (a custom one calling its own client: `httpx.ConnectError`,
    `openai.APIConnectionError`, a bug) becomes a `SummarizerError` chained to it:
    `SummarizerTimeoutError` for a `TimeoutError`, `SummarizerUnavailableError` for an
    `OSError` (`ConnectionError` among them), the base class otherwise. So the cooldown
    and `on_failure` apply to it as to the library's own summarizers', instead of the
    error failing every build and the summarizer being called again on every turn.
    """

    def __init__(self, inner: Summarizer, counter: TokenCounter, overrun: float) -> None:
        self.inner = inner
        self.counter = counter
        self.overrun = overrun

    def __repr__(self) -> str:
        return repr(self.inner)

    async def summarize(self, request: SummaryRequest) -> Summary:
        try:
            summary = await self.inner.summarize(request)
        except SummarizerError:
            raise
        except Exception as error:
            raise _summarizer_error(error) from error
        tokens = self.counter.count_text(digest_text(summary))
        if tokens > request.budget_tokens * self.overrun:
            raise SummarizerResponseError(
                f"the summarizer returned {tokens:,} tokens, over its budget of "
                f"{request.budget_tokens:,}"
            )
        return summary


def _summarizer_error(error: Exception) -> SummarizerError:
    """The `SummarizerError` standing for what a summarizer raised (see `CheckedSummarizer`)."""
    # Redacted: a client's error text can hold the key or URL it was called with.
    text = redact(f"the summarizer raised {type(error).__name__}: {error}")
    if isinstance(error, TimeoutError):
        return SummarizerTimeoutError(text)
    if isinstance(error, OSError):
        return SummarizerUnavailableError(text)
    return SummarizerError(text)


class ForcedCut(SummarizingBlockCompaction):
    """`SummarizingBlockCompaction` cut where a forced `/compact` cuts (seed 003).

    Everything before the loop's last user message is folded; the last user turn and
    what follows are the tail. With no user message, or none before it, nothing is.
    """

    def _boundaries(
        self, view: LoopView, config: CompactionConfig
    ) -> tuple[TurnRange | None, TurnRange | None, TurnRange | None]:
        messages = view.messages
        cut = forced_boundary([m.message for m in messages])
        if not cut:
            return None, None, None
        turn_count = view.turn_map.turn_count()
        tail_first = messages[cut].turn_index
        if tail_first < 1:
            return None, None, None
        return (
            None,
            TurnRange(start_turn=0, end_turn=tail_first - 1),
            TurnRange(start_turn=tail_first, end_turn=turn_count - 1),
        )


def usage_counts(usage: Mapping[str, Any] | object) -> tuple[int, int]:
    """Return `(prompt, completion)` tokens from an OpenAI or Anthropic usage report."""

    def get(name: str) -> Any:
        if isinstance(usage, Mapping):
            return usage.get(name)
        return getattr(usage, name, None)

    def count(name: str) -> int:
        value = get(name)
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"usage {name} must be an int, got {type(value).__name__}")
        if value < 0:
            raise ValueError(f"usage {name} must not be negative, got {value}")
        return value

    if usage is None or isinstance(usage, str | bytes):
        raise TypeError(f"usage must be a mapping or an object, got {type(usage).__name__}")
    if get("prompt_tokens") is not None:  # OpenAI: cached tokens are included
        prompt = count("prompt_tokens")
    else:  # Anthropic: cached tokens are reported apart from input_tokens
        prompt = sum(
            count(name)
            for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
    completion = count("completion_tokens") or count("output_tokens")
    if prompt <= 0:
        raise ValueError("usage reports no prompt tokens (prompt_tokens or input_tokens)")
    return prompt, completion
