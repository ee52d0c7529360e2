"""Statements run straight on the driver, and whether a PostgreSQL database is Citus.

The append path's few statements, where SQLAlchemy's execution costs several times what
the database needs, run on the stdlib SQLite cursor.

Each helper returns None (or takes SQLAlchemy's path itself) on a database it does not
serve, so a caller keeps one line for both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError

__all__ = [
    "CITUS_INFO",
    "driver_values",
    "insert_plain",
    "is_citus",
    "on_asyncpg",
    "read_plain",
    "read_sqlite",
    "rows_of",
    "run_plain",
]

CITUS_INFO = "sessionstore_citus"
"""Where `is_citus` keeps its answer in a pooled connection's `info`."""

_PLAIN_INSERTS: dict[tuple[str, tuple[str, ...], int], str] = {}
_Compiled = tuple[Any, str, tuple[str, ...], dict[str, Any], dict[str, Any]]
"""A statement, its SQL, its parameters' names in order, its literals and bind processors."""
_PLAIN_STATEMENTS: dict[tuple[int, str], _Compiled] = {}


def is_citus(db: Connection) -> bool:
    """Whether the database is a Citus coordinator (asked once per connection).

    There a statement that writes through a data-modifying CTE or `INSERT ... SELECT` runs
    in several steps through the coordinator; the store sends plain statements instead,
    each of which Citus routes to the one node that holds the session.
    """
    if db.dialect.name != "postgresql":
        return False
    info = db.connection.info
    found = info.get(CITUS_INFO)
    if found is None:
        query = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
        found = info[CITUS_INFO] = bool(db.exec_driver_sql(query).scalar())
    return bool(found)


def on_asyncpg(dialect: Dialect, dispatch: Any) -> bool:
    """Whether statements may go straight to asyncpg: its dialect, and no cursor listeners.

    `dispatch`: an engine's or a connection's. Listeners (an application's tracing, the
    tests' routing check) see only what SQLAlchemy executes, so with any the statement
    takes SQLAlchemy's path.
    """
    return dialect.driver == "asyncpg" and not (
        dispatch.before_cursor_execute or dispatch.after_cursor_execute
    )


def _compiled(dialect: Dialect, statement: Any, params: Mapping[str, Any]) -> _Compiled:
    """Compile a statement for the dialect once (cached by identity)."""
    key = (id(statement), dialect.name)
    entry = _PLAIN_STATEMENTS.get(key)
    if entry is None or entry[0] is not statement:
        compiled = statement.compile(dialect=dialect)
        names = tuple(compiled.positiontup or ())
        # Literals SQLAlchemy turned into parameters (the 1 of `version + 1`).
        fixed = {name: compiled.binds[name].value for name in names if name not in params}
        processors = {n: p for n, p in compiled._bind_processors.items() if n in names}
        entry = (statement, compiled.string, names, fixed, processors)
        _PLAIN_STATEMENTS[key] = entry
    return entry


def driver_values(
    dialect: Dialect, statement: Any, params: Mapping[str, Any]
) -> tuple[str, list[Any]]:
    """The statement's SQL for the dialect and its parameters in order, bind-processed.

    What SQLAlchemy would send the driver: the compiled SQL (once a statement), each
    parameter through its type's bind processor, the literals it made parameters.
    """
    _, sql, names, fixed, processors = _compiled(dialect, statement, params)
    values = []
    for name in names:
        value = params[name] if name in params else fixed[name]
        process = processors.get(name)
        values.append(value if process is None or value is None else process(value))
    return sql, values


def _fetch(db: Connection, sql: str, values: list[Any]) -> list[Any]:
    """Run SQL on the connection's DBAPI cursor and return every row as the driver gives it."""
    cursor: Any = db.connection.dbapi_connection.cursor()  # type: ignore[union-attr]  # a live connection
    dbapi_error = db.dialect.loaded_dbapi.Error
    try:
        cursor.execute(sql, values)
        return cursor.fetchall()  # type: ignore[no-any-return]  # DBAPI rows
    except dbapi_error as exc:
        raise DBAPIError.instance(sql, None, exc, dbapi_error) from exc
    finally:
        cursor.close()


def run_plain(db: Connection, statement: Any, params: Mapping[str, Any]) -> list[Any] | None:
    """Run a pre-built statement straight on a SQLite connection; return its rows.

    For the few statements of the append path, where SQLAlchemy's execution costs several
    times what SQLite needs: the statement is compiled once, and the parameters must be
    bind-ready (no type processing is applied). Returns None on other databases: run
    the statement with `db.execute` there.
    """
    if db.dialect.name != "sqlite":
        return None
    _, sql, names, fixed, _ = _compiled(db.dialect, statement, params)
    return _fetch(db, sql, [params[n] if n in params else fixed[n] for n in names])


