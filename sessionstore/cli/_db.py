"""`sessionstore db`: create, upgrade and check the database schema."""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import click
from sqlalchemy.ext.asyncio import AsyncEngine

from sessionstore import SchemaError, make_engine, migrate
from sessionstore.cli._options import Settings, database_url, json_option, run
from sessionstore.cli._render import print_json

__all__ = ["db"]


@click.group()
def db() -> None:
    """Create, upgrade and check the database schema.

    The migrations ship with sessionstore and run from code; every other command needs
    the schema at the newest revision (the head).

    \b
    Examples:
        sessionstore db upgrade
        sessionstore db check
    """


@contextlib.asynccontextmanager
async def _engine(settings: Settings, *, upgrade: bool = False) -> AsyncIterator[AsyncEngine]:
    """Make an engine for the commands that run more than one migration step on it.

    Only `db upgrade` may create a SQLite file; the others open it read-only.
    """
    url = database_url(settings.url, read_only=not upgrade, may_create=upgrade)
    engine = make_engine(url, lock_timeout=settings.lock_timeout)
    try:
        yield engine
    finally:
        await engine.dispose()


async def _upgrade(settings: Settings) -> str | None:
    async with _engine(settings, upgrade=True) as engine:
        await migrate.upgrade(engine)
        return await migrate.current(engine)


@db.command("upgrade")
@json_option()
@click.pass_obj
def db_upgrade(settings: Settings, as_json: bool) -> None:
    """Migrate the database to the newest schema, creating it if it is empty.

    Running it again at the head does nothing.

    \b
    Example:
        sessionstore --url sqlite+aiosqlite:///agents.db db upgrade
    """
    revision = run(_upgrade(settings))
    if as_json:
        print_json({"revision": revision, "head": migrate.head()})
    else:
        click.echo(f"Database upgraded to revision {revision} (head).")


@db.command("current")
@json_option()
@click.pass_obj
def db_current(settings: Settings, as_json: bool) -> None:
    """Print the database's schema revision, or "none" if it was never migrated.

    \b
    Example:
        sessionstore db current --json
    """
    revision = run(_current(settings))
    if as_json:
        head = migrate.head()
        print_json({"revision": revision, "head": head, "is_up_to_date": revision == head})
    else:
        click.echo(revision or "none")


async def _current(settings: Settings) -> str | None:
    async with _engine(settings) as engine:
        return await migrate.current(engine)


async def _schema_status(settings: Settings) -> tuple[str | None, SchemaError | None]:
    """Return the database's revision and, unless it is at the head, why not."""
    async with _engine(settings) as engine:
        try:
            return await migrate.check(engine), None
        except SchemaError as exc:
            return await migrate.current(engine), exc


@db.command("check")
@json_option()
@click.pass_obj
def db_check(settings: Settings, as_json: bool) -> None:
    """Exit 0 if the schema is at the head; otherwise explain, and exit 1.

    Useful before deploying a new version, or as a readiness check.

    \b
    Example:
        sessionstore db check || sessionstore db upgrade
    """
    revision, problem = run(_schema_status(settings))
    if as_json:
        print_json({"revision": revision, "head": migrate.head(), "is_up_to_date": problem is None})
    if problem is not None:
        raise click.ClickException(str(problem))
    if not as_json:
        click.echo(f"up to date (revision {revision})")
