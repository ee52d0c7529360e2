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

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Self, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from sessionstore._overlay import ContextSources
from sessionstore._scope import ChainEntry
from sessionstore._tokens import HeuristicTokenCounter, TokenCounter
from sessionstore._turns import TurnMap
from sessionstore.config import CompactionScope
from sessionstore.errors import BlockNotFoundError, ConflictError
from sessionstore.models import (
    CompactionBlock,
    CompactionEnded,
    CompactionEvent,
    CompactionStarted,
    LoopRecord,
    Message,
    Page,
    ReplacementMessage,
    Session,
    StoredMessage,
    TurnRange,
)
from sessionstore.store import _blocks, _messages, _reads, _sessions
from sessionstore.store import _statements as sql
from sessionstore.store._engine import DEFAULT_URL, TransactionRunner, make_engine
from sessionstore.store._schema import check, upgrade
from sessionstore.store._sessions import Tenant, now
from sessionstore.store._tables import loop_model, session_model

__all__ = ["SessionStore"]

_T = TypeVar("_T")


class _Rollback(Exception):
    """Ends a write transaction without writing, carrying the call's result."""

    def __init__(self, result: Any) -> None:
        self.result = result


def _check_aware(moment: datetime | None) -> None:
    if moment is not None and moment.tzinfo is None:
        raise ValueError("as_of must be an aware datetime")


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise ValueError("limit must be at least 1")


def _check_event_kind(event: object) -> None:
    if event not in _blocks.EVENT_KINDS:
        raise ValueError("event must be 'started' or 'ended'")


