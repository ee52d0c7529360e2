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
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

import click
from click.core import ParameterSource
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Column, Table
from rich.text import Text
from sqlalchemy.engine import make_url

from sessionstore import migrate
from sessionstore._audit import AuditedTurn, LoopAudit, SessionAudit, audit_session
from sessionstore._compaction import CompactionResult, compact_session_loops
from sessionstore._context import build_context
from sessionstore._demo import generate_session
from sessionstore._overlay import BuiltContext, ContextItem
from sessionstore.config import CompactionConfig, FixedCount, TokenBudget
from sessionstore.errors import (
    SchemaError,
    SessionExistsError,
    SessionStoreError,
    describe_validation_error,
)
from sessionstore.formats._jsonl import parse_conversation_line
from sessionstore.formats._openai import to_openai
from sessionstore.formats._text import render_as_text
from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactedSection,
    CompactionBlock,
    CompactionSummaryMessage,
    ImageContent,
    LoopRecord,
    Message,
    Page,
    Session,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_payload,
)
from sessionstore.store import SessionStore
from sessionstore.store._engine import DEFAULT_URL, make_engine

__all__ = ["main"]

_T = TypeVar("_T")

_URL_ENVVAR = "SESSIONSTORE_URL"


@dataclass(frozen=True, slots=True)
class _Settings:
    """What the group's options give every command."""

    url: str
    is_url_given: bool = False
    """True when `--url` was on the command line (so hints to run more commands repeat it)."""


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

    New here? `sessionstore demo` stores a long synthetic agent session, compacts it and
    rebuilds the model's context within a budget, in a few seconds.

    Create the schema once with `sessionstore db upgrade`, import conversations, then
    list, show, export and delete sessions; `compact` writes compaction overlays,
    `context` prints what the model sees, and `audit` compares it with what happened.
    The database is the SQLite file `sessionstore.db` in the working directory unless
    `--url` or SESSIONSTORE_URL says otherwise.

    \b
    Examples:
        sessionstore demo
        sessionstore db upgrade
        sessionstore import conversations.jsonl
        SESSIONSTORE_URL=postgresql+asyncpg://localhost/agents sessionstore sessions list
    """
    given = ctx.get_parameter_source("url") is ParameterSource.COMMANDLINE
    ctx.obj = _Settings(url=url, is_url_given=given)


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


# ── compaction: compact, context, audit ────────────────────────────────────────

_Scope = FixedCount | TokenBudget

_DEFAULTS = CompactionConfig()
"""The library's defaults, which the options show."""

_SUMMARY_PREFIX = re.compile(r"^\[Summary\] turn \d+: ")
"""The default strategy's one-liners repeat the turn number, which the tables already show."""


class _ScopeType(click.ParamType[_Scope]):
    """A number of earlier loops (`FixedCount`), or `budget` (`TokenBudget`)."""

    name = "N|budget"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> _Scope:
        if isinstance(value, FixedCount | TokenBudget):
            return value
        text = str(value).strip().lower()
        if text == "budget":
            return TokenBudget()
        if not text.isdigit():
            self.fail(
                f"{value!r} is neither a number of earlier loops (0, 1, 2, ...) nor 'budget'",
                param,
                ctx,
            )
        return FixedCount(int(text))


class _AsOfType(click.ParamType[int | datetime]):
    """A generation of the loop's block (1, 2, ...) or an ISO 8601 time."""

    name = "GENERATION|TIME"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | datetime:
        if isinstance(value, int | datetime):
            return value
        text = str(value).strip()
        if text.isdigit():
            if int(text) < 1:
                self.fail("block generations start at 1", param, ctx)
            return int(text)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(
                f"{value!r} is neither a block generation (1, 2, ...) nor an ISO 8601 time "
                "such as 2026-05-09T14:30:00Z",
                param,
                ctx,
            )
        # Everything is stored in UTC, so a time without an offset is read as UTC.
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


_SCOPE = _ScopeType()
_DEFAULT_SCOPE = (
    str(_DEFAULTS.compaction_scope.count)
    if isinstance(_DEFAULTS.compaction_scope, FixedCount)
    else "budget"
)
_AS_OF = _AsOfType()
_TOKENS = click.IntRange(min=1)
_COUNT = click.IntRange(min=0)

_F = TypeVar("_F", bound=Callable[..., Any])


def _loop_option(help_text: str) -> Callable[[_F], _F]:
    return click.option("--loop", "loop_id", type=int, metavar="LOOP_ID", help=help_text)


def _overlay_option(help_text: str) -> Callable[[_F], _F]:
    return click.option(
        "--overlay", default="default", show_default=True, metavar="NAME", help=help_text
    )


_READ_SCOPE_HELP = (
    "The earlier loops of the chain that take part: a number, or `budget` for as many as "
    "fit --budget.  [default: the scope the loop was last compacted with, else 3]"
)


