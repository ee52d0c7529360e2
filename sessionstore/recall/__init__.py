"""Recall tools: let an agent look back past its summaries, into the raw history behind them.

A compacted context shows the model summaries in place of raw turns. These tools give the
agent the way back: find raw messages by their words, list the loops of its session, open
a summary to the raw messages it stands for (its provenance), and read any turns of any
loop, all through one tenant's handle, so they never reach another tenant's data.

`recall_tools(tenant, session_id=...)` returns them as plain async functions with typed
arguments and docstrings, from which every agent framework derives a JSON schema:

- `search_history(query, limit=10, session_id=None)`
- `list_loops(session_id=None)`
- `expand_summary(summary_id, session_id=None)`
- `read_messages(loop_id, start_turn=0, end_turn=None, session_id=None)`

Each returns JSON data; a request the store refuses (an unknown session, loop or summary,
a blank query) returns `{"error": "..."}` for the model to read, rather than raising.
The same functions are offered as openai-agents tools (`sessionstore.recall.openai_agents`),
pydantic-ai tools (`sessionstore.recall.pydantic_ai`) and an MCP server
(`sessionstore mcp`, `sessionstore.recall.mcp`).

>>> tools = recall_tools(store.for_tenant("my-agent", "user-42"), session_id="chat-42")
>>> await tools[0]("failing test")  # search_history
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec

from pydantic import ValidationError

from sessionstore.errors import SessionStoreError, describe_validation_error
from sessionstore.formats._text import render_as_text
from sessionstore.models import (
    AssistantMessage,
    CompactionBlock,
    ImageContent,
    Message,
    ReplacementMessage,
    StoredMessage,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    TurnRange,
    UserMessage,
)
from sessionstore.store import TenantStore

__all__ = ["MAX_TURNS", "MESSAGE_CHARS", "RecallTools", "recall_tools"]

MESSAGE_CHARS = 4000
"""The most characters of one message a tool returns (the rest is marked as cut)."""
MAX_TURNS = 20
"""The most turns one `read_messages` call returns."""
_SUMMARY_PREVIEW = 300
_P = ParamSpec("_P")


def _answers_errors(
    method: Callable[_P, Awaitable[dict[str, Any]]],
) -> Callable[_P, Awaitable[dict[str, Any]]]:
    """Turn what the store refuses into `{"error": ...}`, which the model can act on."""

    @functools.wraps(method)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> dict[str, Any]:
        try:
            return await method(*args, **kwargs)
        except ValidationError as exc:
            return {"error": describe_validation_error(exc)}
        except (SessionStoreError, ValueError, TypeError) as exc:
            return {"error": str(exc)}

    return wrapper


class RecallTools:
    """The recall tools of one tenant, optionally bound to one session.

    Args:
        store: The tenant's handle (`store.for_tenant(app_name, user_id)`): the tools see
            what it sees and nothing else.
        session_id: The session the tools look into when a call names none (the agent's
            own). Without it, `search_history` searches every session of the tenant and
            the other tools need a `session_id`.
        message_chars: The most characters of one message returned.
    """

    def __init__(
        self,
        store: TenantStore,
        *,
        session_id: str | None = None,
        message_chars: int = MESSAGE_CHARS,
    ) -> None:
        if not isinstance(store, TenantStore):
            raise TypeError(
                "recall tools act for one tenant: pass store.for_tenant(app_name, user_id), "
                f"not {type(store).__name__}"
            )
        if message_chars < 100:
            raise ValueError("message_chars must be at least 100")
        self._store = store
        self._session_id = session_id
        self._chars = message_chars

    def functions(self) -> list[Callable[..., Awaitable[dict[str, Any]]]]:
        """Return the four tools as plain async functions (name, docstring, typed arguments)."""
        return [self.search_history, self.list_loops, self.expand_summary, self.read_messages]

    def _session(self, session_id: str | None) -> str:
        chosen = session_id or self._session_id
        if not chosen:
            raise ValueError("name the session: pass session_id (search_history lists them)")
        return chosen

    @_answers_errors
    async def search_history(
        self, query: str, limit: int = 10, session_id: str | None = None
    ) -> dict[str, Any]:
        """Search the raw history, and the summaries that stand for it, by words.

        Every word of the query must appear (case-insensitive, whole words). Raw hits name
        the message, its loop and turn (read them with read_messages); summary hits name
        a summary_id (open it with expand_summary).

        Args:
            query: The words to find.
            limit: The most hits to return (1 to 50).
            session_id: The session to search; by default the agent's own, or every
                session of the user when there is none.
        """
        if not 1 <= limit <= 50:
            raise ValueError("limit must be between 1 and 50")
        hits = await self._store.search(
            query,
            session_id=session_id or self._session_id,
            limit=limit,
            include_summaries=True,
        )
        return {
            "hits": [
                {
                    "session_id": hit.session_id,
                    "loop_id": hit.loop_id,
                    **(
                        {"summary_id": hit.message_id, "covers": len(hit.covers)}
                        if hit.is_summary
                        else {
                            "message_id": hit.message_id,
                            "turn": hit.turn_index,
                            "kind": hit.kind,
                        }
                    ),
                    "snippet": hit.snippet,
                }
                for hit in hits
            ]
        }

    @_answers_errors
    async def list_loops(self, session_id: str | None = None) -> dict[str, Any]:
        """List the loops (agent runs) of the session's active chain, oldest first.

        Each loop shows its turn count and, when it was compacted, its summaries (with
        the summary_id that expand_summary opens) and a preview of their text.

        Args:
            session_id: The session; by default the agent's own.
        """
        chain = await self._store.chain_blocks(self._session(session_id))
        return {
            "loops": [
                {
                    "loop_id": loop.id,
                    "turns": loop.turn_count,
                    "messages": loop.message_count,
                    "started_at": loop.created_at.isoformat(),
                    "summaries": _summaries(block),
                }
                for loop, block in chain
            ]
        }

    @_answers_errors
    async def expand_summary(
        self, summary_id: int, session_id: str | None = None
    ) -> dict[str, Any]:
        """Open a summary: return the raw messages it stands for, in order.

        Args:
            summary_id: The summary's id, from search_history or list_loops.
            session_id: The session; by default the agent's own.
        """
        sid = self._session(session_id)
        summary = await self._store.get_replacement_message(sid, summary_id)
        raw = await self._store.get_messages_by_id(sid, summary.covers)
        return {
            "summary_id": summary_id,
            "summary": self._clip(_text(summary.message)),
            "messages": [self._message(m) for m in raw],
        }

    @_answers_errors
    async def read_messages(
        self,
        loop_id: int,
        start_turn: int = 0,
        end_turn: int | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Read the raw messages of a range of turns of a loop, as they were written.

        Args:
            loop_id: The loop, from list_loops or search_history.
            start_turn: The first turn (from 0).
            end_turn: The last turn, inclusive (default: start_turn; at most 20 turns).
            session_id: The session; by default the agent's own.
        """
        sid = self._session(session_id)
        loop = await self._store.get_loop(sid, loop_id)
        if loop.turn_count == 0:
            return {"loop_id": loop_id, "turns": 0, "messages": []}
        last = start_turn if end_turn is None else end_turn
        if start_turn < 0 or last < start_turn:
            raise ValueError("start_turn must be at least 0 and end_turn at least start_turn")
        if start_turn >= loop.turn_count:
            raise ValueError(
                f"loop {loop_id} has {loop.turn_count} turns (0 to {loop.turn_count - 1})"
            )
        last = min(last, loop.turn_count - 1, start_turn + MAX_TURNS - 1)
        messages = await self._store.get_turns(
            sid, loop_id, TurnRange(start_turn=start_turn, end_turn=last)
        )
        return {
            "loop_id": loop_id,
            "turns": loop.turn_count,
            "start_turn": start_turn,
            "end_turn": last,
            "messages": [self._message(m) for m in messages],
        }

    def _message(self, stored: StoredMessage) -> dict[str, Any]:
        return {
            "message_id": stored.id,
            "loop_id": stored.loop_id,
            "turn": stored.turn_index,
            "kind": stored.message.kind,
            "text": self._clip(_text(stored.message)),
        }

    def _clip(self, text: str) -> str:
        if len(text) <= self._chars:
            return text
        return f"{text[: self._chars]}\n[... {len(text) - self._chars} more characters]"


