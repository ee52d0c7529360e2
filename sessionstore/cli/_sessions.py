"""`sessionstore sessions list|show|delete|purge`, `import` and `export`: sessions in and out."""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from sessionstore.cli._loops import session_loops
from sessionstore.cli._options import (
    Settings,
    json_option,
    loop_option,
    read_only_file_uri,
    run_read,
    run_with_store,
    user_errors,
)
from sessionstore.cli._progress import progress, progress_option
from sessionstore.cli._render import (
    echo,
    json_text,
    print_json,
    print_session,
    print_session_page,
    progress_bar,
    session_json,
)
from sessionstore.cli._replaced_file import replaced_on_success

# Imported by the commands that use them when they run (the formats, the progress bars),
# so `sessions list` loads neither.
if TYPE_CHECKING:
    from sessionstore import (
        ImportReport,
        LoopRecord,
        Page,
        PurgeReport,
        Session,
        SessionStore,
        SessionUsage,
    )
    from sessionstore._file_history import FileHistory

__all__ = ["export", "import_", "sessions"]


# ── import ─────────────────────────────────────────────────────────────────────


async def _import(
    store: SessionStore, lines: Iterable[bytes], *, app_name: str, user_id: str
) -> ImportReport:
    from sessionstore import ImportLineError, import_jsonl

    try:
        return await import_jsonl(store, lines, app_name=app_name, user_id=user_id)
    except ImportLineError as exc:
        imported = len(exc.report.imported)
        kept = (
            f"the {imported} session(s) imported from earlier lines stay imported"
            if imported
            else "no session was imported by this run"
        )
        raise click.ClickException(
            f"{exc}\n({kept}; fix the line and run the import again: "
            "sessions that already exist are skipped)"
        ) from exc