def _turn_span(start: int, end: int) -> str:
    return str(start) if start == end else f"{start}..{end}"


def _ids(values: Iterable[int]) -> str:
    return ", ".join(str(value) for value in values) or "none"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _gist(message: Message) -> str:
    """Return the first words of a message: its text, what it called, or what it ran."""
    if isinstance(message, AssistantMessage):
        calls = ", ".join(call.name for call in message.tool_calls)
        text = message.text or " ".join(
            block.thinking for block in message.content if isinstance(block, ThinkingContent)
        )
        if calls:
            return f"→ {calls}: {text}" if text else f"→ {calls}"
        return text
    if isinstance(message, ToolResultMessage):
        return (
            f"{message.tool_name or 'tool'}{' (error)' if message.is_error else ''}: {message.text}"
        )
    if isinstance(message, UserMessage | SystemMessage):
        return message.text
    if isinstance(message, BashExecutionMessage):
        return f"$ {message.command}"
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
        return _SUMMARY_PREFIX.sub("", message.summary)
    return f"[{message.custom_type}]"


_KIND_LABELS = {
    "user": "user",
    "assistant": "asst",
    "tool_result": "tool",
    "bash_execution": "bash",
    "system": "system",
    "custom": "custom",
    "branch_summary": "branch",
    "compaction_summary": "summary",
}


def _kinds(messages: Iterable[Message]) -> str:
    """Return e.g. `asst+2 tool` for an assistant message and two tool results."""
    counts = Counter(_KIND_LABELS.get(message.kind, message.kind) for message in messages)
    return "+".join(label if n == 1 else f"{n} {label}" for label, n in counts.items())


# ── compact ────────────────────────────────────────────────────────────────────


async def _compact(
    url: str,
    session_id: str,
    *,
    loop_id: int | None,
    strategy: str,
    config_fields: dict[str, Any],
    max_context_tokens: int,
    overlay: str,
) -> CompactionResult:
    config = CompactionConfig(**config_fields)
    async with _open_store(url) as store:
        return await compact_session_loops(
            store,
            session_id,
            loop_id,
            strategy,
            config,
            max_context_tokens,
            overlay=overlay,
        )


def _section_json(section: CompactedSection | None) -> dict[str, int] | None:
    if section is None:
        return None
    return {
        "start_turn": section.range.start_turn,
        "end_turn": section.range.end_turn,
        "messages": len(section.messages),
    }


def _block_json(block: CompactionBlock) -> dict[str, Any]:
    first = block.keep_first
    return {
        "id": block.id,
        "loop_id": block.loop_id,
        "generation": block.generation,
        "overlay": block.overlay,
        "strategy": block.strategy,
        "keep_first": None if first is None else first.model_dump(mode="json"),
        "keep_compacted": _section_json(block.keep_compacted),
        "keep_recent": _section_json(block.keep_recent),
        "tokens_before": block.tokens_before,
        "tokens_after": block.tokens_after,
        "created_at": None if block.created_at is None else block.created_at.isoformat(),
    }


def _compaction_json(session_id: str, result: CompactionResult) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "loop_ids": result.loop_ids,
        "skipped_loop_ids": result.skipped_loop_ids,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "duration_ms": round(result.duration_ms, 3),
        "blocks": [_block_json(block) for block in result.blocks],
    }


def _section_cell(section: CompactedSection | None) -> str:
    if section is None:
        return "-"
    turns = _turn_span(section.range.start_turn, section.range.end_turn)
    return f"{turns} ({len(section.messages)} msg)"


def _print_compaction(console: Console, session_id: str, result: CompactionResult) -> None:
    if not result.loop_ids:
        console.print(
            f"Nothing to compact: session {session_id!r} has no loops.",
            markup=False,
            soft_wrap=True,
        )
        return
    current = result.loop_ids[-1]
    if result.blocks:
        table = Table(
            Column("Loop", justify="right", no_wrap=True),
            Column("Gen", justify="right", no_wrap=True),
            Column("Keep\nfirst", no_wrap=True),
            Column("Keep\ncompacted", no_wrap=True),
            Column("Keep\nrecent", no_wrap=True),
            Column("Tokens\nbefore", justify="right", no_wrap=True),
            Column("Tokens\nafter", justify="right", no_wrap=True),
        )
        for block in result.blocks:
            first = block.keep_first
            table.add_row(
                *_cells(
                    f"{block.loop_id}*" if block.loop_id == current else block.loop_id,
                    block.generation,
                    "-" if first is None else _turn_span(first.start_turn, first.end_turn),
                    _section_cell(block.keep_compacted),
                    _section_cell(block.keep_recent),
                    f"{block.tokens_before:,}",
                    f"{block.tokens_after:,}",
                )
            )
        console.print(table)
        console.print("* the current loop", style="dim")
    else:
        console.print("No block was written: no loop in scope has turns to compact.")
    if result.skipped_loop_ids:
        console.print(
            f"Skipped loop(s) {_ids(sorted(result.skipped_loop_ids))}: their current block already "
            "summarises them with the same strategy and settings.",
            markup=False,
            soft_wrap=True,
        )
    console.print(
        f"Loops in scope {_ids(result.loop_ids)}: {result.tokens_before:,} → "
        f"{result.tokens_after:,} context tokens "
        f"({_share(result.tokens_after, result.tokens_before)}).",
        markup=False,
        soft_wrap=True,
    )


