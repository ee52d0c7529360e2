"""What a compaction of a stored session would fold, read without running one (no model call).

The engine asks before it compacts: an automatic compaction with nothing to fold is a
no-op that anti-thrashing would count, and a fold into the session digest is run only
when a loop before the scope is missing from it.
"""

from __future__ import annotations

from sessionstore._compaction import compaction_policy
from sessionstore._scope import ChainEntry
from sessionstore.config import CompactionConfig
from sessionstore.errors import LoopNotFoundError
from sessionstore.models import TurnRange
from sessionstore.store import SessionStore, TenantStore
from sessionstore.strategies._plan import Compress, forced_boundary, split_history

__all__ = ["has_content_to_compress", "in_scope", "pending_digest"]


async def in_scope(
    store: SessionStore | TenantStore,
    session_id: str,
    config: CompactionConfig,
    window: int,
    overlay: str,
) -> list[ChainEntry]:
    """The loops in a compaction's scope, oldest first (none for a session without loops)."""
    policy = compaction_policy(config, window)
    try:
        return await store.chain_in_scope(
            session_id,
            scope=policy.compaction_scope,
            max_context_tokens=window,
            summary_cap=policy.max_summary_tokens,
            overlay=overlay,
        )
    except LoopNotFoundError:
        return []


async def pending_digest(
    store: SessionStore | TenantStore, session_id: str, scope: list[ChainEntry], overlay: str
) -> bool:
    """Whether a loop before `scope` (not empty) is not in the session digest yet."""
    _, pending = await store.digest_inputs(
        session_id, first_in_scope=scope[0][0].id, loop_id=scope[-1][0].id, overlay=overlay
    )
    return bool(pending)


async def has_content_to_compress(
    store: SessionStore | TenantStore,
    session_id: str,
    config: CompactionConfig,
    window: int,
    overlay: str,
    *,
    force: bool = False,
) -> bool:
    """`StoreContextEngine.has_content_to_compress` on `store` (its docstring says what counts)."""
    scope = await in_scope(store, session_id, config, window, overlay)
    if not scope:
        return False
    current, block = scope[-1]
    for loop, earlier in scope[:-1]:
        section = earlier.keep_compacted if earlier is not None else None
        whole = section is not None and section.range == TurnRange(
            start_turn=0, end_turn=max(loop.turn_count - 1, 0)
        )
        if loop.turn_count > 0 and not whole:
            return True
    if await pending_digest(store, session_id, scope, overlay):
        return True
    stored = await store.get_messages(session_id, current.id)
    messages = [m.message for m in stored]
    if force:
        cut = forced_boundary(messages) or 0
        foldable = {m.turn_index for m in stored[:cut]}
    else:
        policy = compaction_policy(config, window)
        plan = split_history(messages, tail_token_budget=policy.keep_recent_tokens)
        if not isinstance(plan, Compress):
            return False
        foldable = {stored[i].turn_index for i in plan.middle}
    folded: set[int] = set()
    if block is not None and block.keep_compacted is not None:
        covered = block.keep_compacted.range
        folded = set(range(covered.start_turn, covered.end_turn + 1))
    return bool(foldable - folded)
