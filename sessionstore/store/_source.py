"""The store's `Source`: each named statement as a SQLAlchemy statement.

`sessionstore._context_source` reads a loop's context, and `sessionstore._usage_read` a
session's usage, against named statements; here each name is the store's statement
(`statement`), run on the transaction's connection. The same statements compiled for
SQLite are the texts `sessionstore._sqlite_context` runs on the standard library's driver
(a test holds them equal).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    any_,
    bindparam,
    cast,
    extract,
    func,
    literal_column,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY

from sessionstore.models import StoredMessage
from sessionstore.models._batch import RecordReading
from sessionstore.store import _statements as sql
from sessionstore.store._chain_walk import select_chain, select_chain_counts, walk_form
from sessionstore.store._plain import is_citus, read_plain, read_sqlite
from sessionstore.store._tables import decoded_models

__all__ = ["StoreSource", "statement"]


def _loops() -> Any:
    return select(*sql.LOOP_COLUMNS).where(*sql.keyed(sql.loops)).order_by(sql.loops.c.sequence)


def _root() -> Any:
    loops = sql.loops
    return select(loops).where(*sql.keyed(loops), loops.c.parent_loop_id.is_(None)).limit(2)


def _loop_stats_as_of() -> Any:
    columns = sql.messages.c
    return (
        select(
            columns.loop_id,
            func.count(),
            func.coalesce(func.sum(columns.token_count), 0),
            func.max(columns.turn_index),
        )
        .where(
            *sql.keyed(sql.messages),
            columns.loop_id.in_(bindparam("loops", expanding=True)),
            columns.created_at <= bindparam("t"),
        )
        .group_by(columns.loop_id)
    )


def _generation_time() -> Any:
    columns = sql.blocks.c
    return select(columns.created_at).where(
        *sql.keyed(sql.blocks),
        columns.loop_id == bindparam("lid"),
        columns.overlay == bindparam("overlay"),
        columns.generation == bindparam("generation"),
    )


def _overlay_block() -> Any:
    columns = sql.blocks.c
    return (
        select(columns.id)
        .where(*sql.keyed(sql.blocks), columns.overlay == bindparam("overlay"))
        .limit(1)
    )


def _recorded_usage() -> Any:
    from sessionstore.store._usage import recorded_usage  # it imports this module

    return recorded_usage()


def _message_usage(dialect: str) -> Any:
    from sessionstore.store._usage import message_usage

    return message_usage(dialect)


def _raw_loops(as_of: bool) -> Callable[[str], Any]:
    """The messages of the loops `:loops` (by loop and position), for a dialect.

    On PostgreSQL the loop ids are one array (`loop_id = ANY(:loops)`), not an `IN` list
    of as many parameters: asyncpg's plain read (`read_plain`) binds it as one value, and
    every list length is the same statement (one prepared statement, one plan).
    """

    def build(dialect: str) -> Any:
        if dialect != "postgresql":
            return sql.SELECT_RAW_LOOPS_AS_OF if as_of else sql.SELECT_RAW_LOOPS
        columns = sql.messages.c
        where = [
            *sql.keyed(sql.messages),
            columns.loop_id == any_(bindparam("loops", type_=ARRAY(BigInteger))),
        ]
        if as_of:
            where.append(columns.created_at <= bindparam("t"))
        return (
            select(*sql.MESSAGE_COLUMNS).where(*where).order_by(columns.loop_id, columns.position)
        )

    return build


_BY_DIALECT: dict[str, Callable[[str], Any]] = {
    "usage_messages": _message_usage,
    "raw_loops": _raw_loops(as_of=False),
    "raw_loops_as_of": _raw_loops(as_of=True),
}
"""The statements whose text depends on the dialect (they read JSON), by name."""

_BUILDERS: dict[str, Callable[[], Any]] = {
    "session": lambda: sql.SELECT_SESSION,
    "session_tenants": lambda: sql.SELECT_SESSION_TENANTS,
    "loop": lambda: sql.SELECT_LOOP,
    "loops": _loops,
    "root": _root,
    "loop_stats_as_of": _loop_stats_as_of,
    "generation_time": _generation_time,
    "overlay_block": _overlay_block,
    "block_rows": lambda: sql.select_block_rows(False),
    "block_rows_as_of": lambda: sql.select_block_rows(True),
    "digest": lambda: sql.select_newest_digest(False, False),
    "digest_as_of": lambda: sql.select_newest_digest(False, True),
    "digest_heads": lambda: sql.select_newest_digest(True, False),
    "digest_heads_as_of": lambda: sql.select_newest_digest(True, True),
    "sections": lambda: sql.SELECT_SECTIONS,
    "section_messages": lambda: sql.SELECT_SECTION_MESSAGES,
    "raw_turns": lambda: sql.SELECT_RAW_TURNS,
    "raw_turns_as_of": lambda: sql.SELECT_RAW_TURNS_AS_OF,
    "latest_user": lambda: sql.SELECT_LATEST_USER,
    "latest_user_as_of": lambda: sql.SELECT_LATEST_USER_AS_OF,
    "usage_recorded": _recorded_usage,
    "loop_page": lambda: sql.SELECT_LOOP_PAGE,
    "loop_blocks": lambda: sql.select_blocks(False).order_by(sql.blocks.c.id),
}


_WALKS: dict[str, Callable[[str], Any]] = {
    "chain": lambda form: select_chain(False, form),
    "chain_limited": lambda form: select_chain(True, form),
    "chain_counts": select_chain_counts,
}
"""The statements that walk a chain, by the form of their steps (`walk_form`)."""


@cache
def statement(name: str, dialect: str, routed: bool = False) -> Any:
    """The store's statement named `name` for `dialect`, built once.

    `name` is one of `_context_source.STATEMENTS`; most are the same on every dialect.
    A chain's walk finds each parent as the database needs (`walk_form`; `routed`:
    a Citus database).
    """
    walk = _WALKS.get(name)
    if walk is not None:
        return walk(walk_form(dialect, routed))
    by_dialect = _BY_DIALECT.get(name)
    return by_dialect(dialect) if by_dialect is not None else _BUILDERS[name]()


class StoreSource:
    """Runs the named statements on a connection (in the caller's transaction)."""

    __slots__ = ("db", "dialect", "routed")

    def __init__(self, db: Connection) -> None:
        self.db = db
        self.dialect: str = db.dialect.name
        self.routed = is_citus(db)

    def rows(self, name: str, params: Mapping[str, Any]) -> Sequence[Any]:
        """Return every row of the statement `name` run with `params`."""
        return self.db.execute(statement(name, self.dialect, self.routed), params).all()

    def messages(
        self,
        name: str,
        params: Mapping[str, Any],
        session_id: str,
        reading: RecordReading | None = None,
    ) -> list[StoredMessage]:
        """Return the stored messages of the statement `name` (of the message columns), decoded.

        The rows come straight from the driver, on SQLite (`read_sqlite`) and on asyncpg
        (`read_plain`, the time as microseconds: `micros_read`): SQLAlchemy's result rows
        were more than half of a context read of thousands of messages. With `reading`
        (of a `RecordCache`), a message it holds is taken again, not decoded.
        """
        if self.dialect == "sqlite":
            rows = read_sqlite(self.db, statement(name, "sqlite"), params)
            return decoded_models(rows, session_id, plain="sqlite", reading=reading)
        if self.dialect == "postgresql":
            found = statement(name, self.dialect, self.routed)
            plain = read_plain(self.db, micros_read(found), params)
            if plain is not None:
                return decoded_models(plain, session_id, plain="postgresql", reading=reading)
        return decoded_models(self.rows(name, params), session_id, reading=reading)


_MICROS_READS: dict[int, tuple[Any, Any]] = {}


def micros_read(statement: Any) -> Any:
    """The statement of the message columns with `created_at` as integer microseconds.

    For asyncpg's plain read (`read_plain`), which gets each value as the driver decodes
    it: a `timestamptz` becomes a new `datetime` a row, about 60% of what the eight
    columns beside the payload cost to decode, while a batch's messages share one time,
    which `decoded_records` turns into a `datetime` once (`utc_micros`). `EXTRACT` gives
    `numeric` (exact) from PostgreSQL 14, and a `double precision` before, whose error is
    a fraction of a microsecond at today's times, so the rounding cast is exact either
    way. Made once a statement (cached by identity; the statements are built once).
    """
    entry = _MICROS_READS.get(id(statement))
    if entry is None or entry[0] is not statement:
        columns = list(statement.selected_columns)
        at = sql.MESSAGE_COLUMNS.index(sql.messages.c.created_at)
        micros = extract("epoch", columns[at]) * literal_column("1000000")
        columns[at] = cast(micros, BigInteger).label("created_at")
        entry = (statement, statement.with_only_columns(*columns))
        _MICROS_READS[id(statement)] = entry
    return entry[1]


def sqlite_compiled(name: str) -> tuple[str, dict[str, Any], str]:
    """The statement `name` compiled for SQLite (named parameters), as `_sqlite_context` keeps it.

    Returns its text (an `IN` list's parameter left as `__[POSTCOMPILE_<name>]`), the
    values of the parameters the statement fixes (a `LIMIT`, a literal), and a letter a
    selected column: `t` a time (`sqlite_utc`), `j` JSON (`json.loads`), `-` as the
    driver gives it. A test holds `_sqlite_context.STATEMENTS` equal to these.
    """
    from sqlalchemy.dialects import sqlite

    from sessionstore.store._nul import NulSafeJSON
    from sessionstore.store._types import UTCDateTime

    stmt = statement(name, "sqlite")
    compiled = stmt.compile(dialect=sqlite.dialect(paramstyle="named"))
    fixed = {
        key: value for key, value in compiled.params.items() if not compiled.binds[key].required
    }
    kinds = "".join(
        "t"
        if isinstance(column.type, UTCDateTime)
        else "j"
        if isinstance(column.type, NulSafeJSON)
        else "-"
        for column in stmt.selected_columns
    )
    return str(compiled), fixed, kinds
