"""A search hit: where a raw message (or a summary) matched a full-text query, and how well."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from sessionstore.models._messages import MessageKind

__all__ = ["SearchHit"]


class SearchHit(BaseModel):
    """One message that matched a search, with a snippet and a score (higher is better).

    A raw message hit names the message (`message_id`, `position`, `turn_index`), which
    `SessionStore.get_messages_by_id` reads back. A summary hit (`is_summary`) is a
    replacement message of the newest block of a loop: `message_id` is the replacement
    message's id, `block_id` its block, and `covers` the raw messages it stands for.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    session_id: str
    """The session of the message."""
    loop_id: int
    """The loop of the message (of the summarised loop, for a summary)."""
    loop_number: int
    """That loop's number in its session, from 1 (`LoopRecord.number`): what the CLI shows."""
    message_id: int
    """The raw message's id, or the replacement message's id for a summary."""
    position: int
    """The message's position in its loop (in its section, for a summary)."""
    turn_index: int | None
    """The raw message's turn; None for a summary, which stands for several."""
    kind: MessageKind
    """The message kind (`user`, `assistant`, `tool_result`, ...)."""
    snippet: str
    """About 160 characters around the first match, the matched words in `**`."""
    score: float
    """The database's relevance (SQLite FTS5 bm25, negated; PostgreSQL `ts_rank`).

    Comparable between the hits of one search on one backend, not across backends.
    """
    created_at: datetime
    """When the message (or the summary's block) was written (UTC)."""
    is_summary: bool = False
    """True for a replacement message of a compaction block (a summary)."""
    block_id: int | None = None
    """The block of a summary hit."""
    covers: list[int] = Field(default_factory=list)
    """The raw message ids a summary hit stands for."""
