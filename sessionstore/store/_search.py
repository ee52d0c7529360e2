"""Units of work for full-text search: each database's own engine, ranked, within a tenant.

The statements' texts and how their rows become hits are `sessionstore._search_core`'s
(shared with `sessionstore search` on a SQLite file, which runs them without
SQLAlchemy); here they run on the store's connection, typed as the store's columns.
SQLite matches through the FTS5 tables and ranks by bm25; PostgreSQL matches the
GIN-indexed `search_vector` column and ranks by `ts_rank` (migration 0005 creates both;
since 0012 the append writes the raw messages' vector, `_search_vector`). The engine is
the dialect's own, so this is the one module besides `_engine` that branches on the
dialect.

On SQLite the raw messages' FTS5 index is brought up to date by the search, not by the
append (migration 0009): tokenizing every message as it is written was the largest cost of
an append. The index holds every row up to its highest id (`indexed_through`); rows are
numbered in commit order (one writer at a time, AUTOINCREMENT), so the rows after it are
exactly the ones not indexed yet. A search that finds such rows indexes them first, in a
write transaction, and then searches in it: a search right after an append finds it. A
read-only store cannot write the index: it matches the rows not indexed yet, word by
word, and ranks them after the indexed hits. The index's text is not stored: SQLite
derives it from each payload (the view `sessionstore_messages_search`, migration 0010).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from sqlalchemy import Connection, TextualSelect, text

from sessionstore._search_core import (
    CATCH_UP,
    INDEXED_THROUGH,
    NEWEST,
    RowKind,
    search_rows,
)
from sessionstore.models import SearchHit
from sessionstore.store._nul import NulSafeJSONText
from sessionstore.store._sessions import Tenant, session_key, visible_session
from sessionstore.store._types import JSONPayload, UTCDateTime

__all__ = ["IndexBehind", "index_pending", "search"]


class IndexBehind(Exception):
    """Raised by `search` on SQLite when messages are not indexed yet: index, then search."""


def index_pending(db: Connection) -> int:
    """Index the raw messages the SQLite search index does not hold yet (in a write).

    Returns how many rows were indexed; a no-op on PostgreSQL (its index is a column).
    """
    if db.dialect.name != "sqlite":
        return 0
    return db.exec_driver_sql(CATCH_UP).rowcount or 0


def _indexed_through(db: Connection) -> int | None:
    """The highest indexed id on SQLite when rows after it exist; None when all are indexed."""
    through = int(db.exec_driver_sql(INDEXED_THROUGH).scalar_one())
    newest = int(db.exec_driver_sql(NEWEST).scalar_one())
    return through if newest > through else None


@cache
def _typed(kind: RowKind, sql: str) -> TextualSelect:
    """A search statement's text with its columns' types (`_search_core.RowKind`)."""
    # The payload is read as JSON text, decoded as the message reads decode it (_nul.py):
    # a NUL in a snippet must not show PostgreSQL's escape.
    typed: dict[str, Any] = {"created_at": UTCDateTime(), "payload": NulSafeJSONText()}
    if kind == "summary":
        typed["covers"] = JSONPayload
    return text(sql).columns(**typed)


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
    """Return the best `limit` hits for every one of `terms`, best first (`search_rows`).

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
    behind = None if postgres else _indexed_through(db)
    if behind is not None and not scan_pending:
        raise IndexBehind

    def run(kind: RowKind, sql: str, values: Mapping[str, Any]) -> Iterable[Any]:
        return db.execute(_typed(kind, sql), values)

    return search_rows(
        run,
        terms,
        postgres=postgres,
        key=key,
        app_name=app_name,
        user_id=user_id,
        tenant=None if tenant is None else tenant.params,
        limit=limit,
        include_summaries=include_summaries,
        behind=behind,
    )
