"""The store's calls on compaction blocks, context reads and compaction events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import JsonValue, TypeAdapter
from sqlalchemy import Connection

from sessionstore._context_read import read_context as read_sources
from sessionstore._context_source import check_read
from sessionstore._items import ContextSources
from sessionstore._scope import ChainEntry
from sessionstore.config import CompactionScope
from sessionstore.errors import BlockNotFoundError
from sessionstore.models import (
    CompactionBlock,
    CompactionEnded,
    CompactionEvent,
    CompactionStarted,
    LoopRecord,
    ReplacementMessage,
    SessionDigest,
)
from sessionstore.models._batch import RecordCache
from sessionstore.models._limits import (
    MAX_INT,
    check_big_count,
    check_count,
    check_id,
    check_json,
    check_overlay,
    finite_duration,
)
from sessionstore.store import _blocks, _reads, _sessions
from sessionstore.store import _statements as sql
from sessionstore.store._handle import _Handle, check_aware, check_event_kind, check_limit
from sessionstore.store._sessions import now
from sessionstore.store._source import StoreSource
from sessionstore.strategies import LoopView

__all__ = ["BlockMethods"]


DETAILS: TypeAdapter[dict[str, JsonValue]] = TypeAdapter(dict[str, JsonValue])
"""Validates an event's details before they are written, so a refusal writes nothing."""


_M = TypeVar("_M", CompactionBlock, SessionDigest)


def _revalidated(model: _M) -> _M:
    """Return `model` with its own fields validated again; nothing is written if refused.

    Its sections and messages, models themselves, are not validated again.
    """
    return type(model).model_validate(dict(model))


def _checked_event(record: dict[str, Any]) -> dict[str, Any]:
    """Return an event's row values, checked before anything is written."""
    check_id(record["loop_id"], "loop_id")
    check_id(record["block_id"], "block_id")
    check_big_count(record["tokens_before"], "tokens_before")
    check_big_count(record["tokens_after"], "tokens_after")
    finite_duration(record["duration_ms"], "duration_ms")
    details = check_json(record["details"], "details")
    return {**record, "details": DETAILS.validate_python(details)}