@main.command("compact")
@click.argument("session_id", metavar="SESSION")
@_loop_option("Compact this loop (and the loops before it in scope) instead of the active loop.")
@click.option(
    "--budget",
    "max_context_tokens",
    type=_TOKENS,
    default=100_000,
    show_default=True,
    metavar="TOKENS",
    help="The model's window (max_context_tokens), which `--scope budget` walks back against.",
)
@click.option(
    "--strategy",
    default="default",
    show_default=True,
    metavar="NAME",
    help="The block strategy, by its registered name.",
)
@click.option(
    "--scope",
    type=_SCOPE,
    metavar="N|budget",
    default=_DEFAULT_SCOPE,
    show_default=True,
    help="How many earlier loops of the chain are summarised with the current one, or "
    "`budget` for as many as fit --budget.",
)
@click.option(
    "--keep-first",
    type=_COUNT,
    default=_DEFAULTS.keep_first_turns,
    show_default=True,
    metavar="TURNS",
    help="Turns kept verbatim from the start of the current loop.",
)
@click.option(
    "--keep-recent",
    type=_COUNT,
    default=_DEFAULTS.keep_recent_turns,
    show_default=True,
    metavar="TURNS",
    help="Turns kept from the end of the current loop, with tool output truncated.",
)
@click.option(
    "--max-summary-tokens",
    type=_TOKENS,
    default=_DEFAULTS.max_summary_tokens,
    show_default=True,
    metavar="TOKENS",
    help="The token budget of one loop's summary.",
)
@click.option(
    "--tool-output-max-lines",
    type=_TOKENS,
    default=_DEFAULTS.tool_output_max_lines,
    show_default=True,
    metavar="LINES",
    help="The most lines a tool output keeps in the recent turns (head and tail).",
)
@_overlay_option("The named overlay to write; other overlays are left alone.")
@_json_option
@click.pass_obj
def compact(
    settings: _Settings,
    session_id: str,
    loop_id: int | None,
    max_context_tokens: int,
    strategy: str,
    scope: _Scope,
    keep_first: int,
    keep_recent: int,
    max_summary_tokens: int,
    tool_output_max_lines: int,
    overlay: str,
    as_json: bool,
) -> None:
    """Compact a session's current loop and the earlier loops in scope.

    Writes one compaction block per loop, in one transaction: the current loop keeps
    its first turns raw, has its middle turns summarised and its recent turns kept with
    tool output truncated; each earlier loop in scope is summarised whole (unless its
    block already is such a summary). Raw messages never change: a newer block
    supersedes the loop's previous one, which stays for audit and `context --as-of`.

    \b
    Examples:
        sessionstore compact 3f2a9c...
        sessionstore compact 3f2a9c... --scope budget --budget 32000 --keep-recent 6 --json
    """
    result = _run(
        _compact(
            settings.url,
            session_id,
            loop_id=loop_id,
            strategy=strategy,
            config_fields={
                "compaction_scope": scope,
                "keep_first_turns": keep_first,
                "keep_recent_turns": keep_recent,
                "max_summary_tokens": max_summary_tokens,
                "tool_output_max_lines": tool_output_max_lines,
                "block_strategy": strategy,
            },
            max_context_tokens=max_context_tokens,
            overlay=overlay,
        )
    )
    if as_json:
        _print_json(_compaction_json(session_id, result))
        return
    console = _stdout()
    if result.loop_ids:
        console.print(
            f"Compacted session {session_id!r} (strategy {strategy!r}, overlay {overlay!r}, "
            f"{result.duration_ms:.0f} ms):",
            markup=False,
            soft_wrap=True,
        )
    _print_compaction(console, session_id, result)


# ── context ────────────────────────────────────────────────────────────────────


async def _context(
    url: str,
    session_id: str,
    *,
    max_context_tokens: int,
    system_prompt_tokens: int,
    loop_id: int | None,
    as_of: int | datetime | None,
    overlay: str,
    scope: _Scope | None,
) -> BuiltContext:
    async with _open_store(url) as store:
        return await build_context(
            store,
            session_id,
            max_context_tokens=max_context_tokens,
            loop_id=loop_id,
            scope=scope,
            system_prompt_tokens=system_prompt_tokens,
            overlay=overlay,
            as_of=as_of,
        )


