"""Units of work for full-text search: each database's own engine, ranked, within a tenant.

SQLite matches through the FTS5 tables and ranks by bm25; PostgreSQL matches the GIN-indexed
`search_vector` column and ranks by `ts_rank` (migration 0005 creates both; since 0012 the
append writes the raw messages' vector, `_search_vector`). The engine is
the dialect's own, so this is the one module besides `_engine` that branches on the
dialect. Every query word must match; the words are taken from the user's query by
`query_terms` and quoted (SQLite) or passed to `plainto_tsquery` (PostgreSQL), so no
input is a full-text syntax error.

On SQLite the raw messages' FTS5 index is brought up to date by the search, not by the
append (migration 0009): tokenizing every message as it is written was the largest cost of
an append. The index holds every row up to its highest id (`indexed_through`); rows are
numbered in commit order (one writer at a time, AUTOINCREMENT), so the rows after it are
exactly the ones not indexed yet. A search that finds such rows indexes them first, in a
write transaction, and then searches in it: a search right after an append finds it. A
read-only store cannot write the index: it matches the rows not indexed yet here, word by
word, and ranks them after the indexed hits. The index's text is not stored: SQLite
derives it from each payload (the view `sessionstore_messages_search`, migration 0010).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Connection, TextClause, text

from sessionstore._search_text import SEPARATORS, searchable_text, snippet
from sessionstore.models import MESSAGE_ADAPTER, SearchHit
from sessionstore.store._nul import NulSafeJSONText
from sessionstore.store._sessions import Tenant, session_key, visible_session
from sessionstore.store._types import JSONPayload, UTCDateTime

__all__ = ["IndexBehind", "index_pending", "search"]

_MESSAGES_FTS = "sessionstore_messages_fts"
_INDEXED_THROUGH = f"SELECT coalesce(max(id), 0) FROM {_MESSAGES_FTS}_docsize"
"""The highest id the index holds (FTS5's per-row size table is keyed by the row's id)."""
_SEARCH_VIEW = "sessionstore_messages_search"
"""SQLite: each raw message's id and the text its index holds, derived from the payload
by the database (migration 0010); the FTS5 table's content."""
_CATCH_UP = (
    f"INSERT INTO {_MESSAGES_FTS}(rowid, search_text) "
    f"SELECT id, search_text FROM {_SEARCH_VIEW} WHERE id > ({_INDEXED_THROUGH}) "
    "ORDER BY id"
)
_NEWEST = "SELECT coalesce(max(id), 0) FROM sessionstore_messages"


class IndexBehind(Exception):
    """Raised by `search` on SQLite when messages are not indexed yet: index, then search."""


def index_pending(db: Connection) -> int:
    """Index the raw messages the SQLite search index does not hold yet (in a write).

    Returns how many rows were indexed; a no-op on PostgreSQL (its index is a column).
    """
    if db.dialect.name != "sqlite":
        return 0
    return db.exec_driver_sql(_CATCH_UP).rowcount or 0


def _indexed_through(db: Connection) -> int | None:
    """The highest indexed id on SQLite when rows after it exist; None when all are indexed."""
    through = int(db.exec_driver_sql(_INDEXED_THROUGH).scalar_one())
    newest = int(db.exec_driver_sql(_NEWEST).scalar_one())
    return through if newest > through else None


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
def _statement(postgres: bool, summaries: bool, filters: tuple[bool, bool, bool, bool]) -> Any:
    alias = "sm" if summaries else "m"
    table = "sessionstore_section_messages" if summaries else "sessionstore_messages"
    columns = _SUMMARY_COLUMNS if summaries else _RAW_COLUMNS
    joins = _SUMMARY_JOINS if summaries else _RAW_JOINS
    where = _filters(*filters, alias=alias) + (f" AND {_NEWEST_BLOCK}" if summaries else "")
    if postgres:
        sql = (
            f"SELECT {columns}, ts_rank({alias}.search_vector, q.query) AS score "
            f"FROM {table} {alias} {joins}"
            f"JOIN sessionstore_sessions s ON s.id = {alias}.session_id "
            f"AND s.app_name = {alias}.app_name AND s.user_id = {alias}.user_id "
            "CROSS JOIN plainto_tsquery('simple', :q) AS q(query) "
            f"WHERE {alias}.search_vector @@ q.query{where} "
            f"ORDER BY score DESC, {alias}.id LIMIT :limit"
        )
    else:
        fts = f"{table}_fts"
        sql = (
            f"SELECT {columns}, -bm25({fts}) AS score "
            f"FROM {fts} JOIN {table} {alias} ON {alias}.id = {fts}.rowid {joins}"
            f"JOIN sessionstore_sessions s ON s.id = {alias}.session_id "
            f"AND s.app_name = {alias}.app_name AND s.user_id = {alias}.user_id "
            f"WHERE {fts} MATCH :q{where} "
            f"ORDER BY score DESC, {alias}.id LIMIT :limit"
        )
    stmt: TextClause = text(sql)
    # The payload is read as JSON text, decoded as the message reads decode it (_nul.py):
    # a NUL in a snippet must not show PostgreSQL's escape.
    typed: dict[str, Any] = {"created_at": UTCDateTime(), "payload": NulSafeJSONText()}
    if summaries:
        typed["covers"] = JSONPayload
    return stmt.columns(**typed)


