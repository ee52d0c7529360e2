"""What the context loader reads and produces: sources, items and the built context (pure data)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from sessionstore.config import CompactionScope
from sessionstore.models import CompactionBlock, LoopRecord, Message, SessionDigest, StoredMessage

__all__ = [
    "BuiltContext",
    "ContextItem",
    "ContextSources",
    "InterruptedCall",
    "LoopSource",
    "Source",
]

Source = Literal[
    "raw", "compacted", "recent", "synthetic", "marker", "digest", "shortened", "built"
]


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One message of a built context, with where it came from."""

    message: Message
    tokens: int
    """Its cached token count."""
    source: Source
    """`raw` (a raw message, verbatim unless `redacted`), `compacted` / `recent` (a
    replacement message of that block section), `synthetic` (added by the loader),
    `marker` (a trim marker), `digest` (the session digest of the loops before the
    scope), `shortened` (a raw message cut to fit the budget: a tool output, the task,
    the system prompt, or the latest request's standing instructions), `built` (a digest
    written at build time, never stored, of the raw turns dropped to fit, merged into the
    summary before them; `covers` names them all)."""
    loop_id: int | None = None
    message_id: int | None = None
    """The raw message's id, for `raw` items."""
    replacement_id: int | None = None
    """The replacement message's id, for `compacted` and `recent` items."""
    covers: tuple[int, ...] = ()
    """The ids of the raw messages this item stands for."""
    pinned: bool = False
    """True for the latest user request, which trimming never drops (nor cuts its task)."""
    flexible: bool = False
    """A text the loader wrote (a summary, a trim marker): its role is chosen to keep
    user and assistant turns alternating."""
    redacted: bool = False
    """Secrets were redacted from the message (`redact_secrets`): it is not the stored
    message any more, whatever its `source`."""


@dataclass(frozen=True, slots=True)
class InterruptedCall:
    """A tool call with no result; the context holds a synthetic result for it."""

    loop_id: int | None
    message_id: int | None
    """The raw assistant message that made the call, when the call is raw."""
    call_id: str
    tool_name: str
    at_end: bool
    """True when the call is the last thing its loop holds (an interrupted run)."""


@dataclass(frozen=True, slots=True)
class LoopSource:
    """What the loader needs of one loop: its record, block and raw messages.

    `raw` holds the messages of every turn the block does not replace (all of them
    when there is no block).
    """

    loop: LoopRecord
    block: CompactionBlock | None
    raw: Sequence[StoredMessage]
    """Raw messages in position order: `keep_first` turns and uncovered turns."""


@dataclass(frozen=True, slots=True)
class ContextSources:
    """What the store reads for the loader: the loops in scope and the pinned request."""

    loops: list[LoopSource]
    """The loops in scope, oldest first."""
    latest_user: StoredMessage | None
    """The chain's latest raw user message (the latest user request)."""
    as_of: datetime | None
    """The time the sources were read as of, or None for now."""
    scope: CompactionScope | None = None
    """The scope the loops were chosen by."""
    digest: SessionDigest | None = None
    """The session digest that stands for the loops before `loops`, if any."""
    left_out_tokens: int = 0
    """What the newest loop a `TokenBudget` scope left out costs, when no digest stands
    for it (0: every loop before `loops` is in the digest, or there is none)."""
    system: list[StoredMessage] = field(default_factory=list)
    """The system messages that open the chain's first loop, when that loop is not in
    `loops` (the system prompt is sent whatever the scope)."""


@dataclass(slots=True)
class BuiltContext:
    """What `build_context` returns: the messages for the model and how they were chosen."""

    items: list[ContextItem]
    budget: int
    """The tokens the messages could use (`max_context_tokens - system_prompt_tokens`)."""
    tokens: int
    """The tokens the messages use (cached counts, times `token_scale`, rounded up)."""
    loop_ids: list[int] = field(default_factory=list)
    """The loops in scope, oldest first."""
    interrupted_calls: list[InterruptedCall] = field(default_factory=list)
    orphan_results: list[int] = field(default_factory=list)
    """Raw ids of tool results left out because no call in the context answers to them."""
    trimmed_messages: int = 0
    """Messages left out to fit the budget (a marker in the context says so)."""
    loaded_tokens: int = 0
    """The tokens of everything loaded, before trimming (scaled like `tokens`)."""
    overlay: str = "default"
    as_of: object | None = None
    """The generation or time the context was rebuilt as of, or None for now."""
    scope: CompactionScope | None = None
    """The scope that chose `loop_ids`."""
    left_out_tokens: int = 0
    """What the newest loop the budget left out costs when no session digest stands for
    it: the chain does not fit, and a compaction gate counts this beside `loaded_tokens`."""

    @property
    def messages(self) -> list[Message]:
        """The messages to send to the model, in order."""
        return [item.message for item in self.items]
