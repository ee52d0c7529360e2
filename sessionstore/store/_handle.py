"""`_Handle`: what every part of the store's facade shares: the runner, counter and tenant."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection

from sessionstore._context_source import check_aware as check_aware
from sessionstore._tokens import TokenCounter
from sessionstore.models._limits import check_big_count
from sessionstore.store import _blocks
from sessionstore.store._engine import TransactionRunner
from sessionstore.store._sessions import SessionKey, Tenant, session_key

__all__ = ["Rollback", "_Handle", "check_aware", "check_event_kind", "check_limit"]

_T = TypeVar("_T")


class Rollback(Exception):
    """Ends a write transaction without writing, carrying the call's result."""

    def __init__(self, result: Any) -> None:
        self.result = result


def check_limit(limit: int | None) -> None:
    """Refuse a `limit` below 1 (or past the 64-bit range)."""
    check_big_count(limit, "limit", low=1)


def check_event_kind(event: object) -> None:
    """Refuse an event kind other than `started` and `ended`."""
    if event not in _blocks.EVENT_KINDS:
        raise ValueError("event must be 'started' or 'ended'")


class _Handle:
    """The state of a store handle and the one way it runs a transaction.

    A handle holds no engine of its own: only the runner, which `SessionStore` builds
    and a tenant handle shares, so a tenant handle has nothing that reaches past its tenant.
    """

    def __init__(
        self, runner: TransactionRunner, counter: TokenCounter, tenant: Tenant | None
    ) -> None:
        self._runner = runner
        self._counter = counter
        self._tenant = tenant

    def _key(self, db: Connection, session_id: str) -> SessionKey:
        """The key of the session a call names (see `_sessions.session_key`)."""
        return session_key(db, self._tenant, session_id)

    async def _read(
        self, work: Callable[[Connection], _T], *, inline: bool = False, snapshot: bool = True
    ) -> _T:
        return await self._runner.run(work, inline=inline, snapshot=snapshot)

    async def _write(self, work: Callable[[Connection], _T], *, inline: bool = False) -> _T:
        return await self._runner.run(work, write=True, inline=inline)
