"""`sessionstore mcp`: serve the recall tools of one tenant to an MCP client over stdio."""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

import click

from sessionstore.cli._options import Settings, run
from sessionstore.errors import MissingDependencyError
from sessionstore.recall import MESSAGE_CHARS

__all__ = ["mcp"]


@click.command("mcp")
@click.option("--app", "app_name", required=True, help="The tenant's application.")
@click.option("--user", "user_id", required=True, help="The tenant's user.")
@click.option(
    "--session",
    "session_id",
    metavar="SESSION",
    help="The session a call looks into when it names none (the agent's own).",
)
@click.option(
    "--message-chars",
    type=click.IntRange(100, 1_000_000),
    default=MESSAGE_CHARS,
    show_default=True,
    help="The most characters of one message a tool returns.",
)
@click.pass_obj
def mcp(
    settings: Settings,
    app_name: str,
    user_id: str,
    session_id: str | None,
    message_chars: int,
) -> None:
    """Serve the recall tools of one tenant to an MCP client over stdio.

    The tools (search_history, list_loops, expand_summary, read_messages) let an agent
    look back past its summaries into the raw history they stand for. They see only the
    sessions of the tenant named by --app and --user: no tool takes a tenant. Needs the
    mcp extra (pip install "sessionstore[mcp]"); the client starts this command and
    talks to it on stdin and stdout.

    \b
    Example:
        sessionstore mcp --app my-agent --user user-42
    """
    try:
        from sessionstore.recall.mcp import serve_stdio  # the mcp package only when serving
    except MissingDependencyError as exc:
        raise click.ClickException(str(exc)) from exc
    run(
        serve_stdio(
            settings.url,
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            message_chars=message_chars,
        )
    )
