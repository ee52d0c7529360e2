"""Full-text search without SQLAlchemy: its statements' texts and how their rows become hits.

The store's search (`store/_search.py`) runs these texts through SQLAlchemy, typed as its
columns are; `sessionstore search` on a SQLite file runs the same texts on the standard
library's driver (`_sqlite_context.search_file`). Both call `search_rows`, so the hits,
their order and their snippets are one computation.

SQLite matches through the FTS5 tables and ranks by bm25; PostgreSQL matches the GIN-indexed
`search_vector` column and ranks by `ts_rank`. Every query word must match; the words are
quoted (SQLite) or passed to `plainto_tsquery` (PostgreSQL), so no input is a full-text
syntax error. On SQLite the raw messages' index is brought up to date by the search, not
the append (migration 0009): the index holds every row up to its highest id
(`INDEXED_THROUGH`), and rows are numbered in commit order, so the rows after it are
exactly the ones not indexed yet; `CATCH_UP` indexes them. A reader that cannot write
matches those rows word by word (`pending_sql`) and ranks them after the indexed hits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any, Literal

from sessionstore._context_source import SessionKey
from sessionstore._search_text import SEPARATORS, query_terms, searchable_text, snippet
from sessionstore.models import MESSAGE_ADAPTER, SearchHit

__all__ = [
    "CATCH_UP",
    "INDEXED_THROUGH",
    "NEWEST",
    "Filters",
    "RowKind",
    "Run",
    "pending_sql",
    "search_rows",
    "search_terms",
    "statement_sql",
]

MESSAGES_FTS = "sessionstore_messages_fts"
INDEXED_THROUGH = f"SELECT coalesce(max(id), 0) FROM {MESSAGES_FTS}_docsize"
"""The highest id the index holds (FTS5's per-row size table is keyed by the row's id)."""
SEARCH_VIEW = "sessionstore_messages_search"
"""SQLite: each raw message's id and the text its index holds, derived from the payload
by the database (migration 0010); the FTS5 table's content."""
CATCH_UP = (
    f"INSERT INTO {MESSAGES_FTS}(rowid, search_text) "
    f"SELECT id, search_text FROM {SEARCH_VIEW} WHERE id > ({INDEXED_THROUGH}) "
    "ORDER BY id"
)
NEWEST = "SELECT coalesce(max(id), 0) FROM sessionstore_messages"

Filters = tuple[bool, bool, bool, bool]
"""Which filters a search has: the tenant's, an app, a user, a session."""
RowKind = Literal["raw", "summary", "pending"]
"""Which statement a row comes from, so a runner knows its columns' types: `created_at`
a time and `payload` JSON text in all three, `covers` a JSON list in `summary`."""
Run = Callable[[RowKind, str, Mapping[str, Any]], Iterable[Any]]
"""Runs a statement's text with parameters; its rows have the columns as attributes."""

_RAW_COLUMNS = (
    "m.id, m.session_id, m.loop_id, l.sequence + 1 AS loop_number, m.position, m.turn_index, "
    "m.kind, m.created_at, "
    "CAST(m.payload AS TEXT) AS payload"
)
_SUMMARY_COLUMNS = (
    "sm.id, sm.session_id, b.loop_id, l.sequence + 1 AS loop_number, sm.position, "
    "b.id AS block_id, sm.kind, b.created_at, "
    "CAST(sm.payload AS TEXT) AS payload, sm.covers"
)
# Only the newest block of a loop and overlay speaks for it; older generations are audit data.
_NEWEST_BLOCK = (
    "b.generation = (SELECT max(b2.generation) FROM sessionstore_blocks b2 "
    "WHERE b2.session_id = b.session_id AND b2.app_name = b.app_name "
    "AND b2.user_id = b.user_id AND b2.loop_id = b.loop_id AND b2.overlay = b.overlay)"
)


def _same_session(alias: str, other: str) -> str:
    """Join on the session key (the distribution column first): rows of one session."""
    return " AND ".join(
        f"{alias}.{column} = {other}.{column}" for column in ("session_id", "app_name", "user_id")
    )