class BlockMethods(_Handle):
    """`SessionStore`'s calls on blocks, context reads and compaction events."""

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
        digest: SessionDigest | None = None,
        expected_version: int | None = None,
        read_counts: Mapping[int, int] | None = None,
    ) -> list[CompactionBlock]:
        """Write blocks for several loops, a session digest and events in one transaction.

        Every block is validated before anything is written; if one is refused, none
        is written. Each event is persisted as a `CompactionEvent`; an event whose loop
        gets a block here is linked to that block. `digest` (see `SessionDigest`) is
        written with them; its loops must be the session's, and the digest it extends
        (`extends_id`) one of the session's digests of the same overlay.

        `read_counts` maps a loop id to the number of its messages its block was built
        from: if a message appended since falls in a turn the block covers (a tool result
        joins its call's turn), the block would not stand for it, and nothing is written.

        Raises:
            The errors of `write_block`; `ValueError` for the same loop and overlay twice;
            `LoopNotFoundError` / `BlockNotFoundError` for an event whose loop or block is
            not the session's; `LoopChangedError` when `read_counts` says a loop changed;
            `ValueError` for a digest extending one the session's overlay does not have.
        """
        check_id(expected_version, "expected_version")
        # Validated again: a block or digest built with `model_copy(update=...)` (as a
        # strategy may) was never checked, and what is written must read back.
        blocks = [(loop_id, _revalidated(block)) for loop_id, block in blocks]
        for loop_id, _ in blocks:
            check_id(loop_id, "loop_id")
        if digest is not None:
            digest = _revalidated(digest)
            check_id(digest.head_loop_id, "head_loop_id")
            check_id(digest.through_loop_id, "through_loop_id")
            check_id(digest.extends_id, "extends_id")
        keys = [(loop_id, block.overlay) for loop_id, block in blocks]
        if len(set(keys)) != len(keys):
            raise ValueError("write_blocks got the same loop and overlay twice")
        records = [_checked_event(event.record()) for event in events]
        moment = now()

        def work(db: Connection) -> list[CompactionBlock]:
            key = self._key(db, session_id)
            locked = _sessions.lock(db, key, moment)
            _sessions.check_version(session_id, locked, expected_version)
            for loop_id, block in blocks:
                loop = _sessions.loop_row(db, key, loop_id)
                if read_counts is not None and loop_id in read_counts:
                    _blocks.check_unchanged(db, key, loop_id, read_counts[loop_id], block)
                _blocks.validate_block(db, key, loop_id, loop.turn_count, block)
                _blocks.check_settled(db, key, loop, block)
            for record in records:
                _blocks.check_event_refs(db, key, record["loop_id"], record["block_id"])
            written = [
                _blocks.insert_block(db, self._counter, key, loop_id, block, moment)
                for loop_id, block in blocks
            ]
            block_of = {block.loop_id: block.id for block in written}
            rows = [
                {
                    **record,
                    **key.columns,
                    "block_id": record["block_id"] or block_of.get(record["loop_id"]),
                    "created_at": moment,
                }
                for record in records
            ]
            _blocks.insert_events(db, rows)
            if digest is not None:
                _blocks.insert_digest(db, key, digest, moment)
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
        check_aware(as_of)
        check_id(loop_id, "loop_id")
        check_overlay(overlay)
        check_count(generation, "generation", low=-MAX_INT - 1)
        columns = sql.blocks.c
        stmt = sql.select_blocks(overlay is not None)
        if generation is not None:
            stmt = stmt.where(columns.generation == generation)
        if as_of is not None:
            stmt = stmt.where(columns.created_at <= as_of)

        def work(db: Connection) -> CompactionBlock | None:
            key = self._key(db, session_id)
            _sessions.visible_session(db, key)
            _sessions.loop_row(db, key, loop_id)
            stmt_params = {**key.params, "lid": loop_id, "overlay": overlay}
            row = db.execute(stmt.order_by(columns.generation.desc()).limit(1), stmt_params).first()
            return None if row is None else _blocks.load_blocks(db, key, [row])[0]

        return await self._read(work)

    async def block_history(
        self, session_id: str, loop_id: int, *, overlay: str | None = None
    ) -> list[CompactionBlock]:
        """Return every block of a loop (of one overlay, or all), oldest first."""
        check_id(loop_id, "loop_id")
        if overlay is not None:
            check_overlay(overlay)
        stmt = sql.select_blocks(overlay is not None).order_by(sql.blocks.c.id)

        def work(db: Connection) -> list[CompactionBlock]:
            key = self._key(db, session_id)
            _sessions.visible_session(db, key)
            _sessions.loop_row(db, key, loop_id)
            stmt_params = {**key.params, "lid": loop_id, "overlay": overlay}
            return _blocks.load_blocks(db, key, db.execute(stmt, stmt_params).all())

        return await self._read(work)

    async def get_replacement_message(
        self, session_id: str, replacement_id: int
    ) -> ReplacementMessage:
        """Return one replacement message of a block of this session, by id.

        Raises:
            BlockNotFoundError: no replacement message with this id in the session.
        """
        check_id(replacement_id, "replacement_id")

        def work(db: Connection) -> ReplacementMessage | None:
            key = self._key(db, session_id)
            _sessions.visible_session(db, key)
            return _blocks.replacement(db, key, replacement_id)

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
        check_limit(limit)
        check_aware(as_of)
        check_id(loop_id, "loop_id")
        check_overlay(overlay)

        def work(db: Connection) -> list[ChainEntry]:
            key = self._key(db, session_id)
            head = _sessions.resolve_loop(db, key, loop_id)
            _blocks.check_overlay(db, key, overlay)
            if head is None:
                return []
            loops, _ = _reads.chain_as_of(db, key, head, limit, as_of)
            found = _blocks.current_blocks(db, key, loops, overlay, as_of, messages=True)
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
        check_id(loop_id, "loop_id")
        check_overlay(overlay)

        def work(db: Connection) -> list[ChainEntry]:
            key = self._key(db, session_id)
            return _reads.chain_in_scope(
                db,
                key,
                scope=scope,
                max_context_tokens=max_context_tokens,
                summary_cap=summary_cap,
                loop_id=loop_id,
                overlay=overlay,
            )

        return await self._read(work)

    async def get_loop_view(
        self, session_id: str, loop: LoopRecord, *, overlay: str = "default"
    ) -> LoopView:
        """Return what a block strategy sees of `loop`, read in one transaction.

        The view holds the loop's messages as columns (`id`, `turn_index`,
        `token_count`, and the stored payloads): a message is built, and decoded, only
        when the strategy indexes it, so a strategy that summarises a hundred turns of
        a 20,000-message loop builds a few hundred messages, not 20,000. `previous` is
        the loop's current block for `overlay`, with its messages.
        """

        def work(db: Connection) -> LoopView:
            key = self._key(db, session_id)
            return _reads.loop_view(db, key, loop, overlay)

        return await self._read(work)

    async def digest_inputs(
        self,
        session_id: str,
        *,
        first_in_scope: int,
        loop_id: int | None = None,
        overlay: str = "default",
    ) -> tuple[SessionDigest | None, list[LoopRecord]]:
        """Return the chain's newest session digest and the loops before the scope it lacks.

        The loops are those between the last loop the digest folds (or the root) and
        `first_in_scope`, oldest first: what a compaction folds into the next digest.
        """
        check_id(first_in_scope, "first_in_scope")
        check_id(loop_id, "loop_id")
        check_overlay(overlay)

        def work(db: Connection) -> tuple[SessionDigest | None, list[LoopRecord]]:
            key = self._key(db, session_id)
            return _reads.digest_inputs(
                db,
                key,
                loop_id=loop_id,
                overlay=overlay,
                first_in_scope=first_in_scope,
            )

        return await self._read(work)

    async def get_digest(
        self,
        session_id: str,
        *,
        loop_id: int | None = None,
        overlay: str = "default",
        as_of: datetime | None = None,
    ) -> SessionDigest | None:
        """Return the session digest the context of `loop_id` (default: active) starts with."""
        check_aware(as_of)
        check_id(loop_id, "loop_id")
        check_overlay(overlay)

        def work(db: Connection) -> SessionDigest | None:
            key = self._key(db, session_id)
            head = _sessions.resolve_loop(db, key, loop_id)
            if head is None:
                return None
            return _reads.chain_digest(db, key, head, overlay, as_of)

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
        new_overlay: bool = False,
        records: RecordCache | None = None,
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
            new_overlay: True: a named overlay nothing was compacted into yet reads as the
                raw history (for a writer about to compact into it) instead of raising
                `OverlayNotFoundError`.
            records: A `RecordCache` the reads of this session share: the raw messages
                the last read decoded are taken again, not decoded.

        Raises:
            BlockNotFoundError: `as_of` is a generation the newest loop does not have.
            OverlayNotFoundError: no block of the session carries `overlay` (a typo?),
                unless `new_overlay`.
        """
        check_read(budget=budget, loop_id=loop_id, overlay=overlay, as_of=as_of)

        def work(db: Connection) -> ContextSources:
            key = self._key(db, session_id)
            return read_sources(
                StoreSource(db),
                key,
                scope=scope,
                budget=budget,
                loop_id=loop_id,
                overlay=overlay,
                as_of=as_of,
                new_overlay=new_overlay,
                records=records,
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
        """Persist a `started` or `ended` compaction event of a session.

        Raises:
            ValueError: a token figure that is negative or past the 64-bit range, a
                duration that is negative or not finite, or details that are not JSON
                (`check_json`): nothing is written.
            SessionNotFoundError: no such session (or another tenant's).
            LoopNotFoundError: `loop_id` is not a loop of this session.
            BlockNotFoundError: `block_id` is not a block of this session (of `loop_id`,
                when given).
        """
        check_event_kind(event)
        moment = now()
        values = {
            "session_id": session_id,
            "created_at": moment,
            **_checked_event(
                {
                    "event": event,
                    "loop_id": loop_id,
                    "block_id": block_id,
                    "tokens_before": tokens_before,
                    "tokens_after": tokens_after,
                    "duration_ms": duration_ms,
                    "details": dict(details or {}),
                }
            ),
        }

        def work(db: Connection) -> list[int]:
            key = self._key(db, session_id)
            _sessions.lock(db, key, moment)
            _blocks.check_event_refs(db, key, loop_id, block_id)
            return _blocks.insert_events(db, [{**values, **key.columns}])

        (event_id,) = await self._write(work)
        return CompactionEvent.model_validate({**values, "id": event_id})

    async def list_compaction_events(
        self, session_id: str, *, last: int | None = None
    ) -> list[CompactionEvent]:
        """Return a session's compaction events, oldest first; only the newest `last` if given.

        Raises:
            SessionNotFoundError: no such session (or another tenant's).
            ValueError: `last` is negative.
        """
        check_count(last, "last")

        def work(db: Connection) -> list[CompactionEvent]:
            key = self._key(db, session_id)
            _sessions.visible_session(db, key)
            return _blocks.list_events(db, key, last)

        return await self._read(work)
