"""Driver errors as the store raises them: the one place they are translated.

`storage_error` turns a SQLAlchemy error into a `StorageError` (a `SchemaError` for a
database nobody migrated, a `LockTimeoutError` for a lock held too long), by the drivers'
error codes, never the SQL or its parameters; `connection_error` does it for a database
that cannot be reached at all.
"""

from __future__ import annotations

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from sessionstore.errors import LockTimeoutError, SchemaError, StorageError

__all__ = ["connection_error", "is_busy", "is_sqlite_busy", "storage_error"]

# PostgreSQL's lock_not_available; SQLite's SQLITE_BUSY (the primary code of an extended one).
_PG_LOCK_NOT_AVAILABLE = "55P03"
# PostgreSQL's undefined_table; SQLite has no code for it, only its message "no such table".
_PG_UNDEFINED_TABLE = "42P01"
_SQLITE_BUSY = 5


def storage_error(exc: SQLAlchemyError, what: str = "database error") -> StorageError | SchemaError:
    """Return the `StorageError` a driver error becomes: the one place errors are translated.

    The message names the error and the driver's own words, never the SQL statement or its
    bound parameters (they hold message contents). A missing table (a database nobody
    migrated) is a `SchemaError` that names the fix. Raise it `from exc`, so the original
    stays chained for debugging.
    """
    original = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else None
    if original is not None:
        words = " ".join(str(original).split("\n", 1)[0].split())
        if _is_missing_table(original, words):
            return SchemaError(
                f"{what}: the database has no sessionstore tables ({words}): create them "
                "with `sessionstore db upgrade` or `await sessionstore.migrate.upgrade(url)`"
            )
        if _is_lock_timeout(original):
            return LockTimeoutError(
                f"{what}: another transaction held a lock for longer than the lock timeout "
                f"({type(original).__name__}: {words}); nothing was written, retry later"
            )
        return StorageError(f"{what}: {type(original).__name__}: {words}")
    return StorageError(f"{what}: {type(exc).__name__}")


def _is_missing_table(original: BaseException, words: str) -> bool:
    if getattr(original, "sqlstate", None) == _PG_UNDEFINED_TABLE:
        return True
    # sqlite3 has no error code of its own for it (SQLITE_ERROR): its message is the only sign.
    return "sqlite" in type(original).__module__ and words.startswith("no such table")


def is_sqlite_busy(original: object) -> bool:
    """Whether a driver's error is SQLite's SQLITE_BUSY (by its code, never its message)."""
    code = getattr(original, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == _SQLITE_BUSY


def is_busy(exc: BaseException) -> bool:
    """Whether a SQLAlchemy error wraps SQLITE_BUSY (another connection holds a lock)."""
    return is_sqlite_busy(getattr(exc, "orig", None))


def _is_lock_timeout(original: BaseException) -> bool:
    # By the driver's error code, never by its message.
    return getattr(original, "sqlstate", None) == _PG_LOCK_NOT_AVAILABLE or is_sqlite_busy(original)


def connection_error(url: URL, exc: OSError) -> StorageError:
    """Return the `StorageError` for a database that cannot be reached at all.

    The drivers raise these as plain `OSError`s (connection refused, unknown host, an SSL
    upgrade the server refused, a timeout) that SQLAlchemy does not wrap.
    """
    where = url.render_as_string(hide_password=True)
    words = " ".join(str(exc).split()) or "no answer"
    return StorageError(
        f"cannot connect to the database {where}: {type(exc).__name__}: {words} "
        "(check the host, port, SSL settings and that the server is running)"
    )
