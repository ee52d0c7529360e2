"""`sessionstore search`: find messages in the stored history, ranked by the database.

On a SQLite file whose index holds every message, the search runs without SQLAlchemy
(`_sqlite_search`); otherwise through the store, which brings the index up to date first.
"""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from sessionstore.cli._options import (
    Settings,
    json_option,
    read_only_file_uri,
    run_with_store,
    user_errors,
)
from sessionstore.cli._render import print_json
from sessionstore.cli._render._search import print_search_hits

if TYPE_CHECKING:
    from sessionstore.models import SearchHit

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
    hits = _search_file(settings, query, session_id, app_name, user_id, limit, include_summaries)
    if hits is None:
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


def _search_file(
    settings: Settings,
    query: str,
    session_id: str | None,
    app_name: str | None,
    user_id: str | None,
    limit: int,
    include_summaries: bool,
) -> list[SearchHit] | None:
    """The search of a SQLite file read without SQLAlchemy, or None (`_sqlite_search`).

    None for any other URL, a file at another revision, or messages the index does not
    hold yet (the store's search indexes them first).
    """
    uri = read_only_file_uri(settings.url)
    if uri is None:
        return None
    from sessionstore._search_core import search_terms
    from sessionstore._sqlite_search import search_file

    with user_errors():
        return search_file(
            uri,
            timeout=settings.lock_timeout,
            terms=search_terms(query, limit, app_name, user_id),
            session_id=session_id,
            app_name=app_name,
            user_id=user_id,
            limit=limit,
            include_summaries=include_summaries,
        )
