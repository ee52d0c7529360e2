"""What a retention purge did (or, in a dry run, would do)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PurgeReport"]


class PurgeReport(BaseModel):
    """The outcome of `SessionStore.purge`: the sessions removed and their rows, per table."""

    model_config = ConfigDict(frozen=True)

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
    failed: dict[str, str] = Field(default_factory=dict)
    """Sessions that could not be deleted, by id, with the error: skipped by this purge
    (they and their rows are still there, and the next purge tries them again), so one
    such session never keeps the others from being purged."""