_SUMMARY_JOINS = (
    "JOIN sessionstore_block_sections sec ON sec.id = sm.section_id AND sec.kind = 'compacted' "
    f"AND {_same_session('sec', 'sm')} "
    f"JOIN sessionstore_blocks b ON b.id = sec.block_id AND {_same_session('b', 'sec')} "
    # The loop's number in its session (`LoopRecord.number`), which the CLI shows.
    f"JOIN sessionstore_loops l ON l.id = b.loop_id AND {_same_session('l', 'b')} "
)
_RAW_JOINS = f"JOIN sessionstore_loops l ON l.id = m.loop_id AND {_same_session('l', 'm')} "


def _filters(tenant: bool, app: bool, user: bool, session: bool, alias: str) -> str:
    clauses = []
    if tenant:
        clauses.append("s.app_name = :t_app AND s.user_id = :t_user")
    else:
        if app:
            clauses.append("s.app_name = :app")
        if user:
            clauses.append("s.user_id = :user")
    if session:
        clauses.append(
            f"{alias}.session_id = :sid AND {alias}.app_name = :s_app AND {alias}.user_id = :s_user"
        )
    return "".join(f" AND {clause}" for clause in clauses)


@cache
def statement_sql(postgres: bool, summaries: bool, filters: Filters) -> str:
    """The text of the search of raw messages (or of summaries), best first, `:limit` rows."""
    alias = "sm" if summaries else "m"
    table = "sessionstore_section_messages" if summaries else "sessionstore_messages"
    columns = _SUMMARY_COLUMNS if summaries else _RAW_COLUMNS
    joins = _SUMMARY_JOINS if summaries else _RAW_JOINS
    where = _filters(*filters, alias=alias) + (f" AND {_NEWEST_BLOCK}" if summaries else "")
    if postgres:
        return (
            f"SELECT {columns}, ts_rank({alias}.search_vector, q.query) AS score "
            f"FROM {table} {alias} {joins}"
            f"JOIN sessionstore_sessions s ON s.id = {alias}.session_id "
            f"AND s.app_name = {alias}.app_name AND s.user_id = {alias}.user_id "
            "CROSS JOIN plainto_tsquery('simple', :q) AS q(query) "
            f"WHERE {alias}.search_vector @@ q.query{where} "
            f"ORDER BY score DESC, {alias}.id LIMIT :limit"
        )
    fts = f"{table}_fts"
    return (
        f"SELECT {columns}, -bm25({fts}) AS score "
        f"FROM {fts} JOIN {table} {alias} ON {alias}.id = {fts}.rowid {joins}"
        f"JOIN sessionstore_sessions s ON s.id = {alias}.session_id "
        f"AND s.app_name = {alias}.app_name AND s.user_id = {alias}.user_id "
        f"WHERE {fts} MATCH :q{where} "
        f"ORDER BY score DESC, {alias}.id LIMIT :limit"
    )


@cache
def pending_sql(filters: Filters) -> str:
    """SQLite: the text of the raw messages after `:through` (not indexed yet), with their words."""
    return (
        f"SELECT {_RAW_COLUMNS}, v.search_text FROM sessionstore_messages m "
        f"JOIN {SEARCH_VIEW} v ON v.id = m.id "
        "JOIN sessionstore_sessions s ON s.id = m.session_id "
        "AND s.app_name = m.app_name AND s.user_id = m.user_id "
        f"{_RAW_JOINS}"
        f"WHERE m.id > :through{_filters(*filters, alias='m')} ORDER BY m.id"
    )


def search_terms(query: str, limit: int, app_name: str | None, user_id: str | None) -> list[str]:
    """The words of `query` (`query_terms`), once `limit` and the filters are checked.

    Raises:
        ValueError: the query is blank, `limit` is not 1 to 1000, or `user_id` is given
            without `app_name`.
    """
    terms = query_terms(query)
    if not 1 <= limit <= 1000:
        raise ValueError("limit must be between 1 and 1000")
    if user_id is not None and app_name is None:
        raise ValueError("filtering by user_id needs app_name too")
    return terms


