"""`SessionStore`: the async store of sessions, loops, messages and compaction blocks.

This is the only module that opens transactions: one public call is one transaction.
Every write starts by bumping the session's `version` with an `UPDATE ... RETURNING`,
which takes the session's write lock (a row lock on PostgreSQL, the database write
lock on SQLite), so concurrent writers to one session queue up instead of
interleaving, and positions stay contiguous.

>>> async def main():
...     async with SessionStore.from_url("sqlite+aiosqlite:///sessionstore.db") as store:
...         session = await store.create_session(app_name="demo", user_id="ada")
...         await store.append_messages(session.id, [UserMessage(content="hi")])
"""

from __future__ import annotations

import base64
import binascii
import gc
import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from itertools import pairwise
from typing import Any, Self, TypeVar

from sqlalchemy import (
    Connection,
    Row,
    Table,
    Text,
    and_,
    bindparam,
    cast,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from sessionstore import migrate
from sessionstore._overlay import ContextSources, LoopSource, segments
from sessionstore._tokens import HeuristicTokenCounter, TokenCounter
from sessionstore._turns import TurnAssigner, TurnMap
from sessionstore.errors import (
    BlockNotFoundError,
    ConflictError,
    InvalidBlockError,
    LoopNotFoundError,
    SessionExistsError,
    SessionNotFoundError,
    StaleWriteError,
    StorageError,
)
from sessionstore.models import (
    MESSAGE_ADAPTER,
    SESSION_ID_MAX_LENGTH,
    CompactedSection,
    CompactionBlock,
    CompactionEvent,
    LoopRecord,
    Message,
    Page,
    ReplacementMessage,
    Session,
    StoredMessage,
    ToolResultMessage,
    TurnRange,
    content_hash,
    message_payload,
)
from sessionstore.store._engine import DEFAULT_URL, TransactionRunner, make_engine
from sessionstore.store._tables import (
    BlockRow,
    CompactionEventRow,
    LoopRow,
    MessageRow,
    SectionMessageRow,
    SectionRow,
    SessionRow,
    table_of,
)

__all__ = ["SessionStore"]

_T = TypeVar("_T")

SESSIONS = table_of(SessionRow)
LOOPS = table_of(LoopRow)
S = SESSIONS.c
L = LOOPS.c
M = table_of(MessageRow).c
B = table_of(BlockRow).c
SEC = table_of(SectionRow).c
SM = table_of(SectionMessageRow).c
EV = table_of(CompactionEventRow).c

_LOOP_COLUMNS = (
    L.id,
    L.session_id,
    L.parent_loop_id,
    L.sequence,
    L.depth,
    L.created_at,
    L.closed_at,
    L.message_count,
    L.token_total,
    L.turn_count,
)
_MESSAGE_COLUMNS = (
    M.id,
    M.loop_id,
    M.position,
    M.turn_index,
    M.token_count,
    M.content_hash,
    M.client_id,
    M.created_at,
    # Read as text (a CAST, so asyncpg does not decode JSONB either): pydantic-core
    # parses and validates it in one step, faster than json.loads and then validation.
    cast(M.payload, Text).label("payload"),
)


def _check_aware(moment: datetime | None) -> None:
    if moment is not None and moment.tzinfo is None:
        raise ValueError("as_of must be an aware datetime")


def _now() -> datetime:
    return datetime.now(UTC)


# Statements on hot paths are built once, with bind parameters: building and hashing a
# statement costs SQLAlchemy about 100 µs, five times what SQLite needs to run it.
_TENANT = (S.app_name == bindparam("t_app"), S.user_id == bindparam("t_user"))


@cache
def _lock_stmt(tenant: bool) -> Any:
    return (
        update(SESSIONS)
        .where(S.id == bindparam("sid"), *(_TENANT if tenant else ()))
        .values(version=S.version + 1, updated_at=bindparam("now"))
        .returning(S.version, S.active_loop_id, S.loop_count)
    )


@cache
def _session_stmt(tenant: bool) -> Any:
    return select(SESSIONS).where(S.id == bindparam("sid"), *(_TENANT if tenant else ()))


_RAW_TURNS_WHERE = (
    M.session_id == bindparam("sid"),
    M.loop_id == bindparam("lid"),
    M.turn_index.between(bindparam("a"), bindparam("b")),
)
_RAW_TURNS_STMT = select(*_MESSAGE_COLUMNS).where(*_RAW_TURNS_WHERE).order_by(M.position)
_RAW_TURNS_AS_OF_STMT = (
    select(*_MESSAGE_COLUMNS)
    .where(*_RAW_TURNS_WHERE, M.created_at <= bindparam("t"))
    .order_by(M.position)
)
# Matches the partial index ix_sessionstore_messages_user (kind = 'user').
_USER_WHERE = (
    M.session_id == bindparam("sid"),
    M.loop_id == bindparam("lid"),
    M.kind == literal_column("'user'"),
)
_LATEST_USER_STMT = (
    select(*_MESSAGE_COLUMNS).where(*_USER_WHERE).order_by(M.position.desc()).limit(1)
)
_LATEST_USER_AS_OF_STMT = (
    select(*_MESSAGE_COLUMNS)
    .where(*_USER_WHERE, M.created_at <= bindparam("t"))
    .order_by(M.position.desc())
    .limit(1)
)
_LOOP_STMT = select(LOOPS).where(L.id == bindparam("lid"), L.session_id == bindparam("sid"))
_LOOP_STATE_STMT = select(
    L.message_count, L.token_total, L.turn_count, L.open_tool_call_ids, L.closed_at
).where(L.id == bindparam("lid"), L.session_id == bindparam("sid"))
_LOOP_COUNTERS_STMT = (
    update(LOOPS)
    .where(L.id == bindparam("lid"), L.session_id == bindparam("sid"))
    .values(
        message_count=L.message_count + bindparam("n"),
        token_total=L.token_total + bindparam("tokens"),
        turn_count=bindparam("turns"),
        open_tool_call_ids=bindparam("open_ids", type_=LOOPS.c.open_tool_call_ids.type),
    )
)


@cache
def _insert_stmt(table: Table, many: bool) -> Any:
    return insert(table).returning(table.c.id, sort_by_parameter_order=many)


class _Rollback(Exception):
    """Ends a write transaction without writing, carrying the call's result."""

    def __init__(self, result: Any) -> None:
        self.result = result


@dataclass(frozen=True, slots=True)
class _Locked:
    """What the version-bumping UPDATE of a session returns."""

    version: int
    active_loop_id: int | None
    loop_count: int


class SessionStore:
    """The async store: sessions, their loops, messages and compaction blocks.

    Build it with `SessionStore.from_url(url)` (it then owns and disposes its engine) or
    `SessionStore(engine)` (the caller keeps the engine). `for_tenant(app_name, user_id)`
    returns a handle that sees only that tenant's sessions and shares the engine.

    Args:
        engine: An engine from `sessionstore.engine.make_engine` (or configured the same way).
        token_counter: Counts each message's tokens once, when it is appended.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        token_counter: TokenCounter | None = None,
        _owns_engine: bool = False,
        _tenant: tuple[str, str] | None = None,
        _runner: TransactionRunner | None = None,
    ) -> None:
        self._engine = engine
        self._counter: TokenCounter = token_counter or HeuristicTokenCounter()
        self._owns_engine = _owns_engine
        self._tenant = _tenant
        self._runner = _runner or TransactionRunner(engine)

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
        `sessionstore db upgrade` first, or call `await store.upgrade()`.
        """
        engine = make_engine(url, **engine_kwargs)
        return cls(engine, token_counter=token_counter, _owns_engine=True)

    @property
    def engine(self) -> AsyncEngine:
        """The engine this store uses."""
        return self._engine

    @property
    def tenant(self) -> tuple[str, str] | None:
        """The `(app_name, user_id)` this handle is scoped to, or None for an unscoped handle."""
        return self._tenant

    def for_tenant(self, app_name: str, user_id: str) -> SessionStore:
        """Return a handle that sees only the sessions of one tenant, sharing this engine."""
        if not app_name or not user_id:
            raise ValueError("app_name and user_id must be non-empty")
        return SessionStore(
            self._engine,
            token_counter=self._counter,
            _tenant=(app_name, user_id),
            _runner=self._runner,
        )

    async def close(self) -> None:
        """Release the store's worker threads, and dispose of the engine if it created it.

        A tenant handle from `for_tenant` shares its parent's resources: close the parent.
        """
        if self._tenant is not None:
            return
        await self._runner.dispose()
        if self._owns_engine:
            await self._engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def upgrade(self) -> None:
        """Bring the schema to the newest migration (see `sessionstore.migrate`)."""
        await migrate.upgrade(self._engine)

    async def check_schema(self) -> str:
        """Return the schema revision; raise `SchemaError` if it is not the newest."""
        return await migrate.check(self._engine)

    # ── transactions ────────────────────────────────────────────────────────────

    async def _read(self, work: Callable[[Connection], _T]) -> _T:
        return await self._runner.run(work)

    async def _write(self, work: Callable[[Connection], _T]) -> _T:
        return await self._runner.run(work, write=True)

    def _lock_session(self, db: Connection, session_id: str, now: datetime) -> _Locked:
        """Bump the session's version (taking its write lock) and return its state."""
        params = {"sid": session_id, "now": now, **self._tenant_params()}
        row = db.execute(_lock_stmt(self._tenant is not None), params).first()
        if row is None:
            raise SessionNotFoundError(session_id)
        return _Locked(row.version, row.active_loop_id, row.loop_count)

    @staticmethod
    def _check_version(session_id: str, locked: _Locked, expected: int | None) -> None:
        # The lock has already bumped the version: the stored one was one less.
        if expected is not None and locked.version - 1 != expected:
            raise StaleWriteError(session_id, expected=expected, actual=locked.version - 1)

    def _tenant_params(self) -> dict[str, str]:
        if self._tenant is None:
            return {}
        return {"t_app": self._tenant[0], "t_user": self._tenant[1]}

    def _visible_session(self, db: Connection, session_id: str) -> Row[Any]:
        params = {"sid": session_id, **self._tenant_params()}
        row = db.execute(_session_stmt(self._tenant is not None), params).first()
        if row is None:
            raise SessionNotFoundError(session_id)
        return row

    def _resolve_loop(self, db: Connection, session_id: str, loop_id: int | None) -> int | None:
        """Return `loop_id` (checked to be in the session) or the session's active loop."""
        session = self._visible_session(db, session_id)
        if loop_id is None:
            return session.active_loop_id  # type: ignore[no-any-return]  # a nullable int column
        self._loop_row(db, session_id, loop_id)
        return loop_id

    def _loop_row(self, db: Connection, session_id: str, loop_id: int) -> Row[Any]:
        row = db.execute(_LOOP_STMT, {"lid": loop_id, "sid": session_id}).first()
        if row is None:
            raise LoopNotFoundError(loop_id, session_id=session_id)
        return row

    # ── sessions ────────────────────────────────────────────────────────────────

    async def create_session(
        self,
        *,
        session_id: str | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Session:
        """Create a session, owned by this handle's tenant or by `app_name` / `user_id`.

        Args:
            session_id: The id to use (1 to 128 characters); a random one by default.
                Ids are unique across tenants, so prefer the generated ones.
            app_name: The owning application (taken from the handle when it is scoped).
            user_id: The owning user (taken from the handle when it is scoped).
            title: A human-readable title.
            metadata: Free-form JSON data.

        Raises:
            SessionExistsError: `session_id` is already taken.
        """
        values = self._new_session_values(session_id, app_name, user_id, title, metadata)
        await self._insert_session(values, lambda db: None)
        return _session_model(values)

    async def import_session(
        self,
        loops: Sequence[Sequence[Message]],
        *,
        session_id: str | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Session:
        """Create a session with its whole history in one transaction.

        Each entry of `loops` becomes a loop continuing the one before it (the last one
        is active), with its messages appended as by `append_messages`. Either all of it
        is written or none of it.

        Raises:
            pydantic.ValidationError: a message is malformed.
            SessionExistsError: `session_id` is already taken.
            ConflictError: a `client_id` appears twice.
        """
        batches = [[_validated(message) for message in loop] for loop in loops]
        client_ids = [m.client_id for batch in batches for m in batch if m.client_id]
        if len(client_ids) != len(set(client_ids)):
            raise ConflictError("a client_id appears twice in the imported history")
        prepared = [[self._prepare(message) for message in batch] for batch in batches]
        values = self._new_session_values(session_id, app_name, user_id, title, metadata)
        now = values["created_at"]
        sid = values["id"]

        def write_history(db: Connection) -> None:
            parent: int | None = None
            for sequence, items in enumerate(prepared):
                parent = self._start_loop(db, sid, parent, sequence, now).id
                self._insert_messages(db, sid, parent, items, now)

        await self._insert_session(values, write_history)
        return await self.get_session(sid)

    def _new_session_values(
        self,
        session_id: str | None,
        app_name: str | None,
        user_id: str | None,
        title: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        app_name, user_id = self._owner(app_name, user_id)
        if session_id is None:
            session_id = uuid.uuid4().hex
        elif not 0 < len(session_id) <= SESSION_ID_MAX_LENGTH:
            raise ValueError(f"session_id must be 1 to {SESSION_ID_MAX_LENGTH} characters")
        now = _now()
        return {
            "id": session_id,
            "app_name": app_name,
            "user_id": user_id,
            "title": title,
            "metadata": dict(metadata or {}),
            "active_loop_id": None,
            "version": 1,
            "loop_count": 0,
            "created_at": now,
            "updated_at": now,
        }

    async def _insert_session(
        self, values: Mapping[str, Any], then: Callable[[Connection], None]
    ) -> None:
        """Insert a session row, then run `then` in the same transaction."""

        def work(db: Connection) -> None:
            db.execute(insert(SESSIONS), values)
            then(db)

        try:
            await self._write(work)
        except StorageError as exc:
            cause = exc.__cause__
            # SQLite names the column (sessionstore_sessions.id), PostgreSQL the primary key.
            if isinstance(cause, IntegrityError) and "sessionstore_sessions" in str(cause):
                raise SessionExistsError(values["id"]) from cause
            raise

    def _owner(self, app_name: str | None, user_id: str | None) -> tuple[str, str]:
        if self._tenant is not None:
            if (app_name or self._tenant[0], user_id or self._tenant[1]) != self._tenant:
                raise ValueError("a tenant-scoped handle creates sessions for its own tenant only")
            return self._tenant
        if not app_name or not user_id:
            raise ValueError("app_name and user_id are required on an unscoped store")
        return app_name, user_id

    async def get_session(self, session_id: str) -> Session:
        """Return one session.

        Raises:
            SessionNotFoundError: no such session, or it belongs to another tenant.
        """
        row = await self._read(lambda db: self._visible_session(db, session_id))
        return _session_model(row._mapping)

    async def list_sessions(
        self,
        *,
        limit: int = 50,
        cursor: str | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> Page:
        """List sessions, newest first, one page at a time.

        A scoped handle lists its tenant's sessions; an unscoped one lists all, or those
        of `app_name` (and `user_id`) when given.

        Args:
            limit: Page size, 1 to 1000.
            cursor: The `next_cursor` of the previous page.
            app_name: Filter for an unscoped handle.
            user_id: Filter for an unscoped handle (with `app_name`).
        """
        if not 1 <= limit <= 1000:
            raise ValueError("limit must be between 1 and 1000")
        filters: list[Any] = list(_TENANT) if self._tenant is not None else []
        if self._tenant is None:
            if user_id is not None and app_name is None:
                raise ValueError("filtering by user_id needs app_name too")
            if app_name is not None:
                filters.append(S.app_name == app_name)
            if user_id is not None:
                filters.append(S.user_id == user_id)
        if cursor is not None:
            created_at, last_id = _decode_cursor(cursor)
            filters.append(
                or_(S.created_at < created_at, and_(S.created_at == created_at, S.id < last_id))
            )
        stmt = (
            select(SESSIONS)
            .where(*filters)
            .order_by(S.created_at.desc(), S.id.desc())
            .limit(limit + 1)
        )
        params = self._tenant_params()
        rows = await self._read(lambda db: db.execute(stmt, params).all())
        items = [_session_model(row._mapping) for row in rows[:limit]]
        next_cursor = _encode_cursor(items[-1]) if len(rows) > limit else None
        return Page(items=items, next_cursor=next_cursor)

    async def delete_session(self, session_id: str) -> None:
        """Delete a session with all its loops, messages and blocks.

        This is the only way raw messages ever go away (retention, erasure requests).

        Raises:
            SessionNotFoundError: no such session, or it belongs to another tenant.
        """

        def work(db: Connection) -> None:
            self._lock_session(db, session_id, _now())
            db.execute(SESSIONS.delete().where(S.id == session_id))

        await self._write(work)

    # ── loops ───────────────────────────────────────────────────────────────────

    async def start_loop(
        self,
        session_id: str,
        *,
        parent_loop_id: int | None = None,
        expected_version: int | None = None,
    ) -> LoopRecord:
        """Start a loop and make it the session's active loop.

        Without `parent_loop_id` the loop continues the active chain: its parent is the
        active loop (none for the first loop), which is closed. With `parent_loop_id` the
        loop starts a branch from that loop; the previously active loop stays open, and
        `switch_loop` can return to it.

        Raises:
            SessionNotFoundError: no such session (or another tenant's).
            LoopNotFoundError: `parent_loop_id` is not a loop of this session.
            StaleWriteError: `expected_version` is not the session's version.
        """
        now = _now()

        def work(db: Connection) -> LoopRecord:
            locked = self._lock_session(db, session_id, now)
            self._check_version(session_id, locked, expected_version)
            parent = parent_loop_id if parent_loop_id is not None else locked.active_loop_id
            return self._start_loop(db, session_id, parent, locked.loop_count, now)

        return await self._write(work)

    def _start_loop(
        self,
        db: Connection,
        session_id: str,
        parent_loop_id: int | None,
        sequence: int,
        now: datetime,
    ) -> LoopRecord:
        """Insert loop number `sequence` after `parent_loop_id` and make it the active loop.

        The parent is closed. The caller holds the session's lock (`_lock_session`).
        """
        depth = 0
        if parent_loop_id is not None:
            parent = self._loop_row(db, session_id, parent_loop_id)
            depth = parent.depth + 1
            if parent.closed_at is None:
                db.execute(
                    update(LOOPS)
                    .where(L.id == parent_loop_id, L.session_id == session_id)
                    .values(closed_at=now)
                )
        values: dict[str, Any] = {
            "session_id": session_id,
            "parent_loop_id": parent_loop_id,
            "sequence": sequence,
            "depth": depth,
            "created_at": now,
            "closed_at": None,
            "message_count": 0,
            "token_total": 0,
            "turn_count": 0,
            "open_tool_call_ids": [],
        }
        row = db.execute(insert(LOOPS).returning(*_LOOP_COLUMNS), values).one()
        db.execute(
            update(SESSIONS)
            .where(S.id == session_id)
            .values(active_loop_id=row.id, loop_count=sequence + 1)
        )
        return _loop_model(row)

    async def close_loop(self, session_id: str, loop_id: int) -> LoopRecord:
        """Close a loop: no more messages can be appended to it. Closing twice is harmless."""
        now = _now()

        def work(db: Connection) -> Row[Any]:
            self._lock_session(db, session_id, now)
            self._loop_row(db, session_id, loop_id)
            db.execute(
                update(LOOPS)
                .where(L.id == loop_id, L.session_id == session_id, L.closed_at.is_(None))
                .values(closed_at=now)
            )
            return self._loop_row(db, session_id, loop_id)

        return _loop_model(await self._write(work))

    async def switch_loop(
        self, session_id: str, loop_id: int, *, expected_version: int | None = None
    ) -> Session:
        """Make `loop_id` the session's active loop (for example to return to a branch)."""

        def work(db: Connection) -> Row[Any]:
            locked = self._lock_session(db, session_id, _now())
            self._check_version(session_id, locked, expected_version)
            self._loop_row(db, session_id, loop_id)
            db.execute(update(SESSIONS).where(S.id == session_id).values(active_loop_id=loop_id))
            return self._visible_session(db, session_id)

        return _session_model((await self._write(work))._mapping)

    async def get_loop(self, session_id: str, loop_id: int) -> LoopRecord:
        """Return one loop of a session."""

        def work(db: Connection) -> Row[Any]:
            self._visible_session(db, session_id)
            return self._loop_row(db, session_id, loop_id)

        return _loop_model(await self._read(work))

    async def list_loops(self, session_id: str) -> list[LoopRecord]:
        """Return every loop of a session (all branches), in order of creation."""
        stmt = select(*_LOOP_COLUMNS).where(L.session_id == session_id).order_by(L.sequence)

        def work(db: Connection) -> Sequence[Any]:
            self._visible_session(db, session_id)
            return db.execute(stmt).all()

        return [_loop_model(row) for row in await self._read(work)]

    async def active_chain(
        self, session_id: str, *, loop_id: int | None = None, limit: int | None = None
    ) -> list[LoopRecord]:
        """Return the chain of loops ending at `loop_id` (default: the active loop), root first.

        Args:
            session_id: The session.
            loop_id: The loop the chain ends at; the active loop by default.
            limit: Return only the last `limit` loops of the chain (the newest ones).
        """
        if limit is not None and limit < 1:
            raise ValueError("limit must be at least 1")

        def work(db: Connection) -> list[LoopRecord]:
            head = self._resolve_loop(db, session_id, loop_id)
            return [] if head is None else self._chain(db, session_id, head, limit)

        return await self._read(work)

    def _chain(
        self, db: Connection, session_id: str, head: int, limit: int | None
    ) -> list[LoopRecord]:
        chain = (
            select(L.id, L.parent_loop_id, literal(1).label("hops"))
            .where(L.id == head, L.session_id == session_id)
            .cte("chain", recursive=True)
        )
        parent = LOOPS.alias("parent")
        step = select(parent.c.id, parent.c.parent_loop_id, chain.c.hops + 1).where(
            parent.c.id == chain.c.parent_loop_id, parent.c.session_id == session_id
        )
        if limit is not None:
            step = step.where(chain.c.hops < limit)
        chain = chain.union_all(step)
        stmt = select(*_LOOP_COLUMNS).join(chain, chain.c.id == L.id).order_by(L.depth)
        return [_loop_model(row) for row in (db.execute(stmt)).all()]

    # ── messages ────────────────────────────────────────────────────────────────

    async def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        loop_id: int | None = None,
        expected_version: int | None = None,
    ) -> list[StoredMessage]:
        """Append messages to a loop in one transaction and return them as stored.

        Positions continue the loop's; turn indices follow the turn rules (see
        `sessionstore.turns.TurnAssigner`); token counts come from the store's counter.
        A message whose `client_id` is already stored with the same content is not
        written again: the stored one is returned in its place (a safe retry).

        Args:
            session_id: The session.
            messages: The messages, in order. Dicts are validated into messages.
            loop_id: The loop to append to; the active loop by default (a first loop is
                started when the session has none).
            expected_version: Fail with `StaleWriteError` unless the session is at this version.

        Raises:
            pydantic.ValidationError: a message is malformed (nothing is written).
            SessionNotFoundError: no such session (or another tenant's).
            LoopNotFoundError: `loop_id` is not a loop of this session.
            ConflictError: a `client_id` is stored with different content, or the loop is closed.
            StaleWriteError: `expected_version` is not the session's version.
        """
        batch = [_validated(message) for message in messages]
        if not batch:
            return []
        prepared = [self._prepare(message) for message in batch]
        hashes = [item[2] for item in prepared]
        now = _now()

        def work(db: Connection) -> list[StoredMessage]:
            locked = self._lock_session(db, session_id, now)
            known = self._known_client_ids(db, session_id, batch, hashes)
            # Write each message once: skip stored client ids and in-batch repeats.
            first_of: dict[str, int] = {}
            fresh = []
            for i, message in enumerate(batch):
                cid = message.client_id
                if cid is None or (cid not in known and first_of.setdefault(cid, i) == i):
                    fresh.append(i)
            if not fresh:
                # A pure retry: answer with what is stored and leave the version alone.
                raise _Rollback([known[m.client_id] for m in batch])  # type: ignore[index]  # all known
            self._check_version(session_id, locked, expected_version)
            target = loop_id if loop_id is not None else locked.active_loop_id
            if target is None:
                target = self._start_loop(db, session_id, None, locked.loop_count, now).id
            items = [prepared[i] for i in fresh]
            inserted = self._insert_messages(db, session_id, target, items, now)
            by_index = dict(zip(fresh, inserted, strict=True))
            for cid, i in first_of.items():
                known.setdefault(cid, by_index[i])
            return [
                by_index[i] if i in by_index else known[m.client_id]  # type: ignore[index]  # not written => known
                for i, m in enumerate(batch)
            ]

        try:
            return await self._write(work)
        except _Rollback as done:
            result: list[StoredMessage] = done.result
            return result

    def _prepare(self, message: Message) -> tuple[Message, dict[str, Any], str, int]:
        """Return what a message row needs: the message, payload, hash and token count."""
        payload = message_payload(message)
        return message, payload, content_hash(payload), self._counter.count_message(message)

    async def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        loop_id: int | None = None,
        expected_version: int | None = None,
    ) -> StoredMessage:
        """Append one message; see `append_messages`."""
        (stored,) = await self.append_messages(
            session_id, [message], loop_id=loop_id, expected_version=expected_version
        )
        return stored

    def _known_client_ids(
        self,
        db: Connection,
        session_id: str,
        batch: Sequence[Message],
        hashes: Sequence[str],
    ) -> dict[str, StoredMessage]:
        """Return the stored messages of the batch's client ids; refuse changed content."""
        wanted: dict[str, str] = {}
        for message, digest in zip(batch, hashes, strict=True):
            if message.client_id is None:
                continue
            if wanted.setdefault(message.client_id, digest) != digest:
                raise ConflictError(
                    f"client_id {message.client_id!r} is used twice in one batch "
                    "with different content"
                )
        if not wanted:
            return {}
        stmt = select(*_MESSAGE_COLUMNS).where(
            M.session_id == session_id, M.client_id.in_(list(wanted))
        )
        known = {row.client_id: _stored_model(row, session_id) for row in db.execute(stmt).all()}
        for client_id, stored in known.items():
            if stored.content_hash != wanted[client_id]:
                raise ConflictError(
                    f"client_id {client_id!r} is already stored with different content "
                    f"(message {stored.id}); a retry must send the same message"
                )
        return known

    def _insert_messages(
        self,
        db: Connection,
        session_id: str,
        loop_id: int,
        items: Sequence[tuple[Message, dict[str, Any], str, int]],
        now: datetime,
    ) -> list[StoredMessage]:
        loop = db.execute(_LOOP_STATE_STMT, {"lid": loop_id, "sid": session_id}).first()
        if loop is None:
            raise LoopNotFoundError(loop_id, session_id=session_id)
        if loop.closed_at is not None:
            raise ConflictError(
                f"loop {loop_id} is closed: append to the active loop or start a new one"
            )
        assigner = TurnAssigner(loop.turn_count, frozenset(loop.open_tool_call_ids))
        rows = []
        for offset, (message, payload, digest, token_count) in enumerate(items):
            is_tool = isinstance(message, ToolResultMessage)
            rows.append(
                {
                    "session_id": session_id,
                    "loop_id": loop_id,
                    "position": loop.message_count + offset,
                    "turn_index": assigner.assign(message),
                    "kind": message.kind,
                    "tool_call_id": message.tool_call_id if is_tool else None,  # type: ignore[union-attr]  # is_tool narrows it
                    "tool_name": message.tool_name if is_tool else None,  # type: ignore[union-attr]  # is_tool narrows it
                    "payload": payload,
                    "token_count": token_count,
                    "content_hash": digest,
                    "client_id": message.client_id,
                    "created_at": now,
                }
            )
        ids = self._insert_returning_ids(db, MessageRow, rows)
        db.execute(
            _LOOP_COUNTERS_STMT,
            {
                "lid": loop_id,
                "sid": session_id,
                "n": len(rows),
                "tokens": sum(row["token_count"] for row in rows),
                "turns": assigner.next_turn,
                "open_ids": sorted(assigner.open_call_ids),
            },
        )
        stored = [
            StoredMessage(
                id=message_id,
                session_id=session_id,
                loop_id=loop_id,
                position=row["position"],
                turn_index=row["turn_index"],
                token_count=row["token_count"],
                content_hash=row["content_hash"],
                created_at=now,
                message=item[0],
            )
            for message_id, row, item in zip(ids, rows, items, strict=True)
        ]
        return stored

    @staticmethod
    def _insert_returning_ids(
        db: Connection, row_class: type[Any], rows: Sequence[Mapping[str, Any]]
    ) -> list[int]:
        table = table_of(row_class)
        if len(rows) == 1:
            return [db.execute(_insert_stmt(table, False), rows[0]).scalar_one()]
        return list(db.execute(_insert_stmt(table, True), list(rows)).scalars())

    async def get_messages(
        self,
        session_id: str,
        loop_id: int | None = None,
        *,
        last: int | None = None,
    ) -> list[StoredMessage]:
        """Return a loop's messages in order (the active loop by default).

        Args:
            session_id: The session.
            loop_id: The loop; the active loop by default.
            last: Only the newest `last` messages (still returned oldest first).
        """
        if last is not None and last < 0:
            raise ValueError("last must not be negative")

        def work(db: Connection) -> list[StoredMessage]:
            target = self._resolve_loop(db, session_id, loop_id)
            if target is None or last == 0:
                return []
            stmt = select(*_MESSAGE_COLUMNS).where(M.session_id == session_id, M.loop_id == target)
            if last is None:
                rows = db.execute(stmt.order_by(M.position)).all()
            else:
                rows = db.execute(stmt.order_by(M.position.desc()).limit(last)).all()[::-1]
            return _stored_models(rows, session_id)

        return await self._read(work)

    async def get_turns(
        self, session_id: str, loop_id: int, turns: TurnRange
    ) -> list[StoredMessage]:
        """Return the messages of an inclusive turn range of a loop, in order.

        Raises:
            InvalidBlockError: the range ends past the loop's last turn.
        """

        def work(db: Connection) -> list[StoredMessage]:
            self._visible_session(db, session_id)
            loop = self._loop_row(db, session_id, loop_id)
            if turns.end_turn >= loop.turn_count:
                raise InvalidBlockError(
                    f"turn range {turns.start_turn}..{turns.end_turn} is out of bounds: "
                    f"loop {loop_id} has {loop.turn_count} turns"
                )
            stmt = (
                select(*_MESSAGE_COLUMNS)
                .where(
                    M.session_id == session_id,
                    M.loop_id == loop_id,
                    M.turn_index.between(turns.start_turn, turns.end_turn),
                )
                .order_by(M.position)
            )
            return _stored_models(db.execute(stmt).all(), session_id)

        return await self._read(work)

    async def get_turn_map(self, session_id: str, loop_id: int | None = None) -> TurnMap:
        """Return the loop's `TurnMap`: turn index → range of positions, from the index."""

        def work(db: Connection) -> TurnMap:
            target = self._resolve_loop(db, session_id, loop_id)
            if target is None:
                return TurnMap(())
            stmt = (
                select(func.min(M.position), func.max(M.position))
                .where(M.session_id == session_id, M.loop_id == target)
                .group_by(M.turn_index)
                .order_by(M.turn_index)
            )
            return TurnMap.from_bounds((first, last) for first, last in db.execute(stmt).all())

        return await self._read(work)

    async def get_history(
        self, session_id: str, *, loop_id: int | None = None
    ) -> list[StoredMessage]:
        """Return every raw message of the chain ending at `loop_id` (default: active), in order."""

        def work(db: Connection) -> list[StoredMessage]:
            head = self._resolve_loop(db, session_id, loop_id)
            if head is None:
                return []
            depth = {loop.id: loop.depth for loop in self._chain(db, session_id, head, None)}
            stmt = select(*_MESSAGE_COLUMNS).where(
                M.session_id == session_id, M.loop_id.in_(list(depth))
            )
            rows = sorted(db.execute(stmt).all(), key=lambda r: (depth[r.loop_id], r.position))
            return _stored_models(rows, session_id)

        return await self._read(work)

    async def get_messages_by_id(
        self, session_id: str, message_ids: Iterable[int]
    ) -> list[StoredMessage]:
        """Return the raw messages with these ids, in loop and position order."""
        ids = sorted(set(message_ids))
        wanted = set(ids)

        def work(db: Connection) -> list[StoredMessage]:
            self._visible_session(db, session_id)
            if not ids:
                return []
            stmt = (
                select(*_MESSAGE_COLUMNS)
                .where(M.session_id == session_id, M.id.between(ids[0], ids[-1]))
                .order_by(M.id)
            )
            rows = [row for row in db.execute(stmt).all() if row.id in wanted]
            return _stored_models(rows, session_id)

        return await self._read(work)

    # ── compaction blocks ───────────────────────────────────────────────────────

    async def write_block(
        self,
        session_id: str,
        loop_id: int,
        block: CompactionBlock,
        *,
        expected_version: int | None = None,
    ) -> CompactionBlock:
        """Write a compaction block for a loop, atomically, and return it as stored.

        The block becomes the loop's current block for its overlay name (generation
        = previous + 1); earlier generations stay for audit and time travel.

        Raises:
            InvalidBlockError: a turn range is out of the loop's bounds, ranges overlap,
                or a replacement message covers messages that are not in its section's
                turns of this loop.
            SessionNotFoundError: no such session (or another tenant's).
            LoopNotFoundError: `loop_id` is not a loop of this session.
            StaleWriteError: `expected_version` is not the session's version.
        """
        (written,) = await self.write_blocks(
            session_id, [(loop_id, block)], expected_version=expected_version
        )
        return written

    async def write_blocks(
        self,
        session_id: str,
        blocks: Sequence[tuple[int, CompactionBlock]],
        *,
        events: Sequence[Mapping[str, Any]] = (),
        expected_version: int | None = None,
    ) -> list[CompactionBlock]:
        """Write blocks for several loops and their compaction events in one transaction.

        Every block is validated before anything is written; if one is refused, none
        is written. An event is a mapping with the keys of `record_compaction_event`;
        an event whose `loop_id` gets a block here is linked to that block.

        Raises:
            The errors of `write_block`; `ValueError` for an event that is not
            `started` or `ended`, or the same loop and overlay twice.
        """
        keys = [(loop_id, block.overlay) for loop_id, block in blocks]
        if len(set(keys)) != len(keys):
            raise ValueError("write_blocks got the same loop and overlay twice")
        for event in events:
            if event.get("event") not in ("started", "ended"):
                raise ValueError("event must be 'started' or 'ended'")
        now = _now()

        def work(db: Connection) -> list[tuple[int, int, dict[str, CompactedSection]]]:
            locked = self._lock_session(db, session_id, now)
            self._check_version(session_id, locked, expected_version)
            for loop_id, block in blocks:
                loop = self._loop_row(db, session_id, loop_id)
                self._validate_block(db, session_id, loop_id, loop.turn_count, block)
            written = [self._insert_block(db, session_id, lid, b, now) for lid, b in blocks]
            block_of: dict[Any, int] = {
                loop_id: w[0] for (loop_id, _), w in zip(blocks, written, strict=True)
            }
            rows = [
                {
                    "session_id": session_id,
                    "loop_id": event.get("loop_id"),
                    "block_id": event.get("block_id") or block_of.get(event.get("loop_id")),
                    "event": event["event"],
                    "tokens_before": event.get("tokens_before", 0),
                    "tokens_after": event.get("tokens_after"),
                    "duration_ms": event.get("duration_ms"),
                    "details": dict(event.get("details") or {}),
                    "created_at": now,
                }
                for event in events
            ]
            if rows:
                self._insert_returning_ids(db, CompactionEventRow, rows)
            return written

        written = await self._write(work)
        return [
            block.model_copy(
                update={
                    "id": block_id,
                    "session_id": session_id,
                    "loop_id": loop_id,
                    "generation": generation,
                    "created_at": now,
                    "keep_compacted": sections.get("compacted"),
                    "keep_recent": sections.get("recent"),
                }
            )
            for (loop_id, block), (block_id, generation, sections) in zip(
                blocks, written, strict=True
            )
        ]

    def _insert_block(
        self, db: Connection, session_id: str, loop_id: int, block: CompactionBlock, now: datetime
    ) -> tuple[int, int, dict[str, CompactedSection]]:
        stmt = select(func.max(B.generation)).where(
            B.session_id == session_id, B.loop_id == loop_id, B.overlay == block.overlay
        )
        generation = ((db.execute(stmt)).scalar() or 0) + 1
        block_values = {
            "session_id": session_id,
            "loop_id": loop_id,
            "overlay": block.overlay,
            "generation": generation,
            "keep_first_start": block.keep_first.start_turn if block.keep_first else None,
            "keep_first_end": block.keep_first.end_turn if block.keep_first else None,
            "strategy": block.strategy,
            "config": block.config,
            "tokens_before": block.tokens_before,
            "tokens_after": block.tokens_after,
            "created_at": now,
        }
        (block_id,) = self._insert_returning_ids(db, BlockRow, [block_values])
        sections: dict[str, CompactedSection] = {}
        for kind, section in block.sections():
            (section_id,) = self._insert_returning_ids(
                db,
                SectionRow,
                [
                    {
                        "session_id": session_id,
                        "block_id": block_id,
                        "kind": kind,
                        "start_turn": section.range.start_turn,
                        "end_turn": section.range.end_turn,
                    }
                ],
            )
            sections[kind] = self._insert_section_messages(db, session_id, section_id, section)
        return block_id, generation, sections

    def _insert_section_messages(
        self, db: Connection, session_id: str, section_id: int, section: CompactedSection
    ) -> CompactedSection:
        if not section.messages:
            return section
        rows = []
        for position, replacement in enumerate(section.messages):
            token_count = replacement.token_count
            if token_count is None:
                token_count = self._counter.count_message(replacement.message)
            rows.append(
                {
                    "session_id": session_id,
                    "section_id": section_id,
                    "position": position,
                    "kind": replacement.message.kind,
                    "payload": replacement.message.model_dump(mode="json"),
                    "token_count": token_count,
                    "covers": sorted(set(replacement.covers)),
                }
            )
        ids = self._insert_returning_ids(db, SectionMessageRow, rows)
        stored = [
            ReplacementMessage(
                message=replacement.message,
                covers=row["covers"],
                token_count=row["token_count"],
                id=message_id,
            )
            for replacement, row, message_id in zip(section.messages, rows, ids, strict=True)
        ]
        return section.model_copy(update={"messages": stored})

    def _validate_block(
        self,
        db: Connection,
        session_id: str,
        loop_id: int,
        turn_count: int,
        block: CompactionBlock,
    ) -> None:
        ranges = [("keep_first", block.keep_first)] + [
            (f"keep_{kind}", section.range) for kind, section in block.sections()
        ]
        for name, turns in ranges:
            if turns is not None and turns.end_turn >= turn_count:
                raise InvalidBlockError(
                    f"{name} turn range {turns.start_turn}..{turns.end_turn} is out of bounds: "
                    f"loop {loop_id} has {turn_count} turns"
                )
        present = sorted(
            ((turns, name) for name, turns in ranges if turns is not None),
            key=lambda pair: pair[0].start_turn,
        )
        for (before, first), (after, second) in pairwise(present):
            if after.start_turn <= before.end_turn:
                raise InvalidBlockError(
                    f"{first} ({before.start_turn}..{before.end_turn}) and {second} "
                    f"({after.start_turn}..{after.end_turn}) overlap: a turn is shown once"
                )
        covered = {i for _, s in block.sections() for r in s.messages for i in r.covers}
        if not covered:
            return
        stmt = select(M.id, M.turn_index).where(
            M.session_id == session_id,
            M.loop_id == loop_id,
            M.id.between(min(covered), max(covered)),
        )
        turn_of = {row.id: row.turn_index for row in (db.execute(stmt)).all()}
        foreign = sorted(covered - turn_of.keys())
        if foreign:
            shown = ", ".join(map(str, foreign[:10])) + (" ..." if len(foreign) > 10 else "")
            raise InvalidBlockError(
                f"the block's provenance names messages that are not in loop {loop_id}: {shown}"
            )
        for kind, section in block.sections():
            for replacement in section.messages:
                outside = [i for i in replacement.covers if turn_of[i] not in section.range]
                if outside:
                    raise InvalidBlockError(
                        f"a keep_{kind} replacement covers messages {outside[:10]} outside its "
                        f"turn range {section.range.start_turn}..{section.range.end_turn}"
                    )

    async def get_block(
        self,
        session_id: str,
        loop_id: int,
        *,
        overlay: str = "default",
        generation: int | None = None,
        as_of: datetime | None = None,
    ) -> CompactionBlock | None:
        """Return the loop's current block for `overlay`, or None if it has none.

        Args:
            session_id: The session.
            loop_id: The loop.
            overlay: The overlay name.
            generation: Return this generation instead of the newest.
            as_of: Return the newest block written at or before this time.
        """
        _check_aware(as_of)
        stmt = select(BlockRow).where(
            B.session_id == session_id, B.loop_id == loop_id, B.overlay == overlay
        )
        if generation is not None:
            stmt = stmt.where(B.generation == generation)
        if as_of is not None:
            stmt = stmt.where(B.created_at <= as_of)

        def work(db: Connection) -> CompactionBlock | None:
            self._visible_session(db, session_id)
            self._loop_row(db, session_id, loop_id)
            row = db.execute(stmt.order_by(B.generation.desc()).limit(1)).first()
            return None if row is None else self._load_blocks(db, session_id, [row])[0]

        return await self._read(work)

    async def block_history(
        self, session_id: str, loop_id: int, *, overlay: str | None = None
    ) -> list[CompactionBlock]:
        """Return every block of a loop (of one overlay, or all), oldest first."""
        stmt = select(BlockRow).where(B.session_id == session_id, B.loop_id == loop_id)
        if overlay is not None:
            stmt = stmt.where(B.overlay == overlay)

        def work(db: Connection) -> list[CompactionBlock]:
            self._visible_session(db, session_id)
            self._loop_row(db, session_id, loop_id)
            return self._load_blocks(db, session_id, db.execute(stmt.order_by(B.id)).all())

        return await self._read(work)

    async def get_replacement_message(
        self, session_id: str, replacement_id: int
    ) -> ReplacementMessage:
        """Return one replacement message of a block of this session, by id.

        Raises:
            BlockNotFoundError: no replacement message with this id in the session.
        """
        stmt = select(SM.id, SM.payload, SM.token_count, SM.covers).where(
            SM.session_id == session_id, SM.id == replacement_id
        )

        def work(db: Connection) -> Any:
            self._visible_session(db, session_id)
            return db.execute(stmt).first()

        row = await self._read(work)
        if row is None:
            raise BlockNotFoundError(
                f"session {session_id!r} has no replacement message {replacement_id}"
            )
        return ReplacementMessage(
            message=MESSAGE_ADAPTER.validate_python(row.payload),
            covers=row.covers,
            token_count=row.token_count,
            id=row.id,
        )

    async def chain_blocks(
        self,
        session_id: str,
        *,
        loop_id: int | None = None,
        overlay: str = "default",
        as_of: datetime | None = None,
        limit: int | None = None,
    ) -> list[tuple[LoopRecord, CompactionBlock | None]]:
        """Return the chain ending at `loop_id` (default: active), root first, with blocks.

        Each loop comes with its current block for `overlay` (None when it has none).

        Args:
            session_id: The session.
            loop_id: The loop the chain ends at; the active loop by default.
            overlay: The overlay name.
            as_of: Only loops and blocks created at or before this time.
            limit: Only the newest `limit` loops of the chain.
        """
        if limit is not None and limit < 1:
            raise ValueError("limit must be at least 1")
        _check_aware(as_of)

        def work(db: Connection) -> list[tuple[LoopRecord, CompactionBlock | None]]:
            head = self._resolve_loop(db, session_id, loop_id)
            if head is None:
                return []
            chain, _ = self._chain_as_of(db, session_id, head, limit, as_of)
            blocks = self._current_blocks(db, session_id, chain, overlay, as_of, messages=True)
            return [(loop, blocks.get(loop.id)) for loop in chain]

        return await self._read(work)

    async def read_context(
        self,
        session_id: str,
        *,
        choose_scope: Callable[[Sequence[tuple[LoopRecord, CompactionBlock | None]]], int],
        window: int,
        loop_id: int | None = None,
        overlay: str = "default",
        as_of: datetime | int | None = None,
    ) -> ContextSources:
        """Read, in one transaction, what the loader needs to build a loop's context.

        The chain ending at `loop_id` is read newest first, `window` loops at a time;
        `choose_scope` gets `(loop, current block header)` pairs, newest first (the
        sections' ranges without their messages), and returns how many loops before the
        newest take part. Only the loops in scope are read further: their blocks'
        replacement messages and the raw messages of the turns their blocks do not
        replace. The latest raw user message of the chain is found through an index.

        Args:
            session_id: The session.
            choose_scope: Picks the number of earlier loops in scope (see above).
            window: How many loops of the chain to read at first.
            loop_id: The loop whose context it is; the active loop by default.
            overlay: The overlay name.
            as_of: A time, or a generation of the newest loop's block for `overlay`
                (read as the time that block was written): rebuild what the loader
                saw then; loops, messages and blocks written later are left out.

        Raises:
            BlockNotFoundError: `as_of` is a generation the newest loop does not have.
        """
        if window < 1:
            raise ValueError("window must be at least 1")
        if isinstance(as_of, datetime):
            _check_aware(as_of)

        def work(db: Connection) -> ContextSources:
            head = self._resolve_loop(db, session_id, loop_id)
            if head is None:
                return ContextSources([], None, None)
            moment = self._as_of_time(db, session_id, head, overlay, as_of)
            size = window
            while True:
                chain, complete = self._chain_as_of(db, session_id, head, size, moment)
                if not chain:
                    return ContextSources([], None, moment)
                headers = self._current_blocks(
                    db, session_id, chain, overlay, moment, messages=False
                )
                newest_first = [(loop, headers.get(loop.id)) for loop in reversed(chain)]
                earlier = choose_scope(newest_first)
                if not 0 <= earlier < len(chain):
                    raise ValueError(f"choose_scope returned {earlier} for {len(chain)} loops")
                if earlier < len(chain) - 1 or complete:
                    break
                size *= 4
            scope = chain[len(chain) - earlier - 1 :]
            blocks = self._current_blocks(db, session_id, scope, overlay, moment, messages=True)
            sources = []
            for loop in scope:
                block = blocks.get(loop.id)
                raw: list[Row[Any]] = []
                for turns, kind in segments(loop.turn_count, block):
                    if kind == "raw":
                        raw.extend(self._raw_turns(db, session_id, loop.id, turns, moment))
                sources.append(LoopSource(loop, block, _stored_models(raw, session_id)))
            newest = [loop.id for loop in reversed(chain)]
            latest = self._latest_user(db, session_id, newest, moment)
            if latest is None and not complete:
                full, _ = self._chain_as_of(db, session_id, head, None, moment)
                known = {loop.id for loop in chain}
                older = [loop.id for loop in reversed(full) if loop.id not in known]
                latest = self._latest_user(db, session_id, older, moment)
            return ContextSources(sources, latest, moment)

        return await self._read(work)

    def _as_of_time(
        self,
        db: Connection,
        session_id: str,
        head: int,
        overlay: str,
        as_of: datetime | int | None,
    ) -> datetime | None:
        if as_of is None or isinstance(as_of, datetime):
            return as_of
        row = db.execute(
            select(B.created_at).where(
                B.session_id == session_id,
                B.loop_id == head,
                B.overlay == overlay,
                B.generation == as_of,
            )
        ).first()
        if row is None:
            raise BlockNotFoundError(
                f"loop {head} has no generation {as_of} of overlay {overlay!r}"
            )
        return row.created_at  # type: ignore[no-any-return]

    def _chain_as_of(
        self,
        db: Connection,
        session_id: str,
        head: int,
        limit: int | None,
        as_of: datetime | None,
    ) -> tuple[list[LoopRecord], bool]:
        """Return the newest `limit` loops of the chain (root first) and whether that is all.

        With `as_of`, loops created later are skipped, so the chain ends at the newest
        ancestor of `head` that existed then.
        """
        fetch = None if limit is None else limit + 1
        while True:
            chain = self._chain(db, session_id, head, fetch)
            complete = fetch is None or len(chain) < fetch or chain[0].parent_loop_id is None
            if as_of is not None:
                chain = [loop for loop in chain if loop.created_at <= as_of]
            if limit is None or len(chain) > limit or complete:
                break
            fetch = None if fetch is None else fetch * 4
        complete = not (limit is not None and len(chain) > limit)
        if not complete:
            chain = chain[len(chain) - (limit or 0) :]
        if as_of is not None:
            chain = self._loops_as_of(db, session_id, chain, as_of)
        return chain, complete

    def _loops_as_of(
        self, db: Connection, session_id: str, loops: list[LoopRecord], as_of: datetime
    ) -> list[LoopRecord]:
        """Return the loops with their cached counters as they were at `as_of`."""
        if not loops:
            return loops
        stmt = (
            select(
                M.loop_id,
                func.count(),
                func.coalesce(func.sum(M.token_count), 0),
                func.max(M.turn_index),
            )
            .where(
                M.session_id == session_id,
                M.loop_id.in_([loop.id for loop in loops]),
                M.created_at <= as_of,
            )
            .group_by(M.loop_id)
        )
        stats = {row[0]: row[1:] for row in db.execute(stmt).all()}
        result = []
        for loop in loops:
            count, tokens, last_turn = stats.get(loop.id, (0, 0, None))
            closed = loop.closed_at if loop.closed_at and loop.closed_at <= as_of else None
            update = {
                "message_count": count,
                "token_total": int(tokens),
                "turn_count": 0 if last_turn is None else last_turn + 1,
                "closed_at": closed,
            }
            result.append(loop.model_copy(update=update))
        return result

    def _current_blocks(
        self,
        db: Connection,
        session_id: str,
        loops: Sequence[LoopRecord],
        overlay: str,
        as_of: datetime | None,
        *,
        messages: bool,
    ) -> dict[int, CompactionBlock]:
        """Return the newest block of each loop for `overlay` (written by `as_of`)."""
        if not loops:
            return {}
        stmt = select(BlockRow).where(
            B.session_id == session_id,
            B.loop_id.in_([loop.id for loop in loops]),
            B.overlay == overlay,
        )
        if as_of is not None:
            stmt = stmt.where(B.created_at <= as_of)
        newest: dict[int, Row[Any]] = {}
        for row in db.execute(stmt).all():
            if row.loop_id not in newest or row.generation > newest[row.loop_id].generation:
                newest[row.loop_id] = row
        blocks = self._load_blocks(db, session_id, list(newest.values()), messages=messages)
        return {block.loop_id: block for block in blocks if block.loop_id is not None}

    def _raw_turns(
        self,
        db: Connection,
        session_id: str,
        loop_id: int,
        turns: TurnRange,
        as_of: datetime | None,
    ) -> list[Row[Any]]:
        params = {"sid": session_id, "lid": loop_id, "a": turns.start_turn, "b": turns.end_turn}
        if as_of is None:
            return list(db.execute(_RAW_TURNS_STMT, params).all())
        return list(db.execute(_RAW_TURNS_AS_OF_STMT, {**params, "t": as_of}).all())

    def _latest_user(
        self,
        db: Connection,
        session_id: str,
        loop_ids: Sequence[int],
        as_of: datetime | None,
    ) -> StoredMessage | None:
        """Return the newest raw user message of these loops (newest loop first)."""
        for loop_id in loop_ids:
            params: dict[str, Any] = {"sid": session_id, "lid": loop_id}
            if as_of is None:
                row = db.execute(_LATEST_USER_STMT, params).first()
            else:
                row = db.execute(_LATEST_USER_AS_OF_STMT, {**params, "t": as_of}).first()
            if row is not None:
                return _stored_model(row, session_id)
        return None

    def _load_blocks(
        self,
        db: Connection,
        session_id: str,
        rows: Sequence[Row[Any]],
        *,
        messages: bool = True,
    ) -> list[CompactionBlock]:
        if not rows:
            return []
        block_ids = [row.id for row in rows]
        sections = (
            db.execute(
                select(SectionRow).where(SEC.session_id == session_id, SEC.block_id.in_(block_ids))
            )
        ).all()
        replacements: dict[int, list[ReplacementMessage]] = {s.id: [] for s in sections}
        if sections and messages:
            stmt = (
                select(SM.id, SM.section_id, SM.payload, SM.token_count, SM.covers)
                .where(SM.session_id == session_id, SM.section_id.in_(list(replacements)))
                .order_by(SM.section_id, SM.position)
            )
            for m in (db.execute(stmt)).all():
                replacements[m.section_id].append(
                    ReplacementMessage(
                        message=MESSAGE_ADAPTER.validate_python(m.payload),
                        covers=m.covers,
                        token_count=m.token_count,
                        id=m.id,
                    )
                )
        by_block: dict[int, dict[str, CompactedSection]] = {}
        for s in sections:
            by_block.setdefault(s.block_id, {})[s.kind] = CompactedSection(
                range=TurnRange(start_turn=s.start_turn, end_turn=s.end_turn),
                messages=replacements[s.id],
            )
        blocks = []
        for row in rows:
            found = by_block.get(row.id, {})
            keep_first = None
            if row.keep_first_start is not None:
                keep_first = TurnRange(start_turn=row.keep_first_start, end_turn=row.keep_first_end)
            blocks.append(
                CompactionBlock(
                    id=row.id,
                    session_id=row.session_id,
                    loop_id=row.loop_id,
                    overlay=row.overlay,
                    generation=row.generation,
                    keep_first=keep_first,
                    keep_compacted=found.get("compacted"),
                    keep_recent=found.get("recent"),
                    strategy=row.strategy,
                    config=row.config,
                    tokens_before=row.tokens_before,
                    tokens_after=row.tokens_after,
                    created_at=row.created_at,
                )
            )
        return blocks

    # ── compaction events ───────────────────────────────────────────────────────

    async def record_compaction_event(
        self,
        session_id: str,
        *,
        event: str,
        tokens_before: int,
        loop_id: int | None = None,
        block_id: int | None = None,
        tokens_after: int | None = None,
        duration_ms: float | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> CompactionEvent:
        """Persist a `started` or `ended` compaction event of a session."""
        if event not in ("started", "ended"):
            raise ValueError("event must be 'started' or 'ended'")
        now = _now()
        values = {
            "session_id": session_id,
            "loop_id": loop_id,
            "block_id": block_id,
            "event": event,
            "tokens_before": tokens_before,
            "tokens_after": tokens_after,
            "duration_ms": duration_ms,
            "details": dict(details or {}),
            "created_at": now,
        }

        def work(db: Connection) -> list[int]:
            self._lock_session(db, session_id, now)
            if loop_id is not None:
                self._loop_row(db, session_id, loop_id)
            return self._insert_returning_ids(db, CompactionEventRow, [values])

        (event_id,) = await self._write(work)
        return CompactionEvent.model_validate({**values, "id": event_id})

    async def list_compaction_events(self, session_id: str) -> list[CompactionEvent]:
        """Return a session's compaction events, oldest first."""
        stmt = select(CompactionEventRow).where(EV.session_id == session_id).order_by(EV.id)

        def work(db: Connection) -> Sequence[Row[Any]]:
            self._visible_session(db, session_id)
            return db.execute(stmt).all()

        rows = await self._read(work)
        return [CompactionEvent.model_validate(dict(row._mapping)) for row in rows]


# ── row ↔ model ────────────────────────────────────────────────────────────────


def _validated(message: Any) -> Message:
    if isinstance(message, Mapping):
        return MESSAGE_ADAPTER.validate_python(message)
    if not hasattr(message, "kind") or not hasattr(message, "client_id"):
        raise TypeError(f"not a message: {type(message).__name__}")
    return message  # type: ignore[no-any-return]  # a model of the Message union


def _session_model(values: Any) -> Session:
    return Session(
        id=values["id"],
        app_name=values["app_name"],
        user_id=values["user_id"],
        title=values["title"],
        metadata=values["metadata"],
        active_loop_id=values["active_loop_id"],
        loop_count=values["loop_count"],
        version=values["version"],
        created_at=values["created_at"],
        updated_at=values["updated_at"],
    )


def _loop_model(row: Any) -> LoopRecord:
    return LoopRecord(
        id=row.id,
        session_id=row.session_id,
        parent_loop_id=row.parent_loop_id,
        sequence=row.sequence,
        depth=row.depth,
        created_at=row.created_at,
        closed_at=row.closed_at,
        message_count=row.message_count,
        token_total=row.token_total,
        turn_count=row.turn_count,
    )


def _stored_model(row: Sequence[Any], session_id: str) -> StoredMessage:
    # Positional unpacking, in _MESSAGE_COLUMNS order: faster than attribute access.
    message_id, loop_id, position, turn_index, tokens, digest, client_id, created_at, payload = row
    message = MESSAGE_ADAPTER.validate_json(payload)
    if client_id is not None:
        message = message.model_copy(update={"client_id": client_id})
    return StoredMessage(
        id=message_id,
        session_id=session_id,
        loop_id=loop_id,
        position=position,
        turn_index=turn_index,
        token_count=tokens,
        content_hash=digest,
        created_at=created_at,
        message=message,
    )


def _stored_models(rows: Iterable[Sequence[Any]], session_id: str) -> list[StoredMessage]:
    # Building thousands of models triggers many cyclic-GC passes over objects that
    # can never form a cycle; pausing the collector for the loop halves the cost.
    paused = gc.isenabled()
    gc.disable()
    try:
        return [_stored_model(row, session_id) for row in rows]
    finally:
        if paused:
            gc.enable()


def _encode_cursor(session: Session) -> str:
    raw = json.dumps([session.created_at.isoformat(), session.id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created_at, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return datetime.fromisoformat(created_at), str(session_id)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ValueError(
            f"invalid cursor {cursor!r}: pass a next_cursor from list_sessions"
        ) from exc
