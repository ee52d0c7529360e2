"""The recall tools as an MCP server on stdio, scoped to one tenant (`sessionstore mcp`).

Install with `pip install "sessionstore[mcp]"`. The server opens the store, answers
`search_history`, `list_loops`, `expand_summary` and `read_messages` for the tenant it was
started for (`--app`, `--user`), and nothing else: no call names a tenant, so no client
can reach another tenant's sessions.
"""

from __future__ import annotations

from sessionstore.errors import MissingDependencyError
from sessionstore.recall import MESSAGE_CHARS, recall_tools
from sessionstore.store import SessionStore

try:
    from mcp.server.mcpserver import MCPServer
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        'the MCP server needs the mcp package: pip install "sessionstore[mcp]"'
    ) from exc

__all__ = ["recall_server", "serve_stdio"]

INSTRUCTIONS = (
    "Look back into this user's stored agent history: search_history finds raw messages and "
    "summaries by words, list_loops lists the runs of a session with their summaries, "
    "expand_summary returns the raw messages a summary stands for, read_messages reads turns."
)


def recall_server(
    store: SessionStore,
    *,
    app_name: str,
    user_id: str,
    session_id: str | None = None,
    message_chars: int = MESSAGE_CHARS,
) -> MCPServer:
    """Return an MCP server whose tools see only the sessions of `(app_name, user_id)`."""
    server: MCPServer = MCPServer(name="sessionstore", instructions=INSTRUCTIONS)
    tenant = store.for_tenant(app_name, user_id)
    for tool in recall_tools(tenant, session_id=session_id, message_chars=message_chars):
        server.add_tool(tool)
    return server


async def serve_stdio(
    url: str,
    *,
    app_name: str,
    user_id: str,
    session_id: str | None = None,
    message_chars: int = MESSAGE_CHARS,
) -> None:
    """Serve the recall tools of one tenant on stdin and stdout until the client leaves."""
    async with SessionStore.from_url(url) as store:
        await store.check_schema()
        server = recall_server(
            store,
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            message_chars=message_chars,
        )
        await server.run_stdio_async()
