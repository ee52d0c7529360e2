"""Building the context: read through the store, assemble with the pure loader.

`build_context` rebuilds what the model should see for a loop, within a token budget,
from the overlays, reading only what the context holds, in one snapshot.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sessionstore._items import BuiltContext, ContextSources
from sessionstore._overlay import build
from sessionstore._scope import context_scope
from sessionstore.config import CompactionConfig, CompactionScope, validated_config
from sessionstore.models import RecordCache

if TYPE_CHECKING:
    # For the annotations only: `sessionstore context` on a SQLite file builds through
    # `built_from` without loading the store (and SQLAlchemy).
    from sessionstore.store import SessionStore, TenantStore

__all__ = ["build_context", "built_from", "context_budget"]


def context_budget(max_context_tokens: int, system_prompt_tokens: int) -> int:
    """Return the tokens the messages may use: the window less the system prompt.

    Raises:
        ValueError: a window that is not positive, a negative system prompt, or one that
            leaves no room.
    """
    if max_context_tokens <= 0:
        raise ValueError(f"max_context_tokens must be positive, got {max_context_tokens}")
    if system_prompt_tokens < 0:
        raise ValueError(f"system_prompt_tokens must not be negative, got {system_prompt_tokens}")
    budget = max_context_tokens - system_prompt_tokens
    if budget <= 0:
        raise ValueError(
            f"system_prompt_tokens ({system_prompt_tokens}) leaves no room in "
            f"max_context_tokens ({max_context_tokens})"
        )
    return budget


async def build_context(
    store: SessionStore | TenantStore,
    session_id: str,
    *,
    max_context_tokens: int,
    loop_id: int | None = None,
    config: CompactionConfig | dict[str, Any] | None = None,
    scope: CompactionScope | None = None,
    system_prompt_tokens: int = 0,
    overlay: str = "default",
    as_of: int | datetime | None = None,
    token_scale: float = 1.0,
    redact_secrets: bool = False,
    new_overlay: bool = False,
    records: RecordCache | None = None,
) -> BuiltContext:
    """Rebuild the context the model should see for a loop, within a token budget.

    Walks the active chain ending at `loop_id` (default: the active loop), resolves
    the scope, and loads each loop in scope oldest first: from its current block for
    `overlay` where it has one (`keep_first` raw turns, `keep_compacted` and
    `keep_recent` replacement messages, and raw turns appended since), raw messages
    otherwise. Then it enforces the guarantees: tool calls and results pair up, the
    latest user request is present, and the whole fits
    `max_context_tokens - system_prompt_tokens`, cut in the order that loses least
    (bulky tool output, older raw turns, summaries shortened, the newest raw turns, the
    system prompt by whole sentences, then the session's task; never the latest
    request).

    The system prompt is part of the budget. With `system_prompt_tokens=0` (the
    default) the stored system messages are sent and counted. A caller that sends its
    own system prompt says so with `system_prompt_tokens=N`: the stored system
    messages are left out of the context and `N` tokens of the window are reserved.

    Only what the context holds is read, in one transaction: cached token counts,
    indexed turn ranges and the current block of each loop in scope; no raw message is
    re-tokenised.

    >>> async def resume(store, session_id):
    ...     context = await build_context(store, session_id, max_context_tokens=128_000)
    ...     return context.messages

    Args:
        store: The store.
        session_id: The session.
        max_context_tokens: The model's window.
        loop_id: The current loop; the session's active loop by default.
        config: The compaction policy; its `compaction_scope` is used when set explicitly.
        scope: The scope, overriding `config`. With neither, the scope the loop's
            current block was compacted with, else `TokenBudget()`: every loop while the
            chain fits the budget, the session digest standing for the loops that leave.
        system_prompt_tokens: Tokens of the window reserved for a system prompt the
            caller sends itself; when positive, the stored system messages are left out.
        overlay: Which named overlay to load.
        as_of: A generation of the current loop's block, or a time: rebuild exactly
            what the model saw then.
        token_scale: Multiplies cached counts (a `CalibratedTokenCounter.factor`).
        redact_secrets: Redact credentials (API keys, bearer tokens, passwords in URLs,
            private keys, connection strings) from every message sent, raw ones included.
        new_overlay: True: a named `overlay` nothing was compacted into yet is the raw
            history (for a writer about to compact into it), not `OverlayNotFoundError`.
        records: A `RecordCache` kept for this session by a caller that builds its
            context again and again: the raw messages the last build decoded are taken
            again instead of decoded (a raw message never changes).

    Raises:
        ValueError: a budget that is not positive.
        ConfigurationError: a bad config.
        ContextOverflowError: even the latest user request does not fit.
        SessionNotFoundError, LoopNotFoundError, BlockNotFoundError: nothing to build from.
    """
    policy = None if config is None else validated_config(config, CompactionConfig)
    scope = context_scope(scope, policy)
    budget = context_budget(max_context_tokens, system_prompt_tokens)
    sources = await store.read_context(
        session_id,
        budget=budget,
        scope=scope,
        loop_id=loop_id,
        overlay=overlay,
        as_of=as_of,
        new_overlay=new_overlay,
        records=records,
    )
    return built_from(
        sources,
        budget=budget,
        token_scale=token_scale,
        overlay=overlay,
        as_of=as_of,
        redact_secrets=redact_secrets,
        system_prompt_tokens=system_prompt_tokens,
    )


def built_from(
    sources: ContextSources,
    *,
    budget: int,
    token_scale: float = 1.0,
    overlay: str = "default",
    as_of: int | datetime | None = None,
    redact_secrets: bool = False,
    system_prompt_tokens: int = 0,
) -> BuiltContext:
    """Build the context from what `read_context` read (the second half of `build_context`).

    `budget` is `context_budget(max_context_tokens, system_prompt_tokens)`; the other
    arguments are `build_context`'s.
    """
    context = build(
        sources.loops,
        budget=budget,
        latest_user=sources.latest_user,
        token_scale=token_scale,
        overlay=overlay,
        as_of=as_of,
        scope=sources.scope,
        digest=sources.digest,
        redact_secrets=redact_secrets,
        own_system_prompt=system_prompt_tokens > 0,
        system=sources.system,
    )
    context.left_out_tokens = math.ceil(sources.left_out_tokens * token_scale)
    return context
