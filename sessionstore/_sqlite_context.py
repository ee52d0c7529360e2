# ruff: noqa: E501  (the statements' texts are kept as SQLAlchemy compiles them, one line a clause)
"""`context`, `sessions show`, `export` and `audit` on a SQLite file without SQLAlchemy, on `sqlite3`.

A context read (`_context_read.read_context`, the same function the store runs), a
session's usage (`_usage_read.session_usage`, likewise) and a session's raw history a
page at a time (`_file_history.FileHistory`, with the store's paging) ask their
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
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from sessionstore._context_read import read_context
from sessionstore._context_source import (
    SessionKey,
    check_read,
    check_session_id,
    key_from_tenants,
    list_loops,
    visible_session,
)
from sessionstore._items import ContextSources
from sessionstore._sqlite_read import read_file, session_model, sqlite_utc
from sessionstore._usage_read import session_usage
from sessionstore.config import CompactionScope
from sessionstore.models import (
    LoopRecord,
    Session,
    SessionUsage,
    StoredMessage,
)
from sessionstore.models._batch import RecordReading, decoded_records

__all__ = [
    "STATEMENTS",
    "SqliteSource",
    "converted_rows",
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

    def messages(
        self,
        name: str,
        params: Mapping[str, Any],
        session_id: str,
        reading: RecordReading | None = None,
    ) -> list[StoredMessage]:
        """Return the stored messages of a statement of the message columns, each decoded."""
        return decoded_records(self.rows(name, params), session_id, reading=reading)


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
        "WITH RECURSIVE chain(id, parent_loop_id, hops, depth, sequence, created_at, closed_at, message_count, token_total, turn_count, session_id, app_name, user_id) AS \n"
        "(SELECT sessionstore_loops.id AS id, sessionstore_loops.parent_loop_id AS parent_loop_id, :param_1 AS hops, sessionstore_loops.depth AS depth, sessionstore_loops.sequence AS sequence, sessionstore_loops.created_at AS created_at, sessionstore_loops.closed_at AS closed_at, sessionstore_loops.message_count AS message_count, sessionstore_loops.token_total AS token_total, sessionstore_loops.turn_count AS turn_count, sessionstore_loops.session_id AS session_id, sessionstore_loops.app_name AS app_name, sessionstore_loops.user_id AS user_id \n"
        "FROM sessionstore_loops \n"
        "WHERE sessionstore_loops.id = :head AND sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user UNION ALL SELECT parent.id AS id, parent.parent_loop_id AS parent_loop_id, chain.hops + :hops_1 AS anon_1, parent.depth AS depth, parent.sequence AS sequence, parent.created_at AS created_at, parent.closed_at AS closed_at, parent.message_count AS message_count, parent.token_total AS token_total, parent.turn_count AS turn_count, parent.session_id AS session_id, parent.app_name AS app_name, parent.user_id AS user_id \n"
        "FROM chain JOIN sessionstore_loops AS parent ON parent.id = chain.parent_loop_id)\n"
        " SELECT chain.id, chain.session_id, chain.parent_loop_id, chain.sequence, chain.depth, chain.created_at, chain.closed_at, chain.message_count, chain.token_total, chain.turn_count \n"
        "FROM chain ORDER BY chain.depth",
        {"param_1": 1, "hops_1": 1},
        "-----tt---",
    ),
    "chain_limited": (
        "WITH RECURSIVE chain(id, parent_loop_id, hops, depth, sequence, created_at, closed_at, message_count, token_total, turn_count, session_id, app_name, user_id) AS \n"
        "(SELECT sessionstore_loops.id AS id, sessionstore_loops.parent_loop_id AS parent_loop_id, :param_1 AS hops, sessionstore_loops.depth AS depth, sessionstore_loops.sequence AS sequence, sessionstore_loops.created_at AS created_at, sessionstore_loops.closed_at AS closed_at, sessionstore_loops.message_count AS message_count, sessionstore_loops.token_total AS token_total, sessionstore_loops.turn_count AS turn_count, sessionstore_loops.session_id AS session_id, sessionstore_loops.app_name AS app_name, sessionstore_loops.user_id AS user_id \n"
        "FROM sessionstore_loops \n"
        "WHERE sessionstore_loops.id = :head AND sessionstore_loops.session_id = :sid AND sessionstore_loops.app_name = :app AND sessionstore_loops.user_id = :user UNION ALL SELECT parent.id AS id, parent.parent_loop_id AS parent_loop_id, chain.hops + :hops_1 AS anon_1, parent.depth AS depth, parent.sequence AS sequence, parent.created_at AS created_at, parent.closed_at AS closed_at, parent.message_count AS message_count, parent.token_total AS token_total, parent.turn_count AS turn_count, parent.session_id AS session_id, parent.app_name AS app_name, parent.user_id AS user_id \n"
        "FROM chain JOIN sessionstore_loops AS parent ON parent.id = chain.parent_loop_id \n"
        "WHERE chain.hops < :limit)\n"
        " SELECT chain.id, chain.session_id, chain.parent_loop_id, chain.sequence, chain.depth, chain.created_at, chain.closed_at, chain.message_count, chain.token_total, chain.turn_count \n"
        "FROM chain ORDER BY chain.depth",
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
        "SELECT sessionstore_digests.id, sessionstore_digests.session_id, sessionstore_digests.app_name, sessionstore_digests.user_id, sessionstore_digests.overlay, sessionstore_digests.head_loop_id, sessionstore_digests.through_loop_id, CAST(sessionstore_digests.folded AS TEXT) AS folded, sessionstore_digests.payload, sessionstore_digests.token_count, sessionstore_digests.details, sessionstore_digests.created_at, sessionstore_digests.extends_id \n"
        "FROM sessionstore_digests \n"
        "WHERE sessionstore_digests.session_id = :sid AND sessionstore_digests.app_name = :app AND sessionstore_digests.user_id = :user AND sessionstore_digests.overlay = :overlay ORDER BY sessionstore_digests.id DESC\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "--------j-jt-",
    ),
    "digest_as_of": (
        "SELECT sessionstore_digests.id, sessionstore_digests.session_id, sessionstore_digests.app_name, sessionstore_digests.user_id, sessionstore_digests.overlay, sessionstore_digests.head_loop_id, sessionstore_digests.through_loop_id, CAST(sessionstore_digests.folded AS TEXT) AS folded, sessionstore_digests.payload, sessionstore_digests.token_count, sessionstore_digests.details, sessionstore_digests.created_at, sessionstore_digests.extends_id \n"
        "FROM sessionstore_digests \n"
        "WHERE sessionstore_digests.session_id = :sid AND sessionstore_digests.app_name = :app AND sessionstore_digests.user_id = :user AND sessionstore_digests.overlay = :overlay AND sessionstore_digests.created_at <= :t ORDER BY sessionstore_digests.id DESC\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "--------j-jt-",
    ),
    "digest_heads": (
        "SELECT sessionstore_digests.id, sessionstore_digests.session_id, sessionstore_digests.app_name, sessionstore_digests.user_id, sessionstore_digests.overlay, sessionstore_digests.head_loop_id, sessionstore_digests.through_loop_id, CAST(sessionstore_digests.folded AS TEXT) AS folded, sessionstore_digests.payload, sessionstore_digests.token_count, sessionstore_digests.details, sessionstore_digests.created_at, sessionstore_digests.extends_id \n"
        "FROM sessionstore_digests \n"
        "WHERE sessionstore_digests.session_id = :sid AND sessionstore_digests.app_name = :app AND sessionstore_digests.user_id = :user AND sessionstore_digests.overlay = :overlay AND sessionstore_digests.head_loop_id IN (__[POSTCOMPILE_heads]) ORDER BY sessionstore_digests.id DESC\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "--------j-jt-",
    ),
    "digest_heads_as_of": (
        "SELECT sessionstore_digests.id, sessionstore_digests.session_id, sessionstore_digests.app_name, sessionstore_digests.user_id, sessionstore_digests.overlay, sessionstore_digests.head_loop_id, sessionstore_digests.through_loop_id, CAST(sessionstore_digests.folded AS TEXT) AS folded, sessionstore_digests.payload, sessionstore_digests.token_count, sessionstore_digests.details, sessionstore_digests.created_at, sessionstore_digests.extends_id \n"
        "FROM sessionstore_digests \n"
        "WHERE sessionstore_digests.session_id = :sid AND sessionstore_digests.app_name = :app AND sessionstore_digests.user_id = :user AND sessionstore_digests.overlay = :overlay AND sessionstore_digests.head_loop_id IN (__[POSTCOMPILE_heads]) AND sessionstore_digests.created_at <= :t ORDER BY sessionstore_digests.id DESC\n"
        " LIMIT :param_1 OFFSET :param_2",
        {"param_1": 1, "param_2": 0},
        "--------j-jt-",
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
