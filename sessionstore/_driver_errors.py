"""A database driver's own exception as the store raises it: the one place it is translated.

`driver_error` reads a driver's exception (`sqlite3`, asyncpg) by its error codes, never
the SQL or its parameters. The store calls it for the error SQLAlchemy wraps
(`store._db_errors.storage_error`); a command reading a SQLite file on the standard
library's driver calls it for `sqlite3`'s own (`_sqlite_context`). No SQLAlchemy here.
"""

from __future__ import annotations

from sessionstore.errors import LockTimeoutError, SchemaError, StorageError

__all__ = ["driver_error", "is_sqlite_busy"]

# PostgreSQL's lock_not_available; SQLite's SQLITE_BUSY (the primary code of an extended one).
_PG_LOCK_NOT_AVAILABLE = "55P03"
# PostgreSQL's undefined_table; SQLite has no code for it, only its message "no such table".
_PG_UNDEFINED_TABLE = "42P01"
_SQLITE_BUSY = 5


def driver_error(
    original: BaseException, what: str = "database error"
) -> StorageError | SchemaError:
    """Return the `StorageError` a driver's exception becomes.

    The message names the error and the driver's own words, never the SQL statement or its
    bound parameters (they hold message contents). A missing table (a database nobody
    migrated) is a `SchemaError` that names the fix; a lock held too long, a
    `LockTimeoutError`. Raise it `from` the exception, so the original stays chained.
    """
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


def _is_missing_table(original: BaseException, words: str) -> bool:
    if getattr(original, "sqlstate", None) == _PG_UNDEFINED_TABLE:
        return True
    # sqlite3 has no error code of its own for it (SQLITE_ERROR): its message is the only sign.
    return "sqlite" in type(original).__module__ and words.startswith("no such table")


def is_sqlite_busy(original: object) -> bool:
    """Whether a driver's error is SQLite's SQLITE_BUSY (by its code, never its message)."""
    code = getattr(original, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == _SQLITE_BUSY


def _is_lock_timeout(original: BaseException) -> bool:
    # By the driver's error code, never by its message.
    return getattr(original, "sqlstate", None) == _PG_LOCK_NOT_AVAILABLE or is_sqlite_busy(original)
