"""Orchestration: scope across the loop chain, compaction of the loops in scope, context rebuild.

It composes the other layers: it reads through the store, runs a pure strategy, and
writes the blocks through the store, in one transaction.

- `resolve_scope` turns a `CompactionScope` into a number of earlier loops.
- `compact_session_loops` writes a block for the current loop (all three sections)
  and for the earlier loops in scope (`keep_compacted` only).
- `build_context_from_session` (also `build_context`) rebuilds what the model sees,
  within a token budget, from the overlays, reading only what the context holds.
- `maybe_compact` is the WHEN half: it compacts only when `should_compact` says so.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sessionstore._overlay import BuiltContext, build
from sessionstore.config import (
    CompactionConfig,
    CompactionScope,
    FixedCount,
    should_compact,
    validated_config,
)
from sessionstore.errors import ConfigurationError
from sessionstore.models import CompactionBlock, LoopRecord
from sessionstore.store import SessionStore
from sessionstore.strategies import BlockCompactionStrategy, LoopView, get_block_strategy

__all__ = [
    "CompactionCallbacks",
    "CompactionEnded",
    "CompactionResult",
    "CompactionStarted",
    "build_context",
    "build_context_from_session",
    "compact_session_loops",
    "loop_context_tokens",
    "maybe_compact",
    "resolve_scope",
]

ChainEntry = tuple[LoopRecord, CompactionBlock | None]
"""A loop of the chain and its current block (None when it has none)."""

TOKEN_BUDGET_WINDOW = 16
"""How many loops a `TokenBudget` scope reads at first (more when they all fit)."""


# ── scope ──────────────────────────────────────────────────────────────────────


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
    estimate: Callable[[LoopRecord, CompactionBlock | None], int] = loop_context_tokens,
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
    rich context. At compaction time the orchestrator estimates a loop about to be
    summarised at most `max_summary_tokens`, for the same reason.

    Args:
        chain: The loops of the active chain with their current blocks, root first,
            ending with the current loop (a suffix of the chain is enough).
        scope: The scope to resolve.
        max_context_tokens: The budget `TokenBudget` walks against.
        estimate: The per-loop estimate.
    """
    if not chain:
        return 0
    earlier = len(chain) - 1
    if isinstance(scope, FixedCount):
        return min(scope.count, earlier)
    used = estimate(*chain[-1])
    count = 0
    for loop, block in reversed(chain[:-1]):
        cost = estimate(loop, block)
        if used + cost > max_context_tokens:
            break
        used += cost
        count += 1
    return count


def _window(scope: CompactionScope) -> int:
    # One loop more than the scope can take, so a full window proves the scope ends there.
    return scope.count + 2 if isinstance(scope, FixedCount) else TOKEN_BUDGET_WINDOW


# ── context ────────────────────────────────────────────────────────────────────


def _budget(max_context_tokens: int, system_prompt_tokens: int) -> int:
    if max_context_tokens <= 0:
        raise ConfigurationError(f"max_context_tokens must be positive, got {max_context_tokens}")
    if system_prompt_tokens < 0:
        raise ConfigurationError(
            f"system_prompt_tokens must not be negative, got {system_prompt_tokens}"
        )
    budget = max_context_tokens - system_prompt_tokens
    if budget <= 0:
        raise ConfigurationError(
            f"system_prompt_tokens ({system_prompt_tokens}) leaves no room in "
            f"max_context_tokens ({max_context_tokens})"
        )
    return budget