def _as_of_json(as_of: object) -> object:
    return as_of.isoformat() if isinstance(as_of, datetime) else as_of


def _context_summary_json(context: BuiltContext, max_context_tokens: int) -> dict[str, Any]:
    return {
        "max_context_tokens": max_context_tokens,
        "budget": context.budget,
        "tokens": context.tokens,
        "loaded_tokens": context.loaded_tokens,
        "messages": len(context.items),
        "sources": dict(Counter(item.source for item in context.items)),
        "loop_ids": context.loop_ids,
        "trimmed_messages": context.trimmed_messages,
        "interrupted_calls": [
            {
                "loop_id": call.loop_id,
                "message_id": call.message_id,
                "call_id": call.call_id,
                "tool_name": call.tool_name,
                "at_end": call.at_end,
            }
            for call in context.interrupted_calls
        ],
        "orphan_results": context.orphan_results,
        "overlay": context.overlay,
        "as_of": _as_of_json(context.as_of),
    }


def _item_json(item: ContextItem) -> dict[str, Any]:
    return {
        "source": item.source,
        "loop_id": item.loop_id,
        "message_id": item.message_id,
        "replacement_id": item.replacement_id,
        "covers": list(item.covers),
        "tokens": item.tokens,
        "pinned": item.pinned,
        "message": message_payload(item.message),
    }


def _context_footer(context: BuiltContext, max_context_tokens: int) -> list[str]:
    room = f"{context.budget:,}"
    if context.budget != max_context_tokens:
        room += (
            f" ({max_context_tokens:,} minus {max_context_tokens - context.budget:,} "
            "for the system prompt)"
        )
    counts = Counter(item.source for item in context.items)
    sources = [(s, counts[s]) for s in ("raw", "compacted", "recent", "synthetic", "marker")]
    lines = [
        f"tokens: {context.tokens:,} of {room} ({_share(context.tokens, context.budget)}), "
        f"{len(context.items)} messages",
        "sources: "
        + (", ".join(f"{source} {count}" for source, count in sources if count) or "none"),
        f"loops in scope: {_ids(context.loop_ids)}",
        f"trimmed to fit the budget: {context.trimmed_messages} message(s)",
    ]
    calls = context.interrupted_calls
    described = "; ".join(
        f"{call.tool_name} {call.call_id} in loop {call.loop_id}" for call in calls
    )
    lines.append(
        f"interrupted calls: {len(calls)}"
        + (f" ({described}; each answered with a synthetic error result)" if calls else "")
    )
    if context.orphan_results:
        lines.append(
            f"tool results left out (no call in the context): {_ids(context.orphan_results)}"
        )
    if context.as_of is not None:
        lines.append(f"as of: {_as_of_json(context.as_of)}")
    return lines


def _blocks_text(blocks: Sequence[object]) -> str:
    parts = []
    for block in blocks:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ThinkingContent):
            parts.append(
                "(thinking, redacted)" if block.redacted else f"(thinking) {block.thinking}"
            )
        elif isinstance(block, ToolCall):
            parts.append(f"→ {block.name}({block.arguments})")
        elif isinstance(block, ImageContent):
            parts.append("[image]")
    return "\n".join(parts)


def _message_text(message: Message) -> str:
    """Render any message as readable text."""
    if isinstance(message, ToolResultMessage):
        status = "error" if message.is_error else "result"
        head = f"[{message.tool_name or 'tool'} {status} for {message.tool_call_id}]"
        return f"{head}\n{_blocks_text(message.content)}"
    if isinstance(message, SystemMessage | UserMessage | AssistantMessage):
        return _blocks_text(message.content)
    rendered = render_as_text(message)
    return "(a custom message that is not shown to the model)" if rendered is None else rendered


def _origin(item: ContextItem) -> str:
    if item.source == "raw":
        where = f"raw · loop {item.loop_id} · message {item.message_id}"
    elif item.source in ("compacted", "recent"):
        where = (
            f"{item.source} · loop {item.loop_id} · replacement {item.replacement_id} "
            f"· covers {len(item.covers)} message(s)"
        )
    elif item.source == "synthetic":
        where = "synthetic (added by the loader)"
    else:
        where = "marker (messages trimmed to fit)"
    return where + (" · latest user request" if item.pinned else "")


