"""The `sessionstore` command line: thin click commands over `SessionStore` and `migrate`.

Each command parses its options, runs one coroutine with `asyncio.run()` and prints: a
rich table or text by default, JSON on stdout with `--json`. The errors users cause
become `click.ClickException` here, at the boundary, so they see a message on stderr
and a non-zero exit code, never a traceback.
"""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, TypeVar

import click
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Column, Table
from rich.text import Text

from sessionstore import migrate
from sessionstore.engine import DEFAULT_URL, make_engine
from sessionstore.errors import (
    SchemaError,
    SessionExistsError,
    SessionStoreError,
    describe_validation_error,
)
from sessionstore.formats.jsonl import parse_conversation_line
from sessionstore.formats.openai import to_openai
from sessionstore.models import LoopRecord, Page, Session
from sessionstore.store import SessionStore

__all__ = ["main"]

_T = TypeVar("_T")

_URL_ENVVAR = "SESSIONSTORE_URL"


@dataclass(frozen=True, slots=True)
class _Settings:
    """What the group's options give every command."""

    url: str


_json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print machine-readable JSON to stdout."
)
"""The output switch every command that lists or shows something takes."""


def _run(work: Coroutine[Any, Any, _T]) -> _T:
    """Run one coroutine and turn the errors a user can cause into clean messages."""
    try:
        return asyncio.run(work)
    except ValidationError as exc:  # before ValueError, which it subclasses
        raise click.ClickException(describe_validation_error(exc)) from exc
    except (SessionStoreError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


@contextlib.asynccontextmanager
async def _open_store(url: str, *, upgrade: bool = False) -> AsyncIterator[SessionStore]:
    """Open a store whose schema is at the head (or is brought there with `upgrade`)."""
    async with SessionStore.from_url(url) as store:
        if upgrade:
            await store.upgrade()
        else:
            await store.check_schema()
        yield store


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _stdout() -> Console:
    # No highlighting: ids and numbers are data, not syntax to colour.
    return Console(highlight=False)


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _cells(*values: object) -> list[Text]:
    # Text, not str: a title like "[draft]" must not be read as rich markup.
    return [Text("-" if value is None else str(value)) for value in values]


# ── the group ──────────────────────────────────────────────────────────────────


@click.group(
    name="sessionstore",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--url",
    envvar=_URL_ENVVAR,
    default=DEFAULT_URL,
    show_default=True,
    show_envvar=True,
    metavar="URL",
    help="The database: sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER@HOST/DB.",
)
@click.version_option(package_name="sessionstore")
@click.pass_context
def main(ctx: click.Context, url: str) -> None:
    """Durable SQL history for long-lived LLM agents.

    Create the schema once with `sessionstore db upgrade`, import conversations, then
    list, show, export and delete sessions. The database is the SQLite file
    `sessionstore.db` in the working directory unless `--url` or SESSIONSTORE_URL says
    otherwise.

    \b
    Examples:
        sessionstore db upgrade
        sessionstore import conversations.jsonl
        SESSIONSTORE_URL=postgresql+asyncpg://localhost/agents sessionstore sessions list
    """
    ctx.obj = _Settings(url=url)


# ── db ─────────────────────────────────────────────────────────────────────────


@main.group()
def db() -> None:
    """Create, upgrade and check the database schema.

    The migrations ship with sessionstore and run from code; every other command needs
    the schema at the newest revision (the head).

    \b
    Examples:
        sessionstore db upgrade
        sessionstore db check
    """


async def _upgrade(url: str) -> str | None:
    engine = make_engine(url)
    try:
        await migrate.upgrade(engine)
        return await migrate.current(engine)
    finally:
        await engine.dispose()


@db.command("upgrade")
@_json_option
@click.pass_obj
def db_upgrade(settings: _Settings, as_json: bool) -> None:
    """Migrate the database to the newest schema, creating it if it is empty.

    Running it again at the head does nothing.

    \b
    Example:
        sessionstore --url sqlite+aiosqlite:///agents.db db upgrade
    """
    revision = _run(_upgrade(settings.url))
    if as_json:
        _print_json({"revision": revision, "head": migrate.head()})
    else:
        click.echo(f"Database upgraded to revision {revision} (head).")


@db.command("current")
@_json_option
@click.pass_obj
def db_current(settings: _Settings, as_json: bool) -> None:
    """Print the database's schema revision, or "none" if it was never migrated.

    \b
    Example:
        sessionstore db current --json
    """
    revision = _run(migrate.current(settings.url))
    if as_json:
        head = migrate.head()
        _print_json({"revision": revision, "head": head, "is_up_to_date": revision == head})
    else:
        click.echo(revision or "none")


async def _schema_status(url: str) -> tuple[str | None, SchemaError | None]:
    engine = make_engine(url)
    try:
        return await migrate.check(engine), None
    except SchemaError as exc:
        return await migrate.current(engine), exc
    finally:
        await engine.dispose()


@db.command("check")
@_json_option
@click.pass_obj
def db_check(settings: _Settings, as_json: bool) -> None:
    """Exit 0 if the schema is at the head; otherwise explain, and exit 1.

    Useful before deploying a new version, or as a readiness check.

    \b
    Example:
        sessionstore db check || sessionstore db upgrade
    """
    revision, problem = _run(_schema_status(settings.url))
    if as_json:
        _print_json(
            {"revision": revision, "head": migrate.head(), "is_up_to_date": problem is None}
        )
    if problem is not None:
        raise click.ClickException(str(problem))
    if not as_json:
        click.echo(f"up to date (revision {revision})")


# ── import ─────────────────────────────────────────────────────────────────────


@dataclass(slots=True)
class _ImportReport:
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class _BadLine(Exception):
    """A line that could not be imported; the lines before it stay imported."""

    def __init__(self, number: int, reason: str, imported: int) -> None:
        kept = (
            f"the {imported} session(s) imported from earlier lines stay imported"
            if imported
            else "no session was imported by this run"
        )
        super().__init__(
            f"line {number}: {reason}\n({kept}; fix the line and run the import again: "
            "sessions that already exist are skipped)"
        )


async def _import_lines(
    url: str,
    lines: Iterable[tuple[int, bytes]],
    *,
    app_name: str,
    user_id: str,
    upgrade: bool,
) -> _ImportReport:
    report = _ImportReport()
    async with _open_store(url, upgrade=upgrade) as store:
        for number, line in lines:
            if not line.strip():
                continue
            try:
                conversation = parse_conversation_line(line)
                await store.import_session(
                    conversation.loops,
                    session_id=conversation.session_id,
                    app_name=app_name,
                    user_id=user_id,
                    title=conversation.title,
                    metadata=conversation.metadata,
                )
                is_new = True
            except SessionExistsError:
                is_new = False
            except ValidationError as exc:
                raise _BadLine(
                    number, describe_validation_error(exc), len(report.imported)
                ) from exc
            except (SessionStoreError, ValueError) as exc:
                raise _BadLine(number, str(exc), len(report.imported)) from exc
            target = report.imported if is_new else report.skipped
            target.append(conversation.session_id)
    return report


def _numbered(file: IO[bytes], advance: Callable[[int], None]) -> Iterator[tuple[int, bytes]]:
    for number, line in enumerate(file, start=1):
        advance(len(line))
        yield number, line


@main.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, readable=True, path_type=Path))
@click.option(
    "--app-name", default="cli", show_default=True, help="The application that owns the sessions."
)
@click.option(
    "--user-id", default="local", show_default=True, help="The user that owns the sessions."
)
@click.option("--upgrade", is_flag=True, help="Migrate the database to the newest schema first.")
@_json_option
@click.pass_obj
def import_(
    settings: _Settings, file: Path, app_name: str, user_id: str, upgrade: bool, as_json: bool
) -> None:
    """Import conversations from a JSONL file, one session per line.

    Each line is one conversation in the OpenAI chat-completions format, as in the
    shared datasets: {"id", "source", "license", "meta", "messages": [...]}. The session
    id is the line's id (when it has at most 128 characters; otherwise one derived from
    the line), its title is the id, and source, license and meta go into its metadata.
    Every user message starts a new loop of the session. The output of `sessionstore
    export` imports back too.

    Lines whose session already exists are skipped, so running an import again is safe.
    A bad line stops the import with its line number; the sessions of the lines before
    it stay imported.

    \b
    Examples:
        sessionstore import conversations.jsonl
        sessionstore import --app-name bench --user-id ci --upgrade runs.jsonl --json
    """
    stderr = Console(stderr=True)
    progress = Progress(
        TextColumn("Importing"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=stderr,
        disable=not stderr.is_terminal,
    )
    with file.open("rb") as lines, progress:
        # A pipe has no size: the bar then only shows that the import is running.
        task = progress.add_task("import", total=file.stat().st_size or None)
        numbered = _numbered(lines, lambda size: progress.advance(task, size))
        try:
            report = _run(
                _import_lines(
                    settings.url, numbered, app_name=app_name, user_id=user_id, upgrade=upgrade
                )
            )
        except _BadLine as exc:
            raise click.ClickException(str(exc)) from exc
    if as_json:
        _print_json(
            {
                "imported": len(report.imported),
                "skipped": len(report.skipped),
                "sessions": report.imported,
                "skipped_sessions": report.skipped,
            }
        )
    else:
        click.echo(
            f"Imported {len(report.imported)} session(s); "
            f"skipped {len(report.skipped)} that already exist."
        )


# ── export ─────────────────────────────────────────────────────────────────────


async def _export(url: str, session_id: str, loop_id: int | None) -> dict[str, Any]:
    async with _open_store(url) as store:
        session = await store.get_session(session_id)
        history = await store.get_history(session_id, loop_id=loop_id)
    return {
        "id": session.id,
        "title": session.title,
        "metadata": session.metadata,
        "messages": to_openai([stored.message for stored in history]),
    }


@main.command("export")
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--loop",
    "loop_id",
    type=int,
    metavar="LOOP_ID",
    help="Export the chain of loops ending at this loop instead of the active chain.",
)
@click.option(
    "-o",
    "--output",
    type=click.File("w", encoding="utf-8", lazy=True),
    default="-",
    metavar="FILE",
    help="Write to this file instead of stdout.",
)
@click.option(
    "--compact", is_flag=True, help="Write one line, to append to a JSONL file, not indented JSON."
)
@click.pass_obj
def export(
    settings: _Settings, session_id: str, loop_id: int | None, output: IO[str], compact: bool
) -> None:
    """Export a session's raw history as OpenAI chat-completions messages.

    Writes one JSON object, {"id", "title", "metadata", "messages": [...]}, with the raw
    messages of the session's active chain of loops (compaction never changes them).
    Importing a conversation and exporting it gives back the same messages, and a
    `--compact` export is a line `sessionstore import` reads.

    \b
    Examples:
        sessionstore export 3f2a9c... -o session.json
        sessionstore export 3f2a9c... --compact >> sessions.jsonl
    """
    exported = _run(_export(settings.url, session_id, loop_id))
    indent = None if compact else 2
    output.write(json.dumps(exported, indent=indent, ensure_ascii=False) + "\n")
    if output.name != "-":
        click.echo(
            f"Exported {len(exported['messages'])} message(s) of session {session_id!r} "
            f"to {output.name}.",
            err=True,
        )


