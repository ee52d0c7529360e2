# ruff: noqa: E501  (the statements' texts are kept as SQLAlchemy compiles them, one line a clause)
"""`context`, `sessions show`, `export` and `audit` on a SQLite file without SQLAlchemy, on `sqlite3`.

A context read (`_context_read.read_context`, the same function the store runs), a
session's usage (`_usage_read.session_usage`, likewise) and a session's raw history a
page at a time (`FileHistory`, with the store's paging, `_history_pages`) ask their
source for named statements; here each one is the store's statement compiled for SQLite
(`STATEMENTS`, kept as text: a test holds each equal to `store._source.sqlite_compiled`),
run on the standard library's driver on a read-only connection. The values come out as
the store's column types give them on SQLite: times parsed by `sqlite_utc` (the store's
result processor there), JSON columns decoded by `json.loads`, a content hash as its
bytes (which `StoredMessage` turns to hex, as on the store's plain reads).

Only a file at the revision the scripts name newest is read here (`scanned_head`, as for
`sessions list`); anything else returns None and the command opens the store, which says
what is wrong. Importing SQLAlchemy is most of a command's start (`docs/benchmarks.md`,
"Stop 27: context without SQLAlchemy" and "Stop 28").
"""

from __future__ import annotations

import json
import sqlite3
from collections import namedtuple
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from sessionstore._context_read import read_context
from sessionstore._context_source import (
    DEFAULT_OVERLAY,
    BlockMemo,
    SessionKey,
    chain_as_of,
    check_aware,
    check_overlay,
    check_read,
    check_session_id,
    current_blocks,
    key_from_tenants,
    list_loops,
    load_blocks,
    loop_row,
    newest_digest,
    resolve_loop,
    visible_session,
)
from sessionstore._driver_errors import driver_error
from sessionstore._history_pages import history_page
from sessionstore._items import ContextSources
from sessionstore._row_models import stored_models
from sessionstore._scope import ChainEntry
from sessionstore._sqlite_read import read_at_head, read_file, session_model, sqlite_utc
from sessionstore._usage_read import session_usage
from sessionstore.config import CompactionScope
from sessionstore.models import (
    MAX_BIG_INT,
    CompactionBlock,
    LoopRecord,
    Session,
    SessionDigest,
    SessionUsage,
    StoredMessage,
)
from sessionstore.models._batch import decode_all
from sessionstore.models._limits import check_big_count, check_id
from sessionstore.models._limits import check_overlay as check_overlay_name

__all__ = [
    "STATEMENTS",
    "FileHistory",
    "SqliteSource",
    "converted_rows",
    "open_file_history",
    "read_file_context",
    "read_file_session",
    "session_key_of",
    "sqlite_time",
]

_T = TypeVar("_T")


def sqlite_time(moment: datetime) -> str:
    """`moment` as the store binds a time on SQLite: UTC, no offset, microseconds.

    A test holds it equal to the store's bind processor (`_sessions.bound_time`).
    """
    value = moment.astimezone(UTC)
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"
    )


_CONVERTERS: dict[str, Callable[[Any], Any] | None] = {"t": sqlite_utc, "j": json.loads, "-": None}


