"""The recall tools as pydantic-ai `Tool`s (`pip install "sessionstore[pydantic-ai]"`).

    agent = Agent(model, tools=recall_pydantic_tools(tenant, session_id="chat-42"))

pydantic-ai builds each tool's JSON schema from the function's arguments and docstring.
"""

from __future__ import annotations

from typing import Any

from sessionstore.errors import MissingDependencyError
from sessionstore.recall import MESSAGE_CHARS, recall_tools
from sessionstore.store import TenantStore

try:
    from pydantic_ai import Tool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        'the recall tools for pydantic-ai need it: pip install "sessionstore[pydantic-ai]"'
    ) from exc

__all__ = ["recall_pydantic_tools"]


def recall_pydantic_tools(
    store: TenantStore, *, session_id: str | None = None, message_chars: int = MESSAGE_CHARS
) -> list[Tool[Any]]:
    """Return `search_history`, `list_loops`, `expand_summary` and `read_messages` as tools.

    Args:
        store: The tenant's handle; the tools see nothing else.
        session_id: The agent's own session, looked into when a call names none.
        message_chars: The most characters of one message a tool returns.
    """
    return [
        Tool(tool, takes_ctx=False)
        for tool in recall_tools(store, session_id=session_id, message_chars=message_chars)
    ]
