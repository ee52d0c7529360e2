"""The strategies' plugs: `BlockCompactionStrategy` and `CompactionStrategy`, small protocols.

They live apart from `sessionstore.strategies` so that `CompactionConfig` can name
them in its fields without importing the strategies (which import the config).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from sessionstore.models import CompactionBlock, Message

if TYPE_CHECKING:
    from sessionstore.config import CompactionConfig, ContextConfig
    from sessionstore.strategies import LoopView

__all__ = ["BlockCompactionStrategy", "CompactionStrategy"]


@runtime_checkable
class BlockCompactionStrategy(Protocol):
    """Builds a non-destructive `CompactionBlock` for one loop.

    `compact` may be a coroutine function (a strategy that calls a model through a
    `Summarizer`); a pure strategy returns the block directly. `name` is recorded on
    every block it builds. `SectionedBlockStrategy` is a base class that builds the
    block from its three sections.
    """

    name: str

    def compact(
        self, view: LoopView, config: CompactionConfig, is_most_recent: bool
    ) -> CompactionBlock | Awaitable[CompactionBlock]:
        """Return the block: all three sections for the most recent loop, else the summary."""
        ...


@runtime_checkable
class CompactionStrategy(Protocol):
    """The stateless extension point: a message list in, a shorter one out.

    `compact` may be a coroutine function (`SummarizingCompaction` calls a `Summarizer`);
    `compress_messages` awaits it.
    """

    def compact(
        self, messages: Sequence[Message], config: ContextConfig
    ) -> list[Message] | Awaitable[list[Message]]:
        """Return `messages` compacted to fit the budget `config` gives."""
        ...
