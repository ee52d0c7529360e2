"""The recall tools as openai-agents `FunctionTool`s (`pip install "sessionstore[openai-agents]"`).

    agent = Agent(name="coder", tools=recall_function_tools(tenant, session_id="chat-42"))

The SDK builds each tool's JSON schema from the function's arguments and docstring.
"""

from __future__ import annotations

from sessionstore.errors import MissingDependencyError
from sessionstore.recall import MESSAGE_CHARS, recall_tools
from sessionstore.store import TenantStore

try:
    from agents import FunctionTool, function_tool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        'the recall tools for openai-agents need it: pip install "sessionstore[openai-agents]"'
    ) from exc

__all__ = ["recall_function_tools"]


def recall_function_tools(
    store: TenantStore, *, session_id: str | None = None, message_chars: int = MESSAGE_CHARS
) -> list[FunctionTool]:
    """Return `search_history`, `list_loops`, `expand_summary` and `read_messages` as tools.

    Args:
        store: The tenant's handle; the tools see nothing else.
        session_id: The agent's own session, looked into when a call names none.
        message_chars: The most characters of one message a tool returns.
    """
    return [
        function_tool(tool)
        for tool in recall_tools(store, session_id=session_id, message_chars=message_chars)
    ]