async def build_context_from_session(
    store: SessionStore,
    session_id: str,
    *,
    max_context_tokens: int,
    loop_id: int | None = None,
    config: CompactionConfig | dict[str, Any] | None = None,
    system_prompt_tokens: int = 0,
    overlay: str = "default",
    as_of: int | datetime | None = None,
    token_scale: float = 1.0,
) -> BuiltContext:
    """Rebuild the context the model should see for a loop, within a token budget.

    Walks the active chain ending at `loop_id` (default: the active loop), resolves
    the scope (`config.compaction_scope`), and loads each loop in scope oldest first:
    from its current block for `overlay` where it has one (`keep_first` raw turns,
    `keep_compacted` and `keep_recent` replacement messages, and raw turns appended
    since), raw messages otherwise. Then it enforces the guarantees (see
    `sessionstore._overlay`): tool calls and results pair up, the latest user request
    is present, and the whole fits `max_context_tokens - system_prompt_tokens`.

    Only what the context holds is read: cached token counts, indexed turn ranges
    and the current block of each loop in scope; no raw message is re-tokenised.

    Args:
        store: The store.
        session_id: The session.
        max_context_tokens: The model's window.
        loop_id: The current loop; the session's active loop by default.
        config: The compaction policy (its scope is used).
        system_prompt_tokens: Tokens reserved for the system prompt.
        overlay: Which named overlay to load.
        as_of: A generation of the current loop's block, or a time: rebuild exactly
            what the model saw then.
        token_scale: Multiplies cached counts (a `CalibratedTokenCounter.factor`).

    Raises:
        ConfigurationError: a budget that is not positive, or a bad config.
        ContextOverflowError: even the latest user request does not fit.
        SessionNotFoundError, LoopNotFoundError, BlockNotFoundError: nothing to build from.
    """
    policy = validated_config(config, CompactionConfig)
    budget = _budget(max_context_tokens, system_prompt_tokens)
    scope = policy.compaction_scope

    def choose(newest_first: Sequence[ChainEntry]) -> int:
        return resolve_scope(list(reversed(newest_first)), scope, budget)

    sources = await store.read_context(
        session_id,
        choose_scope=choose,
        window=_window(scope),
        loop_id=loop_id,
        overlay=overlay,
        as_of=as_of,
    )
    return build(
        sources.loops,
        budget=budget,
        latest_user=sources.latest_user,
        token_scale=token_scale,
        overlay=overlay,
        as_of=as_of,
    )


build_context = build_context_from_session
"""The short name of `build_context_from_session`."""


# ── compaction ─────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class CompactionStarted:
    """Fired before a compaction runs; persisted as a `started` compaction event."""

    session_id: str
    current_loop_id: int
    loop_ids: list[int]
    """The loops in scope, oldest first."""
    tokens_before: int
    """The estimated context tokens of the loops in scope before this compaction."""
    strategy: str
    overlay: str


@dataclass(frozen=True, slots=True)
class CompactionEnded:
    """Fired after the blocks are built and before they are written.

    Raising from `after_compaction_end` vetoes the compaction: nothing is written.
    """

    session_id: str
    current_loop_id: int
    loop_ids: list[int]
    tokens_before: int
    tokens_after: int
    """The estimated context tokens of the loops in scope with the new blocks."""
    blocks: list[tuple[int, CompactionBlock]]
    """`(loop_id, block)` for every block about to be written (not yet stored)."""
    duration_ms: float