# ── sessions ───────────────────────────────────────────────────────────────────


@main.group()
def sessions() -> None:
    """List, show and delete sessions.

    \b
    Examples:
        sessionstore sessions list --app-name cli
        sessionstore sessions show 3f2a9c...
    """


async def _list_sessions(
    url: str, *, limit: int, cursor: str | None, app_name: str | None, user_id: str | None
) -> Page:
    async with _open_store(url) as store:
        try:
            return await store.list_sessions(
                limit=limit, cursor=cursor, app_name=app_name, user_id=user_id
            )
        except ValueError as exc:
            # The command checks the other options, so the cursor is what the store refused.
            raise click.BadParameter(str(exc), param_hint="--cursor") from exc


@sessions.command("list")
@click.option("--app-name", help="Only the sessions of this application.")
@click.option("--user-id", help="Only the sessions of this user (needs --app-name).")
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=50,
    show_default=True,
    help="Sessions per page.",
)
@click.option("--cursor", help="Show the page after the one that printed this cursor.")
@_json_option
@click.pass_obj
def sessions_list(
    settings: _Settings,
    app_name: str | None,
    user_id: str | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
) -> None:
    """List sessions, newest first, one page at a time.

    When there are more, the output ends with the cursor of the next page.

    \b
    Examples:
        sessionstore sessions list --app-name cli --user-id local --limit 20
        sessionstore sessions list --cursor WyIyMDI2LTA1LTA5...
    """
    if user_id is not None and app_name is None:
        raise click.BadParameter("filtering by user needs --app-name too", param_hint="--user-id")
    page = _run(
        _list_sessions(settings.url, limit=limit, cursor=cursor, app_name=app_name, user_id=user_id)
    )
    if as_json:
        _print_json(page.model_dump(mode="json"))
        return
    if not page.items:
        click.echo("No sessions.")
        return
    # A title that only repeats the id (as after an import) is not shown twice.
    has_titles = any(s.title and s.title != s.id for s in page.items)
    columns = [Column("ID", overflow="fold", ratio=3)]
    if has_titles:
        columns.append(Column("Title", overflow="fold", ratio=2))
    columns += [
        Column("Tenant", overflow="fold", ratio=1),
        Column("Loops", justify="right", no_wrap=True),
        Column("Created", no_wrap=True),
    ]
    table = Table(*columns)
    for session in page.items:
        title = [session.title if session.title != session.id else ""] if has_titles else []
        table.add_row(
            *_cells(
                session.id,
                *title,
                f"{session.app_name}/{session.user_id}",
                session.loop_count,
                _when(session.created_at),
            )
        )
    _stdout().print(table)
    if page.next_cursor is not None:
        click.echo(f"Next page: --cursor {page.next_cursor}")