@main.command("context")
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--budget",
    "max_context_tokens",
    type=_TOKENS,
    required=True,
    metavar="TOKENS",
    help="The model's window (max_context_tokens): the context fits it, or the command fails.",
)
@click.option(
    "--system-prompt-tokens",
    type=_COUNT,
    default=0,
    show_default=True,
    metavar="TOKENS",
    help="Tokens of the window reserved for the system prompt.",
)
@_loop_option("Rebuild the context of this loop instead of the active loop.")
@click.option(
    "--as-of",
    type=_AS_OF,
    metavar="GENERATION|TIME",
    help="Rebuild what the model saw then: a generation of the loop's block (1, 2, ...) "
    "or an ISO 8601 time; a time without an offset is read as UTC.",
)
@_overlay_option("The named overlay to load.")
@click.option("--scope", type=_SCOPE, metavar="N|budget", help=_READ_SCOPE_HELP)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "openai", "json"]),
    help="text: readable, one header line per message, summary at the end; openai: the "
    "messages as an OpenAI chat-completions list; json: every message with where it comes "
    "from.  [default: text]",
)
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@click.pass_obj
def context(
    settings: _Settings,
    session_id: str,
    max_context_tokens: int,
    system_prompt_tokens: int,
    loop_id: int | None,
    as_of: int | datetime | None,
    overlay: str,
    scope: _Scope | None,
    output_format: str | None,
    as_json: bool,
) -> None:
    """Print the context the model sees, rebuilt within a budget.

    Loads the loops in scope oldest first (from their compaction blocks where they have
    one, raw otherwise), pairs every tool call with its result, and trims the oldest
    messages if it must to fit, always keeping the latest user request. With --format
    openai or json the summary (tokens, loops in scope, trimmed messages, interrupted
    calls) goes to stderr, so stdout can be piped.

    \b
    Examples:
        sessionstore context 3f2a9c... --budget 8000
        sessionstore context 3f2a9c... --budget 128000 --system-prompt-tokens 4000 --format openai
        sessionstore context 3f2a9c... --budget 32000 --as-of 1 --json
    """
    if as_json and output_format not in (None, "json"):
        raise click.UsageError(f"--json contradicts --format {output_format}")
    chosen = "json" if as_json else output_format or "text"
    built = _run(
        _context(
            settings.url,
            session_id,
            max_context_tokens=max_context_tokens,
            system_prompt_tokens=system_prompt_tokens,
            loop_id=loop_id,
            as_of=as_of,
            overlay=overlay,
            scope=scope,
        )
    )
    footer = _context_footer(built, max_context_tokens)
    if chosen == "text":
        for number, item in enumerate(built.items, start=1):
            click.echo(
                f"── {number}. {item.message.kind} · {_origin(item)} · {item.tokens:,} tokens"
            )
            click.echo(_message_text(item.message))
            click.echo()
        if not built.items:
            click.echo("(the context is empty: the session has no messages)\n")
        click.echo("── context of session " + repr(session_id))
        for line in footer:
            click.echo(line)
        return
    if chosen == "openai":
        _print_json(to_openai(built.messages))
    else:
        _print_json(
            {
                "session_id": session_id,
                **_context_summary_json(built, max_context_tokens),
                "items": [_item_json(item) for item in built.items],
            }
        )
    for line in footer:
        click.echo(line, err=True)


# ── audit ──────────────────────────────────────────────────────────────────────


async def _audit(
    url: str,
    session_id: str,
    *,
    loop_id: int | None,
    overlay: str,
    scope: _Scope | None,
    max_context_tokens: int,
) -> SessionAudit:
    async with _open_store(url) as store:
        return await audit_session(
            store,
            session_id,
            loop_id=loop_id,
            overlay=overlay,
            scope=scope,
            max_context_tokens=max_context_tokens,
        )


_ACTION_STYLES = {
    "kept": "green",
    "truncated": "yellow",
    "summarised": "cyan",
    "omitted": "magenta",
    "dropped": "bold red",
}


def _action_cell(turn: AuditedTurn) -> Text:
    actions = {m.action for m in turn.messages}
    if actions == {"kept", "truncated"}:
        # A recent turn whose tool output was cut: its other messages are verbatim copies.
        actions = {"truncated"}
    if len(actions) == 1:
        (action,) = actions
        return Text(action, style=_ACTION_STYLES[action])
    return Text("+".join(sorted(actions)) or "-", style="yellow")


def _id_spans(ids: Iterable[int | None]) -> str:
    """Return `#3-5 #9` for the ids 3, 4, 5 and 9."""
    spans: list[list[int]] = []
    for value in sorted(i for i in ids if i is not None):
        if spans and value == spans[-1][-1] + 1:
            spans[-1].append(value)
        else:
            spans.append([value])
    return " ".join(f"#{s[0]}" if len(s) == 1 else f"#{s[0]}-{s[-1]}" for s in spans)


def _line(label: str, text: str = "", *, style: str = "dim") -> Text:
    """Return a one-line cell: `label` styled, then `text`, cut with an ellipsis to fit."""
    cell = Text(label, style=style, no_wrap=True, overflow="ellipsis")
    if text:
        cell.append(" " + _one_line(text))
    return cell


