"""What a retention purge did (or, in a dry run, would do)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PurgeFailure", "PurgeReport"]


class PurgeFailure(BaseModel):
    """A session a purge could not delete, and why: skipped, still there."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    session_id: str
    """The session."""
    app_name: str
    """Its tenant's application."""
    user_id: str
    """Its tenant's user."""
    error: str
    """What the database answered (the error's message, without SQL or contents)."""


class PurgeReport(BaseModel):
    """The outcome of `SessionStore.purge`: the sessions removed and their rows, per table."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    cutoff: datetime
    """Sessions last updated before this moment (aware UTC) were purged."""
    dry_run: bool
    """True when nothing was deleted: the counts say what a purge would remove."""
    sessions: int
    """The sessions purged (or that would be)."""
    rows: dict[str, int]
    """Rows removed per table, by table name without the `sessionstore_` prefix
    (`sessions`, `loops`, `messages`, `blocks`, ...); every table is listed, 0 included."""
    batches: int
    """The batches of sessions the purge went through (one transaction each, unless one
    failed and its sessions were then deleted one by one)."""
    failed: list[PurgeFailure] = Field(default_factory=list)
    """The sessions that could not be deleted, oldest first, with the error: skipped by
    this purge (they and their rows are still there, and the next purge tries them
    again), so one such session never keeps the others from being purged."""
