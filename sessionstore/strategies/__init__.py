"""Compaction strategies, and the registry that resolves a strategy's name to an object.

Two kinds coexist:

- a `CompactionStrategy` shortens a list of messages in memory (the stateless path;
  `compress_messages` runs one: `SummarizingCompaction`, one digest of the middle, by
  default, or `DefaultCompaction`, the seed's legacy `compact_messages`);
- a `BlockCompactionStrategy` builds a non-destructive `CompactionBlock` for one loop
  (`DefaultBlockCompaction`).

`CompactionConfig.in_memory_strategy` and `CompactionConfig.block_strategy` name one
(`"default"` or a registered name) or hold the object itself;
`get_compaction_strategy` and `get_block_strategy` resolve them:

>>> get_block_strategy("default").name
'default'
>>> get_compaction_strategy(DefaultCompaction(safe_tool_pairs=True))
DefaultCompaction(safe_tool_pairs=True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from sessionstore._lazy import lazy_exports
from sessionstore._protocols import BlockCompactionStrategy, CompactionStrategy
from sessionstore.errors import ConfigurationError

if TYPE_CHECKING:
    from sessionstore.strategies._block import (
        LoopView,
        SectionedBlockStrategy,
        SectionLayout,
        section_layout,
    )
    from sessionstore.strategies._compress import (
        CompressedMessages,
        SummarizingCompaction,
        compress_messages,
    )
    from sessionstore.strategies._default import DefaultBlockCompaction
    from sessionstore.strategies._legacy import (
        DefaultCompaction,
        compact_messages,
        keep_within_budget,
        level1_truncate_tool_outputs,
        level2_summarize_old_turns,
        level3_drop_middle,
        total_tokens,
        truncate_head_tail,
        truncate_tool_result,
    )
    from sessionstore.strategies._passes import (
        PassResult,
        microcompact,
        prune_tool_results,
        truncate_head_tail_tokens,
    )
    from sessionstore.strategies._plan import (
        Compress,
        CompressionPlan,
        NoCompression,
        OrphanReport,
        fit_suffix,
        forced_boundary,
        plan_slice,
        sanitize_orphans,
        split_history,
    )
    from sessionstore.strategies._rehydrate import (
        RESTORED_FILE_PREFIX,
        RestoredFile,
        apply_rehydrate,
        rehydrate_recent_reads,
    )
    from sessionstore.strategies._summarizing import SummarizingBlockCompaction, digest_of

__all__ = [
    "RESTORED_FILE_PREFIX",
    "BlockCompactionStrategy",
    "CompactionStrategy",
    "Compress",
    "CompressedMessages",
    "CompressionPlan",
    "DefaultBlockCompaction",
    "DefaultCompaction",
    "LoopView",
    "NoCompression",
    "OrphanReport",
    "PassResult",
    "RestoredFile",
    "SectionLayout",
    "SectionedBlockStrategy",
    "SummarizingBlockCompaction",
    "SummarizingCompaction",
    "apply_rehydrate",
    "compact_messages",
    "compress_messages",
    "digest_of",
    "fit_suffix",
    "forced_boundary",
    "get_block_strategy",
    "get_compaction_strategy",
    "keep_within_budget",
    "level1_truncate_tool_outputs",
    "level2_summarize_old_turns",
    "level3_drop_middle",
    "microcompact",
    "plan_slice",
    "prune_tool_results",
    "register_block_strategy",
    "register_compaction_strategy",
    "rehydrate_recent_reads",
    "sanitize_orphans",
    "section_layout",
    "split_history",
    "total_tokens",
    "truncate_head_tail",
    "truncate_head_tail_tokens",
    "truncate_tool_result",
]

# Where each name lives: imported on first use (PEP 562), so importing one module of
# the package does not import the others.
_SOURCES: dict[str, tuple[str, ...]] = {
    "sessionstore.strategies._block": (
        "LoopView",
        "SectionedBlockStrategy",
        "SectionLayout",
        "section_layout",
    ),
    "sessionstore.strategies._compress": (
        "CompressedMessages",
        "SummarizingCompaction",
        "compress_messages",
    ),
    "sessionstore.strategies._default": ("DefaultBlockCompaction",),
    "sessionstore.strategies._legacy": (
        "DefaultCompaction",
        "compact_messages",
        "keep_within_budget",
        "level1_truncate_tool_outputs",
        "level2_summarize_old_turns",
        "level3_drop_middle",
        "total_tokens",
        "truncate_head_tail",
        "truncate_tool_result",
    ),
    "sessionstore.strategies._passes": (
        "PassResult",
        "microcompact",
        "prune_tool_results",
        "truncate_head_tail_tokens",
    ),
    "sessionstore.strategies._plan": (
        "Compress",
        "CompressionPlan",
        "NoCompression",
        "OrphanReport",
        "fit_suffix",
        "forced_boundary",
        "plan_slice",
        "sanitize_orphans",
        "split_history",
    ),
    "sessionstore.strategies._rehydrate": (
        "RESTORED_FILE_PREFIX",
        "RestoredFile",
        "apply_rehydrate",
        "rehydrate_recent_reads",
    ),
    "sessionstore.strategies._summarizing": (
        "SummarizingBlockCompaction",
        "digest_of",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _SOURCES)

_S = TypeVar("_S")


# The built-in factories import their class when called, so resolving a name is what
# loads a strategy (and the summarizers it calls), never importing this package.
def _default_block() -> BlockCompactionStrategy:
    from sessionstore.strategies._default import DefaultBlockCompaction

    return DefaultBlockCompaction()


def _summarizing_block() -> BlockCompactionStrategy:
    from sessionstore.strategies._summarizing import SummarizingBlockCompaction

    return SummarizingBlockCompaction()


def _default_compaction() -> CompactionStrategy:
    from sessionstore.strategies._legacy import DefaultCompaction

    return DefaultCompaction()


def _summarizing_compaction() -> CompactionStrategy:
    from sessionstore.strategies._compress import SummarizingCompaction

    return SummarizingCompaction()


_BLOCK_STRATEGIES: dict[str, Callable[[], BlockCompactionStrategy]] = {
    "default": _default_block,
    "summarize": _summarizing_block,
}
_COMPACTION_STRATEGIES: dict[str, Callable[[], CompactionStrategy]] = {
    "default": _default_compaction,
    "summarize": _summarizing_compaction,
}


def register_block_strategy(
    name: str, factory: Callable[[], BlockCompactionStrategy], *, replace: bool = False
) -> None:
    """Make `name` resolve to `factory()` in `get_block_strategy` and `CompactionConfig`.

    Raises:
        ValueError: `name` is empty, or already registered and `replace` is False.
    """
    _register(_BLOCK_STRATEGIES, "block strategy", name, factory, replace=replace)


def register_compaction_strategy(
    name: str, factory: Callable[[], CompactionStrategy], *, replace: bool = False
) -> None:
    """Make `name` resolve to `factory()` in `get_compaction_strategy` and `CompactionConfig`.

    Raises:
        ValueError: `name` is empty, or already registered and `replace` is False.
    """
    _register(_COMPACTION_STRATEGIES, "compaction strategy", name, factory, replace=replace)


def get_block_strategy(name_or_object: str | BlockCompactionStrategy) -> BlockCompactionStrategy:
    """Return the block strategy a name stands for (a new one), or the object itself.

    Raises:
        ConfigurationError: no strategy is registered under the name.
        TypeError: the object has no `compact` method.
    """
    return _resolve(_BLOCK_STRATEGIES, "block strategy", name_or_object)


def get_compaction_strategy(name_or_object: str | CompactionStrategy) -> CompactionStrategy:
    """Return the legacy strategy a name stands for (a new one), or the object itself.

    Raises:
        ConfigurationError: no strategy is registered under the name.
        TypeError: the object has no `compact` method.
    """
    return _resolve(_COMPACTION_STRATEGIES, "compaction strategy", name_or_object)


def _register(
    registry: dict[str, Callable[[], _S]],
    kind: str,
    name: str,
    factory: Callable[[], _S],
    *,
    replace: bool,
) -> None:
    if not name:
        raise ValueError(f"a {kind} needs a non-empty name")
    if name in registry and not replace:
        raise ValueError(f"a {kind} named {name!r} is already registered; pass replace=True")
    registry[name] = factory


def _resolve(registry: dict[str, Callable[[], _S]], kind: str, name_or_object: str | _S) -> _S:
    if isinstance(name_or_object, str):
        factory = registry.get(name_or_object)
        if factory is None:
            known = ", ".join(repr(name) for name in sorted(registry))
            raise ConfigurationError(
                f"unknown {kind} {name_or_object!r}; known names: {known} "
                f"(register others with register_{kind.replace(' ', '_')})"
            )
        return factory()
    if not callable(getattr(name_or_object, "compact", None)):
        raise TypeError(
            f"a {kind} is a registered name or an object with a compact() method, "
            f"not {type(name_or_object).__name__}"
        )
    return name_or_object
