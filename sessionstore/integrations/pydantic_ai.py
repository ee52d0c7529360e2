"""Persist a pydantic-ai agent's messages and resume it from a built context.

Install with `pip install "sessionstore[pydantic-ai]"`:

    result = await agent.run("Fix the failing test", message_history=history)
    await save_model_messages(tenant, session_id, result.new_messages())
    history = await build_message_history(tenant, session_id, max_context_tokens=128_000)

The messages go through `sessionstore.formats.pydantic_ai` (an exact round trip), so
compaction, the audit and the CLI apply to them, and `build_message_history` hands the
agent a compacted history that fits the window and never holds a tool call without its
return.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sessionstore._context import build_context
from sessionstore.config import CompactionConfig
from sessionstore.errors import SessionExistsError, SessionNotFoundError
from sessionstore.formats.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from sessionstore.models import StoredMessage, UserMessage
from sessionstore.store import SessionStore, TenantStore

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["build_message_history", "save_model_messages"]


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


async def build_message_history(
    store: SessionStore | TenantStore,
    session_id: str,
    *,
    max_context_tokens: int,
    config: CompactionConfig | Mapping[str, Any] | None = None,
    system_prompt_tokens: int = 0,
    overlay: str = "default",
) -> list[ModelMessage]:
    """Return the session's built context as a pydantic-ai `message_history`.

    `build_context` rebuilds it from the overlays within `max_context_tokens` (less
    `system_prompt_tokens`); see there for the guarantees.
    """
    context = await build_context(
        store,
        session_id,
        max_context_tokens=max_context_tokens,
        config=dict(config) if isinstance(config, Mapping) else config,
        system_prompt_tokens=system_prompt_tokens,
        overlay=overlay,
    )
    return to_pydantic_ai(context.messages)
