"""`SessionStore`: the async store of sessions, loops, messages and compaction blocks.

This package is the only one that imports SQLAlchemy. `SessionStore` is a thin async
facade: each public method runs one transaction, a sync unit of work from the modules
beside it (`_sessions`, `_messages`, `_blocks`, `_reads`), through one
`TransactionRunner` (`_engine`). Every write starts by bumping the session's `version`
with an `UPDATE ... RETURNING`, which takes the session's write lock, so concurrent
writers to one session queue up instead of interleaving, and positions stay contiguous.

>>> async def main():
...     async with SessionStore.from_url("sqlite+aiosqlite:///sessionstore.db") as store:
...         session = await store.create_session(app_name="demo", user_id="ada")
...         await store.append_messages(session.id, [UserMessage(content="hi")])
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Self

from sessionstore._tokens import HeuristicTokenCounter, TokenCounter
from sessionstore.errors import SessionStoreError
from sessionstore.store._block_api import BlockMethods
from sessionstore.store._engine import DEFAULT_URL, SqliteFile, TransactionRunner, make_engine
from sessionstore.store._integrity_api import IntegrityMethods
from sessionstore.store._message_api import MessageMethods
from sessionstore.store._retention import RetentionMethods
from sessionstore.store._schema import check, revision_at_head, upgrade
from sessionstore.store._search_api import SearchMethods
from sessionstore.store._session_api import SessionMethods
from sessionstore.store._sessions import Tenant
from sessionstore.store._tenant import TenantStore
from sessionstore.store._usage_api import UsageMethods

if TYPE_CHECKING:
    from sqlalchemy.engine import URL
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["SessionStore", "TenantStore"]


class SessionStore(
    SessionMethods,
    MessageMethods,
    BlockMethods,
    RetentionMethods,
    SearchMethods,
    UsageMethods,
    IntegrityMethods,
):
    """The async store: sessions, their loops, messages, compaction blocks, search and usage.

    Build it with `SessionStore.from_url(url)` (it then owns and disposes its engine) or
    `SessionStore(engine)` (the caller keeps the engine). It is the unscoped, operator's
    handle: it reaches every tenant, migrates the schema and owns the engine.
    `for_tenant(app_name, user_id)` returns a `TenantStore`, which sees only that
    tenant's sessions and shares this store's engine; give that to code acting for a tenant.

    Args:
        engine: An engine from `sessionstore.make_engine` (or configured the same way).
        token_counter: Counts each message's tokens once, when it is appended.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        token_counter: TokenCounter | None = None,
        _owns_engine: bool = False,
    ) -> None:
        self._setup(TransactionRunner(engine), token_counter, owns_engine=_owns_engine)

    def _setup(
        self, runner: TransactionRunner, token_counter: TokenCounter | None, *, owns_engine: bool
    ) -> None:
        super().__init__(runner, token_counter or HeuristicTokenCounter(), None)
        self._owns_engine = owns_engine

    @classmethod
    def from_url(
        cls,
        url: str | URL = DEFAULT_URL,
        *,
        token_counter: TokenCounter | None = None,
        **engine_kwargs: Any,
    ) -> SessionStore:
        """Open a store on a database URL (default: `sessionstore.db` in the working directory).

        The schema must exist: run `await sessionstore.migrate.upgrade(url)` or
        `sessionstore db upgrade` first, or call `await store.upgrade()`. `engine_kwargs`
        go to `make_engine`: `lock_timeout`, and on SQLite `synchronous="full"` for
        commits that survive a power cut (the default `"normal"` survives an application
        crash).
        """
        sqlite_file = SqliteFile.of(url, **engine_kwargs)
        if sqlite_file is None:
            engine = make_engine(url, **engine_kwargs)
            return cls(engine, token_counter=token_counter, _owns_engine=True)
        # Its calls never need the async engine: it is made when first asked for (see
        # `SqliteFile`), so a command that only reads starts without importing it.
        store = cls.__new__(cls)
        store._setup(TransactionRunner(sqlite_file), token_counter, owns_engine=True)
        return store

    @property
    def engine(self) -> AsyncEngine:
        """The engine this store uses (on a SQLite file, made when first asked for)."""
        return self._runner.engine

    def for_tenant(self, app_name: str, user_id: str) -> TenantStore:
        """Return a handle that sees only the sessions of one tenant, sharing this engine.

        The handle cannot reach other tenants, the engine or the migrations. It needs no
        closing of its own: closing this store ends it too.
        """
        if not app_name or not user_id:
            raise ValueError("app_name and user_id must be non-empty")
        return TenantStore(self._runner, self._counter, Tenant(app_name, user_id))

    async def close(self) -> None:
        """Release the store's worker threads, and dispose of the engine if it created it.

        The tenant handles from `for_tenant` share these resources and end with them.
        """
        await self._runner.dispose()
        engine = self._runner.made_engine
        if self._owns_engine and engine is not None:
            await engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def upgrade(self) -> None:
        """Bring the schema to the newest migration (see `sessionstore.migrate`)."""
        await upgrade(self.engine)

    async def check_schema(self) -> str:
        """Return the schema revision; raise `SchemaError` if it is not the newest."""
        if self._runner.made_engine is None:
            # A SQLite file store without its async engine yet: the common answer (at the
            # newest revision) is read on the store's own connection. Anything else, an
            # error included, is for `check`, which says what is wrong.
            with contextlib.suppress(SessionStoreError):
                revision = await self._runner.run(revision_at_head, inline=True)
                if revision is not None:
                    return revision
        return await check(self.engine)
