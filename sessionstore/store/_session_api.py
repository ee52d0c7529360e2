"""The store's calls on sessions and loops (the facade over `_sessions`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

from sessionstore.errors import ConflictError
from sessionstore.models import (
    LoopRecord,
    Message,
    Page,
    Session,
)
from sessionstore.models._limits import check_id
from sessionstore.store import _messages, _sessions
from sessionstore.store._handle import _Handle, check_limit
from sessionstore.store._sessions import now
from sessionstore.store._tables import loop_model, session_model

__all__ = ["SessionMethods"]


class SessionMethods(_Handle):
    """`SessionStore`'s calls on sessions and loops."""

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
                Ids are unique within a tenant: another tenant may use the same id.
            app_name: The owning application (taken from the handle when it is scoped).
            user_id: The owning user (taken from the handle when it is scoped).
            title: A human-readable title.
            metadata: Free-form JSON data.

        Raises:
            SessionExistsError: the tenant already has a session with `session_id`.
        """
        values = _sessions.new_session_values(
            self._tenant,
            session_id=session_id,
            app_name=app_name,
            user_id=user_id,
            title=title,
            metadata=metadata,
        )
        session = session_model(values)  # refused here, before anything is written
        await self._write(lambda db: _sessions.insert_session(db, values))
        return session

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
            SessionExistsError: the tenant already has a session with `session_id`.
            ConflictError: a `client_id` appears twice.
        """
        batches = [[_messages.validated(message) for message in loop] for loop in loops]
        client_ids = [m.client_id for batch in batches for m in batch if m.client_id]
        if len(client_ids) != len(set(client_ids)):
            raise ConflictError("a client_id appears twice in the imported history")
        prepared = [_messages.prepare_all(batch, self._counter) for batch in batches]
        values = _sessions.new_session_values(
            self._tenant,
            session_id=session_id,
            app_name=app_name,
            user_id=user_id,
            title=title,
            metadata=metadata,
        )
        session_model(values)  # refused here, before anything is written
        moment = values["created_at"]
        key = _sessions.SessionKey(values["id"], values["app_name"], values["user_id"])

        def work(db: Connection) -> Session:
            _sessions.insert_session(db, values)
            parent: int | None = None
            for sequence, items in enumerate(prepared):
                parent = _sessions.start_loop(db, key, parent, sequence, moment).id
                state = _messages.loop_state(db, key, parent, 0)
                _messages.insert_messages(db, key, state, items, moment)
            return session_model(_sessions.visible_session(db, key)._mapping)

        return await self._write(work)

    async def get_session(self, session_id: str) -> Session:
        """Return one session.

        Raises:
            SessionNotFoundError: no such session, or it belongs to another tenant.
        """
        row = await self._read(lambda db: _sessions.visible_session(db, self._key(db, session_id)))
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

        A tenant handle lists its tenant's sessions (naming another tenant in `app_name` or
        `user_id` is a `ValueError`); an unscoped one lists all, or those of `app_name`
        (and `user_id`) when given.

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
        _sessions.check_tenant(app_name, user_id)
        if self._tenant is not None and (
            app_name not in (None, self._tenant.app_name)
            or user_id not in (None, self._tenant.user_id)
        ):
            raise ValueError("a tenant-scoped handle lists its own tenant's sessions only")
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
        await self._write(lambda db: _sessions.delete_session(db, self._key(db, session_id)))

    # ── loops ───────────────────────────────────────────────────────────────────

    async def start_loop(
        self,
        session_id: str,
        *,
        parent_loop_id: int | None = None,
        is_root: bool = False,
        messages: Sequence[Message] = (),
        expected_version: int | None = None,
    ) -> LoopRecord:
        """Start a loop and make it the session's active loop.

        Without `parent_loop_id` the loop continues the active chain: its parent is the
        active loop (none for the first loop), which is closed. With `parent_loop_id` the
        loop starts a branch from that loop; the previously active loop stays open, and
        `switch_loop` can return to it. With `is_root` the loop starts a new chain with no
        parent: the session's history starts over from it, and the old chain stays, whole,
        for audit (and `switch_loop`).

        Args:
            session_id: The session.
            parent_loop_id: The loop to branch from.
            is_root: Start a new chain (not with `parent_loop_id`).
            messages: Messages the new loop starts with, appended as by `append_messages`
                in the same transaction (a `client_id` already stored is a `ConflictError`
                here, not a retry).
            expected_version: Fail with `StaleWriteError` unless the session is at this version.

        Raises:
            ValueError: `is_root` with a `parent_loop_id`.
            SessionNotFoundError: no such session (or another tenant's).
            LoopNotFoundError: `parent_loop_id` is not a loop of this session.
            ConflictError: a `client_id` appears twice, or is already stored.
            StaleWriteError: `expected_version` is not the session's version.
        """
        check_id(parent_loop_id, "parent_loop_id")
        check_id(expected_version, "expected_version")
        if is_root and parent_loop_id is not None:
            raise ValueError("a root loop has no parent_loop_id")
        batch = _messages.prepare_all(messages, self._counter)
        client_ids = [item.message.client_id for item in batch if item.message.client_id]
        if len(client_ids) != len(set(client_ids)):
            raise ConflictError("a client_id appears twice in the loop's first messages")
        moment = now()

        def work(db: Connection) -> LoopRecord:
            key = self._key(db, session_id)
            locked = _sessions.lock(db, key, moment)
            _sessions.check_version(session_id, locked, expected_version)
            stored = _messages.known_client_ids(db, key, batch)
            if stored:
                raise ConflictError(
                    f"client_id {sorted(stored)[0]!r} is already stored in session {session_id!r}"
                )
            parent = parent_loop_id
            if parent is None and not is_root:
                parent = locked.active_loop_id
            loop = _sessions.start_loop(db, key, parent, locked.loop_count, moment)
            if not batch:
                return loop
            _messages.append_to_loop(db, key, loop.id, batch, moment)
            return loop_model(_sessions.loop_row(db, key, loop.id))

        return await self._write(work)

    async def close_loop(self, session_id: str, loop_id: int) -> LoopRecord:
        """Close a loop: no more messages can be appended to it. Closing twice is harmless."""
        check_id(loop_id, "loop_id")
        moment = now()

        def work(db: Connection) -> LoopRecord:
            key = self._key(db, session_id)
            _sessions.lock(db, key, moment)
            return loop_model(_sessions.close_loop(db, key, loop_id, moment))

        return await self._write(work)

    async def switch_loop(
        self, session_id: str, loop_id: int, *, expected_version: int | None = None
    ) -> Session:
        """Make `loop_id` the session's active loop (for example to return to a branch)."""
        check_id(loop_id, "loop_id")
        check_id(expected_version, "expected_version")

        def work(db: Connection) -> Session:
            key = self._key(db, session_id)
            locked = _sessions.lock(db, key, now())
            _sessions.check_version(session_id, locked, expected_version)
            _sessions.switch_loop(db, key, loop_id)
            return session_model(_sessions.visible_session(db, key)._mapping)

        return await self._write(work)

    async def get_loop(self, session_id: str, loop_id: int) -> LoopRecord:
        """Return one loop of a session."""
        check_id(loop_id, "loop_id")

        def work(db: Connection) -> LoopRecord:
            key = self._key(db, session_id)
            _sessions.visible_session(db, key)
            return loop_model(_sessions.loop_row(db, key, loop_id))

        return await self._read(work)

    async def list_loops(self, session_id: str) -> list[LoopRecord]:
        """Return every loop of a session (all branches), in order of creation."""

        def work(db: Connection) -> list[LoopRecord]:
            key = self._key(db, session_id)
            _sessions.visible_session(db, key)
            return _sessions.list_loops(db, key)

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
        check_id(loop_id, "loop_id")
        check_limit(limit)

        def work(db: Connection) -> list[LoopRecord]:
            key = self._key(db, session_id)
            head = _sessions.resolve_loop(db, key, loop_id)
            return [] if head is None else _sessions.chain(db, key, head, limit)

        return await self._read(work)