def read_plain(db: Connection, statement: Any, params: Mapping[str, Any]) -> list[Any] | None:
    """Run a row-returning read straight on the driver's cursor; return the driver's rows.

    On SQLite this is `run_plain`. On PostgreSQL through asyncpg the statement goes through
    the DBAPI adapter's cursor (its prepared statement cache, its transaction and error
    handling) but skips SQLAlchemy's result processing, which cost a decoded read of 5,000
    messages about as much as the driver's fetch: each value comes as asyncpg gives it
    (`timestamptz` an aware UTC datetime, `bytea` bytes, text still NUL-encoded, see
    `_nul.py`), so the caller must undo what the column types' result processors do. The
    parameters go through their types' bind processors. Returns None on other drivers,
    and on a PostgreSQL connection with cursor listeners (an application's tracing, the
    tests' routing check), which then see the statement go through SQLAlchemy as usual.
    """
    if db.dialect.name == "sqlite":
        return run_plain(db, statement, params)
    if not on_asyncpg(db.dialect, db.dispatch):
        return None
    return _fetch(db, *driver_values(db.dialect, statement, params))


def read_sqlite(db: Connection, statement: Any, params: Mapping[str, Any]) -> list[Any]:
    """Run a read straight on a SQLite connection's cursor; return the driver's rows.

    As `run_plain`, for a statement that may hold `IN` lists (each list value of `params`
    is expanded as SQLAlchemy expands it; every list of the store's reads filters a
    conjunction, so an empty one selects no row) and parameters of any type (each goes
    through its type's bind processor, a time as the store binds it).
    """
    _, sql, names, fixed, processors = _compiled(db.dialect, statement, params)
    values: list[Any] = []
    for name in names:
        value = params[name] if name in params else fixed[name]
        if isinstance(value, list):
            if not value:
                return []
            sql = sql.replace(f"__[POSTCOMPILE_{name}]", ", ".join("?" * len(value)), 1)
            values.extend(value)
            continue
        process = processors.get(name)
        values.append(value if process is None or value is None else process(value))
    return _fetch(db, sql, values)


def rows_of(
    db: Connection,
    statement: Any,
    params: Mapping[str, Any],
    plain_params: Mapping[str, Any] | None = None,
) -> Sequence[Any]:
    """Return a row-returning statement's rows: on SQLite through `run_plain`, else `execute`.

    `plain_params`: the bind-ready form of `params` for `run_plain`, when they differ (a
    time bound with `bound_time`).
    """
    rows = run_plain(db, statement, params if plain_params is None else plain_params)
    return db.execute(statement, params).all() if rows is None else rows


_MAX_VARIABLES = 999
"""The fewest parameters a SQLite statement may have (`SQLITE_MAX_VARIABLE_NUMBER` before 3.32)."""


def _insert_sql(table: str, columns: tuple[str, ...], count: int) -> str:
    """The INSERT of `count` rows in one VALUES list (built once a table, columns and count)."""
    key = (table, columns, count)
    sql = _PLAIN_INSERTS.get(key)
    if sql is None:
        row = f"({', '.join('?' * len(columns))})"
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([row] * count)}"
        _PLAIN_INSERTS[key] = sql
    return sql


def insert_plain(
    db: Connection, table: Table, columns: tuple[str, ...], rows: Sequence[Sequence[Any]]
) -> list[int] | None:
    """Insert rows of bind-ready values on a SQLite connection and return their ids.

    Straight on the stdlib cursor: no statement compilation, no type processing of each
    value and no `RETURNING` (the values must already be what the column types would
    bind: JSON as text, datetimes processed). The rows go in a few multi-row statements,
    not one statement a row (`executemany`): a statement's run costs the driver's and
    SQLite's per-statement work (a reset, a bind pass, a step, the start of the trigger
    program), measured at 2.5 to 3.5 µs a row, a fifth of a short message's insert. The
    rows are split in powers of two (100 = 64 + 32 + 4), so a handful of statements serve
    every batch size and each is prepared once (the driver's statement cache). The ids
    are consecutive because the transaction holds the write lock and the table is
    `AUTOINCREMENT`, so they follow from the last. Returns None on other databases: use
    Core there.
    """
    if db.dialect.name != "sqlite" or not rows:
        return None
    most = 1
    while most * 2 * len(columns) <= _MAX_VARIABLES:
        most *= 2
    # The DBAPI connection: the stdlib one, or aiosqlite's adapter (in-memory databases).
    cursor: Any = db.connection.dbapi_connection.cursor()  # type: ignore[union-attr]  # a live connection
    dbapi_error = db.dialect.loaded_dbapi.Error
    sql = ""
    try:
        at, count = 0, most
        while at < len(rows):
            while count > len(rows) - at:
                count //= 2
            sql = _insert_sql(table.name, columns, count)
            cursor.execute(sql, [value for row in rows[at : at + count] for value in row])
            at += count
        last = cursor.lastrowid  # the last row's: the rows are numbered in VALUES order
    except dbapi_error as exc:
        raise DBAPIError.instance(sql, None, exc, dbapi_error) from exc
    finally:
        cursor.close()
    return list(range(last - len(rows) + 1, last + 1))