async def _show_session(url: str, session_id: str) -> tuple[Session, list[LoopRecord]]:
    async with _open_store(url) as store:
        return await store.get_session(session_id), await store.list_loops(session_id)


@sessions.command("show")
@click.argument("session_id", metavar="SESSION")
@_json_option
@click.pass_obj
def sessions_show(settings: _Settings, session_id: str, as_json: bool) -> None:
    """Show a session and its loops.

    Each loop is one user request and the agent's work on it; the active loop, marked
    with "*", is the head of the chain that new messages continue.

    \b
    Example:
        sessionstore sessions show 3f2a9c... --json
    """
    session, loops = _run(_show_session(settings.url, session_id))
    if as_json:
        _print_json(
            {
                "session": session.model_dump(mode="json"),
                "loops": [
                    {**loop.model_dump(mode="json"), "is_active": loop.id == session.active_loop_id}
                    for loop in loops
                ],
            }
        )
        return
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column(overflow="fold")
    for name, value in [
        ("Session", session.id),
        ("Title", session.title),
        ("Tenant", f"{session.app_name}/{session.user_id}"),
        ("Created", _when(session.created_at)),
        ("Updated", _when(session.updated_at)),
        ("Version", session.version),
        ("Active loop", session.active_loop_id),
        ("Metadata", json.dumps(session.metadata, ensure_ascii=False)),
    ]:
        fields.add_row(*_cells(name, value))
    console = _stdout()
    console.print(fields)
    if not loops:
        console.print("No loops.")
        return
    table = Table(
        *(
            Column(name, justify="right")
            for name in ("Loop", "Parent", "Seq", "Depth", "Messages", "Tokens", "Turns")
        ),
        "Closed",
        "Active",
    )
    for loop in loops:
        table.add_row(
            *_cells(
                loop.id,
                loop.parent_loop_id,
                loop.sequence,
                loop.depth,
                loop.message_count,
                loop.token_total,
                loop.turn_count,
                "no" if loop.closed_at is None else "yes",
                "*" if loop.id == session.active_loop_id else "",
            )
        )
    console.print(table)


async def _delete_session(url: str, session_id: str) -> None:
    async with _open_store(url) as store:
        await store.delete_session(session_id)


@sessions.command("delete")
@click.argument("session_id", metavar="SESSION")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def sessions_delete(settings: _Settings, session_id: str, yes: bool) -> None:
    """Delete a session with all its loops, messages and compaction blocks.

    This cannot be undone: it is how raw history goes away (retention, erasure requests).

    \b
    Example:
        sessionstore sessions delete 3f2a9c... --yes
    """
    if not yes:
        click.confirm(f"Delete session {session_id!r} and all its history?", abort=True, err=True)
    _run(_delete_session(settings.url, session_id))
    click.echo(f"Deleted session {session_id!r}.")
