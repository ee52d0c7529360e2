"""The `sessionstore` command line: thin click commands over the library.

Each command parses its options, runs one library coroutine with `asyncio.run()` and
prints: a rich table or text by default, JSON on stdout with `--json`. The errors users
cause become `click.ClickException` at this boundary, so they see a message on stderr
and a non-zero exit code, never a traceback.

- `_db`: `db upgrade|current|check`;
- `_sessions`: `sessions list|show|delete`, `import` and `export`;
- `_search`: `search`;
- `_compaction`: `compact`, `context` and `audit`;
- `_demo`: `demo`;
- `_trajectories`: `trajectories compress`;
- `_options`: the shared options and parameter types, and how a command runs;
- `_render`: the tables, text and JSON the commands print.
"""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

import click
from click.core import ParameterSource

from sessionstore.cli._compaction import audit, compact, context
from sessionstore.cli._db import db
from sessionstore.cli._demo import demo
from sessionstore.cli._options import Settings, url_option
from sessionstore.cli._search import search
from sessionstore.cli._sessions import export, import_, sessions
from sessionstore.cli._trajectories import trajectories

__all__ = ["main"]


@click.group(
    name="sessionstore",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@url_option
@click.version_option(package_name="sessionstore")
@click.pass_context
def main(ctx: click.Context, url: str) -> None:
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
    ctx.obj = Settings(url=url, is_url_given=given)


for _command in (
    db,
    sessions,
    import_,
    export,
    search,
    compact,
    context,
    audit,
    demo,
    trajectories,
):
    main.add_command(_command)