Callback = Callable[[Any], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class CompactionCallbacks:
    """Lifecycle hooks around a compaction; each may be a function or a coroutine function.

    `before_compaction_start(CompactionStarted)` runs before the strategy (for
    pre-compaction indexing or memory extraction). `after_compaction_end(
    CompactionEnded)` runs after the blocks are built and before they are written
    (for verification); an exception from either aborts the compaction and nothing
    is written.
    """

    before_compaction_start: Callback | None = None
    after_compaction_end: Callback | None = None


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What `compact_session_loops` did."""

    blocks: list[CompactionBlock]
    """The blocks written: the current loop's first, then earlier loops, newest first."""
    skipped_loop_ids: list[int] = field(default_factory=list)
    """Earlier loops in scope whose current block was already a summary built the same way."""
    loop_ids: list[int] = field(default_factory=list)
    """The loops in scope, oldest first."""
    tokens_before: int = 0
    tokens_after: int = 0
    duration_ms: float = 0.0


async def _call(callback: Callback | None, event: Any) -> None:
    if callback is None:
        return
    outcome = callback(event)
    if inspect.isawaitable(outcome):
        await outcome


async def _run_strategy(
    strategy: BlockCompactionStrategy,
    name: str,
    view: LoopView,
    config: CompactionConfig,
    most_recent: bool,
) -> CompactionBlock:
    built: Any = strategy.compact(view, config, most_recent)
    if inspect.isawaitable(built):
        built = await built
    if not isinstance(built, CompactionBlock):
        raise ConfigurationError(
            f"strategy {name!r} returned {type(built).__name__}, not a CompactionBlock"
        )
    return built


def _is_summary_of_whole_loop(
    loop: LoopRecord, block: CompactionBlock | None, strategy: str, snapshot: dict[str, Any]
) -> bool:
    """True when `block` already summarises the whole (closed) loop the same way."""
    if block is None or block.keep_first is not None or block.keep_recent is not None:
        return False
    section = block.keep_compacted
    return (
        section is not None
        and section.range.start_turn == 0
        and section.range.end_turn == loop.turn_count - 1
        and block.strategy == strategy
        and block.config == snapshot
    )


async def _chain_for_scope(
    store: SessionStore,
    session_id: str,
    loop_id: int | None,
    overlay: str,
    scope: CompactionScope,
    estimate: Callable[[LoopRecord, CompactionBlock | None], int],
    max_context_tokens: int,
) -> tuple[list[ChainEntry], int]:
    limit = _window(scope)
    while True:
        chain = await store.chain_blocks(session_id, loop_id=loop_id, overlay=overlay, limit=limit)
        earlier = resolve_scope(chain, scope, max_context_tokens, estimate=estimate)
        if earlier < len(chain) - 1 or len(chain) < limit:
            return chain, earlier
        limit *= 4


async def compact_session_loops(
    store: SessionStore,
    session_id: str,
    current_loop_id: int | None = None,
    strategy: BlockCompactionStrategy | str | None = None,
    config: CompactionConfig | dict[str, Any] | None = None,
    max_context_tokens: int = 100_000,
    *,
    overlay: str = "default",
    callbacks: CompactionCallbacks | None = None,
) -> CompactionResult:
    """Compact the current loop and the earlier loops in scope, in one transaction.

    The current loop gets a block with all three sections; each earlier loop in
    scope gets a block with `keep_compacted` only (a summary of the whole loop),
    unless its current block already is one, built by the same strategy and config.
    The new blocks supersede the loops' previous blocks for `overlay`, which stay.
    A `started` and an `ended` event are written with the blocks. If the strategy or
    a callback raises, no block is written, the failure is recorded as an `ended`
    event with `status: failed`, and the exception propagates.

    Args:
        store: The store.
        session_id: The session.
        current_loop_id: The current loop; the session's active loop by default.
        strategy: A `BlockCompactionStrategy` or a registered name; default
            `config.block_strategy`.
        config: The compaction policy.
        max_context_tokens: The window a `TokenBudget` scope walks against.
        overlay: The name of the overlay to write.
        callbacks: Hooks fired before and after.

    Raises:
        ConfigurationError: a bad config or budget, or an unknown strategy name.
        InvalidBlockError: the strategy built a block that does not fit its loop.
        SessionNotFoundError, LoopNotFoundError: nothing to compact.
    """
    policy = validated_config(config, CompactionConfig)
    _budget(max_context_tokens, 0)
    chosen = get_block_strategy(strategy if strategy is not None else policy.block_strategy)
    name = getattr(chosen, "name", type(chosen).__name__)
    snapshot = policy.snapshot()

    def projected(loop: LoopRecord, block: CompactionBlock | None) -> int:
        return min(loop_context_tokens(loop, block), policy.max_summary_tokens)

    chain, earlier = await _chain_for_scope(
        store,
        session_id,
        current_loop_id,
        overlay,
        policy.compaction_scope,
        projected,
        max_context_tokens,
    )
    if not chain:
        return CompactionResult(blocks=[])
    in_scope = chain[len(chain) - earlier - 1 :]
    current = in_scope[-1][0]
    loop_ids = [loop.id for loop, _ in in_scope]
    tokens_before = sum(loop_context_tokens(loop, block) for loop, block in in_scope)
    todo: list[tuple[LoopRecord, bool]] = []
    skipped: list[int] = []
    for loop, block in reversed(in_scope):  # the current loop first
        most_recent = loop.id == current.id
        if loop.turn_count == 0:
            continue
        if not most_recent and _is_summary_of_whole_loop(loop, block, name, snapshot):
            skipped.append(loop.id)
            continue
        todo.append((loop, most_recent))
    started = CompactionStarted(session_id, current.id, loop_ids, tokens_before, name, overlay)
    started_row = {
        "event": "started",
        "loop_id": current.id,
        "tokens_before": tokens_before,
        "details": {"loop_ids": loop_ids, "strategy": name, "overlay": overlay},
    }
    clock = time.perf_counter()
    try:
        await _call(callbacks.before_compaction_start if callbacks else None, started)
        blocks: list[tuple[int, CompactionBlock]] = []
        for loop, most_recent in todo:
            messages = await store.get_messages(session_id, loop.id)
            built = await _run_strategy(
                chosen, name, LoopView.of(loop, messages), policy, most_recent
            )
            blocks.append((loop.id, built.model_copy(update={"overlay": overlay})))
        new = dict(blocks)
        tokens_after = sum(
            loop_context_tokens(loop, new.get(loop.id, block)) for loop, block in in_scope
        )
        ended = CompactionEnded(
            session_id,
            current.id,
            loop_ids,
            tokens_before,
            tokens_after,
            blocks,
            (time.perf_counter() - clock) * 1000,
        )
        await _call(callbacks.after_compaction_end if callbacks else None, ended)
    except BaseException as error:
        await _record_failure(store, session_id, started_row, error, clock)
        raise
    ended_row = {
        "event": "ended",
        "loop_id": current.id,
        "tokens_before": tokens_before,
        "tokens_after": tokens_after,
        "duration_ms": ended.duration_ms,
        "details": {
            "status": "ok",
            "loop_ids": loop_ids,
            "compacted_loop_ids": [loop_id for loop_id, _ in blocks],
            "skipped_loop_ids": skipped,
            "strategy": name,
            "overlay": overlay,
        },
    }
    written = await store.write_blocks(session_id, blocks, events=[started_row, ended_row])
    return CompactionResult(
        blocks=written,
        skipped_loop_ids=skipped,
        loop_ids=loop_ids,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        duration_ms=ended.duration_ms,
    )


async def _record_failure(
    store: SessionStore,
    session_id: str,
    started_row: dict[str, Any],
    error: BaseException,
    clock: float,
) -> None:
    """Record a failed compaction (best effort: a failure to record is not raised)."""
    if not isinstance(error, Exception):
        return
    ended_row = {
        "event": "ended",
        "loop_id": started_row["loop_id"],
        "tokens_before": started_row["tokens_before"],
        "duration_ms": (time.perf_counter() - clock) * 1000,
        "details": {
            **started_row["details"],
            "status": "failed",
            "error": f"{type(error).__name__}: {error}",
        },
    }
    try:
        await store.write_blocks(session_id, [], events=[started_row, ended_row])
    except Exception:  # the original error is the one to raise
        return


async def maybe_compact(
    store: SessionStore,
    session_id: str,
    *,
    max_context_tokens: int,
    config: CompactionConfig | dict[str, Any] | None = None,
    system_prompt_tokens: int = 0,
    loop_id: int | None = None,
    overlay: str = "default",
    callbacks: CompactionCallbacks | None = None,
) -> CompactionResult | None:
    """Compact when `should_compact` says the context is near the window; else return None.

    The context is measured as `build_context` loads it, before any trimming, plus
    `system_prompt_tokens`.
    """
    policy = validated_config(config, CompactionConfig)
    context = await build_context_from_session(
        store,
        session_id,
        max_context_tokens=max_context_tokens,
        loop_id=loop_id,
        config=policy,
        system_prompt_tokens=system_prompt_tokens,
        overlay=overlay,
    )
    loaded = context.loaded_tokens + system_prompt_tokens
    if not should_compact(loaded, max_context_tokens, policy):
        return None
    return await compact_session_loops(
        store,
        session_id,
        loop_id,
        None,
        policy,
        max_context_tokens,
        overlay=overlay,
        callbacks=callbacks,
    )
