"""`sessionstore search`: find messages in the stored history, ranked by the database."""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

import click

from sessionstore.cli._options import Settings, json_option, run_with_store
from sessionstore.cli._render import print_json
from sessionstore.cli._render._search import print_search_hits

__all__ = ["search"]


@click.command("search")
@click.argument("query")
@click.option("--session", "session_id", metavar="SESSION", help="Search only this session.")
@click.option("--app-name", help="Only the sessions of this application.")
@click.option("--user-id", help="Only the sessions of this user (needs --app-name).")
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=20,
    show_default=True,
    help="The most matches to show.",
)
@click.option(
    "--summaries",
    "include_summaries",
    is_flag=True,
    help="Also search the summaries of the newest compaction blocks.",
)
@json_option()
@click.pass_obj
def search(
    settings: Settings,
    query: str,
    session_id: str | None,
    app_name: str | None,
    user_id: str | None,
    limit: int,
    include_summaries: bool,
    as_json: bool,
) -> None:
    """Search the raw messages of every session, best match first.

    Every word of QUERY must appear, in any order, case-insensitively; punctuation
    separates words and is never search syntax. Each match shows its session, loop,
    turn and message id, the database's score (SQLite bm25, PostgreSQL ts_rank) and a
    snippet with the words in **.

    \b
    Examples:
        sessionstore search "migration failed" --limit 5
        sessionstore search read_file --session 3f2a9c... --json
    """
    if user_id is not None and app_name is None:
        raise click.BadParameter("filtering by user needs --app-name too", param_hint="--user-id")
    hits = run_with_store(
        settings.url,
        lambda store: store.search(
            query,
            session_id=session_id,
            limit=limit,
            include_summaries=include_summaries,
            app_name=app_name,
            user_id=user_id,
        ),
    )
    if as_json:
        print_json([hit.model_dump(mode="json") for hit in hits])
    else:
        print_search_hits(hits)