class SessionStore:
    """The async store: sessions, their loops, messages and compaction blocks.

    Build it with `SessionStore.from_url(url)` (it then owns and disposes its engine) or
    `SessionStore(engine)` (the caller keeps the engine). `for_tenant(app_name, user_id)`
    returns a handle that sees only that tenant's sessions and shares the engine.

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
        _tenant: Tenant | None = None,
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
        return None if self._tenant is None else (self._tenant.app_name, self._tenant.user_id)

    def for_tenant(self, app_name: str, user_id: str) -> SessionStore:
        """Return a handle that sees only the sessions of one tenant, sharing this engine."""
        if not app_name or not user_id:
            raise ValueError("app_name and user_id must be non-empty")
        return SessionStore(
            self._engine,
            token_counter=self._counter,
            _tenant=Tenant(app_name, user_id),
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
        await upgrade(self._engine)

    async def check_schema(self) -> str:
        """Return the schema revision; raise `SchemaError` if it is not the newest."""
        return await check(self._engine)

    async def _read(self, work: Callable[[Connection], _T]) -> _T:
        return await self._runner.run(work)

    async def _write(self, work: Callable[[Connection], _T]) -> _T:
        return await self._runner.run(work, write=True)

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
        values = _sessions.new_session_values(
            self._tenant,
            session_id=session_id,
            app_name=app_name,
            user_id=user_id,
            title=title,
            metadata=metadata,
        )
        await self._write(lambda db: _sessions.insert_session(db, values))
        return session_model(values)

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
        batches = [[_messages.validated(message) for message in loop] for loop in loops]
        client_ids = [m.client_id for batch in batches for m in batch if m.client_id]
        if len(client_ids) != len(set(client_ids)):
            raise ConflictError("a client_id appears twice in the imported history")
        prepared = [[_messages.prepare(m, self._counter) for m in batch] for batch in batches]
        values = _sessions.new_session_values(
            self._tenant,
            session_id=session_id,
            app_name=app_name,
            user_id=user_id,
            title=title,
            metadata=metadata,
        )
        moment, sid = values["created_at"], values["id"]

        def work(db: Connection) -> Session:
            _sessions.insert_session(db, values)
            parent: int | None = None
            for sequence, items in enumerate(prepared):
                parent = _sessions.start_loop(db, sid, parent, sequence, moment).id
                _messages.insert_messages(db, sid, parent, items, moment)
            return session_model(_sessions.visible_session(db, self._tenant, sid)._mapping)

        return await self._write(work)

    async def get_session(self, session_id: str) -> Session:
        """Return one session.

        Raises:
            SessionNotFoundError: no such session, or it belongs to another tenant.
        """
        row = await self._read(lambda db: _sessions.visible_session(db, self._tenant, session_id))
        return session_model(row._mapping)

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
        if self._tenant is None and user_id is not None and app_name is None:
            raise ValueError("filtering by user_id needs app_name too")
        return await self._read(
            lambda db: _sessions.list_sessions(
                db, self._tenant, limit=limit, cursor=cursor, app_name=app_name, user_id=user_id
            )
        )

    async def delete_session(self, session_id: str) -> None:
        """Delete a session with all its loops, messages and blocks.

        This is the only way raw messages ever go away (retention, erasure requests).

        Raises:
            SessionNotFoundError: no such session, or it belongs to another tenant.
        """
        await self._write(lambda db: _sessions.delete_session(db, self._tenant, session_id))

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
        moment = now()

        def work(db: Connection) -> LoopRecord:
            locked = _sessions.lock(db, self._tenant, session_id, moment)
            _sessions.check_version(session_id, locked, expected_version)
            parent = parent_loop_id if parent_loop_id is not None else locked.active_loop_id
            return _sessions.start_loop(db, session_id, parent, locked.loop_count, moment)

        return await self._write(work)

    async def close_loop(self, session_id: str, loop_id: int) -> LoopRecord:
        """Close a loop: no more messages can be appended to it. Closing twice is harmless."""
        moment = now()

        def work(db: Connection) -> LoopRecord:
            _sessions.lock(db, self._tenant, session_id, moment)
            return loop_model(_sessions.close_loop(db, session_id, loop_id, moment))

        return await self._write(work)

    async def switch_loop(
        self, session_id: str, loop_id: int, *, expected_version: int | None = None
    ) -> Session:
        """Make `loop_id` the session's active loop (for example to return to a branch)."""

        def work(db: Connection) -> Session:
            locked = _sessions.lock(db, self._tenant, session_id, now())
            _sessions.check_version(session_id, locked, expected_version)
            _sessions.switch_loop(db, session_id, loop_id)
            return session_model(_sessions.visible_session(db, self._tenant, session_id)._mapping)

        return await self._write(work)

    async def get_loop(self, session_id: str, loop_id: int) -> LoopRecord:
        """Return one loop of a session."""

        def work(db: Connection) -> LoopRecord:
            _sessions.visible_session(db, self._tenant, session_id)
            return loop_model(_sessions.loop_row(db, session_id, loop_id))

        return await self._read(work)

    async def list_loops(self, session_id: str) -> list[LoopRecord]:
        """Return every loop of a session (all branches), in order of creation."""

        def work(db: Connection) -> list[LoopRecord]:
            _sessions.visible_session(db, self._tenant, session_id)
            return _sessions.list_loops(db, session_id)

        return await self._read(work)

    async def active_chain(
        self, session_id: str, *, loop_id: int | None = None, limit: int | None = None
    ) -> list[LoopRecord]:
        """Return the chain of loops ending at `loop_id` (default: the active loop), root first.

        Args:
            session_id: The session.
            loop_id: The loop the chain ends at; the active loop by default.
            limit: Return only the last `limit` loops of the chain (the newest ones).
        """
        _check_limit(limit)

        def work(db: Connection) -> list[LoopRecord]:
            head = _sessions.resolve_loop(db, self._tenant, session_id, loop_id)
            return [] if head is None else _sessions.chain(db, session_id, head, limit)

        return await self._read(work)

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
        `TurnMap`); token counts come from the store's counter. A message whose
        `client_id` is already stored with the same content is not written again: the
        stored one is returned in its place (a safe retry).

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
        batch = [_messages.prepare(_messages.validated(m), self._counter) for m in messages]
        if not batch:
            return []
        moment = now()

        def work(db: Connection) -> list[StoredMessage]:
            locked = _sessions.lock(db, self._tenant, session_id, moment)
            known = _messages.known_client_ids(db, session_id, batch)
            # Write each message once: skip stored client ids and in-batch repeats.
            first_of: dict[str, int] = {}
            fresh = []
            for i, item in enumerate(batch):
                cid = item.message.client_id
                if cid is None or (cid not in known and first_of.setdefault(cid, i) == i):
                    fresh.append(i)
            if not fresh:
                # A pure retry: answer with what is stored and leave the version alone.
                raise _Rollback([known[item.message.client_id] for item in batch])  # type: ignore[index]  # all known
            _sessions.check_version(session_id, locked, expected_version)
            target = loop_id if loop_id is not None else locked.active_loop_id
            if target is None:
                target = _sessions.start_loop(db, session_id, None, locked.loop_count, moment).id
            inserted = _messages.insert_messages(
                db, session_id, target, [batch[i] for i in fresh], moment
            )
            by_index = dict(zip(fresh, inserted, strict=True))
            for cid, i in first_of.items():
                known.setdefault(cid, by_index[i])
            return [
                by_index[i] if i in by_index else known[item.message.client_id]  # type: ignore[index]  # not written => known
                for i, item in enumerate(batch)
            ]

        try:
            return await self._write(work)
        except _Rollback as done:
            result: list[StoredMessage] = done.result
            return result

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
            target = _sessions.resolve_loop(db, self._tenant, session_id, loop_id)
            if target is None or last == 0:
                return []
            return _messages.loop_messages(db, session_id, target, last)

        return await self._read(work)

    async def get_turns(
        self, session_id: str, loop_id: int, turns: TurnRange
    ) -> list[StoredMessage]:
        """Return the messages of an inclusive turn range of a loop, in order.

        Raises:
            InvalidBlockError: the range ends past the loop's last turn.
        """

        def work(db: Connection) -> list[StoredMessage]:
            _sessions.visible_session(db, self._tenant, session_id)
            return _messages.turns(db, session_id, loop_id, turns)

        return await self._read(work)

    async def get_turn_map(self, session_id: str, loop_id: int | None = None) -> TurnMap:
        """Return the loop's `TurnMap`: turn index → range of positions, from the index."""

        def work(db: Connection) -> TurnMap:
            target = _sessions.resolve_loop(db, self._tenant, session_id, loop_id)
            return TurnMap(()) if target is None else _messages.turn_map(db, session_id, target)

        return await self._read(work)

    async def get_history(
        self, session_id: str, *, loop_id: int | None = None
    ) -> list[StoredMessage]:
        """Return every raw message of the chain ending at `loop_id` (default: active), in order."""

        def work(db: Connection) -> list[StoredMessage]:
            head = _sessions.resolve_loop(db, self._tenant, session_id, loop_id)
            return [] if head is None else _messages.history(db, session_id, head)

        return await self._read(work)

    async def get_messages_by_id(
        self, session_id: str, message_ids: Iterable[int]
    ) -> list[StoredMessage]:
        """Return the raw messages with these ids, in loop and position order."""
        ids = list(message_ids)

        def work(db: Connection) -> list[StoredMessage]:
            _sessions.visible_session(db, self._tenant, session_id)
            return _messages.by_id(db, session_id, ids)

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
        events: Sequence[CompactionStarted | CompactionEnded] = (),
        expected_version: int | None = None,
    ) -> list[CompactionBlock]:
        """Write blocks for several loops and their compaction events in one transaction.

        Every block is validated before anything is written; if one is refused, none
        is written. Each event is persisted as a `CompactionEvent`; an event whose loop
        gets a block here is linked to that block.

        Raises:
            The errors of `write_block`; `ValueError` for the same loop and overlay twice.
        """
        keys = [(loop_id, block.overlay) for loop_id, block in blocks]
        if len(set(keys)) != len(keys):
            raise ValueError("write_blocks got the same loop and overlay twice")
        records = [event.record() for event in events]
        moment = now()

        def work(db: Connection) -> list[CompactionBlock]:
            locked = _sessions.lock(db, self._tenant, session_id, moment)
            _sessions.check_version(session_id, locked, expected_version)
            for loop_id, block in blocks:
                loop = _sessions.loop_row(db, session_id, loop_id)
                _blocks.validate_block(db, session_id, loop_id, loop.turn_count, block)
            written = [
                _blocks.insert_block(db, self._counter, session_id, loop_id, block, moment)
                for loop_id, block in blocks
            ]
            block_of = {block.loop_id: block.id for block in written}
            rows = [
                {
                    **record,
                    "session_id": session_id,
                    "block_id": record["block_id"] or block_of.get(record["loop_id"]),
                    "created_at": moment,
                }
                for record in records
            ]
            _blocks.insert_events(db, rows)
            return written

        return await self._write(work)

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
        columns = sql.blocks.c
        stmt = sql.select_blocks(session_id, loop_id, overlay)
        if generation is not None:
            stmt = stmt.where(columns.generation == generation)
        if as_of is not None:
            stmt = stmt.where(columns.created_at <= as_of)

        def work(db: Connection) -> CompactionBlock | None:
            _sessions.visible_session(db, self._tenant, session_id)
            _sessions.loop_row(db, session_id, loop_id)
            row = db.execute(stmt.order_by(columns.generation.desc()).limit(1)).first()
            return None if row is None else _blocks.load_blocks(db, session_id, [row])[0]

        return await self._read(work)

    async def block_history(
        self, session_id: str, loop_id: int, *, overlay: str | None = None
    ) -> list[CompactionBlock]:
        """Return every block of a loop (of one overlay, or all), oldest first."""
        stmt = sql.select_blocks(session_id, loop_id, overlay).order_by(sql.blocks.c.id)

        def work(db: Connection) -> list[CompactionBlock]:
            _sessions.visible_session(db, self._tenant, session_id)
            _sessions.loop_row(db, session_id, loop_id)
            return _blocks.load_blocks(db, session_id, db.execute(stmt).all())

        return await self._read(work)

    async def get_replacement_message(
        self, session_id: str, replacement_id: int
    ) -> ReplacementMessage:
        """Return one replacement message of a block of this session, by id.

        Raises:
            BlockNotFoundError: no replacement message with this id in the session.
        """

        def work(db: Connection) -> ReplacementMessage | None:
            _sessions.visible_session(db, self._tenant, session_id)
            return _blocks.replacement(db, session_id, replacement_id)

        found = await self._read(work)
        if found is None:
            raise BlockNotFoundError(
                f"session {session_id!r} has no replacement message {replacement_id}"
            )
        return found

    async def chain_blocks(
        self,
        session_id: str,
        *,
        loop_id: int | None = None,
        overlay: str = "default",
        as_of: datetime | None = None,
        limit: int | None = None,
    ) -> list[ChainEntry]:
        """Return the chain ending at `loop_id` (default: active), root first, with blocks.

        Each loop comes with its current block for `overlay` (None when it has none).

        Args:
            session_id: The session.
            loop_id: The loop the chain ends at; the active loop by default.
            overlay: The overlay name.
            as_of: Only loops and blocks created at or before this time.
            limit: Only the newest `limit` loops of the chain.
        """
        _check_limit(limit)
        _check_aware(as_of)

        def work(db: Connection) -> list[ChainEntry]:
            head = _sessions.resolve_loop(db, self._tenant, session_id, loop_id)
            if head is None:
                return []
            loops, _ = _reads.chain_as_of(db, session_id, head, limit, as_of)
            found = _blocks.current_blocks(db, session_id, loops, overlay, as_of, messages=True)
            return [(loop, found.get(loop.id)) for loop in loops]

        return await self._read(work)

    async def chain_in_scope(
        self,
        session_id: str,
        *,
        scope: CompactionScope,
        max_context_tokens: int,
        summary_cap: int | None = None,
        loop_id: int | None = None,
        overlay: str = "default",
    ) -> list[ChainEntry]:
        """Return the loops in `scope` of the chain ending at `loop_id`, root first.

        Each loop comes with its current block's header for `overlay` (sections without
        their replacement messages). The scope is resolved by `resolve_scope` against
        `max_context_tokens`, a loop counting at most `summary_cap` tokens.
        """

        def work(db: Connection) -> list[ChainEntry]:
            return _reads.chain_in_scope(
                db,
                self._tenant,
                session_id,
                scope=scope,
                max_context_tokens=max_context_tokens,
                summary_cap=summary_cap,
                loop_id=loop_id,
                overlay=overlay,
            )

        return await self._read(work)

    async def read_context(
        self,
        session_id: str,
        *,
        budget: int,
        scope: CompactionScope | None = None,
        loop_id: int | None = None,
        overlay: str = "default",
        as_of: datetime | int | None = None,
    ) -> ContextSources:
        """Read, in one transaction, what the loader needs to build a loop's context.

        The chain ending at `loop_id` is read newest first, a window of loops at a time,
        until the scope (`resolve_scope` against `budget`, on the block headers) is known
        to end inside it. Only the loops in scope are read further: their blocks'
        replacement messages and the raw messages of the turns their blocks do not
        replace. The latest raw user message of the chain is found through an index.

        Args:
            session_id: The session.
            budget: The tokens a `TokenBudget` scope walks against.
            scope: The scope; None for the one the loop's current block was compacted
                with (the default scope when it has none).
            loop_id: The loop whose context it is; the active loop by default.
            overlay: The overlay name.
            as_of: A time, or a generation of the newest loop's block for `overlay`
                (read as the time that block was written): rebuild what the loader
                saw then; loops, messages and blocks written later are left out.

        Raises:
            BlockNotFoundError: `as_of` is a generation the newest loop does not have.
        """
        if budget < 1:
            raise ValueError("budget must be at least 1")
        if isinstance(as_of, datetime):
            _check_aware(as_of)

        def work(db: Connection) -> ContextSources:
            return _reads.read_context(
                db,
                self._tenant,
                session_id,
                scope=scope,
                budget=budget,
                loop_id=loop_id,
                overlay=overlay,
                as_of=as_of,
            )

        return await self._read(work)

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
        _check_event_kind(event)
        moment = now()
        values = {
            "session_id": session_id,
            "loop_id": loop_id,
            "block_id": block_id,
            "event": event,
            "tokens_before": tokens_before,
            "tokens_after": tokens_after,
            "duration_ms": duration_ms,
            "details": dict(details or {}),
            "created_at": moment,
        }

        def work(db: Connection) -> list[int]:
            _sessions.lock(db, self._tenant, session_id, moment)
            if loop_id is not None:
                _sessions.loop_row(db, session_id, loop_id)
            return _blocks.insert_events(db, [values])

        (event_id,) = await self._write(work)
        return CompactionEvent.model_validate({**values, "id": event_id})

    async def list_compaction_events(self, session_id: str) -> list[CompactionEvent]:
        """Return a session's compaction events, oldest first."""

        def work(db: Connection) -> list[CompactionEvent]:
            _sessions.visible_session(db, self._tenant, session_id)
            return _blocks.list_events(db, session_id)

        return await self._read(work)
