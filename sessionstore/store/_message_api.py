"""The store's calls on raw messages (the facade over `_messages`)."""

from __future__ import annotations

from array import array
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast

from sqlalchemy import Connection

from sessionstore._turns import TurnMap
from sessionstore.models import (
    Message,
    StoredMessage,
    TurnRange,
)
from sessionstore.models._batch import decode_all, paused_gc
from sessionstore.models._limits import check_big_count, check_count, check_id
from sessionstore.store import _messages, _reads, _sessions
from sessionstore.store._engine import INLINE_READ_MAX_MESSAGES, INLINE_WRITE_MAX_MESSAGES
from sessionstore.store._handle import Rollback, _Handle
from sessionstore.store._plain import is_citus
from sessionstore.store._sessions import check_session_id, now

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlalchemy.pool import PoolProxiedConnection

    from sessionstore.store import _payload_reads

__all__ = ["MessageMethods"]


class MessageMethods(_Handle):
    """`SessionStore`'s calls on raw messages."""

    # ── messages ────────────────────────────────────────────────────────────────

    async def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        loop_id: int | Literal["new"] | None = None,
        expected_version: int | None = None,
    ) -> list[StoredMessage]:
        """Append messages to a loop in one transaction and return them as stored.

        Positions continue the loop's; turn indices follow the turn rules (see
        `TurnMap`); token counts come from the store's counter. A message whose
        `client_id` is already stored with the same content is not written again: the
        stored one is returned in its place (a safe retry). An assistant message that
        carries `usage` also records it on its turn (see `usage`), once.

        Args:
            session_id: The session.
            messages: The messages, in order. Dicts are validated into messages.
            loop_id: The loop to append to; the active loop by default (a first loop is
                started when the session has none). `"new"`: the messages start a new loop
                continuing the active chain (as `start_loop` does), in the same transaction;
                when the active loop is open and holds no message yet, they go to it
                instead, so no empty loop is left behind.
            expected_version: Fail with `StaleWriteError` unless the session is at this version.

        Raises:
            ValueError: `loop_id` is a string other than `"new"`.
            pydantic.ValidationError: a message is malformed (nothing is written).
            SessionNotFoundError: no such session (or another tenant's).
            LoopNotFoundError: `loop_id` is not a loop of this session.
            ConflictError: a `client_id` is stored with different content, or the loop is closed.
            StaleWriteError: `expected_version` is not the session's version.
        """
        if isinstance(loop_id, str):
            if loop_id != "new":
                raise ValueError(f'loop_id must be a loop id, "new" or None, not {loop_id!r}')
        else:
            check_id(loop_id, "loop_id")
        check_id(expected_version, "expected_version")
        with paused_gc():  # a batch's models and rows all survive the call (see paused_gc)
            batch = _messages.prepare_all(messages, self._counter)
        if not batch:
            return []
        if not self._runner.appends_take_turns:
            return await self._append(session_id, batch, loop_id, expected_version)
        # PostgreSQL and Citus: this store's appends to one session take turns (`append_turn`).
        async with self._runner.append_turn(session_id):
            return await self._append(session_id, batch, loop_id, expected_version)

    async def _append(
        self,
        session_id: str,
        batch: list[_messages.Prepared],
        loop_id: int | Literal["new"] | None,
        expected_version: int | None,
    ) -> list[StoredMessage]:
        """`append_messages` of a prepared, non-empty batch."""
        moment = now()

        states = self._runner.loop_states
        after: list[_messages.LoopState] = []
        keys: list[_sessions.SessionKey] = []
        last = self._last_append(session_id, batch, loop_id)
        # PostgreSQL: one round trip when this store's cached state is still current (an
        # expected version other than the cached one fails, or is stale: the usual path).
        if (
            last is not None
            and self._runner.appends_alone
            and expected_version in (None, last[1].version)
        ):
            alone = await self._append_alone(session_id, batch, moment, last, loop_id)
            if alone is not None:
                return alone
            # Nothing was written: the usual transaction locks the session and reads it.

        def work(db: Connection) -> list[StoredMessage]:
            with paused_gc():
                return write(db)

        def write(db: Connection) -> list[StoredMessage]:
            key, locked = self._lock(db, session_id, moment)
            keys.append(key)
            known = _messages.known_client_ids(db, key, batch)
            # Write each message once: skip stored client ids and in-batch repeats.
            first_of: dict[str, int] = {}
            fresh = []
            for i, item in enumerate(batch):
                cid = item.message.client_id
                if cid is None or (cid not in known and first_of.setdefault(cid, i) == i):
                    fresh.append(i)
            if not fresh:
                # A pure retry: answer with what is stored and leave the version alone.
                raise Rollback([known[item.message.client_id] for item in batch])  # type: ignore[index]  # all known
            _sessions.check_version(session_id, locked, expected_version)
            target = loop_id if isinstance(loop_id, int) else locked.active_loop_id
            started = None
            if loop_id == "new" and target is not None:
                head = _sessions.loop_head(db, key, target)
                if not head.is_empty_open:
                    started = _sessions.start_loop(
                        db, key, target, locked.loop_count, moment, parent=head
                    )
            elif target is None:
                started = _sessions.start_loop(db, key, None, locked.loop_count, moment)
            if started is not None:  # a loop started here: its state is known
                target = started.id
                state = _messages.LoopState(target, locked.version, 0, 0, frozenset())
            else:
                assert target is not None  # None starts a loop above
                # The loop's state as this store left it, if no one has written since:
                # the lock returned the version just after that write's, so it is current.
                kept = cast("_messages.LoopState | None", states.get((key, target)))
                if kept is not None and kept.version == locked.version - 1:
                    state = kept
                else:
                    state = _messages.loop_state(db, key, target, locked.version)
            every = len(fresh) == len(batch)  # no client id stored or repeated
            inserted, new_state = _messages.insert_messages(
                db, key, state, batch if every else [batch[i] for i in fresh], moment
            )
            after.append(replace(new_state, version=locked.version))
            if every:  # each message written: the answer is the rows, in order
                return inserted
            by_index = dict(zip(fresh, inserted, strict=True))
            for cid, i in first_of.items():
                known.setdefault(cid, by_index[i])
            return [
                by_index[i] if i in by_index else known[item.message.client_id]  # type: ignore[index]  # not written => known
                for i, item in enumerate(batch)
            ]

        try:
            stored = await self._write(work, inline=len(batch) <= INLINE_WRITE_MAX_MESSAGES)
        except Rollback as done:
            result: list[StoredMessage] = done.result
            return result
        # Only once committed: a state cached from a rolled-back write could match a
        # later version written by someone else.
        self._remember_append(session_id, keys[-1], after[-1])
        return stored

    def _lock(
        self, db: Connection, session_id: str, moment: datetime
    ) -> tuple[_sessions.SessionKey, _sessions.Locked]:
        """Find the session's key and lock it (bump its version) for an append.

        On SQLite the unscoped store does both in one statement when it appended to the
        session before (its key is cached): see `_messages.lock_known`.
        """
        if self._tenant is None and db.dialect.name == "sqlite":
            last = cast(
                "tuple[_sessions.SessionKey, _messages.LoopState] | None",
                self._runner.last_appends.get(session_id),
            )
            if last is not None:
                locked = _messages.lock_known(db, last[0], moment)
                if locked is not None:
                    return last[0], locked
        key = self._key(db, session_id)
        return key, _sessions.lock(db, key, moment)

    async def _append_alone(
        self,
        session_id: str,
        batch: Sequence[_messages.Prepared],
        moment: datetime,
        last: tuple[_sessions.SessionKey, _messages.LoopState],
        loop_id: object,
    ) -> list[StoredMessage] | None:
        """PostgreSQL: append in one statement that is its own transaction (one round trip).

        Written only if `last`'s state is still current; None when nothing was written
        (a stale state, a session not found under the key, or Citus).
        """
        key, cached = last
        # Imported here: PostgreSQL's append path, which a read never takes.
        from sessionstore.store._pg_append import LockHint, drives, insert_on_driver

        hint = LockHint(isinstance(loop_id, int), self._tenant is None)

        def work(
            db: Connection,
        ) -> tuple[list[StoredMessage], _messages.LoopState, _sessions.Locked] | None:
            if is_citus(db):  # its coordinator runs a data-modifying CTE in several steps
                self._runner.appends_alone = False
                return None
            with paused_gc():
                return _messages.lock_and_insert(db, key, cached, batch, moment, hint)

        def on_driver(engine: Engine, pooled: PoolProxiedConnection) -> Awaitable[Any]:
            return insert_on_driver(engine, pooled, key, cached, batch, moment, hint)

        # asyncpg's own prepared statement if it can take it, else SQLAlchemy's execution.
        sent = None
        if drives(self._runner.engine.sync_engine):
            sent = await self._runner.run_on_driver(on_driver)
        if sent is None:
            done = await self._runner.run_alone(work)
        else:
            done = _messages.after_lock(cached, len(batch), sent)
        if done is None:
            return None
        stored, new_state, locked = done
        self._remember_append(session_id, key, replace(new_state, version=locked.version))
        return stored

    def _remember_append(
        self, session_id: str, key: _sessions.SessionKey, after: _messages.LoopState
    ) -> None:
        """Cache a committed append's loop state, for this store's next append to it."""
        self._runner.loop_states.put((key, after.loop_id), after)
        self._runner.last_appends.put(session_id, (key, after))

    def _last_append(
        self, session_id: str, batch: Sequence[_messages.Prepared], loop_id: object
    ) -> tuple[_sessions.SessionKey, _messages.LoopState] | None:
        """The key and loop state of this store's last append to the session, if any.

        Only for an append that can take the lock and write its rows in one statement
        (see `_messages.lock_and_insert`).
        """
        last = cast(
            "tuple[_sessions.SessionKey, _messages.LoopState] | None",
            self._runner.last_appends.get(session_id),
        )
        if last is None or loop_id == "new" or (loop_id is not None and loop_id != last[1].loop_id):
            return None
        tenant = self._tenant
        if tenant is not None and (last[0].app_name, last[0].user_id) != (
            tenant.app_name,
            tenant.user_id,
        ):
            return None
        # Client ids need a look-up under the lock before anything is written.
        if any(item.message.client_id is not None for item in batch):
            return None
        return last

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

    async def pop_message(
        self,
        session_id: str,
        *,
        replacement: Message | None = None,
        expected_version: int | None = None,
    ) -> StoredMessage | None:
        """Take the last message of the active chain out of the session's history, keeping it.

        Raw messages are never changed, so this branches: a new loop starts from the parent
        of the loop that holds the last message, with copies of that loop's earlier
        messages (and `replacement` in the last one's place, when given), and becomes the
        active loop, in one transaction. The old loop stays, whole, for audit and
        `switch_loop`. Copies drop their `client_id`.

        Args:
            session_id: The session.
            replacement: A message to put in the last one's place (for example the same
                message with one block less).
            expected_version: Fail with `StaleWriteError` unless the session is at this version.

        Returns:
            The message taken out, as it was stored; None when the history is empty
            (nothing is written then).

        Raises:
            SessionNotFoundError: no such session (or another tenant's).
            StaleWriteError: `expected_version` is not the session's version.
        """
        extra = [] if replacement is None else _messages.prepare_all((replacement,), self._counter)
        moment = now()

        def work(db: Connection) -> StoredMessage | None:
            key = self._key(db, session_id)
            locked = _sessions.lock(db, key, moment)
            _sessions.check_version(session_id, locked, expected_version)
            if locked.active_loop_id is None:
                raise Rollback(None)
            loops = _sessions.chain(db, key, locked.active_loop_id, None)
            holder = next((loop for loop in reversed(loops) if loop.message_count), None)
            if holder is None:
                raise Rollback(None)
            *kept, last = _reads.loop_messages(db, key, holder.id, None)
            copies = [
                _messages.prepare(m.message.model_copy(update={"client_id": None}), self._counter)
                for m in kept
            ]
            branch = _sessions.start_loop(db, key, holder.parent_loop_id, locked.loop_count, moment)
            if copies or extra:
                _messages.append_to_loop(db, key, branch.id, copies + extra, moment)
            return last

        try:
            return await self._write(work)
        except Rollback as done:
            result: StoredMessage | None = done.result
            return result

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
        check_id(loop_id, "loop_id")
        check_big_count(last, "last")

        unscoped = self._tenant is None

        def work(db: Connection) -> list[StoredMessage]:
            with paused_gc():  # every record and message survives the call (see paused_gc)
                if unscoped:
                    check_session_id(session_id)  # as the tenant lookup checks it
                    # No tenant lookup first: one statement, when the id is one tenant's.
                    found = _reads.loop_messages_by_id(db, session_id, loop_id, last)
                    if found is not None:
                        return found
                key = self._key(db, session_id)
                return _reads.loop_messages(db, key, loop_id, last, decoded=True)

        # The newest few: a small read, run on the event loop when SQLite lets it start.
        # No snapshot: the tenant lookup and the one statement that reads the loop's rows
        # (and checks the session) each answer on their own (the unscoped store's first
        # statement answers alone when it finds rows).
        small = last is not None and last <= INLINE_READ_MAX_MESSAGES
        return await self._read(work, inline=small, snapshot=False)

    async def get_turns(
        self, session_id: str, loop_id: int, turns: TurnRange
    ) -> list[StoredMessage]:
        """Return the messages of an inclusive turn range of a loop, in order.

        Raises:
            InvalidBlockError: the range ends past the loop's last turn.
        """
        check_id(loop_id, "loop_id")

        def work(db: Connection) -> list[StoredMessage]:
            key = self._key(db, session_id)
            _sessions.visible_session(db, key)
            return _decoded(_messages.turns(db, key, loop_id, turns))

        return await self._read(work)

    async def get_turn_map(self, session_id: str, loop_id: int | None = None) -> TurnMap:
        """Return the loop's `TurnMap`: turn index → range of positions, from the index."""
        check_id(loop_id, "loop_id")

        def work(db: Connection) -> TurnMap:
            key = self._key(db, session_id)
            target = _sessions.resolve_loop(db, key, loop_id)
            return TurnMap(()) if target is None else _messages.turn_map(db, key, target)

        return await self._read(work)

    async def get_history(
        self, session_id: str, *, loop_id: int | None = None, last: int | None = None
    ) -> list[StoredMessage]:
        """Return every raw message of the chain ending at `loop_id` (default: active), in order.

        Args:
            session_id: The session.
            loop_id: The loop the chain ends at; the active loop by default.
            last: Only the newest `last` messages (still oldest first); only the loops that
                hold them are read.
        """
        check_id(loop_id, "loop_id")
        check_count(last, "last")

        def work(db: Connection) -> list[StoredMessage]:
            key = self._key(db, session_id)
            head = _sessions.resolve_loop(db, key, loop_id)
            if head is None:
                return []
            with paused_gc():
                if last is None:
                    return _reads.history(db, key, head, decoded=True)
                return _reads.history_tail(db, key, head, last, decoded=True)

        return await self._read(work)

    async def iter_history(
        self, session_id: str, *, loop_id: int | None = None, chunk_size: int = 1000
    ) -> AsyncIterator[list[StoredMessage]]:
        """Yield every raw message of the chain ending at `loop_id` (default: active), in chunks.

        The same messages as `get_history`, in the same order, in lists of at most
        `chunk_size`, each read in its own short transaction: memory stays bounded by
        the chunk, however long the history. The chain and each loop's message count
        are read first; messages appended after that are not yielded.

        Args:
            session_id: The session.
            loop_id: The last loop of the chain; the active loop by default.
            chunk_size: The most messages in one chunk.

        Raises:
            ValueError: `chunk_size` is below 1.
            SessionNotFoundError: no such session (or it was deleted during the read).
            LoopNotFoundError: `loop_id` is not a loop of this session.
        """
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")

        def start(
            db: Connection,
        ) -> tuple[_sessions.SessionKey, tuple[array[int], array[int]] | None]:
            key = self._key(db, session_id)
            head = _sessions.resolve_loop(db, key, loop_id)
            return key, None if head is None else _reads.chain_counts(db, key, head)

        key, chain = await self._read(start)
        if chain is None:
            return
        at = (0, 0)
        while at[0] < len(chain[0]):

            def page(
                db: Connection, at: tuple[int, int] = at
            ) -> tuple[list[StoredMessage], tuple[int, int]]:
                with paused_gc():
                    return _reads.history_page(db, key, chain, at, chunk_size, decoded=True)

            chunk, at = await self._read(page)
            if chunk:
                yield chunk

    async def get_messages_by_id(
        self, session_id: str, message_ids: Iterable[int]
    ) -> list[StoredMessage]:
        """Return the raw messages with these ids, in loop and position order."""
        ids = list(message_ids)
        for message_id in ids:
            check_id(message_id, "message_ids")

        def work(db: Connection) -> list[StoredMessage]:
            key = self._key(db, session_id)
            _sessions.visible_session(db, key)
            return _decoded(_messages.by_id(db, key, ids))

        return await self._read(work)

    async def _history_strings(
        self, session_id: str, path: tuple[str, ...], *, last: int | None = None
    ) -> list[tuple[str | None, str | None]]:
        """Return, for the active chain's messages, a string each kept in its payload.

        For adapters that keep their own JSON text of a message in its `extra` and answer
        from it without building messages (the openai-agents session's raw mode): for each
        message, oldest first, `(the string at path, None)`, or `(None, the payload's JSON
        text)` for a message without one. Decode a payload with
        `MESSAGE_ADAPTER.validate_json` (context `STORED`) where a `Message` is needed.

        Args:
            session_id: The session.
            path: The keys that lead to the string (letters, digits and `_` only).
            last: Only the newest `last` messages (still oldest first).

        Raises:
            ValueError: a key of `path` is not a plain name.
            SessionNotFoundError: no such session (or another tenant's).
        """
        chained = await self._chain_strings(session_id, path, last=last)
        payloads = chained.payloads
        return [
            (found, None if found is not None else payloads[message_id])
            for message_id, found in zip(chained.ids, chained.found, strict=True)
        ]

    async def _chain_strings(
        self,
        session_id: str,
        path: tuple[str, ...],
        *,
        last: int | None = None,
        known: Mapping[int, tuple[Any, str | None]] | None = None,
    ) -> _payload_reads.ChainStrings:
        """Return `_history_strings` by column, with each message's id and `content_hash`.

        The strings of the messages in `known` (by id, with their hash, as this returns
        them) are not read again (see `_payload_reads.chain_strings`).
        """
        check_count(last, "last")
        if not path or not all(name.isidentifier() and name.isascii() for name in path):
            raise ValueError(f"path must be plain names, got {path!r}")

        from sessionstore.store import _payload_reads  # here: only this read needs it

        def work(db: Connection) -> _payload_reads.ChainStrings:
            key = self._key(db, session_id)
            return _payload_reads.chain_strings(db, key, path, last, known)

        # The newest few: a small read, run on the event loop when SQLite lets it start.
        return await self._read(work, inline=last is not None and last <= INLINE_READ_MAX_MESSAGES)


def _decoded(stored: list[StoredMessage]) -> list[StoredMessage]:
    """Decode every message of a public read at once (its caller uses them; see `decode_all`)."""
    decode_all(stored)
    return stored
