"""Persist a pydantic-ai agent's messages and resume it from a built context.

Install with `pip install "sessionstore[pydantic-ai]"`:

    result = await agent.run("Fix the failing test", message_history=history)
    await save_model_messages(tenant, session_id, result.new_messages())
    history = await build_message_history(tenant, session_id, max_context_tokens=128_000)

The messages go through `sessionstore.formats.pydantic_ai` (an exact round trip), so
compaction, the audit and the CLI apply to them, and `build_message_history` hands the
agent every message while the whole history fits the window and, once it does not, a
compacted history that fits and never holds a tool call without its return. A live
`ContextEngine` (`StoreContextEngine` by default: the seeds' threshold, anti-thrashing and
cooldowns) compacts on its own when its gate says so; pass the same engine to every call
(`history_engine`) to keep its cooldown and anti-thrashing from one run to the next.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sessionstore._engine import ContextEngine, EngineChoice, make_context_engine
from sessionstore._engine._preflight import build_with_engine
from sessionstore.config import CompactionConfig, validated_config
from sessionstore.errors import SessionExistsError, SessionNotFoundError
from sessionstore.formats.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from sessionstore.models import RecordCache, StoredMessage, UserMessage
from sessionstore.store import SessionStore, TenantStore

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["build_message_history", "history_engine", "save_model_messages"]


async def save_model_messages(
    store: SessionStore | TenantStore, session_id: str, messages: Sequence[ModelMessage]
) -> list[StoredMessage]:
    """Append pydantic-ai messages (`result.new_messages()`) to a session, in one transaction.

    The session is created (for the store's tenant) when it does not exist. Messages that
    open with a user prompt start a new loop (one agent run); others join the active loop.

    Raises:
        FormatError: `messages` is not a pydantic-ai message list.
    """
    converted = from_pydantic_ai(messages)
    if not converted:
        return []
    loop = "new" if any(isinstance(m, UserMessage) for m in converted[:2]) else None
    try:
        return await store.append_messages(session_id, converted, loop_id=loop)  # type: ignore[arg-type]  # "new" or None
    except SessionNotFoundError:
        with contextlib.suppress(SessionExistsError):  # a concurrent first write made it
            await store.create_session(session_id=session_id)
        return await store.append_messages(session_id, converted)


def history_engine(
    store: SessionStore | TenantStore,
    session_id: str,
    *,
    max_context_tokens: int,
    config: CompactionConfig | Mapping[str, Any] | None = None,
    system_prompt_tokens: int = 0,
    overlay: str = "default",
    engine: EngineChoice | None = None,
) -> ContextEngine:
    """Return the live engine of a session's history, to pass to every `build_message_history`.

    One engine across calls keeps its gates' state (the failure cooldown, anti-thrashing)
    and serves a user's `/compact` (`await engine.compress(force=True)`).

    Args:
        store: The store (scoped to a tenant, or not).
        session_id: The session.
        max_context_tokens: The model's window.
        config: The compaction policy (`CompactionConfig()` by default).
        system_prompt_tokens: Tokens of the window kept for the agent's instructions.
        overlay: The named overlay to build from and compact into.
        engine: A registered name (`"store"`), a factory, or None for the config's
            `context_engine`.

    Raises:
        ConfigurationError: a bad config, or an unknown engine name.
    """
    return make_context_engine(
        engine,
        store,
        session_id,
        context_length=max_context_tokens,
        system_prompt_tokens=system_prompt_tokens,
        overlay=overlay,
        config=_policy(config),
    )


async def build_message_history(
    store: SessionStore | TenantStore,
    session_id: str,
    *,
    max_context_tokens: int,
    config: CompactionConfig | Mapping[str, Any] | None = None,
    system_prompt_tokens: int = 0,
    overlay: str = "default",
    engine: EngineChoice | None = None,
    auto_compact: bool = True,
    records: RecordCache | None = None,
) -> list[ModelMessage]:
    """Return the session's built context as a pydantic-ai `message_history`.

    `build_context` rebuilds it from the overlays within `max_context_tokens` (less
    `system_prompt_tokens`); see there for the guarantees. Every message is there while
    the whole history fits. Before it is built, the engine measures the context (seed
    001's pre-flight check) and compacts when its gate says so. A session never written
    has no history yet: `[]`, as the first run of an agent expects.

    Args:
        store: The store (scoped to a tenant, or not).
        session_id: The session.
        max_context_tokens: The model's window.
        config: The compaction policy (`CompactionConfig()` by default).
        system_prompt_tokens: Tokens of the window kept for the agent's instructions.
        overlay: The named overlay to build from and compact into.
        engine: The live engine: one from `history_engine` (its gates' state carries
            from call to call), a registered name, a factory, or None for the config's
            `context_engine` (a new engine each call).
        auto_compact: False: never compact here (the history is still trimmed to fit).
        records: A `RecordCache` kept for the session from call to call: each call
            decodes only the raw messages written since the last (see `build_context`).

    Raises:
        ValueError: a window that is not positive.
        ConfigurationError: a bad config, or an unknown engine name.
    """
    policy = _policy(config)
    chosen = (
        history_engine(
            store,
            session_id,
            max_context_tokens=max_context_tokens,
            config=policy,
            system_prompt_tokens=system_prompt_tokens,
            overlay=overlay,
            engine=engine,
        )
        if auto_compact
        else None
    )
    try:
        context = await build_with_engine(
            store,
            session_id,
            chosen,
            max_context_tokens=max_context_tokens,
            system_prompt_tokens=system_prompt_tokens,
            overlay=overlay,
            config=policy,
            records=records,
        )
    except SessionNotFoundError:
        return []
    return to_pydantic_ai(context.messages)


def _policy(config: CompactionConfig | Mapping[str, Any] | None) -> CompactionConfig | None:
    if config is None:
        return None
    return validated_config(
        dict(config) if isinstance(config, Mapping) else config, CompactionConfig
    )
