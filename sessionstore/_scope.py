"""The scope rule: how many loops of the active chain take part in a context or a compaction.

Pure code. `resolve_scope` turns a `CompactionScope` into a number of earlier loops from
cached counts only; `scope_window` says how many loops to read first, and `grow_window`
is the one loop that reads a larger window until the scope is known to end inside it.
The store calls these itself when it reads a context, in the reading transaction.

A built context is scoped by its budget unless told otherwise (`CONTEXT_SCOPE`): it holds
every loop while the chain fits, and loops leave only when the budget requires, the
session digest then standing for them (`first_shown`). A compaction keeps the seed's
`FixedCount(3)` (`CompactionConfig.compaction_scope`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from sessionstore.config import CompactionConfig, CompactionScope, FixedCount, TokenBudget
from sessionstore.errors import ConfigurationError
from sessionstore.models import CompactionBlock, LoopRecord

__all__ = [
    "CONTEXT_SCOPE",
    "LEFT_OUT_SUMMARIES",
    "TOKEN_BUDGET_WINDOW",
    "ChainEntry",
    "compacted_left_out",
    "context_scope",
    "grow_window",
    "loop_context_tokens",
    "loops_shown",
    "recorded_scope",
    "resolve_scope",
    "scope_window",
    "token_budget_window",
]

_T = TypeVar("_T")

ChainEntry = tuple[LoopRecord, CompactionBlock | None]
"""A loop of the chain and its current block (None when it has none)."""

CONTEXT_SCOPE: CompactionScope = TokenBudget()
"""The scope of a built context when none is given or recorded: every loop that fits."""

TOKEN_BUDGET_WINDOW = 16
"""How many loops a `TokenBudget` scope reads at first (more when they all fit)."""

WINDOW_GROWTH = 4
"""How much larger each further read of the chain is."""

LEFT_OUT_SUMMARIES = 8
"""The most compacted loops a `TokenBudget` context shows though its budget left them out
(with no digest standing for them: `compacted_left_out`), the newest: their summaries
are merged and shortened at every build, which costs with their number."""


def loop_context_tokens(loop: LoopRecord, block: CompactionBlock | None) -> int:
    """Estimate what a loop costs in the context, from cached counts only.

    No block: its raw tokens (`token_total`). With a block: what the block shows
    (`tokens_after`) plus the raw tokens appended since the block was written
    (`token_total - tokens_before`).
    """
    if block is None:
        return loop.token_total
    return block.tokens_after + max(0, loop.token_total - block.tokens_before)


def resolve_scope(
    chain: Sequence[ChainEntry],
    scope: CompactionScope,
    max_context_tokens: int,
    *,
    summary_cap: int | None = None,
) -> int:
    """Return how many loops before the current one take part (the current one is last).

    - `FixedCount(n)`: `n`, or fewer when the chain is shorter.
    - `TokenBudget`: start with the current loop's estimate; walk back over the
      earlier loops, newest first, adding each loop's estimate; stop before the first
      loop that would take the running total over `max_context_tokens`. The current
      loop always takes part, even when it alone is over the budget.

    The estimate of a loop is what it costs *in the context*, not its raw size
    (`loop_context_tokens`: the block's `tokens_after` when it has one). So the scope
    can include loops whose raw messages exceed `max_context_tokens`: their compacted
    summaries fit when the originals do not, which is what gives a summarising strategy
    rich context. At compaction time a loop about to be summarised costs at most
    `summary_cap` (the config's `max_summary_tokens`), for the same reason.

    Args:
        chain: The loops of the active chain with their current blocks, root first,
            ending with the current loop (a suffix of the chain is enough).
        scope: The scope to resolve.
        max_context_tokens: The budget `TokenBudget` walks against.
        summary_cap: The most a loop is estimated at (None: no cap).
    """
    if not chain:
        return 0
    earlier = len(chain) - 1
    if isinstance(scope, FixedCount):
        return min(scope.count, earlier)

    def estimate(loop: LoopRecord, block: CompactionBlock | None) -> int:
        cost = loop_context_tokens(loop, block)
        return cost if summary_cap is None else min(cost, summary_cap)

    used = estimate(*chain[-1])
    count = 0
    for loop, block in reversed(chain[:-1]):
        cost = estimate(loop, block)
        if used + cost > max_context_tokens:
            break
        used += cost
        count += 1
    return count


def scope_window(scope: CompactionScope) -> int:
    """Return how many loops of the chain to read first to resolve `scope`."""
    # One loop more than the scope can take, so a full window proves the scope ends there.
    return scope.count + 2 if isinstance(scope, FixedCount) else TOKEN_BUDGET_WINDOW


def token_budget_window(earlier: int) -> int:
    """Return how many loops, ending at the current one, a `TokenBudget` read holds.

    The window `grow_window` ends with when `earlier` loops before the current one take
    part: the first `TOKEN_BUDGET_WINDOW`, times `WINDOW_GROWTH`, that holds more than
    the scope (a full window proves nothing), or the whole chain when it is shorter.
    """
    size = TOKEN_BUDGET_WINDOW
    while size <= earlier + 1:
        size *= WINDOW_GROWTH
    return size


def compacted_left_out(window: Sequence[ChainEntry], earlier: int) -> list[LoopRecord]:
    """Return the loops of `window` a `TokenBudget` scope left out that have a block.

    When the current loop alone is over the budget (`earlier` is 0) and no session
    digest stands for the loops it leaves out, a context shows the newest
    `LEFT_OUT_SUMMARIES` of these too, oldest first: their summaries stand for them,
    where the task alone did; the trimmer folds the current loop's older raw turns and
    shortens the summaries as the budget needs. When earlier loops fit, they are what
    the context shows (more summaries would have it merge and shorten them all), and
    none of these is.

    `window` is the chain read (`token_budget_window` loops, root first, the current
    one last) and `earlier` how many loops before the current one the scope took.
    """
    if earlier:
        return []
    compacted = [loop for loop, block in window[:-1] if block is not None]
    return compacted[-LEFT_OUT_SUMMARIES:]


def grow_window(start: int, attempt: Callable[[int], _T | None]) -> _T:
    """Call `attempt(size)` with a growing window until it returns a result.

    `attempt` returns None when `size` was too small to decide; the window then grows
    `WINDOW_GROWTH` times, so a chain of n loops is read O(log n) times at most.
    """
    if start < 1:
        raise ValueError(f"the window must be at least 1, got {start}")
    size = start
    while (result := attempt(size)) is None:
        size *= WINDOW_GROWTH
    return result


def context_scope(
    scope: CompactionScope | None, config: CompactionConfig | None
) -> CompactionScope | None:
    """Return the scope a built context was asked for, or None (recorded, else `CONTEXT_SCOPE`).

    `scope` wins; a config's `compaction_scope` counts only when it was set explicitly,
    since its default (`FixedCount(3)`) is the seed's default for *compaction*, not a
    reason to leave loops out of a context that has room for them.
    """
    if scope is not None:
        return scope
    if config is not None and "compaction_scope" in config.model_fields_set:
        return config.compaction_scope
    return None


def loops_shown(
    scope: CompactionScope, in_scope: Sequence[_T], after_digest: Sequence[_T] | None
) -> Sequence[_T]:
    """Return the loops a context shows, oldest first, given the chain's session digest.

    `in_scope` are the loops the scope takes (the current one last); `after_digest` the
    loops after the newest loop the session digest folds (None: no digest). Every loop
    after the digest is shown, since nothing else stands for it. A `TokenBudget` scope
    shows no loop the digest folds: the digest stands for them, and their room goes to
    the loops after it. A `FixedCount` scope shows its loops in any case.
    """
    if not after_digest:
        return in_scope
    if isinstance(scope, TokenBudget) or len(after_digest) > len(in_scope):
        return after_digest
    return in_scope


def recorded_scope(
    block: CompactionBlock | None, default: CompactionScope | None = None
) -> CompactionScope:
    """Return the scope `block` was compacted with, else `default` (`CONTEXT_SCOPE`).

    So a context or an audit looks at the loops a compaction took in, without the
    scope being repeated; a loop never compacted is scoped by the budget.
    """
    fallback = default if default is not None else CONTEXT_SCOPE
    if block is None or "compaction_scope" not in block.config:
        return fallback
    try:
        return CompactionConfig(compaction_scope=block.config["compaction_scope"]).compaction_scope
    except ConfigurationError:  # a block written by hand, or by another tool
        return fallback