def _match_expression(terms: list[str], postgres: bool) -> str:
    if postgres:
        return " ".join(terms)
    # Each word is an FTS5 string (a phrase): no operator, column filter or prefix applies.
    return " ".join('"' + term.replace('"', '""') + '"' for term in terms)


def _search_params(
    terms: list[str],
    *,
    postgres: bool,
    limit: int,
    key: SessionKey | None,
    app_name: str | None,
    user_id: str | None,
    tenant: Mapping[str, str] | None,
) -> tuple[Filters, dict[str, Any]]:
    """The filters and the parameters of a search; `tenant` is the handle's parameters."""
    filters = (tenant is not None, app_name is not None, user_id is not None, key is not None)
    params: dict[str, Any] = {
        "q": _match_expression(terms, postgres),
        "limit": limit,
        "sid": key and key.session_id,
        "s_app": key and key.app_name,
        "s_user": key and key.user_id,
        "app": app_name,
        "user": user_id,
    }
    if tenant is not None:
        params |= tenant
    return filters, params


def search_rows(
    run: Run,
    terms: list[str],
    *,
    postgres: bool,
    key: SessionKey | None,
    app_name: str | None,
    user_id: str | None,
    tenant: Mapping[str, str] | None,
    limit: int,
    include_summaries: bool,
    behind: int | None,
) -> list[SearchHit]:
    """The best `limit` hits for every one of `terms`, best first.

    `key` is the session searched (None: every session the filters let through), `tenant`
    the handle's tenant parameters. `behind` is the highest indexed id when rows after it
    are not indexed yet: they are matched here, ranked after the indexed hits.
    """
    filters, params = _search_params(
        terms,
        postgres=postgres,
        limit=limit,
        key=key,
        app_name=app_name,
        user_id=user_id,
        tenant=tenant,
    )
    hits = [
        _raw_hit(row, terms, float(row.score))
        for row in run("raw", statement_sql(postgres, False, filters), params)
    ]
    if behind is not None:
        hits += _pending_hits(run, terms, filters, {**params, "through": behind})
    if include_summaries:
        hits += [
            SearchHit(
                session_id=row.session_id,
                loop_id=row.loop_id,
                loop_number=row.loop_number,
                message_id=row.id,
                position=row.position,
                turn_index=None,
                kind=row.kind,
                snippet=_snippet(row.payload, terms),
                score=float(row.score),
                created_at=row.created_at,
                is_summary=True,
                block_id=row.block_id,
                covers=row.covers,
            )
            for row in run("summary", statement_sql(postgres, True, filters), params)
        ]
        hits.sort(key=lambda hit: -hit.score)
    return hits[:limit]


def _pending_hits(
    run: Run, terms: list[str], filters: Filters, params: Mapping[str, Any]
) -> list[SearchHit]:
    """Match the rows not indexed yet: every term a whole word.

    The words are those FTS5's tokenizer sees (letters and digits; the rest separates
    them), folded as it folds them; these hits rank after the indexed ones (score 0).
    """
    wanted = {term.casefold() for term in terms}
    hits = []
    for row in run("pending", pending_sql(filters), params):
        words = SEPARATORS.sub(" ", row.search_text or "").casefold().split()
        if wanted <= set(words):
            hits.append(_raw_hit(row, terms, 0.0))
    return hits


def _snippet(payload: str, terms: list[str]) -> str:
    # Cut from the message's text with its punctuation, not from the indexed words.
    return snippet(searchable_text(MESSAGE_ADAPTER.validate_json(payload)), terms)


def _raw_hit(row: Any, terms: list[str], score: float) -> SearchHit:
    """A hit on a raw message row, indexed or not yet."""
    return SearchHit(
        session_id=row.session_id,
        loop_id=row.loop_id,
        loop_number=row.loop_number,
        message_id=row.id,
        position=row.position,
        turn_index=row.turn_index,
        kind=row.kind,
        snippet=_snippet(row.payload, terms),
        score=score,
        created_at=row.created_at,
    )
