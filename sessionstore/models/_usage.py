"""Provider usage as stored: per model call, summed per turn, per loop and per session."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from sessionstore.models._messages import Usage

__all__ = ["LoopUsage", "SessionUsage", "TurnUsage", "UsageRecord"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)


class UsageRecord(_Record):
    """The usage of one model call, on the loop and turn it answered."""

    id: int
    """The record's id."""
    session_id: str
    """The session."""
    loop_id: int
    """The loop of the turn."""
    turn_index: int
    """The turn the call answered (the turn of the assistant message it produced)."""
    message_id: int | None
    """The assistant message that carried the usage; None for `record_usage`."""
    model: str | None
    """The model that was called, when known."""
    usage: Usage
    """The tokens the provider reported."""
    created_at: datetime
    """When it was recorded (UTC)."""


class TurnUsage(_Record):
    """The usage of one turn: the sum of its model calls."""

    turn_index: int
    """The turn."""
    calls: int
    """How many model calls were recorded for it (retries count)."""
    usage: Usage
    """Their summed tokens."""


class LoopUsage(_Record):
    """The usage of one loop: its turns and their sum."""

    loop_id: int
    """The loop."""
    calls: int
    """How many model calls were recorded in it."""
    usage: Usage
    """The loop's total."""
    turns: list[TurnUsage]
    """The turns with recorded usage, in order."""


class SessionUsage(_Record):
    """The usage of a session: every loop, branches included, and the session's total."""

    session_id: str
    """The session."""
    calls: int
    """How many model calls were recorded."""
    usage: Usage
    """The session's total."""
    loops: list[LoopUsage]
    """The loops with recorded usage, oldest first."""
