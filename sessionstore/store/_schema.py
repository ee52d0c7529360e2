"""Schema migrations run from code: the implementation behind `sessionstore.migrate`.

The alembic scripts ship inside the package (`sessionstore/_migrations` in a wheel) and
sit at the top of a checkout (`migrations/`), so both `sessionstore db upgrade` after
`pip install` and `alembic upgrade head` in a checkout run the same revisions.

alembic is imported only to migrate or to explain a mismatch: `check`, which every command
that opens a store runs, reads the version row with SQLAlchemy and the newest revision
from the scripts' headers (`_sqlite_read.shipped_head`), so a command that only reads
starts fast.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import column, inspect, select, table
from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import SQLAlchemyError

from sessionstore._sqlite_read import (
    VERSION_TABLE,
    scanned_head,
    script_location,
    shipped_head,
)
from sessionstore.errors import SchemaError
from sessionstore.store._db_errors import connection_error, storage_error
from sessionstore.store._engine import make_engine

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "VERSION_TABLE",
    "check",
    "current",
    "downgrade",
    "head",
    "revision_at_head",
    "scanned_head",
    "upgrade",
]


def _config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(script_location()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head() -> str:
    """Return the revision id of the newest migration this version of sessionstore ships."""
    from alembic.script import ScriptDirectory

    revision = ScriptDirectory.from_config(_config()).get_current_head()
    if revision is None:  # pragma: no cover - the package always ships 0001_initial
        raise SchemaError("no migration scripts found")
    return revision


@asynccontextmanager
async def _connection(url_or_engine: str | URL | AsyncEngine, what: str) -> AsyncIterator[Any]:
    from sqlalchemy.ext.asyncio import AsyncEngine

    owned = not isinstance(url_or_engine, AsyncEngine)
    engine = url_or_engine if isinstance(url_or_engine, AsyncEngine) else make_engine(url_or_engine)
    try:
        async with engine.connect() as connection:
            yield connection
    except SQLAlchemyError as exc:
        raise storage_error(exc, what) from exc
    except OSError as exc:
        raise connection_error(engine.url, exc) from exc
    finally:
        if owned:
            await engine.dispose()


async def _run(
    url_or_engine: str | URL | AsyncEngine,
    work: Callable[[Connection], Any],
    what: str = "cannot read the schema revision",
) -> Any:
    async with _connection(url_or_engine, what) as connection:
        result = await connection.run_sync(work)
        await connection.commit()
        return result


def _check_known(connection: Connection) -> None:
    """Refuse to migrate a database at a revision this version does not ship (a newer one)."""
    revision = _current_revision(connection)
    if revision is not None and not _is_known(revision):
        raise _unknown_revision(revision)


def _unknown_revision(revision: str) -> SchemaError:
    return SchemaError(
        f"the database is at revision {revision}, which this version of sessionstore does "
        f"not know (its newest is {head()}): a newer sessionstore migrated it; upgrade the "
        "sessionstore package instead of the database"
    )


def _migrate(connection: Connection, step: Callable[[Config], None]) -> None:
    _check_known(connection)
    step(_config(connection))


async def upgrade(url_or_engine: str | URL | AsyncEngine, revision: str = "head") -> None:
    """Upgrade the database to `revision` (default: the newest), creating the schema if empty.

    Raises:
        SchemaError: the database is at a revision this version does not know (a newer one).
    """
    from alembic import command

    await _run(
        url_or_engine,
        lambda conn: _migrate(conn, lambda config: command.upgrade(config, revision)),
        "migration failed",
    )


async def downgrade(url_or_engine: str | URL | AsyncEngine, revision: str) -> None:
    """Downgrade the database to `revision` (`"base"` drops every sessionstore table).

    Raises:
        SchemaError: the database is at a revision this version does not know (a newer one).
    """
    from alembic import command

    await _run(
        url_or_engine,
        lambda conn: _migrate(conn, lambda config: command.downgrade(config, revision)),
        "migration failed",
    )


def _current_revision(connection: Connection) -> str | None:
    """The one revision the version table holds, None without one (alembic's current revision).

    Raises:
        SchemaError: the table holds several rows (alembic's migrations of this schema
            keep one; alembic itself would fail with an error of its own).
    """
    stored = _stored_revisions(connection)
    if not stored:
        return None
    if len(stored) > 1:
        raise SchemaError(
            f"the database's version table {VERSION_TABLE} holds {len(stored)} revisions "
            f"({', '.join(sorted(stored))}) where sessionstore keeps one: it was changed by "
            "hand or by another tool; leave the one row of the revision the schema is at"
        )
    return stored[0]


def _is_known(revision: str) -> bool:
    from alembic.script import ScriptDirectory
    from alembic.script.revision import ResolutionError

    try:
        ScriptDirectory.from_config(_config()).revision_map.get_revision(revision)
    except ResolutionError:
        return False
    return True


async def current(url_or_engine: str | URL | AsyncEngine) -> str | None:
    """Return the database's current revision, or None for a database never migrated."""
    result: str | None = await _run(url_or_engine, _current_revision)
    return result


async def check(url_or_engine: str | URL | AsyncEngine) -> str:
    """Return the current revision if it is the head; otherwise raise `SchemaError`.

    Raises:
        SchemaError: the database is empty, behind, or at a revision this version does not know.
    """
    at_head: str | None = await _run(url_or_engine, revision_at_head)
    if at_head is not None:
        return at_head  # the common case, answered without alembic
    revision = await current(url_or_engine)
    expected = head()
    if revision is not None and revision != expected and not _is_known(revision):
        raise _unknown_revision(revision)
    if revision != expected:
        state = "not initialised" if revision is None else f"at revision {revision}"
        raise SchemaError(
            f"the database is {state}, but this version of sessionstore needs {expected}: "
            "run `sessionstore db upgrade`"
        )
    return revision


# ── the check without alembic ──────────────────────────────────────────────────


def revision_at_head(connection: Connection) -> str | None:
    """The database's revision if it is the newest this version ships, read without alembic.

    None for any other state (no version table, another revision, several rows, scripts
    this scan cannot read): `check` then asks alembic what it is.
    """
    stored = _stored_revisions(connection)
    if stored is not None and len(stored) == 1 and stored[0] == shipped_head():
        return stored[0]
    return None


def _stored_revisions(connection: Connection) -> list[str] | None:
    """The rows of the version table, or None when there is no such table."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    version = table(VERSION_TABLE, column("version_num"))
    return list(connection.scalars(select(version.c.version_num)))