def _match_expression(terms: list[str], postgres: bool) -> str:
    if postgres:
        return " ".join(terms)
    # Each word is an FTS5 string (a phrase): no operator, column filter or prefix applies.
    return " ".join('"' + term.replace('"', '""') + '"' for term in terms)


def _snippet(payload: str, terms: list[str]) -> str:
    # Cut from the message's text with its punctuation, not from the indexed words.
    return snippet(searchable_text(MESSAGE_ADAPTER.validate_json(payload)), terms)


def search(
    db: Connection,
    tenant: Tenant | None,
    terms: list[str],
    *,
    session_id: str | None,
    app_name: str | None,
    user_id: str | None,
    limit: int,
    include_summaries: bool,
    scan_pending: bool = False,
) -> list[SearchHit]:
    """Return the best `limit` hits for every one of `terms`, best first.

    Raises:
        IndexBehind: on SQLite, messages are not indexed yet (index them with
            `index_pending` first), unless `scan_pending`: then they are matched here.
    """
    key = None
    if session_id is not None:
        key = session_key(db, tenant, session_id)
        visible_session(db, key)
    if not terms:
        return []
    postgres = db.dialect.name == "postgresql"
    filters = (
        tenant is not None,
        app_name is not None,
        user_id is not None,
        session_id is not None,
    )
    params: dict[str, Any] = {
        "q": _match_expression(terms, postgres),
        "limit": limit,
        "sid": session_id,
        "s_app": key and key.app_name,
        "s_user": key and key.user_id,
        "app": app_name,
        "user": user_id,
    }
    if tenant is not None:
        params |= tenant.params
    behind = None if postgres else _indexed_through(db)
    if behind is not None and not scan_pending:
        raise IndexBehind
    hits = [
        _raw_hit(row, terms, float(row.score))
        for row in db.execute(_statement(postgres, False, filters), params)
    ]
    if behind is not None:
        hits += _pending_hits(db, terms, filters, params | {"through": behind})
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
            for row in db.execute(_statement(postgres, True, filters), params)
        ]
        hits.sort(key=lambda hit: -hit.score)
    return hits[:limit]


@cache
def _pending_statement(filters: tuple[bool, bool, bool, bool]) -> Any:
    sql = (
        f"SELECT {_RAW_COLUMNS}, v.search_text FROM sessionstore_messages m "
        f"JOIN {_SEARCH_VIEW} v ON v.id = m.id "
        "JOIN sessionstore_sessions s ON s.id = m.session_id "
        "AND s.app_name = m.app_name AND s.user_id = m.user_id "
        f"{_RAW_JOINS}"
        f"WHERE m.id > :through{_filters(*filters, alias='m')} ORDER BY m.id"
    )
    return text(sql).columns(created_at=UTCDateTime(), payload=NulSafeJSONText())


def _pending_hits(
    db: Connection,
    terms: list[str],
    filters: tuple[bool, bool, bool, bool],
    params: dict[str, Any],
) -> list[SearchHit]:
    """Match the rows not indexed yet (a read-only SQLite store): every term a whole word.

    The words are those FTS5's tokenizer sees (letters and digits; the rest separates
    them), folded as it folds them; these hits rank after the indexed ones (score 0).
    """
    wanted = {term.casefold() for term in terms}
    hits = []
    for row in db.execute(_pending_statement(filters), params):
        words = SEPARATORS.sub(" ", row.search_text or "").casefold().split()
        if wanted <= set(words):
            hits.append(_raw_hit(row, terms, 0.0))
    return hits


def _raw_hit(row: Any, terms: list[str], score: float) -> SearchHit:
    """A hit on a raw message row (`_RAW_COLUMNS`), indexed or not yet."""
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
