"""Defaults that several layers share; this module imports nothing, so anything can read it."""

__all__ = ["DEFAULT_LOCK_TIMEOUT", "DEFAULT_URL"]

DEFAULT_URL = "sqlite+aiosqlite:///sessionstore.db"
"""The database a store or the command line opens when none is named: `sessionstore.db` here."""

DEFAULT_LOCK_TIMEOUT = 30.0
"""Seconds a statement waits for a lock another transaction holds before `LockTimeoutError`.

PostgreSQL's `lock_timeout` (a hung transaction holding a session's row) and SQLite's
`busy_timeout` (another writer holding the database's write lock)."""
