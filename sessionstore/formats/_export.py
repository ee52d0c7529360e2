"""Export a session from a store as one conversation, the shape `import_jsonl` reads back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessionstore.formats._openai import to_openai

if TYPE_CHECKING:
    from sessionstore.store import SessionStore, TenantStore

__all__ = ["export_conversation"]


async def export_conversation(
    store: SessionStore | TenantStore, session_id: str, *, loop_id: int | None = None
) -> dict[str, Any]:
    """Return a session's raw history as `{"id", "title", "metadata", "messages": [...]}`.

    The messages are those of the active chain of loops (or of the chain ending at
    `loop_id`) in the OpenAI chat-completions format; compaction never changes them.
    Written as one line of a JSONL file, the result imports back with `import_jsonl`,
    and importing a conversation then exporting it gives back the same messages.

    Raises:
        SessionNotFoundError: there is no such session.
        LoopNotFoundError: `loop_id` is not a loop of the session.
    """
    session = await store.get_session(session_id)
    history = await store.get_history(session_id, loop_id=loop_id)
    return {
        "id": session.id,
        "title": session.title,
        "metadata": session.metadata,
        "messages": to_openai([stored.message for stored in history]),
    }