class SqliteSource:
    """Runs `STATEMENTS` on a `sqlite3` connection; rows as named tuples of converted values."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self._row_types: dict[str, Any] = {}

    def rows(self, name: str, params: Mapping[str, Any]) -> Sequence[Any]:
        """Return every row of the statement `name` run with `params`."""
        text, fixed, kinds = STATEMENTS[name]
        values: dict[str, Any] = dict(fixed)
        for key, value in params.items():
            if isinstance(value, list):
                # An `IN` list, expanded as SQLAlchemy expands it. Every list of these
                # statements filters a conjunction: an empty one selects no row.
                if not value:
                    return []
                names = [f"{key}_{index}" for index in range(1, len(value) + 1)]
                text = text.replace(f"__[POSTCOMPILE_{key}]", ", ".join(f":{n}" for n in names))
                values.update(zip(names, value, strict=True))
            elif isinstance(value, datetime):
                values[key] = sqlite_time(value)
            else:
                values[key] = value
        cursor = self.db.execute(text, values)
        row_type = self._row_types.get(name)
        if row_type is None:
            fields = [column[0] for column in cursor.description]
            row_type = self._row_types[name] = namedtuple(f"{name}_row", fields)
        return converted_rows(cursor, row_type, [_CONVERTERS[kind] for kind in kinds])


def converted_rows(
    cursor: sqlite3.Cursor, row_type: Any, converters: Sequence[Callable[[Any], Any] | None]
) -> list[Any]:
    """The cursor's rows as `row_type`, each value not None through its column's converter.

    Only the columns with a converter are visited: most of a statement's columns are
    taken as the driver gives them (a chain of 1,000 loops is 13,000 values a read).
    """
    make = row_type._make
    converting = [(index, convert) for index, convert in enumerate(converters) if convert]
    if not converting:
        return list(map(make, cursor))
    rows = []
    for row in cursor:
        values = list(row)
        for index, convert in converting:
            value = values[index]
            if value is not None:
                values[index] = convert(value)
        rows.append(make(values))
    return rows


def session_key_of(src: SqliteSource, session_id: str) -> SessionKey:
    """The key of the session with this id, looked up as the unscoped store looks it up."""
    return key_from_tenants(session_id, src.rows("session_tenants", {"sid": session_id}))


def _read_session(
    uri: str,
    timeout: float,
    session_id: str,
    read: Callable[[SqliteSource, SessionKey, Any], _T],
) -> _T | None:
    """`read(source, key, session row)` of a visible session in one read transaction, or None.

    The session is found as the store finds it (by id among the tenants' sessions), so a
    missing or shared id raises what the store raises. None when the file at `uri` is at
    another revision than the newest or cannot be read (the command then opens the store,
    which says what is wrong).
    """
    check_session_id(session_id)

    def read_visible(db: sqlite3.Connection) -> _T:
        src = SqliteSource(db)
        key = session_key_of(src, session_id)
        return read(src, key, visible_session(src, key))

    return read_file(uri, timeout, read_visible)


def read_file_context(
    uri: str,
    *,
    timeout: float,
    session_id: str,
    loop_id_of: Callable[[list[LoopRecord]], int | None],
    scope: CompactionScope | None,
    budget: Callable[[], int],
    overlay: str,
    as_of: datetime | int | None,
) -> tuple[list[LoopRecord], ContextSources] | None:
    """Read a session's loops and a loop's context from the SQLite file at `uri`, or None.

    The calls and their order are the command's on the store (its loops, then the
    context of the loop `loop_id_of` picks from them, within `budget()`), so it raises
    what the store raises; None as `_read_session` says.
    """

    def read(
        src: SqliteSource, key: SessionKey, _row: Any
    ) -> tuple[list[LoopRecord], ContextSources]:
        loops = list_loops(src, key)
        loop_id = loop_id_of(loops)
        tokens = budget()
        check_read(budget=tokens, loop_id=loop_id, overlay=overlay, as_of=as_of)
        sources = read_context(
            src, key, scope=scope, budget=tokens, loop_id=loop_id, overlay=overlay, as_of=as_of
        )
        return loops, sources

    return _read_session(uri, timeout, session_id, read)


def read_file_session(
    uri: str, *, timeout: float, session_id: str
) -> tuple[Session, list[LoopRecord], SessionUsage] | None:
    """Read a session, its loops and its usage from the SQLite file at `uri`, or None.

    What `sessions show` asks the store for (`get_session`, `list_loops`, `usage`), read
    by the same functions on the same statements, in one read transaction; it raises
    what the store raises; None as `_read_session` says.
    """

    def read(
        src: SqliteSource, key: SessionKey, row: Any
    ) -> tuple[Session, list[LoopRecord], SessionUsage]:
        return session_model(row._asdict()), list_loops(src, key), session_usage(src, key)

    return _read_session(uri, timeout, session_id, read)


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
        """The chain ending at `loop_id`, each loop with its current block (`SessionStore.chain_blocks`)."""
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
        """The raw messages of the chain ending at `loop_id`, in chunks (`SessionStore.iter_history`)."""
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


# ── the statements, generated from `store._source.sqlite_compiled` ──────────────

STATEMENTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "session": (
        "SELECT sessionstore_sessions.id, sessionstore_sessions.app_name, sessionstore_sessions.user_id, sessionstore_sessions.title, sessionstore_sessions.metadata, sessionstore_sessions.active_loop_id, sessionstore_sessions.version, sessionstore_sessions.loop_count, sessionstore_sessions.created_at, sessionstore_sessions.updated_at \n"
        "FROM sessionstore_sessions \n"
        "WHERE sessionstore_sessions.id = :sid AND sessionstore_sessions.app_name = :app AND sessionstore_sessions.user_id = :user",
        {},
        "----j---tt",
    ),
    "session_tenants": (
        "SELECT sessionstore_sessions.app_name, sessionstore_sessions.user_id \n"
        "FROM sessionstore_sessions \n"
        "WHERE sessionstore_sessions.id = :sid ORDER BY sessionstore_sessions.app_name, sessionstore_sessions.user_id\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 2, "param_2": 0},
        "--",
    ),
    "loop": (
        "SELECT sessionstore_loops.id, sessionstore_loops.session_id, sessionstore_loops.app_name, sessionstore_loops.user_id, sessionstore_loops.parent_loop_id, sessionstore_loops.sequence, sessionstore_loops.depth, sessionstore_loops.created_at, sessionstore_loops.closed_at, sessionstore_loops.message_count, sessionstore_loops.token_total, sessionstore_loops.turn_count, sessionstore_loops.open_tool_call_ids \n"
        "FROM sessionstore_loops \n"
        "WHERE sessionstore_loops.id = :lid AND sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user",
        {},
        "-------tt---j",
    ),
    "loops": (
        "SELECT sessionstore_loops.id, sessionstore_loops.session_id, sessionstore_loops.parent_loop_id, sessionstore_loops.sequence, sessionstore_loops.depth, sessionstore_loops.created_at, sessionstore_loops.closed_at, sessionstore_loops.message_count, sessionstore_loops.token_total, sessionstore_loops.turn_count \n"
        "FROM sessionstore_loops \n"
        "WHERE sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user ORDER BY sessionstore_loops.sequence",
        {},
        "-----tt---",
    ),
    "chain": (
        "WITH RECURSIVE chain(id, parent_loop_id, hops, depth, session_id, app_name, user_id) AS \n"
        "(SELECT sessionstore_loops.id AS id, sessionstore_loops.parent_loop_id AS parent_loop_id, :param_1 AS hops, sessionstore_loops.depth AS depth, sessionstore_loops.session_id AS session_id, sessionstore_loops.app_name AS app_name, sessionstore_loops.user_id AS user_id \n"
        "FROM sessionstore_loops \n"
        "WHERE sessionstore_loops.id = :head AND sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user UNION ALL SELECT parent.id AS id, parent.parent_loop_id AS parent_loop_id, chain.hops + :hops_1 AS anon_1, parent.depth AS depth, parent.session_id AS session_id, parent.app_name AS app_name, parent.user_id AS user_id \n"
        "FROM chain JOIN sessionstore_loops AS parent ON parent.id = chain.parent_loop_id)\n"
        " SELECT sessionstore_loops.id, sessionstore_loops.session_id, sessionstore_loops.parent_loop_id, sessionstore_loops.sequence, sessionstore_loops.depth, sessionstore_loops.created_at, sessionstore_loops.closed_at, sessionstore_loops.message_count, sessionstore_loops.token_total, sessionstore_loops.turn_count \n"
        "FROM sessionstore_loops JOIN chain ON chain.id = sessionstore_loops.id \n"
        "WHERE sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user ORDER BY sessionstore_loops.depth",
        {"param_1": 1, "hops_1": 1},
        "-----tt---",
    ),
    "chain_limited": (
        "WITH RECURSIVE chain(id, parent_loop_id, hops, depth, session_id, app_name, user_id) AS \n"
        "(SELECT sessionstore_loops.id AS id, sessionstore_loops.parent_loop_id AS parent_loop_id, :param_1 AS hops, sessionstore_loops.depth AS depth, sessionstore_loops.session_id AS session_id, sessionstore_loops.app_name AS app_name, sessionstore_loops.user_id AS user_id \n"
        "FROM sessionstore_loops \n"
        "WHERE sessionstore_loops.id = :head AND sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user UNION ALL SELECT parent.id AS id, parent.parent_loop_id AS parent_loop_id, chain.hops + :hops_1 AS anon_1, parent.depth AS depth, parent.session_id AS session_id, parent.app_name AS app_name, parent.user_id AS user_id \n"
        "FROM chain JOIN sessionstore_loops AS parent ON parent.id = chain.parent_loop_id \n"
        "WHERE chain.hops < :limit)\n"
        " SELECT sessionstore_loops.id, sessionstore_loops.session_id, sessionstore_loops.parent_loop_id, sessionstore_loops.sequence, sessionstore_loops.depth, sessionstore_loops.created_at, sessionstore_loops.closed_at, sessionstore_loops.message_count, sessionstore_loops.token_total, sessionstore_loops.turn_count \n"
        "FROM sessionstore_loops JOIN chain ON chain.id = sessionstore_loops.id \n"
        "WHERE sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user ORDER BY sessionstore_loops.depth",
        {"param_1": 1, "hops_1": 1},
        "-----tt---",
    ),
    "root": (
        "SELECT sessionstore_loops.id, sessionstore_loops.session_id, sessionstore_loops.app_name, sessionstore_loops.user_id, sessionstore_loops.parent_loop_id, sessionstore_loops.sequence, sessionstore_loops.depth, sessionstore_loops.created_at, sessionstore_loops.closed_at, sessionstore_loops.message_count, sessionstore_loops.token_total, sessionstore_loops.turn_count, sessionstore_loops.open_tool_call_ids \n"
        "FROM sessionstore_loops \n"
        "WHERE sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user AND sessionstore_loops.parent_loop_id IS NULL\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 2, "param_2": 0},
        "-------tt---j",
    ),
    "loop_stats_as_of": (
        "SELECT sessionstore_messages.loop_id, count(*) AS count_1, coalesce(sum(sessionstore_messages.token_count), :coalesce_2) AS coalesce_1, max(sessionstore_messages.turn_index) AS max_1 \n"
        "FROM sessionstore_messages \n"
        "WHERE sessionstore_messages.session_id = :sid AND sessionstore_messages.app_name = :app AND sessionstore_messages.user_id = :user AND sessionstore_messages.loop_id IN (__[POSTCOMPILE_loops]) AND sessionstore_messages.created_at <= :t GROUP BY sessionstore_messages.loop_id",
        {"coalesce_2": 0},
        "----",
    ),
    "generation_time": (
        "SELECT sessionstore_blocks.created_at \n"
        "FROM sessionstore_blocks \n"
        "WHERE sessionstore_blocks.session_id = :sid AND sessionstore_blocks.app_name = :app AND sessionstore_blocks.user_id = :user AND sessionstore_blocks.loop_id = :lid AND sessionstore_blocks.overlay = :overlay AND sessionstore_blocks.generation = :generation",
        {},
        "t",
    ),
    "overlay_block": (
        "SELECT sessionstore_blocks.id \n"
        "FROM sessionstore_blocks \n"
        "WHERE sessionstore_blocks.session_id = :sid AND sessionstore_blocks.app_name = :app AND sessionstore_blocks.user_id = :user AND sessionstore_blocks.overlay = :overlay\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "-",
    ),
    "block_rows": (
        "SELECT sessionstore_blocks.id, sessionstore_blocks.session_id, sessionstore_blocks.app_name, sessionstore_blocks.user_id, sessionstore_blocks.loop_id, sessionstore_blocks.overlay, sessionstore_blocks.generation, sessionstore_blocks.keep_first_start, sessionstore_blocks.keep_first_end, sessionstore_blocks.strategy, sessionstore_blocks.config, sessionstore_blocks.tokens_before, sessionstore_blocks.tokens_after, sessionstore_blocks.created_at \n"
        "FROM sessionstore_blocks \n"
        "WHERE sessionstore_blocks.session_id = :sid AND sessionstore_blocks.app_name = :app AND sessionstore_blocks.user_id = :user AND sessionstore_blocks.loop_id IN (__[POSTCOMPILE_loops]) AND sessionstore_blocks.overlay = :overlay",
        {},
        "----------j--t",
    ),
    "block_rows_as_of": (
        "SELECT sessionstore_blocks.id, sessionstore_blocks.session_id, sessionstore_blocks.app_name, sessionstore_blocks.user_id, sessionstore_blocks.loop_id, sessionstore_blocks.overlay, sessionstore_blocks.generation, sessionstore_blocks.keep_first_start, sessionstore_blocks.keep_first_end, sessionstore_blocks.strategy, sessionstore_blocks.config, sessionstore_blocks.tokens_before, sessionstore_blocks.tokens_after, sessionstore_blocks.created_at \n"
        "FROM sessionstore_blocks \n"
        "WHERE sessionstore_blocks.session_id = :sid AND sessionstore_blocks.app_name = :app AND sessionstore_blocks.user_id = :user AND sessionstore_blocks.loop_id IN (__[POSTCOMPILE_loops]) AND sessionstore_blocks.overlay = :overlay AND sessionstore_blocks.created_at <= :t",
        {},
        "----------j--t",
    ),
    "digest": (
        "SELECT sessionstore_digests.id, sessionstore_digests.session_id, sessionstore_digests.app_name, sessionstore_digests.user_id, sessionstore_digests.overlay, sessionstore_digests.head_loop_id, sessionstore_digests.through_loop_id, CAST(sessionstore_digests.folded AS TEXT) AS folded, sessionstore_digests.payload, sessionstore_digests.token_count, sessionstore_digests.details, sessionstore_digests.created_at \n"
        "FROM sessionstore_digests \n"
        "WHERE sessionstore_digests.session_id = :sid AND sessionstore_digests.app_name = :app AND sessionstore_digests.user_id = :user AND sessionstore_digests.overlay = :overlay ORDER BY sessionstore_digests.id DESC\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "--------j-jt",
    ),
    "digest_as_of": (
        "SELECT sessionstore_digests.id, sessionstore_digests.session_id, sessionstore_digests.app_name, sessionstore_digests.user_id, sessionstore_digests.overlay, sessionstore_digests.head_loop_id, sessionstore_digests.through_loop_id, CAST(sessionstore_digests.folded AS TEXT) AS folded, sessionstore_digests.payload, sessionstore_digests.token_count, sessionstore_digests.details, sessionstore_digests.created_at \n"
        "FROM sessionstore_digests \n"
        "WHERE sessionstore_digests.session_id = :sid AND sessionstore_digests.app_name = :app AND sessionstore_digests.user_id = :user AND sessionstore_digests.overlay = :overlay AND sessionstore_digests.created_at <= :t ORDER BY sessionstore_digests.id DESC\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "--------j-jt",
    ),
    "digest_heads": (
        "SELECT sessionstore_digests.id, sessionstore_digests.session_id, sessionstore_digests.app_name, sessionstore_digests.user_id, sessionstore_digests.overlay, sessionstore_digests.head_loop_id, sessionstore_digests.through_loop_id, CAST(sessionstore_digests.folded AS TEXT) AS folded, sessionstore_digests.payload, sessionstore_digests.token_count, sessionstore_digests.details, sessionstore_digests.created_at \n"
        "FROM sessionstore_digests \n"
        "WHERE sessionstore_digests.session_id = :sid AND sessionstore_digests.app_name = :app AND sessionstore_digests.user_id = :user AND sessionstore_digests.overlay = :overlay AND sessionstore_digests.head_loop_id IN (__[POSTCOMPILE_heads]) ORDER BY sessionstore_digests.id DESC\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "--------j-jt",
    ),
    "digest_heads_as_of": (
        "SELECT sessionstore_digests.id, sessionstore_digests.session_id, sessionstore_digests.app_name, sessionstore_digests.user_id, sessionstore_digests.overlay, sessionstore_digests.head_loop_id, sessionstore_digests.through_loop_id, CAST(sessionstore_digests.folded AS TEXT) AS folded, sessionstore_digests.payload, sessionstore_digests.token_count, sessionstore_digests.details, sessionstore_digests.created_at \n"
        "FROM sessionstore_digests \n"
        "WHERE sessionstore_digests.session_id = :sid AND sessionstore_digests.app_name = :app AND sessionstore_digests.user_id = :user AND sessionstore_digests.overlay = :overlay AND sessionstore_digests.head_loop_id IN (__[POSTCOMPILE_heads]) AND sessionstore_digests.created_at <= :t ORDER BY sessionstore_digests.id DESC\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "--------j-jt",
    ),
    "sections": (
        "SELECT sessionstore_block_sections.id, sessionstore_block_sections.session_id, sessionstore_block_sections.app_name, sessionstore_block_sections.user_id, sessionstore_block_sections.block_id, sessionstore_block_sections.kind, sessionstore_block_sections.start_turn, sessionstore_block_sections.end_turn \n"
        "FROM sessionstore_block_sections \n"
        "WHERE sessionstore_block_sections.session_id = :sid AND sessionstore_block_sections.app_name = :app AND sessionstore_block_sections.user_id = :user AND sessionstore_block_sections.block_id IN (__[POSTCOMPILE_blocks])",
        {},
        "--------",
    ),
    "section_messages": (
        "SELECT sessionstore_section_messages.id, sessionstore_section_messages.section_id, CAST(sessionstore_section_messages.payload AS TEXT) AS payload, sessionstore_section_messages.token_count, sessionstore_section_messages.covers \n"
        "FROM sessionstore_section_messages \n"
        "WHERE sessionstore_section_messages.session_id = :sid AND sessionstore_section_messages.app_name = :app AND sessionstore_section_messages.user_id = :user AND sessionstore_section_messages.section_id IN (__[POSTCOMPILE_sections]) ORDER BY sessionstore_section_messages.section_id, sessionstore_section_messages.position",
        {},
        "----j",
    ),
    "raw_turns": (
        "SELECT sessionstore_messages.id, sessionstore_messages.loop_id, sessionstore_messages.position, sessionstore_messages.turn_index, sessionstore_messages.token_count, sessionstore_messages.content_hash, sessionstore_messages.client_id, sessionstore_messages.created_at, CAST(sessionstore_messages.payload AS TEXT) AS payload \n"
        "FROM sessionstore_messages \n"
        "WHERE sessionstore_messages.session_id = :sid AND sessionstore_messages.app_name = :app AND sessionstore_messages.user_id = :user AND sessionstore_messages.loop_id = :lid AND sessionstore_messages.turn_index BETWEEN :a AND :b ORDER BY sessionstore_messages.position",
        {},
        "-------t-",
    ),
    "raw_turns_as_of": (
        "SELECT sessionstore_messages.id, sessionstore_messages.loop_id, sessionstore_messages.position, sessionstore_messages.turn_index, sessionstore_messages.token_count, sessionstore_messages.content_hash, sessionstore_messages.client_id, sessionstore_messages.created_at, CAST(sessionstore_messages.payload AS TEXT) AS payload \n"
        "FROM sessionstore_messages \n"
        "WHERE sessionstore_messages.session_id = :sid AND sessionstore_messages.app_name = :app AND sessionstore_messages.user_id = :user AND sessionstore_messages.loop_id = :lid AND sessionstore_messages.turn_index BETWEEN :a AND :b AND sessionstore_messages.created_at <= :t ORDER BY sessionstore_messages.position",
        {},
        "-------t-",
    ),
    "raw_loops": (
        "SELECT sessionstore_messages.id, sessionstore_messages.loop_id, sessionstore_messages.position, sessionstore_messages.turn_index, sessionstore_messages.token_count, sessionstore_messages.content_hash, sessionstore_messages.client_id, sessionstore_messages.created_at, CAST(sessionstore_messages.payload AS TEXT) AS payload \n"
        "FROM sessionstore_messages \n"
        "WHERE sessionstore_messages.session_id = :sid AND sessionstore_messages.app_name = :app AND sessionstore_messages.user_id = :user AND sessionstore_messages.loop_id IN (__[POSTCOMPILE_loops]) ORDER BY sessionstore_messages.loop_id, sessionstore_messages.position",
        {},
        "-------t-",
    ),
    "raw_loops_as_of": (
        "SELECT sessionstore_messages.id, sessionstore_messages.loop_id, sessionstore_messages.position, sessionstore_messages.turn_index, sessionstore_messages.token_count, sessionstore_messages.content_hash, sessionstore_messages.client_id, sessionstore_messages.created_at, CAST(sessionstore_messages.payload AS TEXT) AS payload \n"
        "FROM sessionstore_messages \n"
        "WHERE sessionstore_messages.session_id = :sid AND sessionstore_messages.app_name = :app AND sessionstore_messages.user_id = :user AND sessionstore_messages.loop_id IN (__[POSTCOMPILE_loops]) AND sessionstore_messages.created_at <= :t ORDER BY sessionstore_messages.loop_id, sessionstore_messages.position",
        {},
        "-------t-",
    ),
    "latest_user": (
        "SELECT sessionstore_messages.id, sessionstore_messages.loop_id, sessionstore_messages.position, sessionstore_messages.turn_index, sessionstore_messages.token_count, sessionstore_messages.content_hash, sessionstore_messages.client_id, sessionstore_messages.created_at, CAST(sessionstore_messages.payload AS TEXT) AS payload \n"
        "FROM sessionstore_messages \n"
        "WHERE sessionstore_messages.session_id = :sid AND sessionstore_messages.app_name = :app AND sessionstore_messages.user_id = :user AND sessionstore_messages.loop_id = :lid AND sessionstore_messages.kind = 'user' ORDER BY sessionstore_messages.position DESC\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "-------t-",
    ),
    "latest_user_as_of": (
        "SELECT sessionstore_messages.id, sessionstore_messages.loop_id, sessionstore_messages.position, sessionstore_messages.turn_index, sessionstore_messages.token_count, sessionstore_messages.content_hash, sessionstore_messages.client_id, sessionstore_messages.created_at, CAST(sessionstore_messages.payload AS TEXT) AS payload \n"
        "FROM sessionstore_messages \n"
        "WHERE sessionstore_messages.session_id = :sid AND sessionstore_messages.app_name = :app AND sessionstore_messages.user_id = :user AND sessionstore_messages.loop_id = :lid AND sessionstore_messages.kind = 'user' AND sessionstore_messages.created_at <= :t ORDER BY sessionstore_messages.position DESC\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "-------t-",
    ),
    "usage_recorded": (
        "SELECT sessionstore_usage.loop_id, sessionstore_usage.turn_index, count(*) AS count_1, sum(sessionstore_usage.input_tokens / :input_tokens_1) AS sum_1, sum(sessionstore_usage.input_tokens % :input_tokens_2) AS sum_2, sum(sessionstore_usage.output_tokens / :output_tokens_1) AS sum_3, sum(sessionstore_usage.output_tokens % :output_tokens_2) AS sum_4, sum(sessionstore_usage.cache_read_tokens / :cache_read_tokens_1) AS sum_5, sum(sessionstore_usage.cache_read_tokens % :cache_read_tokens_2) AS sum_6, sum(sessionstore_usage.cache_write_tokens / :cache_write_tokens_1) AS sum_7, sum(sessionstore_usage.cache_write_tokens % :cache_write_tokens_2) AS sum_8, sum(sessionstore_usage.reasoning_tokens / :reasoning_tokens_1) AS sum_9, sum(sessionstore_usage.reasoning_tokens % :reasoning_tokens_2) AS sum_10 \n"
        "FROM sessionstore_usage \n"
        "WHERE sessionstore_usage.session_id = :sid AND sessionstore_usage.app_name = :app AND sessionstore_usage.user_id = :user GROUP BY sessionstore_usage.loop_id, sessionstore_usage.turn_index",
        {
            "input_tokens_1": 4294967296,
            "input_tokens_2": 4294967296,
            "output_tokens_1": 4294967296,
            "output_tokens_2": 4294967296,
            "cache_read_tokens_1": 4294967296,
            "cache_read_tokens_2": 4294967296,
            "cache_write_tokens_1": 4294967296,
            "cache_write_tokens_2": 4294967296,
            "reasoning_tokens_1": 4294967296,
            "reasoning_tokens_2": 4294967296,
        },
        "-------------",
    ),
    "usage_messages": (
        "SELECT sessionstore_messages.loop_id, sessionstore_messages.turn_index, count(*) AS count_1, sum(coalesce(json_extract(sessionstore_messages.payload, '$.usage.input_tokens'), :coalesce_1) / :coalesce_2) AS sum_1, sum(coalesce(json_extract(sessionstore_messages.payload, '$.usage.input_tokens'), :coalesce_1) % :coalesce_3) AS sum_2, sum(coalesce(json_extract(sessionstore_messages.payload, '$.usage.output_tokens'), :coalesce_4) / :coalesce_5) AS sum_3, sum(coalesce(json_extract(sessionstore_messages.payload, '$.usage.output_tokens'), :coalesce_4) % :coalesce_6) AS sum_4, sum(coalesce(json_extract(sessionstore_messages.payload, '$.usage.cache_read_tokens'), :coalesce_7) / :coalesce_8) AS sum_5, sum(coalesce(json_extract(sessionstore_messages.payload, '$.usage.cache_read_tokens'), :coalesce_7) % :coalesce_9) AS sum_6, sum(coalesce(json_extract(sessionstore_messages.payload, '$.usage.cache_write_tokens'), :coalesce_10) / :coalesce_11) AS sum_7, sum(coalesce(json_extract(sessionstore_messages.payload, '$.usage.cache_write_tokens'), :coalesce_10) % :coalesce_12) AS sum_8, sum(coalesce(json_extract(sessionstore_messages.payload, '$.usage.reasoning_tokens'), :coalesce_13) / :coalesce_14) AS sum_9, sum(coalesce(json_extract(sessionstore_messages.payload, '$.usage.reasoning_tokens'), :coalesce_13) % :coalesce_15) AS sum_10 \n"
        "FROM sessionstore_messages \n"
        "WHERE sessionstore_messages.loop_id IN (SELECT sessionstore_loops.id \n"
        "FROM sessionstore_loops \n"
        "WHERE sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user) AND sessionstore_messages.session_id = :sid AND sessionstore_messages.app_name = :app AND sessionstore_messages.user_id = :user AND sessionstore_messages.kind = :kind_1 AND json_type(sessionstore_messages.payload, '$.usage') = 'object' GROUP BY sessionstore_messages.loop_id, sessionstore_messages.turn_index",
        {
            "coalesce_1": 0,
            "coalesce_2": 4294967296,
            "coalesce_3": 4294967296,
            "coalesce_4": 0,
            "coalesce_5": 4294967296,
            "coalesce_6": 4294967296,
            "coalesce_7": 0,
            "coalesce_8": 4294967296,
            "coalesce_9": 4294967296,
            "coalesce_10": 0,
            "coalesce_11": 4294967296,
            "coalesce_12": 4294967296,
            "coalesce_13": 0,
            "coalesce_14": 4294967296,
            "coalesce_15": 4294967296,
            "kind_1": "assistant",
        },
        "-------------",
    ),
    "chain_counts": (
        "WITH RECURSIVE chain(id, parent_loop_id, hops, depth, session_id, app_name, user_id) AS \n"
        "(SELECT sessionstore_loops.id AS id, sessionstore_loops.parent_loop_id AS parent_loop_id, :param_1 AS hops, sessionstore_loops.depth AS depth, sessionstore_loops.session_id AS session_id, sessionstore_loops.app_name AS app_name, sessionstore_loops.user_id AS user_id \n"
        "FROM sessionstore_loops \n"
        "WHERE sessionstore_loops.id = :head AND sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user UNION ALL SELECT parent.id AS id, parent.parent_loop_id AS parent_loop_id, chain.hops + :hops_1 AS anon_1, parent.depth AS depth, parent.session_id AS session_id, parent.app_name AS app_name, parent.user_id AS user_id \n"
        "FROM chain JOIN sessionstore_loops AS parent ON parent.id = chain.parent_loop_id)\n"
        " SELECT sessionstore_loops.id, sessionstore_loops.message_count \n"
        "FROM sessionstore_loops JOIN chain ON chain.id = sessionstore_loops.id \n"
        "WHERE sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user ORDER BY sessionstore_loops.depth",
        {"param_1": 1, "hops_1": 1},
        "--",
    ),
    "loop_page": (
        "SELECT sessionstore_messages.id, sessionstore_messages.loop_id, sessionstore_messages.position, sessionstore_messages.turn_index, sessionstore_messages.token_count, sessionstore_messages.content_hash, sessionstore_messages.client_id, sessionstore_messages.created_at, CAST(sessionstore_messages.payload AS TEXT) AS payload \n"
        "FROM sessionstore_messages \n"
        "WHERE sessionstore_messages.session_id = :sid AND sessionstore_messages.app_name = :app AND sessionstore_messages.user_id = :user AND sessionstore_messages.loop_id = :lid AND sessionstore_messages.position >= :start AND sessionstore_messages.position < :stop ORDER BY sessionstore_messages.position",
        {},
        "-------t-",
    ),
    "loop_blocks": (
        "SELECT sessionstore_blocks.id, sessionstore_blocks.session_id, sessionstore_blocks.app_name, sessionstore_blocks.user_id, sessionstore_blocks.loop_id, sessionstore_blocks.overlay, sessionstore_blocks.generation, sessionstore_blocks.keep_first_start, sessionstore_blocks.keep_first_end, sessionstore_blocks.strategy, sessionstore_blocks.config, sessionstore_blocks.tokens_before, sessionstore_blocks.tokens_after, sessionstore_blocks.created_at \n"
        "FROM sessionstore_blocks \n"
        "WHERE sessionstore_blocks.session_id = :sid AND sessionstore_blocks.app_name = :app AND sessionstore_blocks.user_id = :user AND sessionstore_blocks.loop_id = :lid ORDER BY sessionstore_blocks.id",
        {},
        "----------j--t",
    ),
}
"""Each of `_context_source.STATEMENTS`: its SQLite text, fixed parameters, column kinds."""
