"""Loops of stored messages built by hand, for the strategy and summarizer tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sessionstore import (
    AssistantMessage,
    LoopRecord,
    LoopView,
    Message,
    StoredMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore._tokens import message_tokens
from sessionstore._turns import TurnAssigner
from sessionstore.models import content_hash, message_payload

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def stored(messages: Sequence[Message], *, loop_id: int = 1, first_id: int = 1) -> LoopView:
    """A loop of stored messages: ids from `first_id`, turns as the store assigns them."""
    assigner = TurnAssigner()
    rows = [
        StoredMessage(
            id=first_id + position,
            session_id="s",
            loop_id=loop_id,
            position=position,
            turn_index=assigner.assign(message),
            token_count=message_tokens(message),
            content_hash=content_hash(message_payload(message)),
            created_at=CREATED,
            message=message,
        )
        for position, message in enumerate(messages)
    ]
    loop = LoopRecord(
        id=loop_id,
        session_id="s",
        parent_loop_id=None,
        sequence=0,
        depth=0,
        created_at=CREATED,
        closed_at=None,
        message_count=len(rows),
        token_total=sum(r.token_count for r in rows),
        turn_count=assigner.next_turn,
    )
    return LoopView.of(loop, rows)


def user(text: str = "please fix the bug") -> UserMessage:
    return UserMessage(content=text)


def tool_turn(
    i: int, *, text: str = "", names: Sequence[str] = ("bash",), output: str = "ok"
) -> list[Message]:
    calls = [ToolCall(id=f"t{i}_{k}", name=name) for k, name in enumerate(names)]
    blocks: list[TextContent | ToolCall] = [TextContent(text=text)] if text else []
    return [
        AssistantMessage(content=[*blocks, *calls]),
        *[ToolResultMessage(tool_call_id=c.id, tool_name=c.name, content=output) for c in calls],
    ]


def loop_of(turns: int, *, output: str = "ok") -> LoopView:
    """A user turn, then `turns - 1` assistant turns with one tool call each."""
    messages: list[Message] = [user()]
    for i in range(1, turns):
        messages += tool_turn(i, text=f"step {i}", output=output)
    return stored(messages)