def _advancing(file: IO[bytes], advance: Callable[[int], None]) -> Iterator[bytes]:
    for line in file:
        advance(len(line))
        yield line


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, readable=True, path_type=Path))
@click.option(
    "--app-name", default="cli", show_default=True, help="The application that owns the sessions."
)
@click.option(
    "--user-id", default="local", show_default=True, help="The user that owns the sessions."
)
@click.option("--upgrade", is_flag=True, help="Migrate the database to the newest schema first.")
@json_option()
@click.pass_obj
def import_(
    settings: Settings, file: Path, app_name: str, user_id: str, upgrade: bool, as_json: bool
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
    from rich.progress import DownloadColumn

    progress = progress_bar("Importing", DownloadColumn())
    with file.open("rb") as lines, progress:
        # A pipe has no size: the bar then only shows that the import is running.
        task = progress.add_task("import", total=file.stat().st_size or None)
        advancing = _advancing(lines, lambda size: progress.advance(task, size))
        report = run_with_store(
            settings.url,
            lambda store: _import(store, advancing, app_name=app_name, user_id=user_id),
            upgrade=upgrade,
        )
    if as_json:
        print_json(
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


@click.command("export")
@click.argument("session_id", metavar="SESSION")
@loop_option("Export the chain of loops ending at this loop instead of the active chain.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    default="-",
    metavar="FILE",
    help="Write to this file instead of stdout (whole or not at all: a failed export leaves "
    "FILE as it was).",
)
@click.option(
    "--compact", is_flag=True, help="Write one line, to append to a JSONL file, not indented JSON."
)
@click.option(
    "--redact-secrets",
    is_flag=True,
    help="Redact credentials (API keys, bearer tokens, passwords in URLs, private keys) from "
    "the messages, the title and the metadata, to share a transcript. The export then no "
    "longer imports back as the same messages.",
)
@progress_option()
@click.pass_obj
def export(
    settings: Settings,
    session_id: str,
    loop_number: int | None,
    output: Path,
    compact: bool,
    redact_secrets: bool,
    show_progress: bool | None,
) -> None:
    """Export a session's raw history as OpenAI chat-completions messages.

    Writes one JSON object, {"id", "title", "metadata", "messages": [...]}, with the raw
    messages of the session's active chain of loops (compaction never changes them).
    Importing a conversation and exporting it gives back the same messages, and a
    `--compact` export is a line `sessionstore import` reads. With -o, the export is
    written to a temporary file beside FILE and renamed over it once complete, so a
    failed export never leaves FILE truncated.

    \b
    Examples:
        sessionstore export 3f2a9c... -o session.json
        sessionstore export 3f2a9c... --compact >> sessions.jsonl
        sessionstore export 3f2a9c... --redact-secrets -o shared.json
    """
    from sessionstore import stream_conversation

    indent = None if compact else 2

    def export_to(sink: IO[str]) -> None:
        async def work(store: SessionStore | FileHistory) -> None:
            loop_id = None
            if loop_number is not None:
                _, loop_id = await session_loops(store, session_id, loop_number)
            # Streamed a chunk of messages at a time: memory stays bounded on any history.
            chunks = stream_conversation(
                store, session_id, loop_id=loop_id, indent=indent, redact_secrets=redact_secrets
            )
            written = 0
            async for text in chunks:
                # Exact JSON, with what a terminal could obey escaped (`json_text`).
                sink.write(json_text(text))
                written += len(text)
                shown.step(f"Exporting session {session_id}: {written / 1e6:,.1f} MB written")
            sink.write("\n")

        with progress(f"Exporting session {session_id}", show_progress) as shown:
            run_read(settings, work)

    if str(output) == "-":
        export_to(sys.stdout)
        return
    with replaced_on_success(output, param_hint="-o") as sink:
        export_to(sink)
    echo(f"Exported session {session_id!r} to {output}.", err=True)


# ── sessions ───────────────────────────────────────────────────────────────────


@click.group()
def sessions() -> None:
    """List, show, delete and purge sessions.

    \b
    Examples:
        sessionstore sessions list --app-name cli
        sessionstore sessions show 3f2a9c...
    """


async def _list_sessions(
    store: SessionStore,
    *,
    limit: int,
    cursor: str | None,
    app_name: str | None,
    user_id: str | None,
) -> Page:
    try:
        return await store.list_sessions(
            limit=limit, cursor=cursor, app_name=app_name, user_id=user_id
        )
    except ValueError as exc:
        # The command checks the other options, so the cursor is what the store refused.
        raise click.BadParameter(str(exc), param_hint="--cursor") from exc


def _first_page_of_file(
    settings: Settings, limit: int, app_name: str | None, user_id: str | None
) -> Page | None:
    """The first page read from a SQLite file without SQLAlchemy, or None (see `_sqlite_read`)."""
    uri = read_only_file_uri(settings.url)
    if uri is None:
        return None
    from sessionstore._sqlite_read import first_page

    return first_page(
        uri, timeout=settings.lock_timeout, limit=limit, app_name=app_name, user_id=user_id
    )


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
@json_option()
@click.pass_obj
def sessions_list(
    settings: Settings,
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
    page = None if cursor is not None else _first_page_of_file(settings, limit, app_name, user_id)
    if page is None:
        page = run_with_store(
            settings.url,
            lambda store: _list_sessions(
                store, limit=limit, cursor=cursor, app_name=app_name, user_id=user_id
            ),
            read_only=True,
        )
    if as_json:
        print_json(page.model_dump(mode="json"))
    else:
        print_session_page(page)


async def _show_session(
    store: SessionStore, session_id: str
) -> tuple[Session, list[LoopRecord], SessionUsage]:
    session = await store.get_session(session_id)
    return session, await store.list_loops(session_id), await store.usage(session_id)


def _file_session(
    settings: Settings, session_id: str
) -> tuple[Session, list[LoopRecord], SessionUsage] | None:
    """What `show` prints, read from a SQLite file without SQLAlchemy, or None (`_sqlite_context`).

    The same reads as through the store, raising the same errors; None for any other
    URL or a file the store must read.
    """
    uri = read_only_file_uri(settings.url)
    if uri is None:
        return None
    from sessionstore._sqlite_context import read_file_session

    with user_errors():
        return read_file_session(uri, timeout=settings.lock_timeout, session_id=session_id)


@sessions.command("show")
@click.argument("session_id", metavar="SESSION")
@json_option()
@click.pass_obj
def sessions_show(settings: Settings, session_id: str, as_json: bool) -> None:
    """Show a session, its loops, and the provider usage recorded for them.

    Each loop is one user request and the agent's work on it; the active loop, marked
    with "*", is the head of the chain that new messages continue. Usage (input, output,
    cache read, cache write and reasoning tokens) is summed per loop and for the session;
    --json also lists it per turn.

    \b
    Example:
        sessionstore sessions show 3f2a9c... --json
    """
    shown = _file_session(settings, session_id)
    if shown is None:
        shown = run_with_store(
            settings.url, lambda store: _show_session(store, session_id), read_only=True
        )
    session, loops, usage = shown
    if as_json:
        print_json(session_json(session, loops, usage))
    else:
        print_session(session, loops, usage)


@sessions.command("delete")
@click.argument("session_id", metavar="SESSION")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def sessions_delete(settings: Settings, session_id: str, yes: bool) -> None:
    """Delete a session with all its loops, messages and compaction blocks.

    This cannot be undone: it is how raw history goes away (retention, erasure requests).

    \b
    Example:
        sessionstore sessions delete 3f2a9c... --yes
    """
    if not yes:
        click.confirm(f"Delete session {session_id!r} and all its history?", abort=True, err=True)
    run_with_store(settings.url, lambda store: store.delete_session(session_id))
    click.echo(f"Deleted session {session_id!r}.")


# ── purge ──────────────────────────────────────────────────────────────────────


_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION = re.compile(r"(\d+)\s*([smhdw])")


class DurationType(click.ParamType[timedelta]):
    """A positive duration: a whole number and a unit, `s`, `m`, `h`, `d` or `w` (`30d`)."""

    name = "AGE"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        if isinstance(value, timedelta):
            return value
        found = _DURATION.fullmatch(str(value).strip().lower())
        amount = int(found.group(1)) if found else 0
        if found is None or amount == 0:
            self.fail(
                f"{value!r} is not a duration: write a positive whole number and a unit, "
                "s, m, h, d or w (for example 30d, 12h or 90m)",
                param,
                ctx,
            )
        try:
            return timedelta(**{_UNITS[found.group(2)]: amount})
        except OverflowError:
            self.fail(f"{value!r} is too long a duration", param, ctx)


def _report_text(report: PurgeReport, older_than: str) -> str:
    verb = "Would purge" if report.dry_run else "Purged"
    when = report.cutoff.strftime("%Y-%m-%d %H:%M:%S UTC")
    rows = ", ".join(f"{count} {table}" for table, count in report.rows.items() if count)
    return (
        f"{verb} {report.sessions} session(s) last updated before {when} "
        f"(older than {older_than})" + (f": {rows}." if rows else ".")
    )


def _failed_text(report: PurgeReport) -> str:
    skipped = "\n".join(
        f"  {f.session_id} ({f.app_name}/{f.user_id}): {f.error}" for f in report.failed
    )
    return (
        f"{len(report.failed)} session(s) could not be deleted and were skipped "
        f"(the others were purged; the next purge tries these again):\n{skipped}"
    )


@sessions.command("purge")
@click.option(
    "--older-than",
    "age",
    required=True,
    type=DurationType(),
    help="Purge the sessions not updated for this long: 30d, 12h, 90m, 2w, 45s.",
)
@click.option("--app-name", help="Only the sessions of this application (needs --user-id).")
@click.option("--user-id", help="Only the sessions of this user (needs --app-name).")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    default=500,
    show_default=True,
    help="Sessions deleted per transaction.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be purged; delete nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option()
@click.pass_obj
def sessions_purge(
    settings: Settings,
    age: timedelta,
    app_name: str | None,
    user_id: str | None,
    batch_size: int,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Delete every session not updated for a while, with all its history.

    A session's last update is its last write (a message, a loop, a compaction). Each
    purged session goes with all its rows (loops, messages, blocks, events, digests), as by
    `sessions delete`; nothing else is touched. Sessions go oldest first, --batch-size per
    transaction, so an interrupted purge keeps what it did and can simply be run again.
    A session that cannot be deleted is reported and skipped (exit code 1); the others are
    purged. This cannot be undone: try --dry-run first.

    \b
    Examples:
        sessionstore sessions purge --older-than 30d --dry-run
        sessionstore sessions purge --older-than 90d --app-name cli --user-id local --yes --json
    """
    if (app_name is None) != (user_id is None):
        raise click.BadParameter(
            "a tenant is --app-name and --user-id together",
            param_hint="--user-id" if user_id is None else "--app-name",
        )
    shown = _shown_age(age)
    cutoff = datetime.now(UTC) - age
    if not dry_run and not yes:
        whose = f" of {app_name}/{user_id}" if app_name else ""
        click.confirm(
            f"Delete every session{whose} last updated before "
            f"{cutoff:%Y-%m-%d %H:%M:%S} UTC (older than {shown}), with all its history?",
            abort=True,
            err=True,
        )
    from rich.progress import MofNCompleteColumn

    progress = progress_bar("Counting" if dry_run else "Purging", MofNCompleteColumn())

    async def purge(store: SessionStore) -> PurgeReport:
        handle = (
            store if app_name is None or user_id is None else store.for_tenant(app_name, user_id)
        )
        task = progress.add_task("purge", total=None)
        return await handle.purge(
            older_than=cutoff,
            batch_size=batch_size,
            dry_run=dry_run,
            progress=lambda done, total: progress.update(task, completed=done, total=total),
        )

    with progress:
        report = run_with_store(settings.url, purge)
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        click.echo(_report_text(report, shown))
    if report.failed:  # the others were purged; exit 1 so a scheduled purge is noticed
        click.echo(_failed_text(report), err=True)
        raise SystemExit(1)


def _shown_age(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    for unit, size in (("w", 604_800), ("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
