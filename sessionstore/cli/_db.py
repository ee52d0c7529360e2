"""`sessionstore db`: create, upgrade and check the database schema."""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import click

from sessionstore.cli._options import (
    Settings,
    database_url,
    json_option,
    open_store,
    read_only_file_uri,
    run,
)
from sessionstore.cli._render import echo, print_json, progress_bar

# Imported by the commands that use them when they run: `db check` and `db current` on a
# SQLite file at the head read it without SQLAlchemy and alembic (`_file_revision`).
if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from sessionstore import IntegrityReport, SchemaError, migrate

__all__ = ["db"]


@click.group()
def db() -> None:
    """Create, upgrade and check the database schema.

    The migrations ship with sessionstore and run from code; every other command needs
    the schema at the newest revision (the head). `verify` checks the stored data itself.

    \b
    Examples:
        sessionstore db upgrade
        sessionstore db check
        sessionstore db verify
        sessionstore db distribute
    """


@contextlib.asynccontextmanager
async def _engine(settings: Settings, *, upgrade: bool = False) -> AsyncIterator[AsyncEngine]:
    """Make an engine for the commands that run more than one migration step on it.

    Only `db upgrade` may create a SQLite file; the others open it read-only.
    """
    from sessionstore import make_engine

    url = database_url(settings.url, read_only=not upgrade, may_create=upgrade)
    engine = make_engine(url, lock_timeout=settings.lock_timeout)
    try:
        yield engine
    finally:
        await engine.dispose()


async def _upgrade(settings: Settings) -> str | None:
    from sessionstore import migrate

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
    from sessionstore import migrate

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
    at_head = _file_revision(settings)
    revision: str | None
    if at_head is not None:
        revision, head = at_head, at_head
    else:
        from sessionstore import migrate

        revision, head = run(_current(settings)), migrate.head()
    if as_json:
        print_json({"revision": revision, "head": head, "is_up_to_date": revision == head})
    else:
        click.echo(revision or "none")


def _file_revision(settings: Settings) -> str | None:
    """The revision of a SQLite file whose schema is at the head, read without SQLAlchemy.

    None for any other URL, another revision or a file that cannot be read: the command
    then asks alembic, which says what the database is at, or what is wrong.
    """
    uri = read_only_file_uri(settings.url)
    if uri is None:
        return None
    from sessionstore._sqlite_read import read_file, shipped_head

    return read_file(uri, settings.lock_timeout, lambda _db: shipped_head())


async def _current(settings: Settings) -> str | None:
    from sessionstore import migrate

    async with _engine(settings) as engine:
        return await migrate.current(engine)


async def _schema_status(settings: Settings) -> tuple[str | None, SchemaError | None]:
    """Return the database's revision and, unless it is at the head, why not."""
    from sessionstore import SchemaError, migrate

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
    at_head = _file_revision(settings)
    revision: str | None
    problem: SchemaError | None
    if at_head is not None:
        revision, problem, head = at_head, None, at_head
    else:
        from sessionstore import migrate

        revision, problem = run(_schema_status(settings))
        head = migrate.head()
    if as_json:
        print_json({"revision": revision, "head": head, "is_up_to_date": problem is None})
    if problem is not None:
        raise click.ClickException(str(problem))
    if not as_json:
        click.echo(f"up to date (revision {revision})")


async def _distribute(settings: Settings, shard_count: int | None) -> migrate.Distribution:
    from sessionstore import migrate

    async with _engine(settings) as engine:
        return await migrate.distribute(engine, shard_count=shard_count)


@db.command("distribute")
@click.option(
    "--shard-count",
    type=click.IntRange(1, 64_000),
    default=None,
    help="Shards of the session tables (default: Citus's citus.shard_count, 32).",
)
@json_option()
@click.pass_obj
def db_distribute(settings: Settings, shard_count: int | None, as_json: bool) -> None:
    """Distribute the schema over a Citus cluster (run it on the coordinator).

    Every session table is distributed by the session id and colocated, so a call about
    one session runs on one worker; alembic's version table becomes a reference table.
    Run `db upgrade` first. Running it again does nothing. See docs/guides/scale-out.md.

    \b
    Example:
        sessionstore db distribute --shard-count 64
    """
    done = run(_distribute(settings, shard_count))
    if as_json:
        print_json(
            {
                "citus_version": done.citus_version,
                "shard_count": done.shard_count,
                "workers": done.workers,
                "distributed": done.distributed,
                "reference": done.referenced,
            }
        )
        return
    if done.distributed or done.referenced:
        click.echo(
            f"Distributed {len(done.distributed)} tables over {done.shard_count} shards "
            f"on {done.workers} workers (Citus {done.citus_version})."
        )
    else:
        click.echo(
            f"Already distributed: {done.shard_count} shards on {done.workers} workers "
            f"(Citus {done.citus_version})."
        )


async def _verify(settings: Settings, advance: Callable[[int, int], None]) -> IntegrityReport:
    async with open_store(settings.url, read_only=True) as store:
        return await store.verify(progress=advance)


@db.command("verify")
@json_option()
@click.pass_obj
def db_verify(settings: Settings, as_json: bool) -> None:
    """Check the stored data: exit 0 if it is intact; otherwise list each problem, and exit 1.

    Recomputes every message's content hash and turn, and checks that each loop's
    positions run from 0 without a gap, its counters match its messages, the chain of
    loops holds together, and every block's turn ranges and provenance fit its loop.
    Reads only (a SQLite file is opened read-only); one transaction per session, with a
    progress bar on a terminal.

    \b
    Example:
        sessionstore db verify --json
    """
    from rich.progress import MofNCompleteColumn

    progress = progress_bar("Verifying sessions", MofNCompleteColumn(), transient=True)
    with progress:
        task = progress.add_task("verify", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        report = run(_verify(settings, advance))
    if as_json:
        print_json({**report.model_dump(mode="json"), "is_ok": report.is_ok})
    else:
        _print_report(report)
    if not report.is_ok:
        raise SystemExit(1)


def _print_report(report: IntegrityReport) -> None:
    checked = (
        f"{report.sessions} sessions, {report.loops} loops, {report.messages} messages, "
        f"{report.blocks} blocks"
    )
    if report.is_ok:
        click.echo(f"OK: checked {checked}; no problems.")
        return
    for problem in report.problems:
        where = [f"session {problem.session_id}"]
        for label, value in (
            ("loop id", problem.loop_id),  # not the number `--loop` takes: data may be broken
            ("message", problem.message_id),
            ("block", problem.block_id),
        ):
            if value is not None:
                where.append(f"{label} {value}")
        # The session id and the detail quote stored data.
        echo(f"{', '.join(where)}: [{problem.check}] {problem.detail}")
    click.echo(f"{len(report.problems)} problems in {checked}.", err=True)
