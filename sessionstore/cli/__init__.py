"""The `sessionstore` command line: thin click commands over the library.

Each command parses its options, runs one library coroutine with `asyncio.run()` and
prints: a rich table or text by default, JSON on stdout with `--json`. The errors users
cause become `click.ClickException` at this boundary, so they see a message on stderr
and a non-zero exit code, never a traceback.

- `_db`: `db upgrade|current|check|verify`;
- `_sessions`: `sessions list|show|delete`, `import` and `export`;
- `_search`: `search`;
- `_mcp`: `mcp` (the recall tools over MCP);
- `_compaction`: `compact`, `context` and `audit`;
- `_demo`: `demo`;
- `_trajectories`: `trajectories compress`;
- `_settings`: the group's `--url` and the settings it passes on (click only);
- `_options`: the shared options and parameter types, and how a command runs;
- `_render`: the tables, text and JSON the commands print.
"""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

import difflib
import importlib
from typing import Any, NamedTuple

import click
from click.core import ParameterSource

from sessionstore.cli._settings import Settings, lock_timeout_option, url_option

__all__ = ["main"]


class _Command(NamedTuple):
    module: str
    attribute: str
    summary: str
    """The first sentence of the command's help (a test keeps the two equal)."""


COMMANDS: dict[str, _Command] = {
    "audit": _Command(
        "sessionstore.cli._compaction",
        "audit",
        "Compare raw turns with what the model sees, turn by turn.",
    ),
    "compact": _Command(
        "sessionstore.cli._compaction",
        "compact",
        "Compact a session's current loop and the earlier loops in scope.",
    ),
    "context": _Command(
        "sessionstore.cli._compaction",
        "context",
        "Print the context the model sees, rebuilt within a budget.",
    ),
    "db": _Command("sessionstore.cli._db", "db", "Create, upgrade and check the database schema."),
    "demo": _Command(
        "sessionstore.cli._demo",
        "demo",
        "Try it: store, compact and rebuild a long agent session.",
    ),
    "export": _Command(
        "sessionstore.cli._sessions",
        "export",
        "Export a session's raw history as OpenAI chat-completions messages.",
    ),
    "import": _Command(
        "sessionstore.cli._sessions",
        "import_",
        "Import conversations from a JSONL file, one session per line.",
    ),
    "mcp": _Command(
        "sessionstore.cli._mcp",
        "mcp",
        "Serve the recall tools of one tenant to an MCP client over stdio.",
    ),
    "search": _Command(
        "sessionstore.cli._search",
        "search",
        "Search the raw messages of every session, best match first.",
    ),
    "sessions": _Command(
        "sessionstore.cli._sessions", "sessions", "List, show, delete and purge sessions."
    ),
    "trajectories": _Command(
        "sessionstore.cli._trajectories",
        "trajectories",
        "Prepare agent trajectories (JSONL) as training data.",
    ),
}
"""Every command: where it lives and what `sessionstore --help` says of it.

The group imports a command's module only to run it (or print its own help), so the
top-level help and `--version` never import the library, SQLAlchemy or alembic.
"""


class _LazyGroup(click.Group):
    """A group that lists its commands from `COMMANDS` and imports one only when it is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        if not isinstance(command, click.Command):  # pragma: no cover - a wiring mistake
            raise TypeError(f"{entry.module}.{entry.attribute} is not a click command")
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse the group's options, taken from after the command too (`demo --url ...`)."""
        return super().parse_args(ctx, _group_options_first(args))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Find the command; an unknown name gets the closest ones as "did you mean"."""
        name = click.utils.make_str(args[0]) if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            close = difflib.get_close_matches(name, COMMANDS, n=3, cutoff=0.6)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; an error's message (which may quote stored text) is printable."""
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            # Imported here: the top-level help and --version import no renderer.
            from sessionstore.cli._render._printable import printable

            # click declares `message` Final, but sets it as a plain attribute: rewriting it
            # keeps the exception's class, context and exit code.
            exc.message = printable(exc.message)  # type: ignore[misc]
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the commands from their summaries, without importing them."""
        if not COMMANDS:  # pragma: no cover
            return
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, click.Command(name, help=COMMANDS[name].summary).get_short_help_str(limit))
            for name in self.list_commands(ctx)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


_GROUP_OPTIONS = ("--url", "--lock-timeout")
"""The group's options that take a value; they may also follow the command's name."""


def _group_options_first(args: list[str]) -> list[str]:
    """Move the group's options found after the command name (before a `--`) in front of it."""
    start = 0
    while start < len(args) and args[start].startswith("-") and args[start] != "--":
        start += 2 if args[start] in _GROUP_OPTIONS else 1
    if start >= len(args):
        return args
    moved: list[str] = []
    rest: list[str] = []
    index = start + 1
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest += args[index:]
            break
        if arg in _GROUP_OPTIONS and index + 1 < len(args):
            moved += args[index : index + 2]
            index += 2
            continue
        if arg.partition("=")[0] in _GROUP_OPTIONS:
            moved.append(arg)
        else:
            rest.append(arg)
        index += 1
    return [*args[:start], *moved, args[start], *rest]


@click.group(
    name="sessionstore",
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@url_option
@lock_timeout_option
@click.version_option(package_name="sessionstore")
@click.pass_context
def main(ctx: click.Context, url: str, lock_timeout: float) -> None:
    """Durable SQL history for long-lived LLM agents.

    New here? `sessionstore demo` stores a long synthetic agent session, compacts it and
    rebuilds the model's context within a budget, in a few seconds.

    Create the schema once with `sessionstore db upgrade`, import conversations, then
    list, show, export, delete and `search` sessions; `compact` writes compaction overlays,
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
    ctx.obj = Settings(url=url, is_url_given=given, lock_timeout=lock_timeout)
