"""`_Handle`: what every part of the store's facade shares: the engine, tenant and runner."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sessionstore._tokens import HeuristicTokenCounter, TokenCounter
from sessionstore.store import _blocks
from sessionstore.store._engine import TransactionRunner
from sessionstore.store._sessions import Tenant

__all__ = ["Rollback", "_Handle", "check_aware", "check_event_kind", "check_limit"]

_T = TypeVar("_T")


class Rollback(Exception):
    """Ends a write transaction without writing, carrying the call's result."""

    def __init__(self, result: Any) -> None:
        self.result = result


def check_aware(moment: datetime | None) -> None:
    """Refuse a naive `as_of` datetime."""
    if moment is not None and moment.tzinfo is None:
        raise ValueError("as_of must be an aware datetime")


def check_limit(limit: int | None) -> None:
    """Refuse a `limit` below 1."""
    if limit is not None and limit < 1:
        raise ValueError("limit must be at least 1")


def check_event_kind(event: object) -> None:
    """Refuse an event kind other than `started` and `ended`."""
    if event not in _blocks.EVENT_KINDS:
        raise ValueError("event must be 'started' or 'ended'")


class _Handle:
    """The state of a store handle and the one way it runs a transaction."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        token_counter: TokenCounter | None = None,
        _owns_engine: bool = False,
        _tenant: Tenant | None = None,
        _runner: TransactionRunner | None = None,
    ) -> None:
        self._engine = engine
        self._counter: TokenCounter = token_counter or HeuristicTokenCounter()
        self._owns_engine = _owns_engine
        self._tenant = _tenant
        self._runner = _runner or TransactionRunner(engine)

    async def _read(self, work: Callable[[Connection], _T]) -> _T:
        return await self._runner.run(work)

    async def _write(self, work: Callable[[Connection], _T], *, inline: bool = False) -> _T:
        return await self._runner.run(work, write=True, inline=inline)
