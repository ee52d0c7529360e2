"""`export` and `audit` on a SQLite file without SQLAlchemy: the file's `FileHistory`.

What the two commands ask a store for (`get_session`, `list_loops`, `chain_blocks`,
`get_digest`, `get_messages`, `block_history`, `iter_history`) answered from the file by
the store's own read functions (`_context_source`) on the store's statements compiled for
SQLite (`_sqlite_context.SqliteSource`), with the store's checks in the store's order, so
the answers and errors are the store's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from functools import partial

from sessionstore._context_source import (
    DEFAULT_OVERLAY,
    BlockMemo,
    SessionKey,
    chain_as_of,
    check_aware,
    check_overlay,
    check_session_id,
    current_blocks,
    list_loops,
    load_blocks,
    loop_row,
    newest_digest,
    resolve_loop,
    visible_session,
)
from sessionstore._driver_errors import driver_error
from sessionstore._history_pages import history_page
from sessionstore._row_models import stored_models
from sessionstore._scope import ChainEntry
from sessionstore._sqlite_context import SqliteSource, session_key_of
from sessionstore._sqlite_read import read_at_head, session_model
from sessionstore.models import (
    MAX_BIG_INT,
    CompactionBlock,
    LoopRecord,
    Session,
    SessionDigest,
    StoredMessage,
)
from sessionstore.models._batch import decode_all
from sessionstore.models._limits import check_big_count, check_id
from sessionstore.models._limits import check_overlay as check_overlay_name

__all__ = ["FileHistory", "open_file_history"]


_ChainAsked = tuple[SessionKey, int, int | None, datetime | None]
"""A chain asked of `FileHistory`: the session, the head, the limit and the moment."""


class FileHistory:
    """What `export` and `audit` ask a store for, from a file.

    `export`: `get_session`, `list_loops`, `iter_history`; `audit`: `list_loops`,
    `chain_blocks`, `get_digest`, `get_messages`, `block_history`. Read on a read-only
    `sqlite3` connection at the newest revision (`open_file_history`) by the store's
    functions on the store's statements, with the store's checks in the store's order,
    so the answers and errors are the store's. The connection holds one read
    transaction, so an audit's reads see one snapshot (through the store each call is a
    transaction of its own). As the store's `iter_history`, the chain and its loops'
    message counts are read first and each page is a read transaction of its own, so
    an export of a long history neither holds one snapshot open nor reads messages
    appended meanwhile. A driver error while reading is raised as the store raises it
    (`driver_error`).
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._src = SqliteSource(db)
        self._chains: dict[_ChainAsked, tuple[list[LoopRecord], bool]] = {}
        """Chains read in this read transaction: an audit asks for each twice a moment."""
        self._blocks: BlockMemo = {}
        """Blocks loaded in this read transaction: an audit's moments share most."""

    def _chain_as_of(
        self, key: SessionKey, head: int, limit: int | None, as_of: datetime | None
    ) -> list[LoopRecord]:
        """`chain_as_of`'s loops, read once a read transaction (the same snapshot answers)."""
        asked = (key, head, limit, as_of)
        found = self._chains.get(asked)
        if found is None:
            found = self._chains[asked] = chain_as_of(self._src, key, head, limit, as_of)
        return list(found[0])

    def _new_snapshot(self) -> None:
        """End the read transaction and begin another; what was read in it is forgotten."""
        self._db.execute("COMMIT")
        self._db.execute("BEGIN")
        self._chains.clear()
        self._blocks.clear()

    def _key(self, session_id: str) -> SessionKey:
        check_session_id(session_id)
        return session_key_of(self._src, session_id)

    def _loop_range(self, key: SessionKey, lid: int, start: int, stop: int) -> list[StoredMessage]:
        """The loop's messages at positions `start` to `stop` (excluded), not decoded yet."""
        params = {**key.params, "lid": lid, "start": start, "stop": stop}
        return stored_models(self._src.rows("loop_page", params), key.session_id)

    async def get_session(self, session_id: str) -> Session:
        """The session (`SessionStore.get_session`)."""
        with _storage_errors():
            key = self._key(session_id)
            return session_model(visible_session(self._src, key)._asdict())

    async def list_loops(self, session_id: str) -> list[LoopRecord]:
        """Every loop of the session, in order of creation (`SessionStore.list_loops`)."""
        with _storage_errors():
            key = self._key(session_id)
            visible_session(self._src, key)
            return list_loops(self._src, key)

    async def chain_blocks(
        self,
        session_id: str,
        *,
        loop_id: int | None = None,
        overlay: str = DEFAULT_OVERLAY,
        as_of: datetime | None = None,
        limit: int | None = None,
    ) -> list[ChainEntry]:
        """The chain ending at `loop_id`, each loop with its current block.

        As `SessionStore.chain_blocks`.
        """
        check_big_count(limit, "limit", low=1)
        check_aware(as_of)
        check_id(loop_id, "loop_id")
        check_overlay_name(overlay)
        with _storage_errors():
            key = self._key(session_id)
            head = resolve_loop(self._src, key, loop_id)
            check_overlay(self._src, key, overlay)
            if head is None:
                return []
            loops = self._chain_as_of(key, head, limit, as_of)
            found = current_blocks(
                self._src, key, loops, overlay, as_of, messages=True, memo=self._blocks
            )
        return [(loop, found.get(loop.id)) for loop in loops]

    async def get_digest(
        self,
        session_id: str,
        *,
        loop_id: int | None = None,
        overlay: str = DEFAULT_OVERLAY,
        as_of: datetime | None = None,
    ) -> SessionDigest | None:
        """The digest the context of `loop_id` starts with (`SessionStore.get_digest`)."""
        check_aware(as_of)
        check_id(loop_id, "loop_id")
        check_overlay_name(overlay)
        with _storage_errors():
            key = self._key(session_id)
            head = resolve_loop(self._src, key, loop_id)
            if head is None:
                return None
            loops = self._chain_as_of(key, head, None, as_of)
            return newest_digest(self._src, key, overlay, [loop.id for loop in loops], as_of)

    async def get_messages(
        self, session_id: str, loop_id: int | None = None
    ) -> list[StoredMessage]:
        """A loop's messages in order, the active loop by default (`SessionStore.get_messages`)."""
        check_id(loop_id, "loop_id")
        with _storage_errors():
            key = self._key(session_id)
            lid = resolve_loop(self._src, key, loop_id)
            if lid is None:
                return []
            found = self._loop_range(key, lid, 0, MAX_BIG_INT)
        decode_all(found)
        return found

    async def block_history(self, session_id: str, loop_id: int) -> list[CompactionBlock]:
        """Every block of a loop, of every overlay, oldest first (`SessionStore.block_history`)."""
        check_id(loop_id, "loop_id")
        with _storage_errors():
            key = self._key(session_id)
            visible_session(self._src, key)
            loop_row(self._src, key, loop_id)
            rows = self._src.rows("loop_blocks", {**key.params, "lid": loop_id})
            return load_blocks(self._src, key, rows, memo=self._blocks)

    async def iter_history(
        self, session_id: str, *, loop_id: int | None = None, chunk_size: int = 1000
    ) -> AsyncIterator[list[StoredMessage]]:
        """The raw messages of the chain ending at `loop_id`, in chunks.

        As `SessionStore.iter_history`.
        """
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        with _storage_errors():
            key = self._key(session_id)
            head = resolve_loop(self._src, key, loop_id)
            if head is None:
                return
            rows = self._src.rows("chain_counts", {**key.params, "head": head})
        chain = ([row[0] for row in rows], [row[1] for row in rows])
        read_range = partial(self._loop_range, key)
        at = (0, 0)
        while at[0] < len(chain[0]):
            with _storage_errors():
                self._new_snapshot()  # each page a read transaction of its own
                visible_session(self._src, key)
                chunk, at = history_page(chain, at, chunk_size, read_range)
            decode_all(chunk)
            if chunk:
                yield chunk


@contextmanager
def _storage_errors() -> Iterator[None]:
    """A `sqlite3` error raised as the store raises the same error (`driver_error`)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise driver_error(exc) from exc


@contextmanager
def open_file_history(uri: str, *, timeout: float) -> Iterator[FileHistory | None]:
    """A `FileHistory` of the SQLite file at `uri`, or None when the store must read it.

    None when the file is at another revision than the newest or cannot be opened (the
    command then opens the store, which says what is wrong).
    """
    with ExitStack() as stack:
        try:
            db = stack.enter_context(read_at_head(uri, timeout=timeout))
        except sqlite3.Error:
            db = None
        yield None if db is None else FileHistory(db)
