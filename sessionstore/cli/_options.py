"""What every command shares: its settings, its options and parameter types, and how it runs.

A command takes its options through the decorators here (so an option reads the same
everywhere it appears), then runs one coroutine with `run`, which turns the errors a
user can cause into clean messages, or with `run_with_store`, which first opens the
store and checks its schema (`open_store`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import click
from pydantic import ValidationError

from sessionstore import FixedCount, SessionStoreError, TokenBudget
from sessionstore._defaults import DEFAULT_LOCK_TIMEOUT
from sessionstore.cli._settings import URL_ENVVAR, Settings, lock_timeout_option, url_option
from sessionstore.errors import describe_validation_error
from sessionstore.models import MAX_BIG_INT, MAX_INT
from sessionstore.models._limits import check_overlay

# The store (and SQLAlchemy) load when a command opens one, not when it parses options.
if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from sessionstore import SessionStore
    from sessionstore._file_history import FileHistory

__all__ = [
    "AS_OF",
    "COUNT",
    "LOOP_ID",
    "SCOPE",
    "TOKENS",
    "URL_ENVVAR",
    "AsOfType",
    "Scope",
    "ScopeType",
    "Settings",
    "budget_option",
    "database_url",
    "json_option",
    "lock_timeout_option",
    "loop_option",
    "open_store",
    "overlay_option",
    "read_only_file_uri",
    "run",
    "run_read",
    "run_with_store",
    "scope_option",
    "url_option",
]

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

Scope = FixedCount | TokenBudget


def _lock_timeout() -> float:
    """The `--lock-timeout` of the running command (the default outside one)."""
    context = click.get_current_context(silent=True)
    settings = None if context is None else context.find_object(Settings)
    return DEFAULT_LOCK_TIMEOUT if settings is None else settings.lock_timeout


def _sqlite_file(url: str | URL) -> Path | None:
    """The file of a plain SQLite file URL, or None (another database, memory, a `file:` URI)."""
    from sessionstore.store._engine import normalize_url

    try:
        parsed = normalize_url(url)
    except SessionStoreError:
        return None  # opening it raises the clear ConfigurationError
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or database in (None, "", ":memory:"):
        return None
    if database.startswith("file:") or "uri" in parsed.query:
        return None  # the user chose the open mode: keep it
    return Path(database)


def database_url(url: str, *, read_only: bool = False, may_create: bool = False) -> str:
    """Return the URL a command opens: a SQLite file it may not create must exist.

    A command that only reads opens a SQLite file read-only (`mode=ro`), so it never
    writes to it; a file in a directory that cannot be written to (read-only media, where
    no other process can write either) is opened `immutable=1`, which SQLite needs to read a
    WAL database there. PostgreSQL URLs are returned as they are.

    Raises:
        click.ClickException: the SQLite file does not exist and the command may not create it.
    """
    path = _sqlite_file(url)
    if path is None:
        return url
    if not path.exists():
        if may_create and path.parent.is_dir():
            return url
        if may_create:
            raise click.ClickException(
                f"cannot create a SQLite database at {path}: the directory {path.parent} "
                "does not exist"
            )
        raise click.ClickException(
            f"no SQLite database at {path}: check --url (or {URL_ENVVAR}); "
            "`sessionstore db upgrade` creates a new one"
        )
    if not read_only:
        return url
    return f"sqlite+aiosqlite:///{_read_only_uri(path)}&uri=true"


def _read_only_uri(path: Path) -> str:
    """The `file:` URI that opens the SQLite file at `path` without writing to it."""
    path = path.resolve()
    wal = path.with_name(path.name + "-wal")
    # immutable=1 ignores a write-ahead log: only for a file with none to replay.
    is_media_read_only = not os.access(path.parent, os.W_OK)
    has_log = wal.exists() and wal.stat().st_size > 0
    mode = "immutable=1" if is_media_read_only and not has_log else "mode=ro"
    return f"file:{quote(str(path))}?{mode}"


_PLAIN_SQLITE_URL = re.compile(r"sqlite(?:\+aiosqlite)?:///(?P<path>[^?#%]+)")
"""A SQLite file URL with no query, fragment or escape: its path is what follows `:///`."""


def read_only_file_uri(url: str) -> str | None:
    """The read-only `file:` URI of the SQLite file a plain URL names, if it exists.

    Parsed without SQLAlchemy, for a command that reads the file on the standard
    library's driver (`_sqlite_read`); None for any other URL (a test holds that
    SQLAlchemy reads the same file from every URL answered), and the command opens
    the store instead.
    """
    match = _PLAIN_SQLITE_URL.fullmatch(url)
    if match is None or match["path"] == ":memory:":
        return None
    path = Path(match["path"])
    return _read_only_uri(path) if path.is_file() else None


# ── running a command ──────────────────────────────────────────────────────────


def run(work: Coroutine[Any, Any, _T]) -> _T:
    """Run one coroutine and turn the errors a user can cause into clean messages.

    The result is kept beside the task, not in it: on Python 3.11 `asyncio.run` formats
    its task, result and all, when it puts the Ctrl-C handler back (twice), and an
    audit's result takes seconds to format.
    """
    import asyncio  # here: a command that reads without the store runs no event loop

    results: list[_T] = []

    async def main() -> None:
        results.append(await work)

    with user_errors():
        asyncio.run(main())
    return results[0]


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors a user can cause into clean messages (`run`'s, for a read without it)."""
    try:
        yield
    except ValidationError as exc:  # before ValueError, which it subclasses
        raise click.ClickException(describe_validation_error(exc)) from exc
    except (SessionStoreError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


@contextlib.asynccontextmanager
async def open_store(
    url: str, *, upgrade: bool = False, read_only: bool = False
) -> AsyncIterator[SessionStore]:
    """Open a store whose schema is at the head (or is brought there with `upgrade`).

    Only `upgrade` may create a SQLite file; `read_only` opens it without writing
    (see `database_url`).
    """
    from sessionstore import SessionStore

    opened = database_url(url, read_only=read_only and not upgrade, may_create=upgrade)
    async with SessionStore.from_url(opened, lock_timeout=_lock_timeout()) as store:
        if upgrade:
            await store.upgrade()
        else:
            await store.check_schema()
        yield store


def run_with_store(
    url: str,
    work: Callable[[SessionStore], Awaitable[_T]],
    *,
    upgrade: bool = False,
    read_only: bool = False,
) -> _T:
    """Open the store at `url`, run `work` on it, and close it, in one `run`."""

    async def main() -> _T:
        async with open_store(url, upgrade=upgrade, read_only=read_only) as store:
            return await work(store)

    return run(main())


def run_read(
    settings: Settings, work: Callable[[SessionStore | FileHistory], Coroutine[Any, Any, _T]]
) -> _T:
    """Run `work` on a SQLite file read without SQLAlchemy, or else on the store, read-only.

    On a plain SQLite file at the newest revision, `work` gets the file's reader
    (`_file_history.FileHistory`), which answers what `export` and `audit` ask as the
    store does; any other URL or file is read through the store (which says what is
    wrong with it).
    """
    uri = read_only_file_uri(settings.url)
    if uri is not None:
        from sessionstore._file_history import open_file_history

        with open_file_history(uri, timeout=settings.lock_timeout) as history:
            if history is not None:
                return run(work(history))
    return run_with_store(settings.url, work, read_only=True)


# ── parameter types ────────────────────────────────────────────────────────────


class ScopeType(click.ParamType[Scope]):
    """A number of earlier loops (`FixedCount`), or `budget` (`TokenBudget`)."""

    name = "N|budget"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Scope:
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
        if int(text) > MAX_INT:
            self.fail(
                f"{value!r} is out of range: a scope counts at most {MAX_INT:,} earlier loops",
                param,
                ctx,
            )
        return FixedCount(int(text))


class AsOfType(click.ParamType[int | datetime]):
    """A generation of the loop's block (1, 2, ...) or an ISO 8601 time."""

    name = "GENERATION|TIME"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | datetime:
        if isinstance(value, int | datetime):
            return value
        text = str(value).strip()
        if text.isdigit():
            if not 1 <= int(text) <= MAX_INT:
                self.fail(f"block generations start at 1 (the range is 1 to {MAX_INT})", param, ctx)
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


SCOPE = ScopeType()
AS_OF = AsOfType()
TOKENS = click.IntRange(min=1, max=MAX_BIG_INT)
COUNT = click.IntRange(min=0, max=MAX_BIG_INT)
LOOP_ID = click.IntRange(min=1, max=MAX_BIG_INT)
"""A loop number (`--loop N`): at most what the id column can hold, so a larger one is a
usage error."""


# ── options ────────────────────────────────────────────────────────────────────


def json_option(help_text: str = "Print machine-readable JSON to stdout.") -> Callable[[_F], _F]:
    """Return the output switch every command that lists or shows something takes."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def summarizer_options(what: str) -> Callable[[_F], _F]:
    """The options that point a command at an OpenAI-compatible summarizer.

    `what` names what the summarizer writes (for the help of `--summarizer-url`).
    """
    url = click.option(
        "--summarizer-url",
        envvar="SESSIONSTORE_SUMMARIZER_URL",
        metavar="URL",
        help=f"An OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, Ollama) that writes "
        f"{what}. Without it, the offline extractive summarizer.",
    )
    model = click.option(
        "--summarizer-model", metavar="NAME", help="The model to ask (with --summarizer-url)."
    )
    key = click.option(
        "--summarizer-key-env",
        default="OPENAI_API_KEY",
        show_default=True,
        metavar="VAR",
        help="The environment variable holding the endpoint's API key (unset: no key).",
    )

    def decorate(function: _F) -> _F:
        return url(model(key(function)))

    return decorate


def loop_option(help_text: str) -> Callable[[_F], _F]:
    """Return `--loop N`: the loop to work on instead of the active one, by its number.

    The number is the loop's in its session (1, 2, ...), as every output of the CLI shows
    it (`sessions show` lists them), not the loop id of the store API (`cli/_loops.py`).
    """
    return click.option(
        "--loop",
        "loop_number",
        type=LOOP_ID,
        metavar="N",
        help=f"{help_text} N is the loop's number in the session, as `sessions show` lists it.",
    )


def _overlay_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        return check_overlay(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def overlay_option(help_text: str) -> Callable[[_F], _F]:
    """Return `--overlay NAME`: the named overlay, `default` by default."""
    return click.option(
        "--overlay",
        default="default",
        show_default=True,
        metavar="NAME",
        callback=_overlay_name,
        help=help_text,
    )


_READ_SCOPE_HELP = (
    "The earlier loops of the chain that take part: a number, or `budget` for as many as "
    "fit --budget.  [default: the scope the loop was last compacted with, else budget]"
)


def scope_option(
    help_text: str = _READ_SCOPE_HELP, default: str | None = None
) -> Callable[[_F], _F]:
    """Return `--scope N|budget`.

    Without a default, a command that reads gets None and the library uses the scope
    the loop was last compacted with, else every loop that fits the budget.
    """
    if default is None:
        return click.option("--scope", type=SCOPE, metavar="N|budget", help=help_text)
    return click.option(
        "--scope",
        type=SCOPE,
        metavar="N|budget",
        default=default,
        show_default=True,
        help=help_text,
    )


def budget_option(
    help_text: str, *, default: int | None = None, dest: str = "max_context_tokens"
) -> Callable[[_F], _F]:
    """Return `--budget TOKENS`: the model's window; required when there is no default."""
    if default is None:
        return click.option(
            "--budget", dest, type=TOKENS, required=True, metavar="TOKENS", help=help_text
        )
    return click.option(
        "--budget",
        dest,
        type=TOKENS,
        default=default,
        show_default=True,
        metavar="TOKENS",
        help=help_text,
    )