def recall_tools(
    store: TenantStore, *, session_id: str | None = None, message_chars: int = MESSAGE_CHARS
) -> list[Callable[..., Awaitable[dict[str, Any]]]]:
    """Return the recall tools of a tenant as plain async functions (see `RecallTools`)."""
    return RecallTools(store, session_id=session_id, message_chars=message_chars).functions()


def _summaries(block: CompactionBlock | None) -> list[dict[str, Any]]:
    if block is None:
        return []
    # The summaries only: `keep_recent` holds raw turns with their tool output shortened.
    section = block.keep_compacted
    found: list[ReplacementMessage] = [
        m for m in (section.messages if section else []) if m.covers and m.id is not None
    ]
    return [
        {
            "summary_id": m.id,
            "covers": len(m.covers),
            "preview": _text(m.message)[:_SUMMARY_PREVIEW],
        }
        for m in found
    ]


def _text(message: Message) -> str:
    """Render a message as the plain text a model reads back."""
    if isinstance(message, UserMessage | SystemMessage | ToolResultMessage | AssistantMessage):
        lines: list[str] = []
        if isinstance(message, ToolResultMessage):
            lines.append(f"[result of {message.tool_name or 'a tool'} ({message.tool_call_id})]")
        for block in message.content:
            if isinstance(block, TextContent):
                lines.append(block.text)
            elif isinstance(block, ThinkingContent):
                lines.append(f"[thinking] {block.thinking}")
            elif isinstance(block, ToolCall):
                lines.append(f"[call {block.name} ({block.id})] {block.arguments}")
            elif isinstance(block, ImageContent):
                lines.append("[image]")
        return "\n".join(lines)
    return render_as_text(message) or f"[{message.kind}]"
