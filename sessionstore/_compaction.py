"""Compaction: write overlays for the loops in scope, with callbacks and events.

It composes the other layers: it reads the loops in scope through the store, runs a
pure strategy on each, and writes the blocks and their events through the store in
one transaction.

- `compact_session_loops` writes a block for the current loop (all three sections)
  and for the earlier loops in scope (`keep_compacted` only).
- `maybe_compact` is the WHEN half: it compacts only when `should_compact` says so.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sessionstore._context import build_context, context_budget
from sessionstore._feedback import CompactionFeedback, Shown, compaction_feedback, shown
from sessionstore._scope import ChainEntry, loop_context_tokens
from sessionstore._session_digest import next_digest
from sessionstore.config import (
    STORED_SUMMARY_MIN_TOKENS,
    CompactionConfig,
    should_compact,
    validated_config,
)
from sessionstore.errors import ConfigurationError, LoopChangedError, SessionNotFoundError
from sessionstore.models import CompactionBlock, CompactionEnded, CompactionStarted, LoopRecord
from sessionstore.store import SessionStore, TenantStore
from sessionstore.strategies import BlockCompactionStrategy, LoopView, get_block_strategy
from sessionstore.summarizers import ExtractiveSummarizer, Summarizer

__all__ = [
    "CompactionCallbacks",
    "CompactionResult",
    "compact_session_loops",
    "compaction_policy",
    "maybe_compact",
]

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
    unchanged_loop_ids: list[int] = field(default_factory=list)
    """Loops whose new block would have been the same as their current one: not written."""
    oversized_loop_ids: list[int] = field(default_factory=list)
    """Loops whose new block would not have been smaller than their raw messages, or than
    the block it would replace: not written (the feedback says which)."""
    feedback: CompactionFeedback | None = None
    """What to tell the user (`feedback.lines()`)."""
    digest_loops: int = 0
    """Loops before the scope the session digest folded in (0: no digest written)."""

    @property
    def noop(self) -> bool:
        """True when the compaction wrote nothing: no block, no session digest."""
        return not self.blocks and not self.digest_loops

    @property
    def digest_only(self) -> bool:
        """True when it wrote the session digest and no block.

        Such a compaction folds loops the budget leaves out into the digest; it is not
        meant to make the context smaller, so the engine's anti-thrashing does not
        count it as a compaction that saved too little.
        """
        return not self.blocks and self.digest_loops > 0

    def __repr__(self) -> str:
        # Short: the blocks hold whole summaries (kilobytes); read them from `blocks`.
        return (
            f"CompactionResult(blocks={len(self.blocks)}, loops={len(self.loop_ids)}, "
            f"tokens {self.tokens_before} -> {self.tokens_after}, {self.duration_ms:.0f} ms)"
        )

    def __str__(self) -> str:
        if self.noop:
            head = f"compaction wrote nothing ({len(self.loop_ids)} loops in scope)"
        elif self.digest_only:
            head = f"compaction folded {self.digest_loops} loops into the session digest"
        else:
            head = f"compaction wrote {len(self.blocks)} blocks on {len(self.loop_ids)} loops"
        lines = [
            head,
            f"  tokens: {self.tokens_before:,} -> {self.tokens_after:,}"
            f" in {self.duration_ms:,.0f} ms",
        ]
        left = {
            "already summarised": self.skipped_loop_ids,
            "unchanged": self.unchanged_loop_ids,
            "not smaller": self.oversized_loop_ids,
        }
        lines += [f"  {what}: {len(ids)} loops" for what, ids in left.items() if ids]
        return "\n".join(lines)


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


def compaction_policy(
    config: CompactionConfig, max_context_tokens: int, *, states_task: bool = False
) -> CompactionConfig:
    """Return `config` sized to the window a compaction stores its blocks for.

    As `CompactionConfig.within`, with a summary of at least `STORED_SUMMARY_MIN_TOKENS`:
    a build re-fits a stored summary larger than its room, but what it leaves out is lost.
    """
    return config.within(
        max_context_tokens, states_task=states_task, min_summary_tokens=STORED_SUMMARY_MIN_TOKENS
    )


def _states_task(loop: LoopRecord, most_recent: bool) -> bool:
    """True for the chain's first loop when a compaction folds it whole into a digest.

    The most recent loop keeps its first turns (the task's request) verbatim instead.
    """
    return loop.parent_loop_id is None and not most_recent


_TIMINGS = frozenset({"duration_ms", "created_at", "elapsed_ms"})
"""Keys of a message's provenance that say when or how fast, not what: not compared."""


def _without_timings(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in _TIMINGS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _same_content(old: CompactionBlock | None, new: CompactionBlock) -> bool:
    """True when `new` would show exactly what `old` shows, built the same way.

    What a summarizer records of its run (how long it took) is not compared: a re-run
    on an unchanged loop writes nothing.
    """
    if old is None:
        return False

    def content(block: CompactionBlock) -> object:
        return (
            block.keep_first,
            block.strategy,
            block.config,
            [
                (
                    kind,
                    section.range,
                    [
                        (_without_timings(r.message.model_dump(mode="json")), sorted(r.covers))
                        for r in section.messages
                    ],
                )
                for kind, section in block.sections()
            ],
        )

    return content(old) == content(new)


def _elapsed_ms(clock: float) -> float:
    return (time.perf_counter() - clock) * 1000


async def compact_session_loops(
    store: SessionStore | TenantStore,
    session_id: str,
    current_loop_id: int | None = None,
    strategy: BlockCompactionStrategy | str | None = None,
    config: CompactionConfig | dict[str, Any] | None = None,
    max_context_tokens: int = 100_000,
    *,
    overlay: str = "default",
    callbacks: CompactionCallbacks | None = None,
    digest_summarizer: Summarizer | None = None,
    system_prompt_tokens: int = 0,
    digest_only: bool = False,
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
        digest_summarizer: Writes the session digest of the loops before the scope: the
            strategy's `digest_summarizer` when it has one, else `ExtractiveSummarizer()`.
        system_prompt_tokens: Tokens of the window a system prompt the caller sends
            itself takes: the messages are compacted for the rest of the window.
        digest_only: Write no block: only fold the loops before the scope into the
            session digest (what keeps loops a budget leaves out in the context when the
            loops in scope are too short to compact).

    Raises:
        ValueError: a budget that is not positive.
        ConfigurationError: a bad config, or an unknown strategy name.
        InvalidBlockError: the strategy built a block that does not fit its loop.
        LoopChangedError: three times running, messages appended while the blocks were
            built fell in turns they cover (each time nothing was written and the loop
            was read again).
        SessionNotFoundError, LoopNotFoundError: nothing to compact.
    """
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            return await _compact_once(
                store,
                session_id,
                current_loop_id,
                strategy,
                config,
                max_context_tokens,
                overlay=overlay,
                callbacks=callbacks,
                digest_summarizer=digest_summarizer,
                system_prompt_tokens=system_prompt_tokens,
                digest_only=digest_only,
            )
        except LoopChangedError:
            # A message appended while the blocks were built fell in a turn they cover:
            # nothing was written; read the loop again and build them again.
            if attempt == _ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


_ATTEMPTS = 3
"""How many times `compact_session_loops` builds its blocks when appends race with it."""


async def _compact_once(
    store: SessionStore | TenantStore,
    session_id: str,
    current_loop_id: int | None,
    strategy: BlockCompactionStrategy | str | None,
    config: CompactionConfig | dict[str, Any] | None,
    max_context_tokens: int,
    *,
    overlay: str,
    callbacks: CompactionCallbacks | None,
    digest_summarizer: Summarizer | None,
    system_prompt_tokens: int = 0,
    digest_only: bool = False,
) -> CompactionResult:
    max_context_tokens = context_budget(max_context_tokens, system_prompt_tokens)
    chosen_config = validated_config(config, CompactionConfig)
    policy = compaction_policy(chosen_config, max_context_tokens)
    # The chain's first loop states the session's task: its digest holds the statement.
    task_policy = compaction_policy(chosen_config, max_context_tokens, states_task=True)
    chosen = get_block_strategy(strategy if strategy is not None else policy.block_strategy)
    name = getattr(chosen, "name", type(chosen).__name__)
    in_scope: list[ChainEntry] = await store.chain_in_scope(
        session_id,
        scope=policy.compaction_scope,
        max_context_tokens=max_context_tokens,
        summary_cap=policy.max_summary_tokens,
        loop_id=current_loop_id,
        overlay=overlay,
    )
    if not in_scope:
        return CompactionResult(blocks=[])
    current = in_scope[-1][0]
    loop_ids = [loop.id for loop, _ in in_scope]
    tokens_before = sum(loop_context_tokens(loop, block) for loop, block in in_scope)
    todo: list[tuple[LoopRecord, bool]] = []
    skipped: list[int] = []
    for loop, block in [] if digest_only else reversed(in_scope):  # the current loop first
        most_recent = loop.id == current.id
        if loop.turn_count == 0:
            continue
        loop_policy = task_policy if _states_task(loop, most_recent) else policy
        if not most_recent and _is_summary_of_whole_loop(loop, block, name, loop_policy.snapshot()):
            skipped.append(loop.id)
            continue
        todo.append((loop, most_recent))
    started = CompactionStarted(session_id, current.id, loop_ids, tokens_before, name, overlay)
    clock = time.perf_counter()
    unchanged: list[int] = []
    oversized: list[int] = []
    notes: list[str] = []
    before = after = Shown(0, 0)
    try:
        await _call(callbacks.before_compaction_start if callbacks else None, started)
        blocks: list[tuple[int, CompactionBlock]] = []
        read_counts: dict[int, int] = {}
        for loop, most_recent in todo:
            view = await store.get_loop_view(session_id, loop, overlay=overlay)
            messages, old = view.messages, view.previous
            read_counts[loop.id] = len(messages)
            was = shown(messages, old)
            before = Shown(before.messages + was.messages, before.tokens + was.tokens)
            # A latest turn still waiting for a tool result stays raw: the result joins it.
            settled = view.settled()
            if not settled.messages:  # no other turn: the loop stays as it is
                after = Shown(after.messages + was.messages, after.tokens + was.tokens)
                continue
            loop_policy = task_policy if _states_task(loop, most_recent) else policy
            built = await _run_strategy(chosen, name, settled, loop_policy, most_recent)
            built = built.model_copy(update={"overlay": overlay})
            # The turns of the messages read, which appends since the scope was read may
            # have outgrown: the block is built from these.
            built.check_ranges(loop.id, settled.turn_map.turn_count())
            will = shown(messages, built)
            raw = view.tokens()
            if _same_content(old, built):
                unchanged.append(loop.id)
                will = was
            elif will.tokens >= raw:
                oversized.append(loop.id)
                notes.append(_oversized_note(loop, built, will, raw))
                will = was
            elif old is not None and will.tokens >= was.tokens:
                # Never grow the context: a block must be smaller than the one it replaces.
                oversized.append(loop.id)
                notes.append(_not_smaller_note(loop, will, was))
                will = was
            else:
                blocks.append((loop.id, built))
            after = Shown(after.messages + will.messages, after.tokens + will.tokens)
        digest = await next_digest(
            store,
            session_id,
            current,
            in_scope[0][0],
            overlay,
            task_policy,  # the digest holds the session's task: it gets the task's share
            digest_summarizer
            or getattr(chosen, "digest_summarizer", None)
            or ExtractiveSummarizer(),
        )
        digest_loops = 0 if digest is None else len(digest.folded)
        if digest is not None:
            notes.append(
                f"Session digest: {digest_loops} more loop(s) before the scope "
                f"folded in, {digest.token_count:,} tokens."
            )
        feedback = compaction_feedback(
            before, after, noop=not blocks and digest is None, notes=notes
        )
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
            _elapsed_ms(clock),
            strategy=name,
            overlay=overlay,
            skipped_loop_ids=skipped,
            details={
                "unchanged_loop_ids": unchanged,
                "oversized_loop_ids": oversized,
                "feedback": feedback.to_dict(),
                "digest_loops": digest_loops,
            },
        )
        await _call(callbacks.after_compaction_end if callbacks else None, ended)
    except BaseException as error:
        await _record_failure(store, started, error, clock)
        raise
    written: list[CompactionBlock] = []
    if blocks or digest is not None:
        written = await store.write_blocks(
            session_id, blocks, events=[started, ended], digest=digest, read_counts=read_counts
        )
    elif oversized:
        # Futile: the strategy ran (a summarizer was called) and no block was smaller. The
        # attempt is recorded without a block, so the engine's gates replayed in another
        # process count it as the engine that made it does (anti-thrashing).
        with contextlib.suppress(SessionNotFoundError):  # deleted meanwhile
            await store.write_blocks(session_id, [], events=[started, ended])
    return CompactionResult(
        blocks=written,
        skipped_loop_ids=skipped,
        loop_ids=loop_ids,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        duration_ms=ended.duration_ms,
        unchanged_loop_ids=unchanged,
        oversized_loop_ids=oversized,
        feedback=feedback,
        digest_loops=digest_loops,
    )


def _not_smaller_note(loop: LoopRecord, will: Shown, was: Shown) -> str:
    return (
        f"Loop {loop.number} (id {loop.id}) was left as it was: its new block would show "
        f"{will.tokens:,} tokens, "
        f"not fewer than the {was.tokens:,} its current block shows."
    )


def _oversized_note(loop: LoopRecord, block: CompactionBlock, will: Shown, raw: int) -> str:
    return (
        f"Loop {loop.number} (id {loop.id}) was left as it was: its new block would show "
        f"{will.tokens:,} tokens, "
        f"not fewer than its {raw:,} raw tokens."
    )


async def _record_failure(
    store: SessionStore | TenantStore,
    started: CompactionStarted,
    error: BaseException,
    clock: float,
) -> None:
    """Record a failed compaction (best effort: a failure to record is not raised)."""
    if not isinstance(error, Exception):
        return
    failed = CompactionEnded(
        started.session_id,
        started.current_loop_id,
        started.loop_ids,
        started.tokens_before,
        None,
        [],
        _elapsed_ms(clock),
        strategy=started.strategy,
        overlay=started.overlay,
        status="failed",
        error=f"{type(error).__name__}: {error}",
    )
    try:
        await store.write_blocks(started.session_id, [], events=[started, failed])
    except Exception:  # the original error is the one to raise
        return


async def maybe_compact(
    store: SessionStore | TenantStore,
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
    `system_prompt_tokens`, plus the loop a budget scope had to leave out with no digest
    standing for it (the chain does not fit: time to fold the oldest loops).
    """
    policy = validated_config(config, CompactionConfig)
    context = await build_context(
        store,
        session_id,
        max_context_tokens=max_context_tokens,
        loop_id=loop_id,
        config=policy,
        system_prompt_tokens=system_prompt_tokens,
        overlay=overlay,
    )
    loaded = context.loaded_tokens + context.left_out_tokens + system_prompt_tokens
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
        system_prompt_tokens=system_prompt_tokens,
    )
