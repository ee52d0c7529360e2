"""Driver errors as the store raises them.

`storage_error` turns a SQLAlchemy error into a `StorageError` (a `SchemaError` for a
database nobody migrated, a `LockTimeoutError` for a lock held too long) through the
driver's own exception (`_driver_errors.driver_error`, which a read without SQLAlchemy
calls too); `connection_error` does it for a database that cannot be reached at all.
"""

from __future__ import annotations

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from sessionstore._driver_errors import driver_error, is_sqlite_busy
from sessionstore.errors import SchemaError, StorageError

__all__ = ["connection_error", "is_busy", "is_sqlite_busy", "storage_error"]


def storage_error(exc: SQLAlchemyError, what: str = "database error") -> StorageError | SchemaError:
    """Return the `StorageError` a driver error becomes (`_driver_errors.driver_error`).

    Raise it `from exc`, so the original stays chained for debugging.
    """
    original = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else None
    if original is not None:
        return driver_error(original, what)
    return StorageError(f"{what}: {type(exc).__name__}")


def is_busy(exc: BaseException) -> bool:
    """Whether a SQLAlchemy error wraps SQLITE_BUSY (another connection holds a lock)."""
    return is_sqlite_busy(getattr(exc, "orig", None))


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