def _raw_cell(turn: AuditedTurn) -> Text:
    messages = [m.message.message for m in turn.messages]
    if not messages:
        return _line("-")
    return _line(_kinds(messages), _gist(messages[0]))


def _shown_cell(turn: AuditedTurn) -> Text:
    actions = {m.action for m in turn.messages}
    if turn.replacements:
        ids = _id_spans(r.id for r in turn.replacements)
        if actions <= {"kept", "truncated"}:
            cut = sum(1 for m in turn.messages if m.action == "truncated")
            copies = "copies" if len(turn.replacements) > 1 else "copy"
            return _line(ids, f"{copies}, {cut} cut" if cut else f"verbatim {copies}")
        return _line(ids, _gist(turn.replacements[0].message))
    if all(m.action == "kept" and m.replacement_id is None for m in turn.messages):
        return _line("raw")
    above = _id_spans({m.replacement_id for m in turn.messages})
    if above:
        return _line(f"in {above} (above)")
    return _line("nothing: no replacement covers it", style="red")


def _turn_table(
    loops: Sequence[LoopAudit], *, max_turns: int | None = None, show_loop: bool = True
) -> Table:
    """One row per turn of the loops in scope; one row per loop out of scope.

    With `max_turns`, a loop with more turns shows its first and last ones and one row
    that counts the turns in between. Without `show_loop`, the loop column is left out
    (for one loop, named elsewhere), leaving the previews more room.
    """
    # The two preview columns are the ones that shrink to fit the terminal (the others
    # are no_wrap); their cells are one line each, cut with an ellipsis (`_line`).
    columns = [
        Column("Loop", justify="right", no_wrap=True),
        Column("Turn", justify="right", no_wrap=True),
        Column("Raw messages", max_width=56),
        Column("Raw tok", justify="right", no_wrap=True),
        Column("Action", no_wrap=True),
        Column("What the model sees", max_width=56),
        Column("Ctx tok", justify="right", no_wrap=True),
    ]
    table = Table(*columns[0 if show_loop else 1 :])

    def add(loop_id: int | None, *cells: Text, end_section: bool) -> None:
        first = [Text("" if loop_id is None else str(loop_id))] if show_loop else []
        table.add_row(*first, *cells, end_section=end_section)

    for position, loop in enumerate(loops):
        if not loop.in_scope:
            # Loops out of scope share a section: they are one row each.
            is_next_out = position + 1 < len(loops) and not loops[position + 1].in_scope
            messages = sum(len(turn.messages) for turn in loop.turns)
            add(
                loop.loop.id,
                Text(_turn_span(0, len(loop.turns) - 1) if loop.turns else "-"),
                _line(f"{len(loop.turns)} turns, {messages} messages"),
                Text(f"{loop.raw_tokens:,}"),
                Text("out of scope", style="dim"),
                _line("nothing: the loop is outside the context's scope"),
                Text("0"),
                end_section=not is_next_out,
            )
            continue
        turns: list[AuditedTurn | list[AuditedTurn]] = list(loop.turns)
        if max_turns is not None and len(loop.turns) > max_turns:
            head = max(1, max_turns // 3)
            tail = max_turns - head
            turns = [*loop.turns[:head], loop.turns[head:-tail], *loop.turns[-tail:]]
        for index, turn in enumerate(turns):
            last = index == len(turns) - 1
            if isinstance(turn, list):
                actions = Counter(t.action for t in turn)
                add(
                    None,
                    Text("…"),
                    _line(f"{len(turn)} more turns"),
                    Text(f"{sum(t.raw_tokens for t in turn):,}"),
                    Text(", ".join(str(a) for a in actions), style="dim"),
                    _line(""),
                    Text(f"{sum(t.context_tokens for t in turn):,}"),
                    end_section=last,
                )
                continue
            add(
                loop.loop.id,
                Text(str(turn.turn_index)),
                _raw_cell(turn),
                Text(f"{turn.raw_tokens:,}"),
                _action_cell(turn),
                _shown_cell(turn),
                Text(f"{turn.context_tokens:,}"),
                end_section=last,
            )
    return table


def _loop_table(audit: SessionAudit) -> Table:
    table = Table(
        *(
            Column(name, justify="right", no_wrap=True)
            for name in ("Loop", "Turns", "Messages", "Raw tok")
        ),
        Column("Block", no_wrap=True),
        Column("Scope", no_wrap=True),
        Column("Ctx tok", justify="right", no_wrap=True),
        Column("Ctx/raw", justify="right", no_wrap=True),
    )
    current = audit.loops[-1].loop.id if audit.loops else None
    for loop in audit.loops:
        block = loop.block
        table.add_row(
            *_cells(
                f"{loop.loop.id}*" if loop.loop.id == current else loop.loop.id,
                len(loop.turns),
                sum(len(turn.messages) for turn in loop.turns),
                f"{loop.raw_tokens:,}",
                "none" if block is None else f"gen {block.generation}",
                "in" if loop.in_scope else "out",
                f"{loop.context_tokens:,}",
                _share(loop.context_tokens, loop.raw_tokens) if loop.in_scope else "-",
            )
        )
    return table


def _audit_totals(audit: SessionAudit) -> str:
    in_scope = sum(1 for loop in audit.loops if loop.in_scope)
    return (
        f"Total: {audit.raw_tokens:,} raw tokens → {audit.context_tokens:,} in context "
        f"(ratio {audit.ratio:.1%}); {in_scope} of {len(audit.loops)} loop(s) in scope."
    )


@main.command("audit")
@click.argument("session_id", metavar="SESSION")
@_loop_option("Audit the chain of loops ending at this loop instead of the active chain.")
@_overlay_option("The named overlay to audit.")
@click.option("--scope", type=_SCOPE, metavar="N|budget", help=_READ_SCOPE_HELP)
@click.option(
    "--budget",
    "max_context_tokens",
    type=_TOKENS,
    default=100_000,
    show_default=True,
    metavar="TOKENS",
    help="The window a `budget` scope walks back against.",
)
@_json_option
@click.pass_obj
def audit(
    settings: _Settings,
    session_id: str,
    loop_id: int | None,
    overlay: str,
    scope: _Scope | None,
    max_context_tokens: int,
    as_json: bool,
) -> None:
    """Compare raw turns with what the model sees, turn by turn.

    For each turn of the loops in scope: its raw messages and their tokens, what the
    overlay did with them (kept, truncated, summarised, omitted or dropped), the
    replacement messages that stand for them (`#id`) and their tokens. Loops outside the
    scope are one row each: the model sees none of them. Then one row per loop and the
    totals. Counts are before any trim to a budget (see `sessionstore context`).

    \b
    Examples:
        sessionstore audit 3f2a9c...
        sessionstore audit 3f2a9c... --loop 12 --json
    """
    result = _run(
        _audit(
            settings.url,
            session_id,
            loop_id=loop_id,
            overlay=overlay,
            scope=scope,
            max_context_tokens=max_context_tokens,
        )
    )
    if as_json:
        _print_json(result.to_dict())
        return
    console = _stdout()
    if not result.loops:
        console.print(f"Session {session_id!r} has no loops.", markup=False, soft_wrap=True)
        return
    console.print(
        f"Audit of session {session_id!r} (overlay {overlay!r})",
        markup=False,
        soft_wrap=True,
    )
    console.print(_turn_table(result.loops))
    console.print(_loop_table(result))
    console.print("* the current loop", style="dim")
    console.print(_audit_totals(result), markup=False, soft_wrap=True)


# ── demo ───────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class _DemoRun:
    session: Session
    loops: int
    messages: int
    turns: int
    raw_tokens: int
    compaction: CompactionResult
    context: BuiltContext
    audit: SessionAudit


def _agent_batches(messages: Sequence[Message]) -> Iterator[list[Message]]:
    """Split a loop as an agent appends it: each message with the tool results answering it."""
    batch: list[Message] = []
    for message in messages:
        if batch and not isinstance(message, ToolResultMessage):
            yield batch
            batch = []
        batch.append(message)
    if batch:
        yield batch


async def _demo(
    url: str,
    history: Sequence[Sequence[Message]],
    *,
    seed: int,
    budget: int,
    advance: Callable[[int], None],
) -> _DemoRun:
    config = CompactionConfig()
    async with _open_store(url, upgrade=True) as store:
        session = await store.create_session(
            app_name="demo",
            user_id="local",
            title=f"Synthetic coding-agent session (seed {seed})",
            metadata={"source": "sessionstore demo", "seed": seed},
        )
        raw_tokens = 0
        for messages in history:
            await store.start_loop(session.id)
            for batch in _agent_batches(messages):
                stored = await store.append_messages(session.id, batch)
                raw_tokens += sum(m.token_count for m in stored)
                advance(len(batch))
        turns = sum(loop.turn_count for loop in await store.list_loops(session.id))
        compaction = await compact_session_loops(
            store, session.id, config=config, max_context_tokens=budget
        )
        built = await build_context(store, session.id, max_context_tokens=budget, config=config)
        audited = await audit_session(store, session.id, config=config, max_context_tokens=budget)
    return _DemoRun(
        session=session,
        loops=len(history),
        messages=sum(len(loop) for loop in history),
        turns=turns,
        raw_tokens=raw_tokens,
        compaction=compaction,
        context=built,
        audit=audited,
    )


def _demo_json(run: _DemoRun, url: str, budget: int) -> dict[str, Any]:
    audited = run.audit.to_dict()
    for loop in audited["loops"]:
        loop["turns"] = len(loop["turns"])
    return {
        "session_id": run.session.id,
        "title": run.session.title,
        "url": make_url(url).render_as_string(hide_password=True),
        "stored": {
            "loops": run.loops,
            "messages": run.messages,
            "turns": run.turns,
            "raw_tokens": run.raw_tokens,
        },
        "compaction": _compaction_json(run.session.id, run.compaction),
        "context": _context_summary_json(run.context, budget),
        "audit": audited,
    }


def _print_demo(console: Console, run: _DemoRun, url: str, budget: int, hint: str) -> None:
    sid = run.session.id

    def heading(text: str) -> None:
        console.print()
        console.print(Text(text, style="bold"))

    console.print(
        Text("sessionstore demo", style="bold")
        + Text(": store, compact and rebuild a long agent session")
    )
    console.print(
        f"Database: {make_url(url).render_as_string(hide_password=True)} (schema upgraded)",
        markup=False,
        soft_wrap=True,
    )
    heading(f"1. Stored session {sid}")
    for line in (
        f"{run.loops} loops (one per user request), {run.turns} turns, {run.messages} messages",
        f"{run.raw_tokens:,} raw tokens: {run.raw_tokens / budget:.1f} times the "
        f"{budget:,}-token budget",
        "stored as an agent does: start_loop, then append_messages per model call",
    ):
        console.print(f"   {line}", markup=False, soft_wrap=True)
    current = run.compaction.loop_ids[-1] if run.compaction.loop_ids else None
    heading(
        f"2. Compacted the current loop ({current}) and the "
        f"{max(0, len(run.compaction.loop_ids) - 1)} before it, in "
        f"{run.compaction.duration_ms:.0f} ms"
    )
    _print_compaction(console, sid, run.compaction)
    built = run.context
    heading(f"3. Rebuilt the model's context within {budget:,} tokens")
    for line in _context_footer(built, budget):
        console.print(f"   {line}", markup=False, soft_wrap=True)
    if run.audit.loops:
        current_audit = run.audit.loops[-1]
        heading(f"4. Audit of loop {current_audit.loop.id}: raw turns against what the model sees")
        console.print(_turn_table([current_audit], max_turns=15, show_loop=False))
    console.print(_loop_table(run.audit))
    console.print("* the current loop", style="dim")
    console.print(_audit_totals(run.audit), markup=False, soft_wrap=True)
    heading("Next, try:")
    for command in (
        f"audit {sid}",
        f"context {sid} --budget 8000 --format text",
        f"compact {sid} --scope budget --budget {budget}",
        f"sessions show {sid}",
    ):
        console.print(f"   {hint} {command}", markup=False, soft_wrap=True)


@main.command("demo")
@click.option(
    "--seed",
    type=int,
    default=7,
    show_default=True,
    help="Chooses the synthetic session; the same seed gives the same messages.",
)
@click.option(
    "--loops",
    type=click.IntRange(1, 200),
    default=12,
    show_default=True,
    help="How many loops (user requests) the session has.",
)
@click.option(
    "--budget",
    type=_TOKENS,
    default=32_000,
    show_default=True,
    metavar="TOKENS",
    help="The model's window the context is rebuilt within.",
)
@_json_option
@click.pass_obj
def demo(settings: _Settings, seed: int, loops: int, budget: int, as_json: bool) -> None:
    """Try it: store, compact and rebuild a long agent session.

    Upgrades the database's schema, stores a realistic coding-agent session (many
    loops, hundreds of messages, far more tokens than the budget) loop by loop as an
    agent would, compacts it, rebuilds the context within the budget, and prints the
    audit of what the model sees against what happened. Each run adds a new session.

    \b
    Examples:
        sessionstore demo
        sessionstore demo --seed 3 --loops 20 --budget 16000
    """
    history = generate_session(seed=seed, loops=loops)
    total = sum(len(loop) for loop in history)
    stderr = Console(stderr=True)
    progress = Progress(
        TextColumn("Storing messages"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=stderr,
        disable=not stderr.is_terminal,
        transient=True,
    )
    with progress:
        task = progress.add_task("store", total=total)
        run = _run(
            _demo(
                settings.url,
                history,
                seed=seed,
                budget=budget,
                advance=lambda count: progress.advance(task, count),
            )
        )
    if as_json:
        _print_json(_demo_json(run, settings.url, budget))
        return
    hint = "sessionstore"
    if settings.is_url_given:
        hint += f" --url {make_url(settings.url).render_as_string(hide_password=False)}"
    _print_demo(_stdout(), run, settings.url, budget, hint)
